"""Leave-one-collection-out choice of the ranking constants (issue 32): fit on every collection
but one, score on the one left out, and judge by the worst held-out collection.

    python -m bench.loco                      # the default grid over every collection
    python -m bench.loco --quick              # 40 queries per collection
    python -m bench.loco --grid alpha=0.4,0.5,0.6 --grid second_passage=0,0.3
    python -m bench.loco --fit worst          # choose by the worst of the others, not their mean
    python -m bench.loco --xquad-queries 0    # every XQuAD-R question (400 a language by default)
    python -m bench.eval --loco               # after the evaluation, the same

Each query's raw keyword and semantic candidate lists (bench/eval.py's cache: ids, ranks,
scores, tiers, passages, as kbase.search.hybrid.candidates gives them) are read once; every
candidate setting is a ``dataclasses.replace`` of kbase.search.fusion.PARAMS, and each query is
fused again offline by kbase's own ``kbase.search.fusion.fuse`` (not a copy), so a grid of
hundreds of settings costs seconds per collection. For every setting, each collection's main
measure (MRR@10, nDCG@10 for SciFact) and top-1 are recorded. Then for each held-out collection
the setting best on all the others (``--fit mean``: the mean of their main measures; ``worst``:
the worst of their margins over the better of keyword, semantic and naive RRF) is scored on it.

The headline is the worst held-out collection, by its margin: held-out score minus the best of
keyword alone, semantic alone and naive RRF (k=60) on the same lists. A change of a constant
lands only when that worst margin does not get worse. Collections whose queries the model does
not read (Chinese or Thai with the English model: hybrid search is the keyword list there) are
scored but cannot tell settings apart. Results: ``--out`` (default
../cache/eval/results/loco-<date>-<revision>) gets loco.json and loco.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import pickle
import statistics
import sys
import time
from pathlib import Path

from bench import eval as ev
from bench.common import git_revision

# The grid: every combination of these values of kbase.search.fusion.FusionParams' fields.
GRID: dict[str, tuple] = {
    "alpha": (0.3, 0.4, 0.5, 0.6, 0.7),
    "second_passage": (0.0, 0.3, 0.6),
    "semantic_span": (10, 20, 50),
    "keyword_span": (20, 50, 100),
    "min_similarity": (0.2, 0.3),
}
XQUAD_QUERIES = 400  # XQuAD-R's 1,190 questions per language: this many, spread, by default


@dataclasses.dataclass
class Scored:
    """One collection's cached lists, ready to fuse: per query its gains and its lists."""

    name: str
    metric: str
    queries: list[ev.Query]
    lists: list[ev.Lists]
    path_of: dict[int, str]
    shipped: object  # the FusionParams kbase uses for this index (its model's floor)


def load(coll: ev.Collection, queries: list[ev.Query], model: str | None) -> Scored:
    """The collection's lists from bench/eval.py's cache, the missing ones made (and kept)."""
    from kbase.search.fusion import params_for

    kb = ev.open_index(coll, model, rebuild=False)
    try:
        path_of = dict(kb.sql("SELECT id, path FROM documents").rows)
        cache_file = ev.CACHE / "lists" / f"{coll.material}-{ev.lists_key(coll, model)}.pickle"
        cached: dict[str, ev.Lists] = {}
        if cache_file.exists():
            cached = pickle.loads(cache_file.read_bytes())
        missing = [q for q in queries if q.text not in cached]
        for q in missing:
            hits = kb.search(q.text, mode="keyword", limit=ev.DEPTH)
            cached[q.text] = ev.raw_lists(kb, q.text, getattr(hits, "corrected", None))
        if missing:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            cache_file.write_bytes(pickle.dumps(cached))
        ev.add_named_answers(kb, coll, queries)
        shipped = params_for(kb.embedder)
    finally:
        kb.close()
    return Scored(
        coll.name, coll.metric, queries, [cached[q.text] for q in queries], path_of, shipped
    )


def _ranked(rows: list[tuple]) -> list:
    from kbase.search.hits import Ranked

    return [Ranked(*r) for r in rows]


def measure(s: Scored, order_of) -> dict[str, float]:
    """Mean top-1 and main measure over the collection's queries for one way of ordering."""
    per = [
        ev.query_scores([s.path_of[d] for d in order_of(lists)][: ev.DEPTH], q, s.metric)
        for q, lists in zip(s.queries, s.lists, strict=True)
    ]
    return {k: statistics.mean(p[k] for p in per) for k in ("top1", "main")}


def settings(grid: dict[str, tuple]) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def evaluate(scored: list[Scored], grid: dict[str, tuple]) -> dict:
    """Every collection under every setting, and its references (keyword, semantic, naive RRF,
    the shipped constants)."""
    from kbase.search.fusion import fuse, reading

    def fused(params):
        def order(lists: ev.Lists) -> list[int]:
            kw = _ranked(lists.keyword)
            sem = _ranked(lists.fused())
            return [f.key for f in fuse(kw, sem, reading(params, lists.share))]

        return order

    cands = settings(grid)
    out: dict = {"settings": cands, "collections": {}}
    for s in scored:
        t0 = time.process_time()
        refs = {
            "keyword": measure(s, lambda li: [r[0] for r in li.keyword]),
            "semantic": measure(s, lambda li: [r[0] for r in li.semantic]),
            "naive rrf": measure(s, ev.naive_rrf),
            "shipped": measure(s, fused(s.shipped)),
        }
        # A collection no query of which the model reads: every setting fuses the keyword list
        # alone, the same way (nothing to compute per setting).
        if not any(li.reads for li in s.lists):
            grid_scores = [refs["shipped"]] * len(cands)
        else:
            base = s.shipped
            grid_scores = [measure(s, fused(dataclasses.replace(base, **c))) for c in cands]
        out["collections"][s.name] = {
            "queries": len(s.queries),
            "metric": "nDCG@10" if s.metric == "ndcg10" else "MRR@10",
            "reads": sum(li.reads for li in s.lists),
            "refs": refs,
            "grid": grid_scores,
            "cpu_seconds": round(time.process_time() - t0, 1),
        }
        print(
            f"  {s.name}: {len(cands)} settings in {out['collections'][s.name]['cpu_seconds']} s"
            " CPU",
            file=sys.stderr,
        )
    return out


def margin(coll: dict, score: float) -> float:
    """A score less the best of keyword alone, semantic alone and naive RRF."""
    refs = coll["refs"]
    return score - max(refs[k]["main"] for k in ("keyword", "semantic", "naive rrf"))


def leave_one_out(table: dict, fit: str) -> list[dict]:
    """For each held-out collection: the setting best on the others and its held-out score."""
    names = list(table["collections"])
    out = []
    for held in names:
        others = [table["collections"][n] for n in names if n != held]
        telling = [c for c in others if c["reads"]] or others  # those settings change

        def objective(i: int, others: list = others, telling: list = telling) -> float:
            if fit == "worst":
                return min(margin(c, c["grid"][i]["main"]) for c in telling)
            return statistics.mean(c["grid"][i]["main"] for c in others)

        best = max(range(len(table["settings"])), key=objective)
        c = table["collections"][held]
        score = c["grid"][best]
        out.append(
            {
                "held_out": held,
                "metric": c["metric"],
                "setting": table["settings"][best],
                "held_out_main": round(score["main"], 4),
                "held_out_top1": round(score["top1"], 4),
                "shipped_main": round(c["refs"]["shipped"]["main"], 4),
                "keyword": round(c["refs"]["keyword"]["main"], 4),
                "semantic": round(c["refs"]["semantic"]["main"], 4),
                "naive_rrf": round(c["refs"]["naive rrf"]["main"], 4),
                "margin": round(margin(c, score["main"]), 4),
                "shipped_margin": round(margin(c, c["refs"]["shipped"]["main"]), 4),
            }
        )
    return out


def report(rows: list[dict], grid: dict, fit: str) -> str:
    worst = min(rows, key=lambda r: r["margin"])
    worst_shipped = min(rows, key=lambda r: r["shipped_margin"])
    lines = [
        f"Worst held-out collection: **{worst['held_out']}**, {worst['metric']}"
        f" {worst['held_out_main']:.3f} with the setting chosen on the others, margin"
        f" {worst['margin']:+.3f} over the best of keyword ({worst['keyword']:.3f}), semantic"
        f" ({worst['semantic']:.3f}) and naive RRF ({worst['naive_rrf']:.3f}).",
        f"With the shipped constants the worst is {worst_shipped['held_out']}, margin"
        f" {worst_shipped['shipped_margin']:+.3f}.",
        "",
        f"Grid ({len(settings(grid))} settings, fit: {fit} of the others): "
        + "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in grid.items()),
        "",
        "| held out | metric | chosen on the others | held-out | shipped | keyword | semantic"
        " | naive RRF | margin |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: r["margin"]):
        chosen = ", ".join(f"{k} {v}" for k, v in r["setting"].items())
        lines.append(
            f"| {r['held_out']} | {r['metric']} | {chosen} | {r['held_out_main']:.3f}"
            f" | {r['shipped_main']:.3f} | {r['keyword']:.3f} | {r['semantic']:.3f}"
            f" | {r['naive_rrf']:.3f} | {r['margin']:+.3f} |"
        )
    return "\n".join(lines)


def parse_grid(specs: list[str] | None) -> dict[str, tuple]:
    from kbase.search.fusion import FusionParams

    if not specs:
        return GRID
    fields = {f.name: f.type for f in dataclasses.fields(FusionParams)}
    grid: dict[str, tuple] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        if name not in fields or not values:
            sys.exit(
                f"error: --grid {spec!r}: give FIELD=V1,V2 with a field of FusionParams"
                f" ({', '.join(fields)})"
            )
        cast = int if isinstance(getattr(FusionParams(), name), int) else float
        grid[name] = tuple(cast(v) for v in values.split(","))
    return grid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=f"{ev.QUICK} queries per collection")
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--model", help="embedding model of the indexes (default: kbase's default)")
    ap.add_argument("--grid", action="append", help="FIELD=V1,V2,... (repeatable)")
    ap.add_argument("--fit", choices=("mean", "worst"), default="mean")
    ap.add_argument(
        "--xquad-queries",
        type=int,
        default=XQUAD_QUERIES,
        help=f"XQuAD-R questions per language, spread (default {XQUAD_QUERIES}; 0: all 1,190)",
    )
    ap.add_argument("--out", type=Path, help="folder for loco.json and loco.md")
    args = ap.parse_args(argv)
    try:
        from kbase.search.fusion import FusionParams, fuse  # noqa: F401
    except ImportError:
        sys.exit(
            "error: this kbase has no kbase.search.fusion.FusionParams and fuse (the fusion's"
            " constants as one object, issue 32): leave-one-collection-out re-fuses with them"
        )
    grid = parse_grid(args.grid)
    found = ev.collections()
    if args.only:
        found = [c for c in found if any(c.name.startswith(o) for o in args.only)]
    if len(found) < 2:
        sys.exit("error: leave-one-collection-out needs two collections or more")
    scored = []
    for coll in found:
        xquad = coll.name.startswith("xquad") and args.xquad_queries
        n = ev.QUICK if args.quick else args.xquad_queries if xquad else None
        queries = ev.sample(coll.queries, n) if n else coll.queries
        print(f"{coll.name}: {len(queries)} queries", file=sys.stderr)
        scored.append(load(coll, queries, args.model))
    table = evaluate(scored, grid)
    rows = leave_one_out(table, args.fit)
    md = report(rows, grid, args.fit)
    revision = git_revision()
    print(f"kbase {revision}, model {args.model or 'default'}\n\n{md}")
    out = args.out or ev.CACHE / "results" / (
        f"loco-{datetime.date.today().isoformat()}-{revision}{'-quick' if args.quick else ''}"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "loco.json").write_text(
        json.dumps({"revision": revision, "grid": grid, "table": table, "held_out": rows}, indent=1)
    )
    (out / "loco.md").write_text(md + "\n")
    print(f"written: {out}/loco.json, loco.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
