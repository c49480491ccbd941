"""Reads of the link graph: links, backlinks, unresolved links, orphans, neighbours, export."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import apsw

from kbase.documents import resolve
from kbase.errors import InputError


@dataclass(frozen=True)
class LinkHit:
    """One link, seen from either end, with the line it sits on."""

    source_id: int
    source_path: str
    source_title: str
    line: int
    context: str  # the source line the link is on, stripped
    target: str  # as written
    anchor: str | None
    alias: str | None
    embed: bool
    kind: str  # wiki, markdown, frontmatter
    target_id: int | None  # the note linked to (None: unresolved, or an attachment)
    target_path: str | None  # the resolved file (note or attachment), None if unresolved
    target_title: str | None
    anchor_ok: bool | None  # None when there is no anchor or nothing to check it against
    context_span: tuple[int, int]  # [start, end) of the link in ``context``


@dataclass(frozen=True)
class Note:
    """A node of the graph."""

    id: int
    path: str
    title: str
    distance: int = 0  # hops from the start note (neighbors)


_LINK_SELECT = """
    SELECT l.source_id, s.path, s.title, l.line, l.start_char, l.end_char,
           s.body, l.target, l.anchor, l.alias, l.embed, l.kind, l.target_id,
           coalesce(t.path, l.target_path), t.title, l.anchor_ok
    FROM links AS l JOIN documents AS s ON s.id = l.source_id LEFT JOIN documents AS t ON t.id = l.target_id
"""


def _link_hits(con: apsw.Connection, where: str, args: tuple) -> list[LinkHit]:
    out = []
    for (sid, spath, stitle, line, start, end, body, target, anchor, alias, embed, kind, tid, tpath, ttitle,
         ok) in con.execute(f"{_LINK_SELECT} WHERE {where} ORDER BY s.path, l.start_char", args):
        context, span = _line_at(body, start, end)
        out.append(LinkHit(sid, spath, stitle, line, context, target, anchor, alias, bool(embed), kind,
                           tid, tpath, ttitle, None if ok is None else bool(ok), span))
    return out


def _line_at(body: str, start: int, end: int) -> tuple[str, tuple[int, int]]:
    """The line of ``body`` holding ``body[start:end]`` (line breaks: LF, CRLF, CR), stripped, and
    where that text lies in it (cut at the line's end)."""
    first = max(body.rfind("\n", 0, start), body.rfind("\r", 0, start)) + 1
    ends = [i for i in (body.find("\n", start), body.find("\r", start)) if i >= 0]
    raw = body[first:min(ends) if ends else len(body)]
    line = raw.strip()
    lead = len(raw) - len(raw.lstrip())
    a = min(max(start - first - lead, 0), len(line))
    return line, (a, min(max(end - first - lead, a), len(line)))


def find_note(con: apsw.Connection, note: str) -> Note:
    """The note ``note`` names: a path, a name as a link gives it, or an alias (see
    ``kbase.documents.resolve``: one match, else an error listing the candidates)."""
    return Note(*con.execute("SELECT id, path, title FROM documents WHERE id = ?", (resolve(con, note),)).fetchone())


def links_from(con: apsw.Connection, note: Note) -> list[LinkHit]:
    return _link_hits(con, "l.source_id = ?", (note.id,))


def links_to(con: apsw.Connection, note: Note) -> list[LinkHit]:
    """Backlinks: links from other notes to this one."""
    return _link_hits(con, "l.target_id = ? AND l.source_id <> ?", (note.id, note.id))


def unresolved(con: apsw.Connection) -> list[LinkHit]:
    return _link_hits(con, "l.target_id IS NULL AND l.target_path IS NULL", ())


def broken_anchors(con: apsw.Connection) -> list[LinkHit]:
    return _link_hits(con, "l.anchor_ok = 0", ())


def orphans(con: apsw.Connection) -> list[Note]:
    """Notes no other note links to."""
    return [Note(*r) for r in con.execute(
        "SELECT d.id, d.path, d.title FROM documents d WHERE d.kind = 'markdown' AND NOT EXISTS"
        " (SELECT 1 FROM links l WHERE l.target_id = d.id AND l.source_id <> d.id) ORDER BY d.path"
    )]


def neighbors(con: apsw.Connection, note: Note, depth: int = 1) -> list[Note]:
    """Notes within ``depth`` links of ``note``, following links both ways, nearest first."""
    if depth < 1:
        raise InputError(f"--depth must be at least 1, not {depth}", "pass --depth 1 or more")
    seen = {note.id: 0}
    queue = deque([note.id])
    while queue:
        current = queue.popleft()
        d = seen[current]
        if d >= depth:
            continue
        for (other,) in con.execute(
            "SELECT target_id FROM links WHERE source_id = ?1 AND target_id IS NOT NULL"
            " UNION SELECT source_id FROM links WHERE target_id = ?1",
            (current,),
        ):
            if other not in seen:
                seen[other] = d + 1
                queue.append(other)
    del seen[note.id]
    if not seen:
        return []
    marks = ",".join("?" * len(seen))
    rows = con.execute(f"SELECT id, path, title FROM documents WHERE id IN ({marks})", list(seen)).fetchall()
    return sorted((Note(i, p, t, seen[i]) for i, p, t in rows), key=lambda n: (n.distance, n.path))


def graph(con: apsw.Connection) -> dict:
    """Every note and every resolved note-to-note link (with how many links join the pair)."""
    nodes = [{"id": i, "path": p, "title": t} for i, p, t in
             con.execute("SELECT id, path, title FROM documents ORDER BY path")]
    edges = [{"source": s, "target": t, "links": n} for s, t, n in con.execute(
        "SELECT source_id, target_id, count(*) FROM links WHERE target_id IS NOT NULL AND target_id <> source_id"
        " GROUP BY 1, 2 ORDER BY 1, 2")]
    return {"nodes": nodes, "edges": edges}


def to_dot(g: dict) -> str:
    """Graphviz DOT of ``graph()``."""
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph kbase {", "  node [shape=box];"]
    lines += [f"  n{n['id']} [label={q(n['title'])}, tooltip={q(n['path'])}];" for n in g["nodes"]]
    lines += [f"  n{e['source']} -> n{e['target']}" + (f" [label={e['links']}]" if e["links"] > 1 else "") + ";"
              for e in g["edges"]]
    lines.append("}")
    return "\n".join(lines)

