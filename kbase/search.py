"""All reads: keyword search with filters, documents by path, status."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import apsw

from kbase import cjk
from kbase.errors import InputError
from kbase.models import Hit
from kbase.text import LINE_BREAK
from kbase.query import Query, parse_query
from kbase.rank import RRF_K, rrf
from kbase.vectors import VectorCache

# bm25 column weights in chunks_fts's column order: body, title + aliases, heading path. Measured
# on SciFact (bench/retrieval.py, BENCHMARKS.md section 4), nDCG@10 as (body, title, headings):
# (1, 10, 4) 0.670, (1, 5, 1) 0.677, (1, 2, 1) 0.678, (1, 1, 1) 0.682. The title column is short,
# so bm25's length normalisation already makes a title match count for much; extra weight only
# helped when the title was indexed twice (also as the first heading of the heading path, which
# chunks_fts_content no longer does) and hurts once it is not.
BM25_WEIGHTS = (1.0, 1.0, 1.0)
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
    return [_hit(con, *row) for row in keyword_ranked(con, text, limit, filters)]


def keyword_ranked(con: apsw.Connection, text: str, n: int, filters: Filters = Filters(),
                   fill_to: int | None = None) -> list[tuple]:
    """Up to ``n`` (doc_id, chunk_id, score, matched chunks, match expression), best first.

    Documents matching only some of the words are added when fewer than ``fill_to`` (default
    ``n``) match all of them."""
    query = parse_query(text)
    if query.empty or n <= 0:
        return []
    where, args = filters.sql()
    if cjk.applies(query):
        return _cjk_ranked(con, query, n, where, args, fill_to)
    where, args = _without_excluded_runs(query, where, args)
    ranked = _ranked_docs(con, query.to_fts(), where, args, n)
    if len(ranked) < (fill_to or n) and len(query.clauses) > 1 and not query.explicit_or:
        have = {r[0] for r in ranked}
        ranked += [r for r in _ranked_docs(con, query.to_fts(match_any=True), where, args, n) if r[0] not in have][
            : n - len(ranked)
        ]
    return [(doc_id, cid, -s, count, match) for doc_id, cid, s, count, match in ranked]


def _cjk_ranked(con: apsw.Connection, query: Query, n: int, where: str, args: list, fill_to: int | None) -> list[tuple]:
    """keyword_ranked for a query with words in scripts without spaces (kbase.cjk): all words on
    chunks_cjk, then some of them; then notes whose chunks hold none of these scripts but some of
    the other words (from chunks_fts)."""
    pq = cjk.pair_query(query)
    ranked = _ranked_docs(con, pq.to_fts(), where, args, n, cjk.TABLE)
    some_words = len(query.clauses) > 1 and not query.explicit_or
    if len(ranked) < (fill_to or n) and some_words:
        # Notes that hold every word, but not in one chunk (a chunk is a few paragraphs; words
        # without spaces are short and a note is what the user looks for): next, by their best chunk.
        have = {r[0] for r in ranked}
        across = set.intersection(*(_docs_matching(con, c) for c in pq.clauses)) - have
        if across:
            marks = ",".join("?" * len(across))
            ranked += _ranked_docs(con, pq.to_fts(match_any=True), f"{where} AND d.id IN ({marks})",
                                   [*args, *across], n - len(ranked), cjk.TABLE)
        have = {r[0] for r in ranked}
        ranked += [r for r in _ranked_docs(con, pq.to_fts(match_any=True), where, args, n, cjk.TABLE)
                   if r[0] not in have][: n - len(ranked)]
        latin = cjk.latin_query(query)
        if len(ranked) < (fill_to or n) and not latin.empty:
            have = {r[0] for r in ranked}
            lw, la = _without_excluded_runs(query, where, args)
            ranked += [r for r in _ranked_docs(con, latin.to_fts(match_any=True), lw, la, n)
                       if r[0] not in have][: n - len(ranked)]
    return [(doc_id, cid, -s, count, match) for doc_id, cid, s, count, match in ranked]


def _docs_matching(con: apsw.Connection, clause: tuple) -> set[int]:
    """The notes with a chunk that matches a clause of a chunks_cjk query (a clause without runs
    also in chunks_fts, which alone holds the chunks without runs)."""
    expr = " OR ".join(t.fts() for t in clause)
    tables = [cjk.TABLE] + (["chunks_fts"] if not cjk.is_pair_match(expr) else [])
    return {doc_id for table in tables for (doc_id,) in con.execute(
        f"SELECT DISTINCT doc_id FROM chunks WHERE id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)", (expr,))}


def _without_excluded_runs(query: Query, where: str, args: list) -> tuple[str, list]:
    """A query on chunks_fts whose excluded words are in scripts without spaces: chunks_fts
    cannot see them, so the notes holding them (in chunks_cjk) are left out."""
    excluded = cjk.excluded_runs(query)
    if excluded is None:
        return where, args
    sql = (f"{where} AND d.id NOT IN (SELECT c.doc_id FROM chunks AS c WHERE c.id IN"
           f" (SELECT rowid FROM {cjk.TABLE} WHERE {cjk.TABLE} MATCH ?))")
    return sql, [*args, excluded]


def _ranked_docs(con: apsw.Connection, match: str, where: str, args: list, limit: int,
                 table: str = "chunks_fts") -> list[tuple]:
    """(doc_id, best chunk id, bm25, matching chunks, match) per document, best first.

    The bm25 scores are materialised first (FTS5 computes them only in its own query), then
    grouped: with min(), SQLite takes the other bare columns from the row holding the minimum,
    so ``cid`` is the best chunk (a third faster than ranking with window functions)."""
    if where == "1":
        return _ranked_docs_from_best_chunks(con, match, limit, table)
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    sql = f"""
        WITH m AS MATERIALIZED (
            SELECT rowid AS cid, bm25({table}, {w}) AS s FROM {table} WHERE {table} MATCH ?
        )
        SELECT c.doc_id, m.cid, min(m.s) AS s, count(*) AS n, ? AS match
        FROM m JOIN chunks AS c ON c.id = m.cid JOIN documents AS d ON d.id = c.doc_id
        WHERE {where} GROUP BY c.doc_id ORDER BY s LIMIT ?"""
    return con.execute(sql, [match, match, *args, limit]).fetchall()


def _ranked_docs_from_best_chunks(con: apsw.Connection, match: str, limit: int,
                                  table: str = "chunks_fts") -> list[tuple]:
    """What _ranked_docs gives without filters, from FTS5's own ordering: the best chunks in
    order (FTS5 still scores every match, but nothing else is done with the rest), widened until
    they hold ``limit`` documents; then one count of matching chunks for those documents. A
    query whose words are common (an any-word query, say) matches much of the index: this way
    it costs a quarter less (any-word queries of titles, 10k notes: p95 39 -> 29 ms)."""
    rank = "bm25(" + ", ".join(str(x) for x in BM25_WEIGHTS) + ")"
    k = max(4 * limit, 64)
    while True:
        rows = con.execute(
            f"WITH top AS (SELECT rowid AS cid, rank AS s FROM {table}"
            f" WHERE {table} MATCH ?1 AND rank MATCH ?2 ORDER BY rank LIMIT ?3)"
            " SELECT c.doc_id, top.cid, top.s FROM top JOIN chunks AS c ON c.id = top.cid ORDER BY top.s",
            (match, rank, k),
        ).fetchall()
        best: dict[int, tuple] = {}
        for doc_id, cid, score in rows:  # best first: a document's first row is its best chunk
            if doc_id not in best:
                best[doc_id] = (doc_id, cid, score)
                if len(best) == limit:
                    break
        if len(best) == limit or len(rows) < k:
            break
        k *= 4  # a few documents hold all of the best chunks: look further
    if not best:
        return []
    marks = ",".join("?" * len(best))
    counts = dict(con.execute(
        f"SELECT doc_id, count(*) FROM chunks WHERE doc_id IN ({marks})"
        f" AND id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?) GROUP BY doc_id",
        [*best, match],
    ).fetchall())
    return [(doc_id, cid, score, counts.get(doc_id, 1), match) for doc_id, cid, score in best.values()]


# sqlite-vec answers k-nearest-neighbour queries for k up to this many rows.
KNN_MAX = 4096


def semantic_search(con: apsw.Connection, query_vector: bytes, *, limit: int = 10,
                    filters: Filters = Filters(), cache: VectorCache | None = None) -> list[Hit]:
    """Documents nearest in meaning to the query vector, one hit (the nearest chunk) each."""
    return [_hit(con, doc_id, cid, sim, n)
            for doc_id, cid, sim, n in semantic_ranked(con, query_vector, limit, filters, cache)]


def semantic_ranked(con: apsw.Connection, query_vector: bytes, n: int, filters: Filters = Filters(),
                    cache: VectorCache | None = None) -> list[tuple]:
    """Up to ``n`` (doc_id, chunk_id, cosine similarity, chunks among the nearest), best first.

    Unfiltered: a k-nearest-neighbour query (sqlite-vec, or the in-memory ``cache``), widened
    until ``n`` documents are found. Filtered: an exact scan over the chunks that pass the
    filters, so a filter never hides matches that exist.
    """
    if n <= 0 or con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is None:
        return []
    where, args = filters.sql()
    if where != "1" and cache is not None:
        allowed = [cid for (cid,) in con.execute(
            f"SELECT c.id FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.embedded AND {where}", args)]
        return _group_nearest(con, cache.nearest(con, query_vector, len(allowed), allowed))[:n]
    if where == "1":
        k = max(4 * n, 40)
        limit = None if cache is not None else KNN_MAX
        while True:
            if cache is not None:
                nearest = cache.nearest(con, query_vector, k)
            else:
                k = min(k, KNN_MAX)
                nearest = con.execute(
                    "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (query_vector, k)
                ).fetchall()
            docs = _group_nearest(con, nearest)
            if len(docs) >= n or len(nearest) < k or (limit is not None and k >= limit):
                break
            k *= 4
        if len(docs) >= n or len(nearest) < k:
            return docs[:n]
    # Exact scan: every embedded chunk that passes the filters (or, past KNN_MAX, every chunk).
    return con.execute(
        f"""WITH s AS (
                SELECT c.doc_id, c.id AS cid, vec_distance_cosine(v.embedding, ?) AS dist
                FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id JOIN chunks_vec AS v ON v.rowid = c.id
                WHERE c.embedded AND {where}
            ), r AS (
                SELECT doc_id, cid, dist, row_number() OVER (PARTITION BY doc_id ORDER BY dist) AS rn,
                       count(*) OVER (PARTITION BY doc_id) AS n FROM s
            )
            SELECT doc_id, cid, 1 - dist, n FROM r WHERE rn = 1 ORDER BY dist LIMIT ?""",
        [query_vector, *args, n],
    ).fetchall()


def _group_nearest(con: apsw.Connection, nearest: list[tuple[int, float]]) -> list[tuple]:
    if not nearest:
        return []
    doc_of = dict(con.execute(
        f"SELECT id, doc_id FROM chunks WHERE id IN ({','.join('?' * len(nearest))})", [r for r, _ in nearest]
    ).fetchall())
    best: dict[int, list] = {}
    for cid, dist in nearest:  # nearest first
        doc_id = doc_of.get(cid)
        if doc_id is None:
            continue
        if doc_id in best:
            best[doc_id][3] += 1
        else:
            best[doc_id] = [doc_id, cid, 1 - dist, 1]
    return [tuple(v) for v in best.values()]


# How many documents each list contributes to the fusion: deeper than any page of results, so a
# document ranked modestly by both lists can still rise (depth 100 beat 20 and 50 on SciFact).
FUSION_DEPTH = 100
# Semantic hits below this cosine similarity stay out of the fusion: the nearest chunks of an
# unrelated query are still "nearest", and would otherwise fill a page with noise (in the sample
# vault, a garden note scored 0.26 for "write-ahead log"; related notes score 0.35 and more with
# this model). On SciFact, floors 0 / 0.25 / 0.3 give nDCG@10 0.716 / 0.716 / 0.714.
MIN_SIMILARITY = 0.3


def hybrid_search(
    con: apsw.Connection,
    text: str,
    query_vector: bytes,
    *,
    limit: int = 10,
    filters: Filters = Filters(),
    k: float = RRF_K,
    weights: dict[str, float] | None = None,
    depth: int = FUSION_DEPTH,
    min_similarity: float = MIN_SIMILARITY,
    cache: VectorCache | None = None,
) -> list[Hit]:
    """Reciprocal rank fusion of the keyword and semantic document lists (see kbase.rank).

    Each hit shows the keyword list's best chunk (with highlights) when it has one, else the
    nearest chunk; ``explain`` gives each list's rank and contribution.
    """
    n = max(limit, depth)
    # The any-word query is only worth its cost when all words do not fill a page by themselves.
    kw = keyword_ranked(con, text, n, filters, fill_to=limit)
    sem = [r for r in semantic_ranked(con, query_vector, n, filters, cache) if r[2] >= min_similarity] \
        if cjk.model_can_read(text) else []
    fused = rrf({"keyword": [r[0] for r in kw], "semantic": [r[0] for r in sem]}, k=k,
                weights=weights or DEFAULT_WEIGHTS)
    kw_by_doc = {r[0]: r for r in kw}
    sem_by_doc = {r[0]: r for r in sem}
    hits = []
    for f in fused[:limit]:
        explain = dict(f.explain)
        if f.key in kw_by_doc:
            explain.setdefault("keyword", {})["score"] = round(kw_by_doc[f.key][2], 4)
        if f.key in sem_by_doc:
            explain.setdefault("semantic", {})["similarity"] = round(sem_by_doc[f.key][2], 4)
        if f.key in kw_by_doc:
            doc_id, cid, _, count, match = kw_by_doc[f.key]
            hits.append(_hit(con, doc_id, cid, f.score, count, match, explain))
        else:
            doc_id, cid, _, count = sem_by_doc[f.key]
            hits.append(_hit(con, doc_id, cid, f.score, count, None, explain))
    return hits


# Both lists count the same: on SciFact semantic weights from 0.75 to 1.5 (keyword 1.0) moved
# nDCG@10 by less than 0.003 at k = 10, so nothing justifies favouring either.
DEFAULT_WEIGHTS = {"keyword": 1.0, "semantic": 1.0}


def _hit(con: apsw.Connection, doc_id: int, chunk_id: int, score: float, n: int, match: str | None = None,
         explain: dict | None = None) -> Hit:
    """A Hit for a document and its chunk; with ``match``, the snippet highlights the terms."""
    pair_match = match if match is not None and cjk.is_pair_match(match) else None
    if pair_match is not None:
        match = None  # chunks_cjk has no highlight(): marked below from the chunk's text
    row = con.execute(
        """SELECT d.path, r.path, d.title, d.size, d.mtime_ns, c.line, c.heading_path,
                  CASE WHEN ?1 IS NULL THEN substr(d.body, c.start_char + 1, c.end_char - c.start_char)
                  ELSE (SELECT highlight(chunks_fts, 0, char(2), char(3)) FROM chunks_fts
                        WHERE chunks_fts MATCH ?1 AND rowid = c.id) END,
                  (SELECT group_concat(tag, ' ') FROM tags WHERE doc_id = d.id)
           FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id JOIN roots AS r ON r.id = d.root_id
           WHERE c.id = ?2""",
        (match, chunk_id),
    ).fetchone()
    path, root, title, size, mtime_ns, line, heading_path, marked, tags = row
    if pair_match is not None:
        marked = cjk.highlighted(con, chunk_id, marked, pair_match)
    snippet, highlights, lines_before = make_snippet(marked or "")
    abspath = os.path.join(root, path) if path else root
    return Hit(
        doc_id=doc_id, path=path or Path(root).name, abspath=abspath, title=title, score=score,
        chunk_id=chunk_id, line=line + lines_before, heading_path=heading_path, snippet=snippet,
        highlights=highlights, matched_chunks=n, tags=tuple((tags or "").split()),
        stale=is_stale(abspath, size, mtime_ns), explain=explain or {},
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
    """A document as stored: its text and where it came from."""

    id: int
    path: str
    abspath: str
    title: str
    body: str
    body_start: int
    kind: str = "markdown"  # or 'text


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
    doc_id, path, root, title, body, body_start, kind = con.execute(
        "SELECT d.id, d.path, r.path, d.title, d.body, d.body_start, d.kind FROM documents AS d"
        " JOIN roots AS r ON r.id = d.root_id WHERE d.id = ?",
        (doc_id,),
    ).fetchone()
    return DocRef(doc_id, path or Path(root).name, os.path.join(root, path) if path else root, title, body,
                  body_start, kind)


@dataclass(frozen=True)
class ChunkRef:
    """Where a chunk sits in its document: ``body[start:end]``, lines ``line`` to ``end_line``."""

    id: int
    doc_id: int
    seq: int
    start: int
    end: int
    line: int
    end_line: int
    heading_path: str
    kind: str


def chunk_ref(con: apsw.Connection, chunk_id: int) -> ChunkRef:
    row = con.execute("SELECT id, doc_id, seq, start_char, end_char, line, end_line, heading_path, kind"
                      " FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
    if row is None:
        raise InputError(f"no chunk {chunk_id} in the index", "it was replaced: search again")
    return ChunkRef(*row)


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
        "embedded_chunks": one("SELECT count(*) FROM chunks WHERE embedded"),
        "links": one("SELECT count(*) FROM links"),
        "unresolved_links": one("SELECT count(*) FROM links WHERE target_id IS NULL AND target_path IS NULL"),
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
