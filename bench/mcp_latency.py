"""kbase mcp: tool-call latency, where a call's time goes, and server memory, on the 10,000-note
synthetic vault.

    python -m bench.mcp_latency [--notes 10000] [--queries 200] [--work DIR] [--skip-processes]

1. The vault of bench/gen_vault.py (seed 1), indexed keyword-only, then a synthetic unit vector
   for every chunk, recorded as the real model's (the model would take hours on 54,000 chunks
   here); queries embed with the real model.
2. In this process, for each query (bench/run.py's mix of the vault's own words), keyword and
   hybrid, alternating stage by stage so that the machine's drift hits each alike:
   - ``engine``: ``KB.search`` alone, on the server's own KB;
   - ``face``: ``kbase.mcp.tools.search`` on the server's KB (the face's own work: the result
     records, the budget, the text);
   - ``server``: ``MCPServer.call_tool`` on the object ``kbase mcp`` serves (argument
     validation, the thread hop, the face, both result forms);
   - ``client``: the SDK's ``Client`` connected to that object in-process (the protocol's
     dispatch and serialisation, no transport).
   Wall and CPU time (this process's) side by side, p50/p95; plus read, links, related.
3. Through the SDK's client to a ``kbase mcp`` subprocess over stdio and over HTTP: the same
   searches as an agent sees them, alternating with the engine alone in this process; the
   server's CPU per call (from /proc) and its resident memory after them.
Numbers go to stdout as JSON; the goal: through the server, keyword p50 <= 15 ms and hybrid p50
<= 40 ms on 10,000 notes (issue 26), side by side with the engine alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kbase
from bench.common import REPO
from kbase.store import db

TICK = os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def summary(seconds: list[float], cpu: list[float] | None = None) -> dict:
    out = {
        "p50_ms": round(statistics.median(seconds) * 1000, 2),
        "p95_ms": round(pct(seconds, 0.95) * 1000, 2),
        "n": len(seconds),
    }
    if cpu:
        out["cpu_p50_ms"] = round(statistics.median(cpu) * 1000, 2)
        out["cpu_mean_ms"] = round(statistics.fmean(cpu) * 1000, 2)
    return out


def build(work: Path, notes: int) -> tuple[Path, Path]:
    from bench.embedding import fill_synthetic_vectors
    from bench.gen_vault import generate

    vault, path = work / "vault", work / "mcp.db"
    if path.exists():
        return vault, path
    generate(vault, notes, seed=1)
    kbase.open(path).index([vault], embed=False)
    con = db.connect(path)
    fill_synthetic_vectors(con)
    con.close()
    return vault, path


class Timer:
    """Wall and CPU time of many calls, one list each."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Timer:
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall.append(time.perf_counter() - self._w)
        self.cpu.append(time.process_time() - self._c)

    def summary(self) -> dict:
        return summary(self.wall, self.cpu)


async def inside(path: Path, queries: list[str], notes: list[str]) -> dict:
    from mcp import Client

    from kbase.mcp import tools
    from kbase.mcp.backend import Backend
    from kbase.mcp.server import build_server

    backend = Backend(path)
    server = build_server(backend)
    direct = backend.kb  # the engine alone, on the same KB (one vector cache, one model)
    out = {}
    async with Client(server) as client:
        for mode in ("keyword", "hybrid"):
            args = {"query": queries[0], "mode": mode}
            await server.call_tool("search", args)  # load the model and the vectors
            await client.call_tool("search", args)
            direct.search(queries[0], mode=mode)
            stages = {k: Timer() for k in ("engine", "face", "server", "client")}
            for q in queries:
                args = {"query": q, "mode": mode}
                with stages["engine"]:
                    direct.search(q, mode=mode)
                with stages["face"]:
                    tools.search(backend.kb, q, mode=mode)
                with stages["server"]:
                    r = await server.call_tool("search", args)
                with stages["client"]:
                    r2 = await client.call_tool("search", args)
                assert not r.is_error and not r2.is_error, r.content
            out[f"search_{mode}"] = {k: t.summary() for k, t in stages.items()}
        for tool, make in (
            ("read", lambda n: {"note": n}),
            ("links", lambda n: {"note": n}),
            ("related", lambda n: {"note": n}),
        ):
            t = Timer()
            for n in notes:
                with t:
                    r = await server.call_tool(tool, make(n))
                assert not r.is_error, r.content
            out[tool] = t.summary()
    return out


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def memory(pid: int) -> dict:
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return {k: fields[k].strip() for k in ("VmRSS", "VmHWM")}


def _server_pid(before: set[int]) -> int | None:
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    new = [p for p in pids if p not in before]
    return new[0] if new else None


def _children() -> set[int]:
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids |= {int(p) for p in (task / "children").read_text().split()}
    return pids


async def _searches(client, queries: list[str], direct, pid: int | None) -> dict:
    out = {}
    for mode in ("keyword", "hybrid"):
        await client.call_tool("search", {"query": queries[0], "mode": mode})
        direct.search(queries[0], mode=mode)
        engine, through = Timer(), Timer()
        server_cpu = []
        for q in queries:
            with engine:
                direct.search(q, mode=mode)
            c0 = _cpu_of(pid) if pid else 0.0
            with through:
                await client.call_tool("search", {"query": q, "mode": mode})
            if pid:
                server_cpu.append(_cpu_of(pid) - c0)
        out[f"search_{mode}"] = {
            "through_server": summary(through.wall),
            "server_cpu_mean_ms": round(statistics.fmean(server_cpu) * 1000, 2)
            if server_cpu
            else None,
            "engine_alone": engine.summary(),
        }
    out["server_memory"] = memory(pid) if pid else None
    return out


async def over_stdio(path: Path, queries: list[str]) -> dict:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbase", "--db", str(path), "mcp"],
        cwd=str(REPO),
        env={k: v for k, v in os.environ.items() if k in ("HOME", "PATH")},
    )
    before = _children()
    async with Client(stdio_client(params, errlog=sys.stderr), read_timeout_seconds=120) as c:
        await c.call_tool("status", {})
        return await _searches(c, queries, kbase.open(path), _server_pid(before))


async def over_http(path: Path, queries: list[str]) -> dict:
    from mcp import Client

    proc = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(path), "mcp", "--http", "127.0.0.1:0"],
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        url = re.search(r"serving on (http://\S+)", line)
        assert url, line
        async with Client(url.group(1), read_timeout_seconds=120) as c:
            await c.call_tool("status", {})
            return await _searches(c, queries, kbase.open(path), proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    from bench.run import make_queries

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, help="keep the vault and index here (reused when present)")
    ap.add_argument("--skip-processes", action="store_true", help="only the in-process stages")
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
    result: dict = {
        "notes": st.documents,
        "chunks": st.chunks,
        "build_s": round(time.perf_counter() - t0, 1),
        "load_before": os.getloadavg(),
        "inside": asyncio.run(inside(path, queries, notes)),
    }
    if not a.skip_processes:
        result["stdio"] = asyncio.run(over_stdio(path, queries))
        result["http"] = asyncio.run(over_http(path, queries))
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
