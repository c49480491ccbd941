"""All reads: keyword search with filters, documents by path, status."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import apsw

from kbase.errors import InputError
from kbase.models import Hit
from kbase.text import LINE_BREAK
from kbase.query import Query, parse_query

# bm25 column weights (title, headings, body): a word in the title or a heading says more about
# a passage than the same word once in its text. Starting points, to be tuned on the benchmark.
BM25_WEIGHTS = (10.0, 4.0, 1.0)
SNIPPET_BEFORE = 60  # characters of context before the first match
SNIPPET_WIDTH = 200  # total snippet length in characters
_OPEN, _CLOSE = "\x02", "\x03"  # highlight markers; never in indexed text (control chars)


@dataclass(frozen=True)
class Filters:
    """Restrictions on which documents a search may return."""

    path: str | None = None  # glob on the root-relative path, or a folder/path prefix if no wildcard
    tags: tuple[str, ...] = ()  # each must be present (nested tags match: 'a' matches 'a/b')
    since: str | None = None  # ISO date: the document's date (front matter, else mtime) >= since
    until: str | None = None  # ISO date: <= until (inclusive)

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over ``documents AS d`` and its bindings."""
        where, args = [], []
        if self.path:
            p = self.path.strip("/")
            if any(ch in p for ch in "*?["):
                where.append("d.path GLOB ?")
                args.append(p)
            elif p:
                where.append("(d.path = ? OR substr(d.path, 1, ?) = ?)")
                args += [p, len(p) + 1, p + "/"]
        for tag in self.tags:
            t = tag.lstrip("#")
            where.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.doc_id = d.id AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
            )
            args += [t, _like_escape(t) + "/%"]
        date_expr = "date(coalesce(d.date, datetime(d.mtime_ns / 1000000000, 'unixepoch')))"
        if self.since:
            where.append(f"{date_expr} >= date(?)")
            args.append(_check_date(self.since, "--since"))
        if self.until:
            where.append(f"{date_expr} <= date(?)")
            args.append(_check_date(self.until, "--until"))
        return (" AND ".join(where) or "1"), args


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_RELATIVE = re.compile(r"^(\d+)([dwmy])$")


def _check_date(value: str, option: str) -> str:
    """ISO date or datetime, or a relative age like 7d, 2w, 3m, 1y (days, weeks, months, years ago)."""
    m = _RELATIVE.match(value.strip())
    if m:
        days = int(m.group(1)) * {"d": 1, "w": 7, "m": 30, "y": 365}[m.group(2)]
        return (dt.date.today() - dt.timedelta(days=days)).isoformat()
    try:
        return dt.datetime.fromisoformat(value.strip()).date().isoformat()
    except ValueError:
        raise InputError(f"{option} {value!r} is not a date", "use YYYY-MM-DD or an age like 7d, 2w, 3m, 1y") from None


def keyword_search(con: apsw.Connection, text: str, *, limit: int = 10, filters: Filters = Filters()) -> list[Hit]:
    """Documents matching ``text`` (see kbase.query for the syntax), best first, one hit each.

    All words must match; if that finds fewer than ``limit`` documents and the query has several
    words (and no explicit OR), documents matching only some words follow.
    """
    query = parse_query(text)
    if query.empty or limit <= 0:
        return []
    where, args = filters.sql()
    ranked = _ranked_docs(con, query.to_fts(), where, args, limit)
    if len(ranked) < limit and len(query.clauses) > 1 and not query.explicit_or:
        have = {r[0] for r in ranked}
        ranked += [r for r in _ranked_docs(con, query.to_fts(match_any=True), where, args, limit) if r[0] not in have][
            : limit - len(ranked)
        ]
    return [_hit(con, query, *row) for row in ranked]


def _ranked_docs(con: apsw.Connection, match: str, where: str, args: list, limit: int) -> list[tuple]:
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    sql = f"""
        WITH m AS (
            SELECT rowid AS cid, bm25(chunks_fts, {w}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?
        ), r AS (
            SELECT c.doc_id, m.cid, m.s,
                   row_number() OVER (PARTITION BY c.doc_id ORDER BY m.s) AS rn,
                   count(*) OVER (PARTITION BY c.doc_id) AS n
            FROM m JOIN chunks AS c ON c.id = m.cid JOIN documents AS d ON d.id = c.doc_id
            WHERE {where}
        )
        SELECT doc_id, cid, s, n, ? AS match FROM r WHERE rn = 1 ORDER BY s LIMIT ?"""
    return con.execute(sql, [match, *args, match, limit]).fetchall()


def _hit(con: apsw.Connection, query: Query, doc_id: int, chunk_id: int, score: float, n: int, match: str) -> Hit:
    row = con.execute(
        """SELECT d.path, r.path, d.title, d.size, d.mtime_ns, c.line, c.heading_path,
                  (SELECT highlight(chunks_fts, 2, char(2), char(3)) FROM chunks_fts
                   WHERE chunks_fts MATCH ? AND rowid = c.id),
                  (SELECT group_concat(tag, ' ') FROM tags WHERE doc_id = d.id)
           FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id JOIN roots AS r ON r.id = d.root_id
           WHERE c.id = ?""",
        (match, chunk_id),
    ).fetchone()
    path, root, title, size, mtime_ns, line, heading_path, marked, tags = row
    snippet, highlights, lines_before = make_snippet(marked or "")
    abspath = os.path.join(root, path) if path else root
    return Hit(
        doc_id=doc_id, path=path or Path(root).name, abspath=abspath, title=title, score=-score,
        chunk_id=chunk_id, line=line + lines_before, heading_path=heading_path, snippet=snippet,
        highlights=highlights, matched_chunks=n, tags=tuple((tags or "").split()),
        stale=is_stale(abspath, size, mtime_ns),
    )


def make_snippet(marked: str) -> tuple[str, tuple[tuple[int, int], ...], int]:
    """From a chunk with highlight markers: (one-line snippet, highlight ranges in it, line
    breaks before the first match)."""
    first = marked.find(_OPEN)
    plain_first = first if first >= 0 else 0
    clean_before = marked[:plain_first].replace(_OPEN, "").replace(_CLOSE, "")
    lines_before = len(LINE_BREAK.findall(clean_before))
    start = max(0, plain_first - SNIPPET_BEFORE)
    if start:
        space = marked.find(" ", start, plain_first)
        start = space + 1 if space >= 0 else start
    window = marked[start:]
    out: list[str] = []
    highlights: list[tuple[int, int]] = []
    pos, open_at, last_space = 0, -1, False
    for ch in window:
        if ch == _OPEN:
            open_at = pos
            continue
        if ch == _CLOSE:
            if open_at >= 0:
                highlights.append((open_at, pos))
            open_at = -1
            continue
        if ch.isspace():
            if last_space or pos == 0:
                continue
            ch, last_space = " ", True
        else:
            last_space = False
        if pos >= SNIPPET_WIDTH and open_at < 0:
            break
        out.append(ch)
        pos += 1
    snippet = "".join(out).rstrip()
    prefix = "…" if start > 0 else ""
    if prefix:
        highlights = [(a + 1, b + 1) for a, b in highlights]
    suffix = "…" if pos >= SNIPPET_WIDTH else ""
    return prefix + snippet + suffix, tuple(h for h in highlights if h[1] <= len(prefix + snippet)), lines_before


def is_stale(abspath: str, size: int, mtime_ns: int) -> bool:
    """True when the file changed (or vanished) since it was indexed: one stat."""
    try:
        st = os.stat(abspath)
    except OSError:
        return True
    return st.st_size != size or st.st_mtime_ns != mtime_ns


@dataclass(frozen=True)
class DocRef:
    id: int
    path: str
    abspath: str
    title: str
    body: str
    body_start: int


def find_document(con: apsw.Connection, target: str) -> DocRef:
    """A document by file path (absolute or relative to the working folder) or by indexed path
    (exactly or a unique path suffix, with or without extension)."""
    rows = con.execute(
        "SELECT d.id, d.path, r.path FROM documents AS d JOIN roots AS r ON r.id = d.root_id"
    ).fetchall()
    full = {(os.path.join(root, path) if path else root): (doc_id, path) for doc_id, path, root in rows}
    try:
        candidate = str(Path(target).expanduser().resolve())
    except (OSError, RuntimeError):
        candidate = target
    if candidate in full:
        return _load_doc(con, full[candidate][0])
    t = target.strip("/").lower()
    matches = [
        a for a, (_, p) in full.items()
        if p.lower() == t or p.lower().endswith("/" + t) or Path(p).with_suffix("").as_posix().lower() in (t,)
        or Path(p).with_suffix("").as_posix().lower().endswith("/" + t)
    ]
    if len(matches) == 1:
        return _load_doc(con, full[matches[0]][0])
    if not matches:
        raise InputError(f"no indexed document matches {target!r}", "see kbase status for the roots, or kbase search")
    shown = ", ".join(sorted(full[m][1] for m in matches)[:5])
    raise InputError(f"{target!r} matches {len(matches)} documents: {shown}", "give more of the path")


def _load_doc(con: apsw.Connection, doc_id: int) -> DocRef:
    doc_id, path, root, title, body, body_start = con.execute(
        "SELECT d.id, d.path, r.path, d.title, d.body, d.body_start FROM documents AS d"
        " JOIN roots AS r ON r.id = d.root_id WHERE d.id = ?",
        (doc_id,),
    ).fetchone()
    return DocRef(doc_id, path or Path(root).name, os.path.join(root, path) if path else root, title, body, body_start)


def status(con: apsw.Connection, db_path: str | os.PathLike[str]) -> dict:
    """Counts and sizes for ``kbase status``."""
    roots = [
        {"path": p, "documents": n, "last_indexed_at": t}
        for p, n, t in con.execute(
            "SELECT r.path, (SELECT count(*) FROM documents WHERE root_id = r.id), r.last_indexed_at"
            " FROM roots AS r ORDER BY r.path"
        )
    ]
    one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    db_bytes = sum(os.path.getsize(f) for f in (str(db_path), f"{db_path}-wal") if os.path.exists(f))
    text_bytes = one("SELECT coalesce(sum(size), 0) FROM documents")
    last = con.execute("SELECT value FROM meta WHERE key = 'last_index_at'").fetchone()
    return {
        "db": str(db_path),
        "roots": roots,
        "documents": one("SELECT count(*) FROM documents"),
        "chunks": one("SELECT count(*) FROM chunks"),
        "tags": one("SELECT count(DISTINCT tag) FROM tags"),
        "oversized_chunks": one("SELECT count(*) FROM chunks WHERE flags & 1"),
        "diagnostics": dict(con.execute("SELECT kind, count(*) FROM diagnostics GROUP BY 1 ORDER BY 1").fetchall()),
        "chunker": json.loads(con.execute("SELECT value FROM meta WHERE key = 'chunker'").fetchone()[0])
        if con.execute("SELECT 1 FROM meta WHERE key = 'chunker'").fetchone() else None,
        "encodings": dict(con.execute("SELECT encoding, count(*) FROM documents GROUP BY 1 ORDER BY 2 DESC").fetchall()),
        "text_bytes": text_bytes,
        "db_bytes": db_bytes,
        "db_to_text": round(db_bytes / text_bytes, 2) if text_bytes else None,
        "last_index_at": last[0] if last else None,
    }
