"""Pure: rank fusion with an explanation of every score."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from kbase.search.hits import CANDIDATES

if TYPE_CHECKING:
    from kbase.search.hits import Ranked

K = TypeVar("K", bound=Hashable)

# Reciprocal rank fusion constant. The classic 60 (Cormack et al., 2009) was tuned for fusing many
# TREC runs; with two lists of different character, a smaller k lets each list's top ranks count.
# SciFact nDCG@10 (bench/retrieval.py): k=60 0.706, 20 0.709, 10 0.714, 5 0.714, 1 0.718.
# 10 keeps almost all of the gain without letting a single list's first hit decide alone.
RRF_K = 10


@dataclass(frozen=True)
class Fused(Generic[K]):
    key: K
    score: float
    explain: (
        dict  # list name -> {"rank": r, "contribution": c}; lists that missed the key are absent
    )


def rrf(
    lists: Mapping[str, Sequence[K]],
    *,
    k: float = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Reciprocal rank fusion: score(d) = sum over lists of weight / (k + rank of d), rank from 1.

    ``lists`` maps a name ("keyword", "semantic") to keys in rank order. Ties keep the order in
    which keys were first seen, lists taken in the order given.
    """
    weights = weights or {}
    scores: dict[K, float] = {}
    explain: dict[K, dict] = {}
    for name, keys in lists.items():
        w = weights.get(name, 1.0)
        for rank, key in enumerate(keys, 1):
            c = w / (k + rank)
            scores[key] = scores.get(key, 0.0) + c
            explain.setdefault(key, {})[name] = {"rank": rank, "contribution": round(c, 6)}
    order = sorted(scores, key=lambda key: -scores[key])  # sorted() is stable
    return [Fused(key, scores[key], explain[key]) for key in order]


def convex(
    lists: Mapping[str, Sequence[tuple[K, float]]], weights: Mapping[str, float]
) -> list[Fused[K]]:
    """score(d) = sum over lists of weight * normalised score of d (0 where the list lacks d).

    ``lists`` maps a name to (key, normalised score) pairs in rank order. The explanation gives
    each list's rank, normalised score and contribution. Ties keep the order first seen."""
    scores: dict[K, float] = {}
    explain: dict[K, dict] = {}
    for name, pairs in lists.items():
        w = weights[name]
        for rank, (key, value) in enumerate(pairs, 1):
            c = w * value
            scores[key] = scores.get(key, 0.0) + c
            explain.setdefault(key, {})[name] = {
                "rank": rank,
                "normalised": round(value, 4),
                "contribution": round(c, 6),
            }
    order = sorted(scores, key=lambda key: -scores[key])
    return [Fused(key, scores[key], explain[key]) for key in order]


@dataclass(frozen=True)
class FusionParams:
    """Every constant of hybrid ranking, today's values the defaults: hybrid_search fuses with
    PARAMS, and an evaluation fuses cached lists again with ``dataclasses.replace(PARAMS, ...)``
    (bench/eval.py, leave-one-collection-out). Each is measured in BENCHMARKS.md."""

    # The semantic list's weight in the convex combination of the two lists' normalised evidence
    # (Bruch, Gai and Ingber, "An analysis of fusion functions for hybrid retrieval", 2023); the
    # keyword list weighs 1 - alpha. 0.4 / 0.5 / 0.6 gave SciFact nDCG@10 0.7297 / 0.7265 /
    # 0.7194, and question top-1 that rose with alpha on one vault and fell on another.
    alpha: float = 0.5
    # Semantic hits below this cosine similarity stay out unless the keyword list holds the note
    # too: the nearest chunks of an unrelated query are still "nearest" (a garden note scored
    # 0.26 for "write-ahead log"; related notes 0.35 and more with all-MiniLM-L6-v2). A model
    # may set its own (kbase.embed: ``min_similarity``; multilingual-e5-small's is 0.8). On
    # SciFact floors 0 / 0.25 / 0.3 give nDCG@10 0.716 / 0.716 / 0.714.
    min_similarity: float = 0.3
    # A note's second-nearest passage counts this much beside its nearest, and its similarity
    # as a whole note (the query against the mean of its chunk vectors, semantic.
    # note_similarities) note_vector: a note that answers a question usually has more than one
    # passage about it, one that mentions it has one. Leave-one-collection-out over 22
    # collections (note_vector 0 / 0.1 / 0.15 / 0.2 / 0.3, second passage 0 / 0.15 / 0.3): 0.2
    # and 0.15 in every fold, the worst held-out margin over the better half and naive RRF
    # -0.001 -> +0.000 (MRR@10; top-1 +0.000 both), SciFact nDCG@10 0.729 -> 0.730,
    # blind/vue-docs-en 0.860 -> 0.892, blind/foam-docs 0.840 -> 0.853; foam-docs 0.838 ->
    # 0.836, blind/rust-book 0.864 -> 0.859 (BENCHMARKS.md section 18). Before: second 0.3 alone
    # (0 / 0.3 / 0.5 on the vaults' questions: top-1 0.616 / 0.663 / 0.663 on obsidian-tasks).
    second_passage: float = 0.15
    note_vector: float = 0.2
    # The keyword tiers that stay steps in the fusion (in units of a list's best evidence): a
    # note the query names comes first, then one whose whole name is a typo away from it, then
    # one whose name starts with it ("Recurring Task" means the note "Recurring Tasks" more than
    # "Recurring Tasks and Custom Statuses", which the meaning of its many passages favoured at
    # one step for both). The half step between is a rule, not a fit: over the 22 collections
    # of bench.eval it changes the first three hits of that one query only (3.25, 3.5 and 4.0
    # alike; BENCHMARKS.md). All words in one passage is not a step: for a question in natural
    # words it happens by accident in a long note, and bm25 already rewards it.
    name_steps: tuple[tuple[str, float], ...] = (
        ("name", 4.0),
        ("near name", 3.5),
        ("name prefix", 3.0),
    )
    # Each list's evidence is min-max scaled between its best note and its span-th best (below
    # that: 0), not its last: over a whole list the scale depended on the size of the collection.
    semantic_span: int = 20
    keyword_span: int = 50
    # Which chunk of a hit speaks for it: each chunk scored by its meaning (cosine, min-max over
    # the note's chunks) and its words (bm25 over the note's best), each side weighing what it
    # gave the note's fused evidence (passage_meaning), but never less than this floor. Snippets
    # that show the answer (foam-docs / obsidian-tasks-docs, of 131 / 136): one weight of 0.3
    # for every note 62 / 52, floor 0.15 64 / 53, floor 0 64 / 55 (BENCHMARKS.md).
    passage_floor: float = 0.0
    # How deep each list feeds the fusion, whatever the limit (hits.CANDIDATES).
    depth: int = CANDIDATES
    # The semantic list is fused only for a query the model reads at least this share of (of
    # its letters, kbase.embed.embedder.reader: an English model's nearest chunks for a Chinese
    # question that names one English term are noise), and then weighs alpha times that share
    # (``reading``): "Option型はなぜnullより良いのか" is read half. Held out over 22 collections,
    # the worst margin over the better half went from -0.025 / -0.023 (top-1 / MRR, a list
    # filtered to the passages the model reads, weight alpha) to -0.008 / -0.004 (BENCHMARKS.md).
    min_read: float = 0.5
    # ... and weighs alpha times that share to this power: the model reads only part of what was
    # asked, and its nearest passages are nearest to that part ("เขียนonclickหรือonClick", write
    # onclick or onClick: 2/3 of its letters are Latin, and the model's neighbours of "onclick
    # onClick", at cosine 0.33, pushed the keyword list's second, handling-events, to fourth).
    # Leave-one-collection-out over powers 1 / 2 / 3 (22 collections): 2 in every fold;
    # blind/react-docs-th MRR@10 0.775 -> 0.781, xquad-zh top-1 0.935 -> 0.936 ("Sky
    # Digital是什么时候推出的？"), held out each by the other; no other collection changes (a
    # query the model reads whole, share 1, is unchanged). BENCHMARKS.md section 18.
    read_power: float = 2.0

    def step(self, tier: str | None) -> float:
        return dict(self.name_steps).get(tier or "", 0.0)


PARAMS = FusionParams()


def reading(params: FusionParams, share: float) -> FusionParams:
    """``params`` for a query of which the model reads ``share`` (kbase.embed.embedder.reader; 1
    for a multilingual model): the semantic list weighs ``alpha * share ** read_power``, the
    keyword list the rest."""
    if share >= 1:
        return params
    return replace(params, alpha=params.alpha * share**params.read_power)


def passage_meaning(f: Fused[int], params: FusionParams = PARAMS, tier: str | None = None) -> float:
    """How much meaning weighs beside words in choosing a fused note's passage: the semantic
    list's share of the note's fused evidence (its name step aside; ``tier``, the keyword
    list's), between passage_floor and 1 - passage_floor. The passage the fused evidence ranks
    first, not the keyword side's alone."""
    sem = f.explain.get("semantic", {}).get("contribution", 0.0)
    kw = 0.0
    if "keyword" in f.explain:
        kw = max(0.0, f.explain["keyword"]["contribution"] - (1 - params.alpha) * params.step(tier))
    share = sem / (sem + kw) if sem + kw > 0 else 0.5
    return params.passage_floor + (1 - 2 * params.passage_floor) * share


def params_for(model: object) -> FusionParams:
    """PARAMS with the embedding model's own similarity floor, if it has one."""
    floor = getattr(model, "min_similarity", None)
    return (
        PARAMS
        if floor is None or floor == PARAMS.min_similarity
        else replace(PARAMS, min_similarity=floor)
    )


def fuse(
    kw: Sequence[Ranked],
    sem: Sequence[Ranked],
    params: FusionParams = PARAMS,
) -> list[Fused[int]]:
    """Pure: the keyword and semantic candidate lists (keyword_ranked, semantic_ranked) fused into
    one document order, best first, with each list's rank, normalised score and contribution.

    Semantic candidates below ``min_similarity`` are left out unless the keyword list holds the
    note too (a list without the model's reading of the query is passed empty). The keyword
    evidence is a note's bm25 fraction scaled between the list's best and its keyword_span-th,
    plus its name step; the semantic evidence is ``note_meaning`` (the nearest passage, the
    second, the whole note), scaled between the best and the semantic_span-th; weights
    ``1 - alpha`` and ``alpha``. Without a semantic list, the keyword order stands (every tier a
    step)."""
    from kbase.search.keyword import TIER_SOME

    in_kw = {r.doc_id for r in kw}
    sem = [r for r in sem if r.explain["similarity"] >= params.min_similarity or r.doc_id in in_kw]
    words = {r.doc_id: r.score % 1 for r in kw}
    meaning = {r.doc_id: note_meaning(r, params) for r in sem}
    evidence = {
        "keyword": spanned(words, params.keyword_span),
        "semantic": spanned(meaning, params.semantic_span),
    }
    # The name steps are a class of match, not a measure of a passage: outside the evidence.
    steps = {
        r.doc_id: params.step(r.explain.get("tier")) if sem else float(int(r.score) - TIER_SOME)
        for r in kw
    }
    return convex(
        {
            "keyword": [(r.doc_id, steps[r.doc_id] + evidence["keyword"][r.doc_id]) for r in kw],
            "semantic": sorted(evidence["semantic"].items(), key=lambda kv: -kv[1]),
        },
        {"keyword": 1 - params.alpha, "semantic": params.alpha},
    )


def note_meaning(r: Ranked, params: FusionParams = PARAMS) -> float:
    """A semantic candidate's evidence before scaling: its nearest passage's similarity (less
    the length prior: ``r.score``), plus second_passage times its second-nearest passage's,
    plus note_vector times its similarity as a whole note (``explain["note"]``; a list made
    without it counts the nearest passage's)."""
    sim = r.explain["similarity"]
    return (
        r.score
        + params.second_passage * r.explain.get("second", sim)
        + params.note_vector * r.explain.get("note", sim)
    )


def spanned(values: dict[int, float], span: int) -> dict[int, float]:
    """Each value min-max scaled between the best and the ``span``-th best, clipped at 0."""
    if not values:
        return {}
    ordered = sorted(values.values(), reverse=True)
    hi, lo = ordered[0], ordered[min(span, len(ordered)) - 1]
    return {k: max(0.0, (v - lo) / (hi - lo)) if hi > lo else 1.0 for k, v in values.items()}
