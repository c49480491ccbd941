"""The engine's CPU per search call in a long-lived process (the MCP server's KB: vectors in
memory), at 10,000 notes, this checkout against another revision, alternating (issue 36 part 4).

    python -m bench.mcp_cpu [--rev main] [--rounds 4] [--queries 60] [--work DIR] [--parts]
                            [--exclusions]

The index is bench/mcp_latency.py's (the generated vault, synthetic vectors recorded as the
model's; the query embeds with the real model). Each round runs one process per revision (the
order reversed every other round: A B B A ...): it opens the index as ``kbase mcp`` does
(``KB(path)``), searches a few queries to load the model and the vectors, then times every query
of bench/run.py's mix (without exclusions, which the revision before this one could not search
at this size) in ``--mode`` (hybrid), CPU (``time.process_time``) beside wall. ``--parts``: where
this checkout's time goes (the engine's functions, timed in place). ``--exclusions``: the mix's
exclusions too (every revision since f9ba3c8 searches them). The mean CPU of each kind of query
is printed for both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, export_revision

CHILD = r"""
import json, sys, time, collections
from pathlib import Path
import kbase
db, mode, parts = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
queries = json.loads(sys.stdin.read())
kb = kbase.open(db)
acc = collections.defaultdict(float)
if parts:
    import kbase.search.hybrid as hy, kbase.search.run as ru, kbase.embed.nearest as ne
    def wrap(mod, name, label):
        f = getattr(mod, name)
        def g(*a, **k):
            c = time.process_time()
            try:
                return f(*a, **k)
            finally:
                acc[label] += time.process_time() - c
        setattr(mod, name, g)
    for mod, name, label in ((hy, "keyword_ranked", "keyword list"),
                             (hy, "semantic_ranked", "semantic list"),
                             (ne.VectorCache, "nearest", "of which the vectors' product"),
                             (hy, "passage_chunks", "passages"), (hy, "hit", "hits"),
                             (ru, "query_vector", "the query's vector")):
        wrap(mod, name, label)
for q in queries[:3]:
    kb.search(q, mode=mode)
acc.clear()
cpu, wall = [], []
for q in queries:
    c, w = time.process_time(), time.perf_counter()
    kb.search(q, mode=mode)
    cpu.append(time.process_time() - c)
    wall.append(time.perf_counter() - w)
parts = {k: v / len(queries) for k, v in acc.items()}
print(json.dumps({"cpu": cpu, "wall": wall, "parts": parts}))
"""


def run(pythonpath: Path, db: Path, mode: str, queries: list[str], parts: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), mode, "1" if parts else "0"],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        env=env,
        cwd=pythonpath,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    from bench.mcp_latency import build
    from bench.run import make_queries

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="main", help="the revision to compare with (A)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--mode", default="hybrid", choices=("hybrid", "keyword", "semantic"))
    ap.add_argument("--work", type=Path, help="the vault and index (reused when present)")
    ap.add_argument("--parts", action="store_true", help="where B's time goes")
    ap.add_argument("--exclusions", action="store_true", help="the mix's exclusions too")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="kbase-mcp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    vault, db = build(work, a.notes)
    mix = [(k, q) for k, q in make_queries(vault, a.queries, seed=3)]
    mix = [(k, q) for k, q in mix if a.exclusions or k != "exclusion"]
    queries = [q for _, q in mix]
    base = export_revision(a.rev, Path(tempfile.mkdtemp(prefix="kbase-rev-")), "kbase")
    sides = {"A": base, "B": REPO}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    wall: dict[str, list[float]] = {"A": [], "B": []}
    parts: dict[str, list[float]] = {}
    load = [os.getloadavg()[0]]
    for r in range(a.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            got = run(sides[side], db, a.mode, queries, a.parts and side == "B")
            cpu[side] += got["cpu"]
            wall[side] += got["wall"]
            for k, v in got["parts"].items():
                parts.setdefault(k, []).append(v)
            load.append(os.getloadavg()[0])
    ms = lambda xs: round(1000 * xs, 1)  # noqa: E731
    out = {
        "A": a.rev,
        "B": "this checkout",
        "mode": a.mode,
        "queries": len(queries),
        "load (1 min)": [round(min(load), 1), round(max(load), 1)],
    }
    for side in ("A", "B"):
        out[side + " cpu ms"] = {
            "mean": ms(statistics.fmean(cpu[side])),
            "median": ms(statistics.median(cpu[side])),
        }
        out[side + " wall ms"] = {
            "mean": ms(statistics.fmean(wall[side])),
            "median": ms(statistics.median(wall[side])),
        }
    for side in ("A", "B"):  # (each side's list: its rounds' queries in the mix's order)
        kinds: dict[str, list[float]] = {}
        for i, x in enumerate(cpu[side]):
            kinds.setdefault(mix[i % len(mix)][0], []).append(x)
        by_kind = {k: ms(statistics.fmean(v)) for k, v in kinds.items()}
        out[side + " cpu ms by kind (mean)"] = by_kind
    if parts:
        out["B parts, CPU ms a call"] = {k: ms(statistics.fmean(v)) for k, v in parts.items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
