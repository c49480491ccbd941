"""A hybrid ``kbase search`` from the shell, cold in its own process against handed to a running
``kbase mcp`` (kbase.handoff; issue 36 part 2), with a keyword search beside them.

    python -m bench.handoff [--rounds 3] [--queries 10] [--work DIR] [--notes 10000] [--rev REV]

Two indexes: foam-docs (shared vaults) embedded with the real model, and the 10,000-note
generated vault of bench/mcp_latency.py (synthetic vectors recorded as the model's; the query
still embeds with the real model). For each, a ``kbase mcp`` serves it (stdio, no --watch: it
does nothing between calls) and each query runs as three processes in turn, the order rotated
each time: ``kbase search Q`` (handed over), the same with ``KBASE_HANDOFF=0`` (cold: imports,
model, the query's vector, sqlite-vec's scan) and ``kbase search -m keyword Q``. Wall time and
the process's CPU (user + sys, from wait4) side by side, medians, with the server's CPU for the
handed-over searches (/proc) and the load. Each ``kbase`` starts as its console script starts
it (pip's wrapper, bench.startup.entry_point), from a bytecode cache. ``--rev REV``: the
handed-over and keyword searches also with that revision's code (``git archive``), in the same
rotation, against the same server.
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
BASE_WAYS = ("handed over (A)", "keyword (A)")  # with --rev


def foam(work: Path) -> tuple[Path, Path]:
    """foam-docs embedded with the real model (kept in ``work``)."""
    vault, path = VAULTS / "foam-docs", work / "foam-embedded.db"
    if not path.exists():
        with kbase.open(path) as kb:
            kb.index([vault])
    return vault, path


def run_cli(db: Path, way: str, query: str, code: Path = REPO) -> tuple[float, float]:
    """One ``kbase search`` process of the checkout ``code``: (wall s, CPU s)."""
    from bench.startup import entry_point

    argv = [sys.executable, "-c", entry_point(code), "--db", str(db), "search"]
    argv += ["-m", "keyword", "--", query] if way.startswith("keyword") else ["--", query]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (compiling kbase at every start is not the cost)
    env["PYTHONPATH"] = str(code)
    env["PYTHONPYCACHEPREFIX"] = str(CACHE / "handoff" / "pycache")
    if way == "cold":
        env["KBASE_HANDOFF"] = "0"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=code
    )
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


def measure(db: Path, queries: list[str], rounds: int, base: Path | None = None) -> dict:
    proc = serve(db)
    ways = WAYS + (BASE_WAYS if base is not None else ())
    try:
        for way in ways:  # the server's warm-up is done, the bytecode caches written
            run_cli(db, way, queries[0], base if way.endswith("(A)") and base else REPO)
        wall: dict[str, list[float]] = {w: [] for w in ways}
        cpu: dict[str, list[float]] = {w: [] for w in ways}
        server: dict[str, list[float]] = {w: [] for w in ways if w.startswith("handed")}
        turn = 0
        for _ in range(rounds):
            for q in queries:
                k = turn % len(ways)
                for way in ways[k:] + ways[:k]:
                    code = base if way.endswith("(A)") and base else REPO
                    before = _cpu_of(proc.pid)
                    w, c = run_cli(db, way, q, code)
                    if way in server:
                        server[way].append(_cpu_of(proc.pid) - before)
                    wall[way].append(w)
                    cpu[way].append(c)
                turn += 1
        out = {
            way: {
                "wall_ms": round(statistics.median(wall[way]) * 1000, 1),
                "cpu_ms": round(statistics.median(cpu[way]) * 1000, 1),
                "n": len(wall[way]),
            }
            for way in ways
        }
        for way, xs in server.items():
            out[way]["server_cpu_ms"] = round(statistics.fmean(xs) * 1000, 1)
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
    ap.add_argument("--rev", help="also the client of this revision (A)")
    a = ap.parse_args()
    base = None
    if a.rev:
        from bench.common import export_revision

        base = export_revision(a.rev, Path(tempfile.mkdtemp(prefix="kbase-rev-")))
        result_rev = {"A": a.rev}
    else:
        result_rev = {}
    result: dict = {**result_rev, "load_before": os.getloadavg()}
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
            **measure(db, queries, a.rounds, base),
        }
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
