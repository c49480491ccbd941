"""Semantic search: the chunks nearest the query vector, grouped per document."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Mapping
from itertools import groupby
from operator import add, itemgetter, mul

import apsw

from kbase.embed.nearest import VectorCache, knn, nearest_oneshot
from kbase.records import Hit
from kbase.search.filters import Filters
from kbase.search.hits import CANDIDATES, RERANK_SLACK, Ranked, chunk_counts, hit, length_units

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
    n = max(limit, CANDIDATES)  # the same candidates whatever the limit (hits.CANDIDATES)
    return [
        hit(con, r.doc_id, r.chunk_id, r.score, r.matched, None, r.explain)
        for r in semantic_ranked(con, query_vector, n, filters, cache)[:limit]
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
    chunk, less the length prior. ``explain["second"]`` is the similarity of the document's
    second-nearest chunk (hybrid search counts it as evidence): a note of one chunk repeats its
    first; one whose second chunk is beyond the nearest chunks looked at gets the farthest of
    those, which bounds it from above."""
    docs, farthest = _semantic_docs(con, query_vector, n + RERANK_SLACK, filters, cache)
    sizes = chunk_counts(con, [d[0] for d in docs])
    out = []
    for doc_id, cid, sim, count, second in docs:
        size = sizes.get(doc_id, 1)
        if second is None:  # one chunk (as far as was looked), or the second beyond the nearest
            second = sim if size == 1 or farthest < -0.5 else min(sim, farthest)
        out.append(
            Ranked(
                doc_id,
                cid,
                sim - SEMANTIC_LENGTH_PRIOR * length_units(size),
                count,
                None,
                {"similarity": round(sim, 4), "second": round(second, 4), "chunks": size},
            )
        )
    out.sort(key=lambda r: -r.score)
    return out[:n]


def note_similarities(
    con: apsw.Connection,
    query_vector: bytes,
    doc_ids: list[int],
    cache: VectorCache | None = None,
) -> dict[int, float]:
    """Each document's similarity to the query as a whole note: the cosine of the query vector
    with the mean of the note's chunk vectors (note-level evidence beside its nearest passages:
    a note about the question has many passages near it, one that mentions it has one). From
    the ``cache``'s vectors in memory where it holds them exactly, else one statement for all of
    ``doc_ids``; a document without vectors is absent."""
    if not doc_ids or not query_vector:
        return {}
    if cache is not None and (held := cache.note_similarities(con, query_vector, doc_ids)):
        return held
    # Summed here without numpy: a one-shot search from the shell imports none (100 ms of CPU
    # at start-up) for a few hundred chunks' vectors.
    query = array("f", query_vector)
    out: dict[int, float] = {}
    for doc, rows in groupby(
        con.execute(
            "SELECT c.doc_id, v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
            " WHERE c.doc_id IN (SELECT value FROM json_each(?)) ORDER BY c.doc_id",
            (json.dumps(doc_ids),),
        ),
        key=itemgetter(0),
    ):
        total: list[float] | None = None
        for _, blob in rows:
            vector = array("f", blob)
            total = list(vector) if total is None else list(map(add, total, vector))
        assert total is not None
        norm = math.sqrt(sum(map(mul, total, total)))
        out[doc] = sum(map(mul, total, query)) / norm if norm > 0 else 0.0
    return out


def _semantic_docs(
    con: apsw.Connection,
    query_vector: bytes,
    n: int,
    filters: Filters = Filters(),
    cache: VectorCache | None = None,
) -> tuple[list[tuple], float]:
    """Up to ``n`` (doc_id, chunk_id, cosine similarity, chunks among the nearest, similarity of
    the second-nearest chunk or None), best first, and the similarity of the farthest chunk
    looked at (-1 when every chunk was looked at: an exact scan, a filtered cache search).

    Unfiltered: a k-nearest-neighbour query (sqlite-vec, or the in-memory ``cache``), widened
    until ``n`` documents are found. Filtered: an exact scan over the chunks that pass the
    filters, so a filter never hides matches that exist.
    """
    if (
        n <= 0
        or con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is None
    ):
        return [], -1.0
    where, args = filters.sql()
    if where != "1" and cache is not None:
        kept = [
            doc_id
            for (doc_id,) in con.execute(f"SELECT d.id FROM documents AS d WHERE {where}", args)
        ]
        grouped = cache.nearest_in_documents(con, query_vector, kept, n)
        if grouped is not None:
            return grouped, -1.0  # every allowed chunk looked at
        allowed = dict(
            con.execute(
                "SELECT c.id, c.doc_id FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
                f" WHERE c.embedded AND {where}",
                args,
            )
        )
        nearest = cache.nearest(con, query_vector, len(allowed), allowed)
        docs, _ = _group_nearest(con, nearest, allowed)
        return docs[:n], -1.0  # every allowed chunk looked at
    if where == "1":
        k = max(4 * n, 40)
        limit = None if cache is not None else KNN_MAX
        while True:
            doc_of = None
            if cache is not None:
                nearest = cache.nearest(con, query_vector, k)
                doc_of = cache.documents(con)
            elif (coded := nearest_oneshot(con, query_vector, k)) is not None:
                nearest, limit = coded, None
            else:
                k = min(k, KNN_MAX)
                nearest = knn(con, query_vector, k)
            docs, farthest = _group_nearest(con, nearest, doc_of)
            if len(docs) >= n or len(nearest) < k or (limit is not None and k >= limit):
                break
            k *= 4
        if len(docs) >= n or len(nearest) < k:
            return docs[:n], farthest if len(nearest) >= k else -1.0
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
            SELECT doc_id, max(CASE WHEN rn = 1 THEN cid END), max(1 - dist), max(n),
                   max(CASE WHEN rn = 2 THEN 1 - dist END)
            FROM r WHERE rn <= 2 GROUP BY doc_id ORDER BY 3 DESC LIMIT ?""",
        [query_vector, *args, n],
    ).fetchall(), -1.0


def _group_nearest(
    con: apsw.Connection,
    nearest: list[tuple[int, float]],
    doc_of: Mapping[int, int] | None = None,
) -> tuple[list[tuple], float]:
    """Nearest chunks (nearest first) -> _semantic_docs's rows and the farthest similarity;
    ``doc_of``: chunk id -> document id, when known (else read, as many chunks as there are)."""
    if not nearest:
        return [], -1.0
    if doc_of is None:
        doc_of = dict(
            con.execute(
                "SELECT id, doc_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([r for r, _ in nearest]),),
            ).fetchall()
        )
    best: dict[int, list] = {}
    for cid, dist in nearest:  # nearest first
        doc_id = doc_of.get(cid)
        if doc_id is None:
            continue
        if doc_id in best:
            best[doc_id][3] += 1
            if best[doc_id][4] is None:
                best[doc_id][4] = 1 - dist
        else:
            best[doc_id] = [doc_id, cid, 1 - dist, 1, None]
    return [tuple(v) for v in best.values()], 1 - nearest[-1][1]
