"""kbase mcp: tool-call latency and server memory on the 10,000-note synthetic vault.

    python bench/mcp_latency.py [--notes 10000] [--queries 200] [--work DIR]

1. The vault of bench/gen_vault.py (seed 1), indexed keyword-only, then a synthetic unit vector
   for every chunk, recorded as the real model's (the model would take hours on 54,000 chunks
   here); queries embed with the real model.
2. Inside the server: ``MCPServer.call_tool("search", ...)`` on the server object kbase mcp runs
   (argument validation, the search, the structured and text results; no transport), keyword
   and hybrid, with queries made of the vault's own words (bench/run.py's mix), p50/p95,
   alternating with the same query through ``KB.search`` alone (the engine's share); plus read,
   links and related on random notes.
3. Through the SDK's client over stdio (a ``kbase mcp`` subprocess): the same searches as an
   agent sees them, p50/p95, and the server's resident memory (VmRSS, VmHWM) after them.
Numbers go to stdout as JSON; the goal is keyword p50 <= 20 ms and hybrid p50 <= 40 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import kbase  # noqa: E402
from kbase.store import db  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def summary(seconds: list[float]) -> dict:
    return {
        "p50_ms": round(statistics.median(seconds) * 1000, 2),
        "p95_ms": round(pct(seconds, 0.95) * 1000, 2),
        "n": len(seconds),
    }


def build(work: Path, notes: int) -> tuple[Path, Path]:
    from embedding import fill_synthetic_vectors
    from gen_vault import generate

    vault, path = work / "vault", work / "mcp.db"
    if path.exists():
        return vault, path
    generate(vault, notes, seed=1)
    kbase.open(path).index([vault], embed=False)
    con = db.connect(path)
    fill_synthetic_vectors(con)
    con.close()
    return vault, path


async def inside(path: Path, queries: list[str], notes: list[str]) -> dict:
    from kbase.mcp.server import Backend, build_server

    server = build_server(Backend(path))
    direct = kbase.open(
        path
    )  # the engine alone, for the server's overhead on this drifting machine
    out = {}
    for mode in ("keyword", "hybrid"):
        await server.call_tool(
            "search", {"query": queries[0], "mode": mode}
        )  # load the model and the vectors
        direct.search(queries[0], mode=mode)
        times, engine = [], []
        for q in queries:  # alternating: the engine, then the same query through the server
            t0 = time.perf_counter()
            direct.search(q, mode=mode)
            engine.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = await server.call_tool("search", {"query": q, "mode": mode})
            times.append(time.perf_counter() - t0)
            assert not r.is_error, r.content
        out[f"search_{mode}"] = summary(times)
        out[f"search_{mode}_engine_alone"] = summary(engine)
    for tool, args in (
        ("read", lambda n: {"note": n}),
        ("links", lambda n: {"note": n}),
        ("related", lambda n: {"note": n}),
    ):
        times = []
        for n in notes:
            t0 = time.perf_counter()
            r = await server.call_tool(tool, args(n))
            times.append(time.perf_counter() - t0)
            assert not r.is_error, r.content
        out[tool] = summary(times)
    return out


def child_pids() -> list[int]:
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def memory(pid: int) -> dict:
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return {k: fields[k].strip() for k in ("VmRSS", "VmHWM")}


async def over_stdio(path: Path, queries: list[str]) -> dict:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbase", "--db", str(path), "mcp"],
        cwd=str(REPO),
        env={k: v for k, v in os.environ.items() if k in ("HOME", "PATH")},
    )
    out = {}
    before = set(child_pids())
    async with Client(stdio_client(params, errlog=sys.stderr), read_timeout_seconds=120) as c:
        for mode in ("keyword", "hybrid"):
            await c.call_tool("search", {"query": queries[0], "mode": mode})
            times = []
            for q in queries:
                t0 = time.perf_counter()
                await c.call_tool("search", {"query": q, "mode": mode})
                times.append(time.perf_counter() - t0)
            out[f"search_{mode}"] = summary(times)
        server = [p for p in child_pids() if p not in before]
        out["server_memory"] = memory(server[0]) if server else None
    return out


def main() -> None:
    from run import make_queries

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, help="keep the vault and index here (reused when present)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="kbase-mcp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    vault, path = build(work, a.notes)
    queries = [q for _, q in make_queries(vault, a.queries, seed=3)]
    rng = random.Random(5)
    all_notes = sorted(str(p.relative_to(vault)) for p in vault.rglob("*.md"))
    notes = rng.sample(all_notes, 50)
    st = kbase.open(path).status()
    result = {
        "notes": st.documents,
        "chunks": st.chunks,
        "build_s": round(time.perf_counter() - t0, 1),
        "inside_server": asyncio.run(inside(path, queries, notes)),
        "client_over_stdio": asyncio.run(over_stdio(path, queries)),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
