"""All reads: keyword search with filters, documents by path, status."""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import apsw

from kbase import cjk
from kbase import snippet as snippets
from kbase.db import located_root
from kbase.errors import InputError
from kbase.models import Hit
from kbase.query import Query, parse_query
from kbase.rank import FUSION_ALPHA, convex
from kbase.text import LINE_BREAK
from kbase.vectors import VectorCache, nearest_oneshot

# bm25 column weights in chunks_fts's column order: body, title + aliases, heading path. Measured
# on SciFact (bench/retrieval.py, BENCHMARKS.md section 4), nDCG@10 as (body, title, headings):
# (1, 10, 4) 0.670, (1, 5, 1) 0.677, (1, 2, 1) 0.678, (1, 1, 1) 0.682. The title column is short,
# so bm25's length normalisation already makes a title match count for much; extra weight only
# helped when the title was indexed twice (also as the first heading of the heading path, which
# chunks_fts_content no longer does) and hurts once it is not.
BM25_WEIGHTS = (1.0, 1.0, 1.0)


@dataclass(frozen=True)
class Filters:
    """Restrictions on which documents a search may return."""

    path: str | None = (
        None  # glob on the root-relative path, or a folder/path prefix if no wildcard
    )
    tags: tuple[str, ...] = ()  # each must be present (nested tags match: 'a' matches 'a/b')
    since: str | None = None  # ISO date: the document's date (front matter, else mtime) >= since
    until: str | None = None  # ISO date: <= until (inclusive)
    exclude: tuple[str, ...] = ()  # paths to leave out: globs or folder/path prefixes, as ``path``

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over ``documents AS d`` and its bindings. Paths match without regard
        to case (ASCII letters, as SQLite's lower())."""
        where, args = [], []
        if self.path:
            where.append(_path_match(self.path, args))
        for pattern in self.exclude:
            if pattern.strip().strip("/"):
                where.append(f"NOT {_path_match(pattern, args)}")
        for tag in self.tags:
            t = tag.lstrip("#")
            where.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.doc_id = d.id"
                " AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
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


def _path_match(pattern: str, args: list) -> str:
    """SQL true when ``d.path`` matches ``pattern``: a glob if it has a wildcard, else the path
    itself or a folder above it."""
    p = pattern.strip().strip("/").lower()
    if any(ch in p for ch in "*?["):
        args.append(p)
        return "(lower(d.path) GLOB ?)"
    if not p:
        return "1"
    args += [p, len(p) + 1, p + "/"]
    return "(lower(d.path) = ? OR lower(substr(d.path, 1, ?)) = ?)"


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_RELATIVE = re.compile(r"^(\d+)([dwmy])$")


def _check_date(value: str, option: str) -> str:
    """ISO date or datetime, or a relative age like 7d, 2w, 3m, 1y
    (days, weeks, months, years ago)."""
    m = _RELATIVE.match(value.strip())
    if m:
        days = int(m.group(1)) * {"d": 1, "w": 7, "m": 30, "y": 365}[m.group(2)]
        return (dt.date.today() - dt.timedelta(days=days)).isoformat()
    try:
        return dt.datetime.fromisoformat(value.strip()).date().isoformat()
    except ValueError:
        raise InputError(
            f"{option} {value!r} is not a date", "use YYYY-MM-DD or an age like 7d, 2w, 3m, 1y"
        ) from None


def keyword_search(
    con: apsw.Connection, text: str, *, limit: int = 10, filters: Filters = Filters()
) -> list[Hit]:
    """Documents matching ``text`` (see kbase.query for the syntax), best first, one hit each.

    A note whose name (title, file name or alias) is the query comes first, then notes whose name
    starts with it, then notes matching all words; if those are fewer than ``limit`` and the
    query has several words (and no explicit OR), documents matching only some words follow.
    """
    return [
        _hit(con, r.doc_id, r.chunk_id, r.score, r.matched, r.match, r.explain)
        for r in keyword_ranked(con, text, limit, filters)
    ]


@dataclass(frozen=True)
class Ranked:
    """A document in one ranked list, with the chunk that speaks for it."""

    doc_id: int
    chunk_id: int
    score: float  # higher is better; falls with rank
    matched: int  # chunks of the document that matched
    match: str | None = None  # the FTS5 expression that matched (to highlight the snippet)
    explain: dict = field(default_factory=dict)  # how the score was made


# Keyword tiers: the integer part of a keyword score. A note named by the query is what the person
# meant; one whose name starts with the query is what they are typing; then all words, then some.
# (TIER_ACROSS: all words, but in different chunks of the note; used for scripts without spaces.)
TIER_NAME, TIER_NAME_PREFIX, TIER_ALL, TIER_ACROSS, TIER_SOME = 5, 4, 3, 2, 1
TIER_LABELS = {
    TIER_NAME: "name",
    TIER_NAME_PREFIX: "name prefix",
    TIER_ALL: "all words",
    TIER_ACROSS: "all words across passages",
    TIER_SOME: "some words",
}
# Within a tier, bm25 maps onto [0, 1) as s / (s + BM25_HALF): a chunk scoring BM25_HALF shows .50.
BM25_HALF = 10.0
# A long note has many chunks, so many chances that one of them matches well by accident: past
# LENGTH_FREE_CHUNKS chunks (a long chapter), its best chunk's bm25 pays LENGTH_PRIOR per
# natural-log unit of its chunk count over that (a 320-chunk list note: ln 10 x LENGTH_PRIOR).
# Measured with bench/long_note.py (BENCHMARKS.md, "Long notes").
LENGTH_PRIOR = 0.5
LENGTH_FREE_CHUNKS = 32
# How many more documents than asked each list considers before the length prior re-orders them.
RERANK_SLACK = 20


def keyword_ranked(
    con: apsw.Connection,
    text: str,
    n: int,
    filters: Filters = Filters(),
    fill_to: int | None = None,
) -> list[Ranked]:
    """Up to ``n`` documents for ``text``, best first (see keyword_search for the order).

    Documents matching only some of the words are added when fewer than ``fill_to`` (default
    ``n``) match all of them."""
    query = parse_query(text)
    if query.empty or n <= 0:
        return []
    where, args = filters.sql()
    depth = n + RERANK_SLACK
    if cjk.applies(query):
        found = _cjk_found(con, query, depth, where, args, fill_to or n)
    else:
        kw_where, kw_args = _without_excluded_runs(query, where, args)
        found = [(TIER_ALL, r) for r in _ranked_docs(con, query.to_fts(), kw_where, kw_args, depth)]
        if len(found) < (fill_to or n) and len(query.clauses) > 1 and not query.explicit_or:
            have = {r[0] for _, r in found}
            found += [
                (TIER_SOME, r)
                for r in _ranked_docs(con, query.to_fts(match_any=True), kw_where, kw_args, depth)
                if r[0] not in have
            ]
    names = _name_tiers(con, query, where, args)
    have = {r[0]: i for i, (_, r) in enumerate(found)}
    for doc_id, tier in names.items():
        # A note asked for by name shows its beginning; one whose name merely starts with the
        # query keeps its best chunk, if its words match one.
        old = found[have[doc_id]][1] if doc_id in have else None
        if tier == TIER_NAME or old is None:
            first = con.execute(
                "SELECT id FROM chunks WHERE doc_id = ? ORDER BY seq LIMIT 1", (doc_id,)
            ).fetchone()
            if first is None:
                continue
            bm25, count = (old[2], old[3]) if old else (0.0, 1)
            row = (doc_id, first[0], bm25, count, query.to_fts(match_any=True))
        else:
            row = old
        if doc_id in have:
            found[have[doc_id]] = (tier, row)
        else:
            found.append((tier, row))
    sizes = _chunk_counts(con, [r[0] for _, r in found])
    out = []
    for tier, (doc_id, cid, bm25, count, match) in found:
        raw = -bm25
        adjusted = max(0.0, raw - LENGTH_PRIOR * _length_units(sizes.get(doc_id, 1)))
        score = tier + adjusted / (adjusted + BM25_HALF)
        out.append(
            Ranked(
                doc_id,
                cid,
                score,
                count,
                match,
                {"tier": TIER_LABELS[tier], "bm25": round(raw, 4), "chunks": sizes.get(doc_id, 1)},
            )
        )
    out.sort(key=lambda r: -r.score)
    return out[:n]


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


_WORD = re.compile(r"\w+")


def _name_tiers(con: apsw.Connection, query, where: str, args: list) -> dict[int, int]:
    """Documents whose name (title, file name, alias) is the query (TIER_NAME) or starts with it
    (TIER_NAME_PREFIX: the query's last word may be unfinished; a single finished word is not a
    prefix, or every note named 'Tasks ...' would jump ahead for 'tasks')."""
    if query.explicit_or or query.excluded:
        return {}
    words = [w.casefold() for w in query.words]
    if not words or len(words) > 12:
        return {}
    # The last word as a prefix, unless it is too short to narrow anything down.
    prefix = "*" if len(words[-1]) >= 3 else ""
    expr = (
        "{title} : (" + " AND ".join('"' + w.replace('"', '""') + '"' for w in words) + prefix + ")"
    )
    rows = con.execute(
        f"""SELECT d.id, d.title, d.path,
                   (SELECT group_concat(alias, char(31)) FROM aliases WHERE doc_id = d.id)
            FROM documents AS d WHERE d.id IN (
                SELECT c.doc_id FROM chunks AS c WHERE c.id IN (
                    SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 5000))
            AND {where}""",
        [expr, *args],
    ).fetchall()
    tiers = {}
    for doc_id, title, path, aliases in rows:
        names = [title, PurePosixPath(path).stem, *((aliases or "").split("\x1f"))]
        best = 0
        for name in names:
            nw = _words(name)
            if nw == words:
                best = TIER_NAME
                break
            if (
                len(words) <= len(nw)
                and nw[: len(words) - 1] == words[:-1]
                and nw[len(words) - 1].startswith(words[-1])
                and (len(words) > 1 or nw[0] != words[0])
            ):
                best = TIER_NAME_PREFIX
        if best:
            tiers[doc_id] = best
    return tiers


def _length_units(chunks: int) -> float:
    """How long a note is, for the length prior: log of its chunks past LENGTH_FREE_CHUNKS."""
    return math.log(chunks / LENGTH_FREE_CHUNKS) if chunks > LENGTH_FREE_CHUNKS else 0.0


def _chunk_counts(con: apsw.Connection, doc_ids: list[int]) -> dict[int, int]:
    """How many chunks each document has (their count, not the matching ones)."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    return dict(
        con.execute(
            f"SELECT doc_id, max(seq) + 1 FROM chunks WHERE doc_id IN ({marks}) GROUP BY doc_id",
            doc_ids,
        ).fetchall()
    )


def _cjk_found(
    con: apsw.Connection, query: Query, n: int, where: str, args: list, fill_to: int
) -> list[tuple]:
    """keyword_ranked's (tier, row) list for a query with words in scripts without spaces
    (kbase.cjk): all words in one chunk of chunks_cjk (TIER_ALL), all words across a note's chunks
    (TIER_ACROSS), then some of them; then notes whose chunks hold none of these scripts but some
    of the other words (from chunks_fts). Rows are _ranked_docs's."""
    pq = cjk.pair_query(query)
    found = [(TIER_ALL, r) for r in _ranked_docs(con, pq.to_fts(), where, args, n, cjk.TABLE)]
    if len(found) >= fill_to or len(query.clauses) < 2 or query.explicit_or:
        return found

    def more(tier: int, rows: list[tuple]) -> None:
        have = {r[0] for _, r in found}
        found.extend((tier, r) for r in rows if r[0] not in have)

    # Notes that hold every word, but not in one chunk (a chunk is a few paragraphs; words without
    # spaces are short and a note is what the user looks for): next, by their best chunk.
    across = set.intersection(*(_docs_matching(con, c) for c in pq.clauses)) - {
        r[0] for _, r in found
    }
    if across:
        marks = ",".join("?" * len(across))
        more(
            TIER_ACROSS,
            _ranked_docs(
                con,
                pq.to_fts(match_any=True),
                f"{where} AND d.id IN ({marks})",
                [*args, *across],
                n,
                cjk.TABLE,
            ),
        )
    more(TIER_SOME, _ranked_docs(con, pq.to_fts(match_any=True), where, args, n, cjk.TABLE))
    latin = cjk.latin_query(query)
    if len(found) < fill_to and not latin.empty:
        lw, la = _without_excluded_runs(query, where, args)
        more(TIER_SOME, _ranked_docs(con, latin.to_fts(match_any=True), lw, la, n))
    return found


def _docs_matching(con: apsw.Connection, clause: tuple) -> set[int]:
    """The notes with a chunk that matches a clause of a chunks_cjk query (a clause without runs
    also in chunks_fts, which alone holds the chunks without runs)."""
    expr = " OR ".join(t.fts() for t in clause)
    tables = [cjk.TABLE] + (["chunks_fts"] if not cjk.is_pair_match(expr) else [])
    return {
        doc_id
        for table in tables
        for (doc_id,) in con.execute(
            "SELECT DISTINCT doc_id FROM chunks"
            f" WHERE id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)",
            (expr,),
        )
    }


def _without_excluded_runs(query: Query, where: str, args: list) -> tuple[str, list]:
    """A query on chunks_fts whose excluded words are in scripts without spaces: chunks_fts
    cannot see them, so the notes holding them (in chunks_cjk) are left out."""
    excluded = cjk.excluded_runs(query)
    if excluded is None:
        return where, args
    sql = (
        f"{where} AND d.id NOT IN (SELECT c.doc_id FROM chunks AS c WHERE c.id IN"
        f" (SELECT rowid FROM {cjk.TABLE} WHERE {cjk.TABLE} MATCH ?))"
    )
    return sql, [*args, excluded]


def _ranked_docs(
    con: apsw.Connection, match: str, where: str, args: list, limit: int, table: str = "chunks_fts"
) -> list[tuple]:
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


def _ranked_docs_from_best_chunks(
    con: apsw.Connection, match: str, limit: int, table: str = "chunks_fts"
) -> list[tuple]:
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
            " SELECT c.doc_id, top.cid, top.s FROM top"
            " JOIN chunks AS c ON c.id = top.cid ORDER BY top.s",
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
    counts = dict(
        con.execute(
            f"SELECT doc_id, count(*) FROM chunks WHERE doc_id IN ({marks})"
            f" AND id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?) GROUP BY doc_id",
            [*best, match],
        ).fetchall()
    )
    return [
        (doc_id, cid, score, counts.get(doc_id, 1), match) for doc_id, cid, score in best.values()
    ]


# sqlite-vec answers k-nearest-neighbour queries for k up to this many rows.
KNN_MAX = 4096


def semantic_search(
    con: apsw.Connection,
    query_vector: bytes,
    *,
    limit: int = 10,
    filters: Filters = Filters(),
    cache: VectorCache | None = None,
) -> list[Hit]:
    """Documents nearest in meaning to the query vector, one hit (the nearest chunk) each."""
    return [
        _hit(con, r.doc_id, r.chunk_id, r.score, r.matched, None, r.explain)
        for r in semantic_ranked(con, query_vector, limit, filters, cache)
    ]


# The length prior of the semantic list, per natural-log unit of a note's chunk count, in cosine
# similarity (see LENGTH_PRIOR).
SEMANTIC_LENGTH_PRIOR = 0.01


def semantic_ranked(
    con: apsw.Connection,
    query_vector: bytes,
    n: int,
    filters: Filters = Filters(),
    cache: VectorCache | None = None,
) -> list[Ranked]:
    """Up to ``n`` documents nearest in meaning, best first: the cosine similarity of the nearest
    chunk, less the length prior."""
    docs = _semantic_docs(con, query_vector, n + RERANK_SLACK, filters, cache)
    sizes = _chunk_counts(con, [d[0] for d in docs])
    out = [
        Ranked(
            doc_id,
            cid,
            sim - SEMANTIC_LENGTH_PRIOR * _length_units(sizes.get(doc_id, 1)),
            count,
            None,
            {"similarity": round(sim, 4), "chunks": sizes.get(doc_id, 1)},
        )
        for doc_id, cid, sim, count in docs
    ]
    out.sort(key=lambda r: -r.score)
    return out[:n]


def _semantic_docs(
    con: apsw.Connection,
    query_vector: bytes,
    n: int,
    filters: Filters = Filters(),
    cache: VectorCache | None = None,
) -> list[tuple]:
    """Up to ``n`` (doc_id, chunk_id, cosine similarity, chunks among the nearest), best first.

    Unfiltered: a k-nearest-neighbour query (sqlite-vec, or the in-memory ``cache``), widened
    until ``n`` documents are found. Filtered: an exact scan over the chunks that pass the
    filters, so a filter never hides matches that exist.
    """
    if (
        n <= 0
        or con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is None
    ):
        return []
    where, args = filters.sql()
    if where != "1" and cache is not None:
        allowed = [
            cid
            for (cid,) in con.execute(
                "SELECT c.id FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
                f" WHERE c.embedded AND {where}",
                args,
            )
        ]
        return _group_nearest(con, cache.nearest(con, query_vector, len(allowed), allowed))[:n]
    if where == "1":
        k = max(4 * n, 40)
        limit = None if cache is not None else KNN_MAX
        while True:
            if cache is not None:
                nearest = cache.nearest(con, query_vector, k)
            elif (coded := nearest_oneshot(con, query_vector, k)) is not None:
                nearest, limit = coded, None
            else:
                k = min(k, KNN_MAX)
                nearest = con.execute(
                    "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?",
                    (query_vector, k),
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
                FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
                     JOIN chunks_vec AS v ON v.rowid = c.id
                WHERE c.embedded AND {where}
            ), r AS (
                SELECT doc_id, cid, dist,
                       row_number() OVER (PARTITION BY doc_id ORDER BY dist) AS rn,
                       count(*) OVER (PARTITION BY doc_id) AS n FROM s
            )
            SELECT doc_id, cid, 1 - dist, n FROM r WHERE rn = 1 ORDER BY dist LIMIT ?""",
        [query_vector, *args, n],
    ).fetchall()


def _group_nearest(con: apsw.Connection, nearest: list[tuple[int, float]]) -> list[tuple]:
    if not nearest:
        return []
    doc_of = dict(
        con.execute(
            f"SELECT id, doc_id FROM chunks WHERE id IN ({','.join('?' * len(nearest))})",
            [r for r, _ in nearest],
        ).fetchall()
    )
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
# Semantic hits below this cosine similarity stay out of the fusion unless the keyword list holds
# the note too: the nearest chunks of an unrelated query are still "nearest", and would otherwise
# fill a page with noise (in the sample
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
    alpha: float = FUSION_ALPHA,
    depth: int = FUSION_DEPTH,
    min_similarity: float = MIN_SIMILARITY,
    cache: VectorCache | None = None,
) -> list[Hit]:
    """The keyword and semantic document lists fused by their scores (kbase.rank.convex): the
    keyword score normalised to the list's best bm25 plus one per tier above "some words" (so a
    note named by the query comes first), the semantic one min-max over its list; weights
    ``1 - alpha`` and ``alpha``. Semantic hits below ``min_similarity`` are not matches (see
    MIN_SIMILARITY) unless the keyword list holds the note too, so a page may hold fewer notes
    than asked. Each hit shows the chunk of the list that contributes most, highlighted with the
    query's words; ``explain`` gives each list's rank, raw and normalised score and contribution.
    """
    n = max(limit, depth)
    # The any-word query is only worth its cost when all words do not fill a page by themselves.
    kw = keyword_ranked(con, text, n, filters, fill_to=limit)
    sem: list[Ranked] = []
    if cjk.model_can_read(text):
        in_kw = {r.doc_id for r in kw}
        sem = [
            r
            for r in semantic_ranked(con, query_vector, n, filters, cache)
            if r.explain["similarity"] >= min_similarity or r.doc_id in in_kw
        ]
    top = max((r.score % 1 for r in kw), default=0.0) or 1.0
    hi, lo = (sem[0].score, sem[-1].score) if sem else (1.0, 0.0)
    # Each list's evidence for a note, in [0, 1]; the keyword list adds its tier on top.
    strength = {
        "keyword": {r.doc_id: (1 - alpha) * (r.score % 1) / top for r in kw},
        "semantic": {
            r.doc_id: alpha * ((r.score - lo) / (hi - lo) if hi > lo else 1.0) for r in sem
        },
    }
    fused = convex(
        {
            "keyword": [(r.doc_id, int(r.score) - TIER_SOME + (r.score % 1) / top) for r in kw],
            "semantic": [
                (r.doc_id, strength["semantic"][r.doc_id] / alpha if alpha else 0.0) for r in sem
            ],
        },
        {"keyword": 1 - alpha, "semantic": alpha},
    )
    by_list = {"keyword": {r.doc_id: r for r in kw}, "semantic": {r.doc_id: r for r in sem}}
    highlight = parse_query(text).to_fts(match_any=True) or None
    hits = []
    for f in fused[:limit]:
        explain = {
            name: {**part, **by_list[name][f.key].explain} for name, part in f.explain.items()
        }
        # The snippet comes from the list whose evidence is stronger (not counting the tier, a
        # class of match rather than a measure of this chunk); keyword wins a tie.
        best = max(f.explain, key=lambda name: strength[name][f.key])
        r = by_list[best][f.key]
        hits.append(
            _hit(con, r.doc_id, r.chunk_id, f.score, r.matched, r.match or highlight, explain)
        )
    return hits


def _hit(
    con: apsw.Connection,
    doc_id: int,
    chunk_id: int,
    score: float,
    n: int,
    match: str | None = None,
    explain: dict | None = None,
) -> Hit:
    """A Hit for a document and its chunk: a reading snippet (Markdown syntax removed) around the
    first match of ``match`` that stays visible, if any, and that match's line in the file."""
    pair_match = match if match is not None and cjk.is_pair_match(match) else None
    if pair_match is not None:
        match = None  # chunks_cjk has no highlight(): marked below from the chunk's text
    row = con.execute(
        """SELECT d.path, r.path, r.relpath, d.title, d.size, d.mtime_ns, d.kind, c.line,
                  c.heading_path,
                  substr(d.body, c.start_char + 1, c.end_char - c.start_char),
                  CASE WHEN ?1 IS NOT NULL THEN
                      (SELECT highlight(chunks_fts, 0, char(2), char(3)) FROM chunks_fts
                       WHERE chunks_fts MATCH ?1 AND rowid = c.id) END,
                  (SELECT group_concat(tag, ' ') FROM tags WHERE doc_id = d.id)
           FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
                JOIN roots AS r ON r.id = d.root_id
           WHERE c.id = ?2""",
        (match, chunk_id),
    ).fetchone()
    path, root, relpath, title, size, mtime_ns, kind, line, heading_path, text, marked, tags = row
    ranges: list[tuple[int, int]] = []
    if pair_match is not None:
        marked = cjk.highlighted(con, chunk_id, text, pair_match)
    if marked:
        unmarked, ranges = snippets.unmark(marked)
        if unmarked != text:  # cannot happen with external content; never show wrong highlights
            ranges = []
    snippet, highlights, anchor = snippets.snippet(text, ranges, markdown=kind == "markdown")
    root = located_root(root, relpath, con.filename)  # moved along with the index?
    abspath = os.path.join(root, path) if path else root
    return Hit(
        doc_id=doc_id,
        path=path or Path(root).name,
        abspath=abspath,
        title=title,
        score=score,
        chunk_id=chunk_id,
        line=line + len(LINE_BREAK.findall(text, 0, anchor)),
        heading_path=_plain_headings(heading_path) if kind == "markdown" else heading_path,
        snippet=snippet,
        highlights=highlights,
        matched_chunks=n,
        tags=tuple((tags or "").split()),
        stale=is_stale(abspath, size, mtime_ns),
        explain=explain or {},
    )


def _plain_headings(heading_path: str) -> str:
    """A heading path as read: 'Example **template**' shows as 'Example template'."""
    if not any(ch in heading_path for ch in "*_`[<~=%\\$"):
        return heading_path
    return " > ".join(snippets.plain(h) for h in heading_path.split(" > "))


def is_stale(abspath: str, size: int, mtime_ns: int) -> bool:
    """True when the file changed (or vanished) since it was indexed: one stat."""
    try:
        st = os.stat(abspath)
    except OSError:
        return True
    return st.st_size != size or st.st_mtime_ns != mtime_ns


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
    row = con.execute(
        "SELECT id, doc_id, seq, start_char, end_char, line, end_line, heading_path, kind"
        " FROM chunks WHERE id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        raise InputError(f"no chunk {chunk_id} in the index", "it was replaced: search again")
    return ChunkRef(*row)
