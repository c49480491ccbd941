"""Pure: rank fusion with an explanation of every score."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

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


# Hybrid search's fusion: a convex combination of normalised scores (Bruch, Gai and Ingber, "An
# analysis of fusion functions for hybrid retrieval", 2023), semantic weight FUSION_ALPHA. With
# each list scaled over its own best notes (kbase.search.hybrid), 0.5 holds on SciFact and on
# the 257 questions of three vaults (BENCHMARKS.md, "Fusion that never loses to its halves"):
# 0.4 / 0.5 / 0.6 gave SciFact nDCG@10 0.7297 / 0.7265 / 0.7194 and question top-1 that rose
# with alpha on one vault and fell on another; the even split favours neither collection.
FUSION_ALPHA = 0.5


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
