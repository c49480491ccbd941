"""Reads of the link graph: links, backlinks, unresolved links, orphans, neighbours, export."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from kbase.errors import InputError
from kbase.notes.resolve import UnknownDocument, lookup, split_anchor
from kbase.search.filters import Filters


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
    # neighbors: 'out' (``via`` links to this note), 'in' (this note links to ``via``) or 'both'
    direction: str = ""
    via: str = (
        ""  # neighbors: the path of the note one hop nearer the start (for distance 1, the start)
    )
    # The name as given, when it named no note and this note's name is a typo away from it.
    corrected_from: str | None = None


_LINK_SELECT = """
    SELECT l.doc_id, s.path, s.title, l.line, l.start_char, l.end_char,
           s.body, l.target, l.anchor, l.alias, l.embed, l.kind, l.target_id,
           coalesce(t.path, l.target_path), t.title, l.anchor_ok
    FROM links AS l JOIN documents AS s ON s.id = l.doc_id
    LEFT JOIN documents AS t ON t.id = l.target_id
"""


def _link_hits(con: apsw.Connection, where: str, args: tuple) -> list[LinkHit]:
    out = []
    for (
        sid,
        spath,
        stitle,
        line,
        start,
        end,
        body,
        target,
        anchor,
        alias,
        embed,
        kind,
        tid,
        tpath,
        ttitle,
        ok,
    ) in con.execute(f"{_LINK_SELECT} WHERE {where} ORDER BY s.path, l.start_char", args):
        context, span = _line_at(body, start, end)
        out.append(
            LinkHit(
                sid,
                spath,
                stitle,
                line,
                context,
                target,
                anchor,
                alias,
                bool(embed),
                kind,
                tid,
                tpath,
                ttitle,
                None if ok is None else bool(ok),
                span,
            )
        )
    return out


def _line_at(body: str, start: int, end: int) -> tuple[str, tuple[int, int]]:
    """The line of ``body`` holding ``body[start:end]`` (line breaks: LF, CRLF, CR), stripped, and
    where that text lies in it (cut at the line's end)."""
    first = max(body.rfind("\n", 0, start), body.rfind("\r", 0, start)) + 1
    ends = [i for i in (body.find("\n", start), body.find("\r", start)) if i >= 0]
    raw = body[first : min(ends) if ends else len(body)]
    line = raw.strip()
    lead = len(raw) - len(raw.lstrip())
    a = min(max(start - first - lead, 0), len(line))
    return line, (a, min(max(end - first - lead, a), len(line)))


def find_note(con: apsw.Connection, note: str) -> Note:
    """The note ``note`` names: a path, a name as a link gives it, an alias, or a name a typo away
    (see ``kbase.notes.resolve.lookup``: one match, else an error listing the candidates)."""
    try:
        doc_id, corrected_from = lookup(con, note, near=False)
    except UnknownDocument:
        base, anchor = split_anchor(note)  # 'Note#Heading' names Note, as a link does
        doc_id, corrected_from = lookup(con, base if anchor and base else note)
    found, path, title = con.execute(
        "SELECT id, path, title FROM documents WHERE id = ?", (doc_id,)
    ).fetchone()
    return Note(found, path, title, corrected_from=corrected_from)


def links_from(con: apsw.Connection, note: Note) -> list[LinkHit]:
    return _link_hits(con, "l.doc_id = ?", (note.id,))


def links_to(con: apsw.Connection, note: Note) -> list[LinkHit]:
    """Backlinks: links from other notes to this one."""
    return _link_hits(con, "l.target_id = ? AND l.doc_id <> ?", (note.id, note.id))


def _notes_where(filters: Filters | None) -> tuple[str, list]:
    """``filters`` (path, exclude, tags) as SQL over ``documents AS d``."""
    return filters.sql() if filters is not None else ("1", [])


def unresolved(con: apsw.Connection, filters: Filters | None = None) -> list[LinkHit]:
    """Links to no note or file, in the notes ``filters`` keep (the note the link is in)."""
    where, args = _notes_where(filters)
    return _link_hits(
        con,
        "l.target_id IS NULL AND l.target_path IS NULL"
        f" AND s.id IN (SELECT d.id FROM documents AS d WHERE {where})",
        tuple(args),
    )


def broken_anchors(con: apsw.Connection, filters: Filters | None = None) -> list[LinkHit]:
    where, args = _notes_where(filters)
    return _link_hits(
        con,
        f"l.anchor_ok = 0 AND s.id IN (SELECT d.id FROM documents AS d WHERE {where})",
        tuple(args),
    )


def orphans(con: apsw.Connection, filters: Filters | None = None) -> list[Note]:
    """Notes no other note links to (of those ``filters`` keep; links from any note count)."""
    where, args = _notes_where(filters)
    return [
        Note(*r)
        for r in con.execute(
            "SELECT d.id, d.path, d.title FROM documents d WHERE d.kind = 'markdown' AND NOT EXISTS"
            " (SELECT 1 FROM links l WHERE l.target_id = d.id AND l.doc_id <> d.id)"
            f" AND {where} ORDER BY d.path",
            args,
        )
    ]


def neighbors(con: apsw.Connection, note: Note, depth: int = 1) -> list[Note]:
    """Notes within ``depth`` links of ``note``, following links both ways, nearest first; each
    says which way its link to the note one hop nearer goes (``direction``, ``via``)."""
    reach = _reach(con, note.id, depth)
    del reach[note.id]
    paths = _paths(con, [*reach, note.id])
    return sorted(
        (
            Note(i, paths[i][0], paths[i][1], d, direction, paths[via][0])
            for i, (d, via, direction) in reach.items()
        ),
        key=lambda n: (n.distance, n.path),
    )


def _reach(
    con: apsw.Connection, start: int, depth: int, allowed: set[int] | None = None
) -> dict[int, tuple]:
    """``{id: (distance, via id, direction)}`` for the notes within ``depth`` links of ``start``
    (itself included, at 0), breadth first. Only notes in ``allowed`` (if given) are entered.
    Of several notes one hop nearer, ``via`` is the first by path, so the answer is stable."""
    if depth < 1:
        raise InputError(f"--depth must be at least 1, not {depth}", "pass --depth 1 or more")
    reach: dict[int, tuple] = {start: (0, start, "")}
    frontier = {start}
    for distance in range(1, depth + 1):
        ids = json.dumps(sorted(frontier))
        found: dict[int, dict[int, set[str]]] = {}  # new note -> {note one hop nearer: directions}
        for source, target in con.execute(
            "SELECT doc_id, target_id FROM links"
            " WHERE doc_id IN (SELECT value FROM json_each(?1))"
            " AND target_id IS NOT NULL AND target_id <> doc_id"
            " UNION ALL SELECT doc_id, target_id FROM links"
            " WHERE target_id IN (SELECT value FROM json_each(?1))"
            " AND doc_id <> target_id",
            (ids,),
        ):
            for near, far, direction in ((source, target, "out"), (target, source, "in")):
                if near in frontier and far not in reach and (allowed is None or far in allowed):
                    found.setdefault(far, {}).setdefault(near, set()).add(direction)
        if not found:
            break
        paths = _paths(con, {near for vias in found.values() for near in vias})
        for far, vias in found.items():
            via = min(vias, key=lambda i: paths[i][0])
            reach[far] = (distance, via, "both" if len(vias[via]) == 2 else vias[via].pop())
        frontier = set(found)
    return reach


def _paths(con: apsw.Connection, ids) -> dict[int, tuple[str, str]]:
    """``{id: (path, title)}``."""
    return {
        i: (p, t)
        for i, p, t in con.execute(
            "SELECT id, path, title FROM documents WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        )
    }


def graph(
    con: apsw.Connection,
    note: Note | None = None,
    depth: int | None = None,
    path: str | None = None,
    exclude: Sequence[str] = (),
) -> dict:
    """Notes and the resolved note-to-note links between them (``links``: how many join the
    pair; ``canvas``, when there are any: how many canvas arrows join two file cards showing the
    pair): every note, or with ``note`` those within ``depth`` links of it (1 by default; each
    node then has its ``distance``). ``path`` keeps only the notes under a folder or matching a
    glob, and each ``exclude`` pattern drops notes, as ``kbase search --path`` matches paths;
    links through a note left out are not followed. The start note is always kept."""
    if note is None and depth is not None:
        raise InputError(
            "--depth needs a NOTE to count from", "pass the note: kbase graph NOTE --depth N"
        )
    allowed = _matching(con, path, exclude)
    distance: dict[int, int] | None = None
    if note is not None:
        distance = {i: r[0] for i, r in _reach(con, note.id, depth or 1, allowed).items()}
    keep = distance if distance is not None else allowed
    nodes_where = edges_where = ""
    args: tuple = ()
    if keep is not None:
        args = (json.dumps(sorted(keep)),)
        nodes_where = " WHERE id IN (SELECT value FROM json_each(?1))"
        edges_where = (
            " AND doc_id IN (SELECT value FROM json_each(?1))"
            " AND target_id IN (SELECT value FROM json_each(?1))"
        )
    nodes = [
        {"id": i, "path": p, "title": t} | ({} if distance is None else {"distance": distance[i]})
        for i, p, t in con.execute(
            f"SELECT id, path, title FROM documents{nodes_where} ORDER BY path", args
        )
    ]
    pairs: dict[tuple[int, int], dict] = {
        (s, t): {"source": s, "target": t, "links": n}
        for s, t, n in con.execute(
            "SELECT doc_id, target_id, count(*) FROM links"
            " WHERE target_id IS NOT NULL AND target_id <> doc_id"
            f"{edges_where} GROUP BY 1, 2 ORDER BY 1, 2",
            args,
        )
    }
    for s, t, n in con.execute(_CANVAS_ARROWS, ()):
        if keep is None or (s in keep and t in keep):
            pairs.setdefault((s, t), {"source": s, "target": t, "links": 0})["canvas"] = n
    return {"nodes": nodes, "edges": [pairs[k] for k in sorted(pairs)]}


# Arrows of canvases between two file cards, as pairs of the documents the cards show (each file
# card is its canvas's link of kind 'canvas', at the card's offset).
_CANVAS_ARROWS = """
    SELECT l1.target_id, l2.target_id, count(*)
    FROM canvas_edges AS e
    JOIN canvas_cards AS k1 ON k1.doc_id = e.doc_id AND k1.card_id = e.from_card
    JOIN canvas_cards AS k2 ON k2.doc_id = e.doc_id AND k2.card_id = e.to_card
    JOIN links AS l1 ON l1.doc_id = e.doc_id AND l1.kind = 'canvas'
         AND l1.start_char = k1.start_char
    JOIN links AS l2 ON l2.doc_id = e.doc_id AND l2.kind = 'canvas'
         AND l2.start_char = k2.start_char
    WHERE k1.kind = 'file' AND k2.kind = 'file' AND l1.target_id IS NOT NULL
      AND l2.target_id IS NOT NULL AND l1.target_id <> l2.target_id
    GROUP BY 1, 2"""


def _matching(con: apsw.Connection, path: str | None, exclude: Sequence[str]) -> set[int] | None:
    """Ids of the notes that ``path`` and the ``exclude`` patterns let through (None: all)."""
    exclude = [e for e in exclude if e.strip("/ ")]
    if not path and not exclude:
        return None
    where, args = Filters(path=path).sql()
    for pattern in exclude:
        w, a = Filters(path=pattern).sql()
        where, args = f"{where} AND NOT ({w})", args + a
    return {i for (i,) in con.execute(f"SELECT d.id FROM documents AS d WHERE {where}", args)}
