"""Hybrid search: the keyword and semantic lists fused by their scores."""

from __future__ import annotations

import apsw

from kbase.embed.nearest import VectorCache
from kbase.models import Hit
from kbase.search import cjk
from kbase.search.filters import Filters
from kbase.search.fusion import FUSION_ALPHA, convex
from kbase.search.hits import Ranked, hit
from kbase.search.keyword import TIER_SOME, keyword_ranked
from kbase.search.query import parse_query
from kbase.search.semantic import semantic_ranked

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
    semantic_reads: bool | None = None,
) -> list[Hit]:
    """The keyword and semantic document lists fused by their scores (kbase.search.fusion.convex):
    the keyword score normalised to the list's best bm25 plus one per tier above "some words" (so a
    note named by the query comes first), the semantic one min-max over its list; weights
    ``1 - alpha`` and ``alpha``. Semantic hits below ``min_similarity`` are not matches (see
    MIN_SIMILARITY) unless the keyword list holds the note too, so a page may hold fewer notes
    than asked. Each hit shows the chunk of the list that contributes most, highlighted with the
    query's words; ``explain`` gives each list's rank, raw and normalised score and contribution.

    ``semantic_reads``: whether the index's model reads the query's language (kbase.embed.embedder
    .reads); when it does not, the semantic list is left out. None: as the default English model
    (a query with no Latin letter gets the keyword list alone).
    """
    n = max(limit, depth)
    # The any-word query is only worth its cost when all words do not fill a page by themselves.
    kw = keyword_ranked(con, text, n, filters, fill_to=limit)
    sem: list[Ranked] = []
    if cjk.model_can_read(text) if semantic_reads is None else semantic_reads:
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
            hit(con, r.doc_id, r.chunk_id, f.score, r.matched, r.match or highlight, explain)
        )
    return hits
