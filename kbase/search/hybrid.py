"""Hybrid search: the keyword and semantic lists fused by their scores."""

from __future__ import annotations

import apsw

from kbase.embed.nearest import VectorCache
from kbase.records import Hit
from kbase.search import cjk
from kbase.search.filters import Filters
from kbase.search.fusion import FUSION_ALPHA, convex
from kbase.search.hits import CANDIDATES, Ranked, hit
from kbase.search.keyword import (
    BM25_WEIGHTS,
    TIER_NAME,
    TIER_NAME_PREFIX,
    TIER_SOME,
    keyword_ranked,
)
from kbase.search.query import parse_query
from kbase.search.semantic import semantic_ranked

# How many documents each list contributes to the fusion: deeper than any page of results, so a
# document ranked modestly by both lists can still rise (depth 100 beat 20 and 50 on SciFact);
# the same whatever the limit (hits.CANDIDATES).
FUSION_DEPTH = CANDIDATES


# Semantic hits below this cosine similarity stay out of the fusion unless the keyword list holds
# the note too: the nearest chunks of an unrelated query are still "nearest", and would otherwise
# fill a page with noise (in the sample
# vault, a garden note scored 0.26 for "write-ahead log"; related notes score 0.35 and more with
# this model). On SciFact, floors 0 / 0.25 / 0.3 give nDCG@10 0.716 / 0.716 / 0.714.
MIN_SIMILARITY = 0.3


# A note's second-nearest passage counts this much beside its nearest: a note that answers a
# question usually has more than one passage about it, a note that merely mentions it has one
# (BENCHMARKS.md, "Fusion that never loses to its halves").
SECOND_PASSAGE = 0.3
# The keyword list's tiers that fusion keeps as steps (in units of a list's best evidence): a note
# named by the query comes first, then one whose name starts with it. Matching all of the words in
# one passage is not a step: for a question in natural words it happens by accident in a long
# note ("add tags to a note"), and bm25 already rewards it.
NAME_STEPS = {TIER_NAME: 4.0, TIER_NAME_PREFIX: 3.0}
# Each list's evidence is min-max scaled between its best note and its SEMANTIC_SPAN-th /
# KEYWORD_SPAN-th best (below that: 0), not its last: over a whole list, the scale depended on the
# size of the collection (a 100-note vault's list reaches notes that share nothing with the query,
# SciFact's does not), and with it which list won. Measured side by side (BENCHMARKS.md).
SEMANTIC_SPAN = 20
KEYWORD_SPAN = 50
# Which chunk of a hit speaks for it: each chunk of the note scored by its meaning (cosine,
# min-max over the note's chunks) and its words (bm25 over the note's best), meaning weighing
# PASSAGE_MEANING. Measured on the answer lines of the question sets (BENCHMARKS.md): the chunk
# that holds the answer line is chosen for 145 of 257 questions at 0.3, 138 at 0.5, 134 by words
# alone, 116 by meaning alone.
PASSAGE_MEANING = 0.3


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
    semantic_reads: bool | None = None,
) -> list[Hit]:
    """The keyword and semantic document lists fused by their scores (kbase.search.fusion.convex):
    the keyword evidence is a note's bm25 (as a fraction, see keyword.BM25_HALF) scaled between
    the list's best and its KEYWORD_SPAN-th best, plus NAME_STEPS for a note the query names; the
    semantic evidence is the similarity of its nearest passage plus SECOND_PASSAGE times that of
    its second, scaled between the best and the SEMANTIC_SPAN-th best; weights ``1 - alpha`` and
    ``alpha``. Semantic hits below ``min_similarity`` are not matches (see MIN_SIMILARITY) unless
    the keyword list holds the note too, so a page may hold fewer notes than asked. Each hit shows
    its passage that answers (passage_chunks, then the sentence with the most query words),
    highlighted with the query's words; ``explain`` gives each list's rank, raw and normalised
    score and contribution.

    ``semantic_reads``: whether the index's model reads the query's language (kbase.embed.embedder
    .reads); when it does not, the semantic list is left out. None: as the default English model
    (a query with no Latin letter gets the keyword list alone).
    """
    n = max(limit, depth)
    # The any-word pass runs when all words do not fill the fusion's depth (not the page's: the
    # first hits must not depend on the limit).
    kw = keyword_ranked(con, text, n, filters, fill_to=depth)
    sem: list[Ranked] = []
    if cjk.model_can_read(text) if semantic_reads is None else semantic_reads:
        in_kw = {r.doc_id for r in kw}
        sem = [
            r
            for r in semantic_ranked(con, query_vector, n, filters, cache)
            if r.explain["similarity"] >= min_similarity or r.doc_id in in_kw
        ]
    words = {r.doc_id: r.score % 1 for r in kw}
    meaning = {
        r.doc_id: r.score + SECOND_PASSAGE * r.explain.get("second", r.explain["similarity"])
        for r in sem
    }
    # Each list's evidence for a note, in [0, 1] (the name steps are a class of match, not a
    # measure of a passage, and stay out of it).
    evidence = {
        "keyword": _spanned(words, KEYWORD_SPAN),
        "semantic": _spanned(meaning, SEMANTIC_SPAN),
    }
    # Without a semantic list (a query the model cannot read, an index without vectors) nothing
    # weighs against the keyword list: its own order stands, every tier a step.
    steps = {
        r.doc_id: NAME_STEPS.get(int(r.score), 0.0) if sem else float(int(r.score) - TIER_SOME)
        for r in kw
    }
    fused = convex(
        {
            "keyword": [(r.doc_id, steps[r.doc_id] + evidence["keyword"][r.doc_id]) for r in kw],
            "semantic": sorted(evidence["semantic"].items(), key=lambda kv: -kv[1]),
        },
        {"keyword": 1 - alpha, "semantic": alpha},
    )
    by_list = {"keyword": {r.doc_id: r for r in kw}, "semantic": {r.doc_id: r for r in sem}}
    highlight = parse_query(text).to_fts(match_any=True) or None
    page = fused[:limit]
    # A note the query names (or names with a typo) shows its beginning, as in keyword mode: the
    # person asked for the note, not for a passage of it.
    named = {r.doc_id for r in kw if r.explain.get("tier") in ("name", "near name")}
    chunks = passage_chunks(
        con, [f.key for f in page if f.key not in named], highlight, query_vector if sem else None
    )
    hits = []
    for f in page:
        explain = {
            name: {**part, **by_list[name][f.key].explain} for name, part in f.explain.items()
        }
        r = by_list["keyword"].get(f.key) or by_list["semantic"][f.key]
        match = by_list["keyword"][f.key].match if f.key in by_list["keyword"] else None
        chunk = chunks.get(f.key, r.chunk_id)
        hits.append(hit(con, f.key, chunk, f.score, r.matched, match or highlight, explain))
    return hits


def passage_chunks(
    con: apsw.Connection, doc_ids: list[int], match: str | None, query_vector: bytes | None
) -> dict[int, int]:
    """For each document, its chunk that best answers the query (see PASSAGE_MEANING): two
    queries for the whole page, one for the words, one for the meaning."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    words: dict[int, float] = {}
    if match:
        w = ", ".join(str(x) for x in BM25_WEIGHTS)
        # One query per note over its range of chunk ids: FTS5 then scores those rows only (a
        # rowid IN (...) list made it score every match in the index first: 34 ms against 0.8).
        # bm25's statistics are the whole index's either way; rows of other notes in a range
        # are ignored below.
        for _doc_id, lo, hi in con.execute(
            f"SELECT doc_id, min(id), max(id) FROM chunks WHERE doc_id IN ({marks})"
            " GROUP BY doc_id",
            doc_ids,
        ).fetchall():
            words.update(
                con.execute(
                    f"SELECT rowid, -bm25(chunks_fts, {w}) FROM chunks_fts"
                    " WHERE chunks_fts MATCH ? AND rowid BETWEEN ? AND ?",
                    (match, lo, hi),
                ).fetchall()
            )
    meaning: dict[int, float] = {}
    if (
        query_vector
        and con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone()
    ):
        meaning = dict(
            con.execute(
                "SELECT c.id, 1 - vec_distance_cosine(v.embedding, ?) FROM chunks AS c"
                f" JOIN chunks_vec AS v ON v.rowid = c.id WHERE c.doc_id IN ({marks})",
                [query_vector, *doc_ids],
            ).fetchall()
        )
    per_doc: dict[int, list[int]] = {}
    for cid, doc_id in con.execute(
        f"SELECT id, doc_id FROM chunks WHERE doc_id IN ({marks}) ORDER BY doc_id, seq", doc_ids
    ):
        if cid in words or cid in meaning:
            per_doc.setdefault(doc_id, []).append(cid)
    out = {}
    for doc_id, cids in per_doc.items():
        top = max((words.get(c, 0.0) for c in cids), default=0.0) or 1.0
        sims = [meaning[c] for c in cids if c in meaning]
        hi, lo = (max(sims), min(sims)) if sims else (1.0, 0.0)
        scores = {
            c: PASSAGE_MEANING * _scaled(meaning.get(c), hi, lo)
            + (1 - PASSAGE_MEANING) * words.get(c, 0.0) / top
            for c in cids
        }
        out[doc_id] = max(cids, key=scores.__getitem__)  # the first of equals: the earliest
    return out


def _scaled(value: float | None, hi: float, lo: float) -> float:
    """``value`` min-max between ``lo`` and ``hi`` (1 when they are equal; 0 for no value)."""
    if value is None:
        return 0.0
    return (value - lo) / (hi - lo) if hi > lo else 1.0


def _spanned(values: dict[int, float], span: int) -> dict[int, float]:
    """Each value min-max scaled between the best and the ``span``-th best, clipped at 0."""
    if not values:
        return {}
    ordered = sorted(values.values(), reverse=True)
    hi, lo = ordered[0], ordered[min(span, len(ordered)) - 1]
    return {k: max(0.0, (v - lo) / (hi - lo)) if hi > lo else 1.0 for k, v in values.items()}
