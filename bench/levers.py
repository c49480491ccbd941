"""A learned fusion measured leave-one-collection-out (issue 32 item 3), beside the shipped one:

    python -m bench.levers                     # every collection of bench/eval.py
    python -m bench.levers --only foam --only scifact

The lists are bench/eval.py's cached candidate lists (bench.loco.load: made where missing), so
the learned model sees exactly what kbase.search.fusion.fuse fuses. The model (``features``:
each list's normalised evidence and reciprocal rank, the all-words tier, the similarity gap to
the list's best, in both lists, and the evidence times the query's length, question words, the
share of it the model reads and the two lists' top-10 agreement; name steps stay steps) is a
pairwise logistic fit on every collection but the held-out one, each collection weighing the
same. For each held-out collection: its margin (measure less the best of keyword, semantic and
naive RRF k=60; top-1 and MRR@10 or nDCG@10) with the model fitted on the others, beside the
shipped fusion's. The headline is the worst held-out margin of each.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from bench import eval as ev
from bench import loco
from kbase.search import fusion

QWORDS = ("how", "what", "why", "when", "where", "which", "who", "can", "does", "do", "is")


def features(lists: ev.Lists, params: fusion.FusionParams) -> tuple[list[int], np.ndarray, list]:
    """(doc ids, one row of features each, name steps) for one query's candidates."""
    kw, sem = loco._ranked(lists.keyword), loco._ranked(lists.fused())
    in_kw = {r.doc_id for r in kw}
    sem = [r for r in sem if r.explain["similarity"] >= params.min_similarity or r.doc_id in in_kw]
    words = fusion.spanned({r.doc_id: r.score % 1 for r in kw}, params.keyword_span)
    meaning = fusion.spanned(
        {r.doc_id: fusion.note_meaning(r, params) for r in sem}, params.semantic_span
    )
    kr = {r.doc_id: i for i, r in enumerate(kw, 1)}
    sr = {r.doc_id: i for i, r in enumerate(sem, 1)}
    tier = {r.doc_id: r.explain.get("tier") for r in kw}
    sim = {r.doc_id: r.explain["similarity"] for r in sem}
    top = max(sim.values(), default=0.0)
    ids = list(dict.fromkeys([r.doc_id for r in kw] + [r.doc_id for r in sem]))
    toks = lists.text.split()
    qlen = math.log1p(len(toks))
    asks = bool(toks) and (toks[0].lower() in QWORDS or lists.text.rstrip().endswith("?"))
    question = float(asks)
    agree = len({r.doc_id for r in kw[:10]} & {r.doc_id for r in sem[:10]}) / 10
    share, alone = lists.share, float(not sem)
    every = float(any(t not in (None, "some words") for t in tier.values()))
    rows = []
    for i in ids:
        ke, se = words.get(i, 0.0), meaning.get(i, 0.0)
        rows.append(
            [ke, se, 1 / (1 + kr[i]) if i in kr else 0.0, 1 / (1 + sr[i]) if i in sr else 0.0,
             float(tier.get(i) in ("all words", "all words, apart")),
             sim[i] - top if i in sim else -1.0, float(i in kr and i in sr),
             se * question, ke * question, se * qlen, ke * qlen, se * agree, ke * agree,
             se * share, ke * share, ke * alone, ke * every]
        )  # fmt: skip
    return ids, np.array(rows, dtype=float), [params.step(tier.get(i)) for i in ids]


def train(scored: list[loco.Scored], iters: int = 300, l2: float = 1e-3) -> np.ndarray:
    """Pairwise logistic regression (each answer against up to 60 other candidates of its
    query), each collection weighing the same; starts from the even convex fusion."""
    diffs, weights = [], []
    for s in scored:
        pairs = []
        for q, lists in zip(s.queries, s.lists, strict=True):
            ids, x, _ = features(lists, s.shipped)
            if not ids:
                continue
            g = np.array([q.gains.get(s.path_of[i], 0) for i in ids])
            pos, neg = np.where(g > 0)[0], np.where(g == 0)[0][:60]
            if len(pos) and len(neg):
                pairs.append((x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, x.shape[1]))
        for pair in pairs:
            diffs.append(pair)
            weights.append(np.full(len(pair), 1 / len(pairs) / len(pair)))
    x, w = np.vstack(diffs), np.concatenate(weights)
    w /= w.sum()
    theta = np.zeros(x.shape[1])
    theta[:2] = 0.5
    for _ in range(iters):
        p = 1 / (1 + np.exp(np.clip(x @ theta, -30, 30)))
        theta -= 5.0 * (-(x * (w * p)[:, None]).sum(axis=0) + l2 * theta)
    return theta


def learned(theta: np.ndarray, params: fusion.FusionParams):
    def order(lists: ev.Lists) -> list[int]:
        ids, x, steps = features(lists, params)
        s = x @ theta if ids else []
        return [ids[j] for j in sorted(range(len(ids)), key=lambda j: (-steps[j], -s[j]))]

    return order


def shipped(params: fusion.FusionParams):
    def order(lists: ev.Lists) -> list[int]:
        kw, sem = loco._ranked(lists.keyword), loco._ranked(lists.fused())
        return [f.key for f in fusion.fuse(kw, sem, fusion.reading(params, lists.share))]

    return order


def margins(s: loco.Scored, score: dict[str, float]) -> tuple[float, float]:
    refs = {
        "keyword": loco.measure(s, lambda li: [r[0] for r in li.keyword]),
        "semantic": loco.measure(s, lambda li: [r[0] for r in li.semantic]),
        "naive rrf": loco.measure(s, ev.naive_rrf),
    }
    m = tuple(score[k] - max(r[k] for r in refs.values()) for k in ("top1", "main"))
    return m[0], m[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--model", help="embedding model of the indexes (default: kbase's default)")
    args = ap.parse_args(argv)
    found = [c for c in ev.collections() if not args.only or any(map(c.name.startswith, args.only))]
    scored = []
    for coll in found:
        n = loco.XQUAD_QUERIES if coll.name.startswith("xquad") else None
        queries = ev.sample(coll.queries, n) if n else coll.queries
        scored.append(loco.load(coll, queries, args.model))
    telling = [s for s in scored if any(li.reads for li in s.lists)]
    print("| held out | shipped (top-1, main) | learned on the others |\n|---|---|---|")
    worst: dict[str, list] = {"shipped": [], "learned": []}
    for held in scored:
        ship = margins(held, loco.measure(held, shipped(held.shipped)))
        learn = ship  # where the model reads no query, both fuse the keyword list alone
        if held in telling:
            theta = train([s for s in telling if s is not held])
            learn = margins(held, loco.measure(held, learned(theta, held.shipped)))
        worst["shipped"].append(ship)
        worst["learned"].append(learn)
        cells = [f"{m[0]:+.3f}, {m[1]:+.3f}" for m in (ship, learn)]
        print(f"| {held.name} | {cells[0]} | {cells[1]} |")
    for label, ms in worst.items():
        print(f"worst held-out {label}: top-1 {min(m[0] for m in ms):+.3f},"
              f" main {min(m[1] for m in ms):+.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
