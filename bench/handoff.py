"""A hybrid ``kbase search`` from the shell, cold in its own process against handed to a running
``kbase mcp`` (kbase.handoff; issue 36 part 2), with a keyword search beside them.

    python -m bench.handoff [--rounds 3] [--queries 10] [--work DIR] [--notes 10000]

Two indexes: foam-docs (shared vaults) embedded with the real model, and the 10,000-note
generated vault of bench/mcp_latency.py (synthetic vectors recorded as the model's; the query
still embeds with the real model). For each, a ``kbase mcp`` serves it (stdio, no --watch: it
does nothing between calls) and each query runs as three processes in turn, the order rotated
each time: ``kbase search Q`` (handed over), the same with ``KBASE_HANDOFF=0`` (cold: imports,
model, the query's vector, sqlite-vec's scan) and ``kbase search -m keyword Q``. Wall time and
the process's CPU (user + sys, from wait4) side by side, medians, with the server's CPU for the
handed-over searches (/proc) and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kbase
from bench.common import CACHE, REPO, VAULTS
from bench.mcp_latency import _cpu_of
from bench.mcp_latency import build as build_10k
from bench.run import make_queries
from kbase import handoff

WAYS = ("handed over", "cold", "keyword")


def foam(work: Path) -> tuple[Path, Path]:
    """foam-docs embedded with the real model (kept in ``work``)."""
    vault, path = VAULTS / "foam-docs", work / "foam-embedded.db"
    if not path.exists():
        with kbase.open(path) as kb:
            kb.index([vault])
    return vault, path


def run_cli(db: Path, way: str, query: str) -> tuple[float, float]:
    """One ``kbase search`` process: (wall s, CPU s)."""
    argv = [sys.executable, "-m", "kbase", "--db", str(db), "search"]
    argv += ["-m", "keyword", "--", query] if way == "keyword" else ["--", query]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (compiling kbase at every start is not the cost)
    if way == "cold":
        env["KBASE_HANDOFF"] = "0"
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.returncode == 0, err
    return wall, usage.ru_utime + usage.ru_stime


def serve(db: Path) -> subprocess.Popen:
    log = open(db.with_suffix(".mcp.log"), "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=log,
        cwd=REPO,
    )
    path = handoff.socket_path(db)
    deadline = time.monotonic() + 300
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"kbase mcp did not serve {db}")
        time.sleep(0.2)
    return proc


def measure(db: Path, queries: list[str], rounds: int) -> dict:
    proc = serve(db)
    try:
        run_cli(db, "handed over", queries[0])  # the server's warm-up is done
        wall: dict[str, list[float]] = {w: [] for w in WAYS}
        cpu: dict[str, list[float]] = {w: [] for w in WAYS}
        server: list[float] = []
        turn = 0
        for _ in range(rounds):
            for q in queries:
                for way in WAYS[turn % 3 :] + WAYS[: turn % 3]:
                    before = _cpu_of(proc.pid)
                    w, c = run_cli(db, way, q)
                    if way == "handed over":
                        server.append(_cpu_of(proc.pid) - before)
                    wall[way].append(w)
                    cpu[way].append(c)
                turn += 1
        out = {
            way: {
                "wall_ms": round(statistics.median(wall[way]) * 1000, 1),
                "cpu_ms": round(statistics.median(cpu[way]) * 1000, 1),
                "n": len(wall[way]),
            }
            for way in WAYS
        }
        out["handed over"]["server_cpu_ms"] = round(statistics.fmean(server) * 1000, 1)
        return out
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--work", type=Path, help="the 10k vault and index (bench.mcp_latency's)")
    ap.add_argument("--only", choices=("foam", "10k"), help="one of the two indexes")
    a = ap.parse_args()
    result: dict = {"load_before": os.getloadavg()}
    sets = []
    if a.only != "10k":
        (CACHE / "handoff").mkdir(parents=True, exist_ok=True)
        sets.append(("foam-docs", *foam(CACHE / "handoff")))
    if a.only != "foam":
        work = a.work or Path(tempfile.mkdtemp(prefix="kbase-mcp-bench-"))
        work.mkdir(parents=True, exist_ok=True)
        sets.append((f"generated-{a.notes}", *build_10k(work, a.notes)))
    for name, vault, db in sets:
        queries = [q for _, q in make_queries(vault, a.queries, seed=3)]
        st = kbase.open(db).status()
        result[name] = {
            "notes": st.documents,
            "chunks": st.chunks,
            **measure(db, queries, a.rounds),
        }
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
