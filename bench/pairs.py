"""The keyword mode's pair mix for scripts without spaces (kbase.search.keyword.PAIR_WEIGHT and
OTHER_WORD_PAIRS) chosen leave-one-collection-out over every CJK and Thai collection of
bench/eval.py (issue 32 parts 2 and 6):

    python -m bench.pairs                          # the default grid, every such collection
    python -m bench.pairs --weights 0.25,0.5,1 --others 0,4 --only xquad-zh --only blind

For each setting, every query of each collection is searched in keyword mode on its cached index
(bench.eval.open_index: built if missing), with the module's constants set in place; each
collection's MRR@10 (nDCG@10 where that is its measure) and top-1, beside a character-bigram BM25
of the same notes (bench.eval.Baseline). Then, for each held-out collection, the setting best on
the others (``--fit mean``: the mean of their measures, each collection weighing the same;
``worst``: the worst of their margins over bigram BM25) is scored on it. The headline is the
worst held-out margin over bigram BM25; the shipped setting is the fit over every collection.
Results: ``--out`` (default ../cache/eval/results/pairs-<date>) gets pairs.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

from bench import eval as ev
from kbase.search import keyword

Setting = tuple[float, int]  # (PAIR_WEIGHT, OTHER_WORD_PAIRS)


def keyword_scores(kb, coll: ev.Collection) -> list[dict]:
    """Each query's scores in keyword mode, with the module's constants as they are now."""
    return [
        ev.query_scores(
            [h.path for h in kb.search(q.text, mode="keyword", limit=ev.DEPTH)], q, coll.metric
        )
        for q in coll.queries
    ]


def measure(coll: ev.Collection, settings: list[Setting]) -> dict:
    """Per setting: the collection's per-query scores in keyword mode; and bigram BM25's."""
    kb = ev.open_index(coll, None, False)
    try:
        docs = dict(kb.sql("SELECT path, body FROM documents").rows)
        base = ev.Baseline(docs, bigrams=True)
        out: dict = {
            "bm25": [ev.query_scores(base.ranked(q.text), q, coll.metric) for q in coll.queries]
        }
        saved = keyword.PAIR_WEIGHT, keyword.OTHER_WORD_PAIRS
        try:
            for weight, others in settings:
                keyword.PAIR_WEIGHT, keyword.OTHER_WORD_PAIRS = weight, others
                t0 = time.process_time()
                out[f"{weight:g}/{others}"] = per = keyword_scores(kb, coll)
                print(
                    f"  {coll.name:24} {weight:g}/{others:<3} {_mean(per, 'main'):.4f}"
                    f" top-1 {_mean(per, 'top1'):.3f}  ({time.process_time() - t0:.1f} s CPU)",
                    file=sys.stderr,
                )
        finally:
            keyword.PAIR_WEIGHT, keyword.OTHER_WORD_PAIRS = saved
        return out
    finally:
        kb.close()


def _mean(per: list[dict], key: str) -> float:
    return statistics.mean(p[key] for p in per) if per else 0.0


def picker(results: dict[str, dict], keys: list[str], fit: str):
    """A function giving, for some collections, the setting best on them (the first of equals,
    in grid order), and the collections' measures by setting."""
    main = {c: {k: _mean(r[k], "main") for k in [*keys, "bm25"]} for c, r in results.items()}

    def score(k: str, colls: list[str]) -> float:
        if fit == "mean":
            return statistics.mean(main[c][k] for c in colls)
        return min(main[c][k] - main[c]["bm25"] for c in colls)

    return (lambda colls: max(keys, key=lambda k: score(k, colls))), main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", default="0,0.25,0.5,0.75,1,1.5,2", help="PAIR_WEIGHT values")
    ap.add_argument("--others", default="0,4", help="OTHER_WORD_PAIRS values")
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--fit", choices=("mean", "worst"), default="mean")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    settings = [(float(w), int(o)) for o in args.others.split(",") for w in args.weights.split(",")]
    keys = [f"{w:g}/{o}" for w, o in settings]
    colls = [
        c
        for c in ev.collections()
        if c.spaceless and (not args.only or any(c.name.startswith(p) for p in args.only))
    ]
    if len(colls) < 2:
        raise SystemExit("bench.pairs: leave-one-collection-out needs two collections or more")
    results = {c.name: measure(c, settings) for c in colls}
    report(colls, results, keys, args.fit, f"{keyword.PAIR_WEIGHT:g}/{keyword.OTHER_WORD_PAIRS}")
    out = args.out or ev.CACHE / "results" / f"pairs-{datetime.date.today().isoformat()}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "pairs.json").write_text(json.dumps({"fit": args.fit, "results": results}))
    return 0


def report(colls: list, results: dict, keys: list[str], fit: str, shipped: str = "") -> None:
    """Print the table of every setting on every collection beside bigram BM25, then each
    held-out collection's pick (``fit`` on the others) and the worst held-out margin."""
    print(f"| collection | n | {' | '.join(keys)} | bigram BM25 |")
    print(f"|---|---:|{'---:|' * (len(keys) + 1)}")
    for c in colls:
        r = results[c.name]
        cells = " | ".join(f"{_mean(r[k], 'main'):.3f}" for k in [*keys, "bm25"])
        print(f"| {c.name} | {len(c.queries)} | {cells} |")
    pick, measures = picker(results, keys, fit)
    print(f"\nheld out (fit: the {fit} of the others) | pick | measure | bigram BM25 | margin")
    worst: tuple[str, float, str] | None = None
    for held in results:
        k = pick([c for c in results if c != held])
        got, bm25 = measures[held][k], measures[held]["bm25"]
        print(f"{held} | {k} | {got:.4f} | {bm25:.4f} | {got - bm25:+.4f}")
        if worst is None or got - bm25 < worst[1]:
            worst = (held, got - bm25, k)
    assert worst is not None
    print(
        f"\nworst held-out margin over bigram BM25: {worst[0]} {worst[1]:+.4f} (pick {worst[2]});"
        f" the fit over every collection: {pick(list(results))}"
        + (f"; shipped: {shipped}" if shipped else "")
    )


if __name__ == "__main__":
    raise SystemExit(main())
