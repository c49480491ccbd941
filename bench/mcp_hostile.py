"""kbase mcp under hostile clients (issue 33 item 9): how long another client waits, and what
the server's memory does, while one client attacks. Everything runs against 127.0.0.1.

    python bench/mcp_hostile.py [--rev REV] [--aborts 200,2000] [--inits 10000] [--sql-seconds 20]
                                [--line-mb 300]

A server (``kbase mcp --http 127.0.0.1:0`` on a small vault) is started from this checkout (B),
and with ``--rev`` also from ``git archive REV`` (A), one after the other. For each attack, a
bystander's keyword search (over its own session) is timed after or during it:

- aborts: N connections announce a 100,000-byte body, send 60 bytes and close; then the search;
- sql: three sessions each run a query of about ``--sql-seconds`` (a recursive count); while they
  run, the search;
- inits: ``initialize`` in a loop (N times, or 30 s); then a new client's initialize (its status)
  and search, and the server's RSS before and after;
- line (stdio): one line of ``--line-mb`` MB to ``kbase mcp`` over stdio; the server's peak RSS
  and its RSS once answered, against its idle RSS.

Printed: each attack's bystander wall time (and the server's CPU seconds over the attack) with
the machine's load; timings on a shared machine compare A and B of one run, not absolutes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) "
    "SELECT count(*) FROM c"
)


def post(port: int, body: dict, sid: str | None = None, timeout: float = 600):
    headers = {
        "host": f"127.0.0.1:{port}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
    }
    if sid:
        headers["mcp-session-id"] = sid
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/mcp", json.dumps(body).encode(), headers)
        r = conn.getresponse()
        r.read()
        return r.status, r.getheader("mcp-session-id")
    finally:
        conn.close()


def session(port: int) -> str:
    status, sid = post(port, INIT)
    assert status == 200 and sid, status
    post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    return sid


def search(port: int, sid: str) -> float:
    t = time.perf_counter()
    call = {"name": "search", "arguments": {"query": "tomatoes", "mode": "keyword"}}
    post(port, {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}, sid)
    return time.perf_counter() - t


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def start(tree: Path, db: Path, *args: str) -> tuple[subprocess.Popen, int]:
    log = db.with_suffix(f".{os.getpid()}.{time.monotonic_ns()}.log")
    err = open(log, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(db), "mcp", "--http", "127.0.0.1:0", *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        stderr=err,
        stdin=subprocess.DEVNULL,
    )
    for _ in range(1200):
        m = re.search(r"serving on http://127\.0\.0\.1:(\d+)", log.read_text())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.1)
    raise SystemExit(f"server did not start: {log.read_text()[-2000:]}")


def attack_aborts(port: int, n: int) -> None:
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        "accept: application/json, text/event-stream\r\ncontent-length: 100000\r\n\r\n"
    ).encode()
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(head + b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {')


def run_tree(label: str, tree: Path, db: Path, args) -> dict:
    out: dict = {}
    proc, port = start(tree, db)
    try:
        by = session(port)
        search(port, by)
        out["idle_search_s"] = round(min(search(port, by) for _ in range(5)), 4)
        for n in args.aborts:
            c0 = cpu(proc.pid)
            attack_aborts(port, n)
            out[f"after_{n}_aborts_s"] = round(search(port, by), 3)
            out[f"after_{n}_aborts_cpu_s"] = round(cpu(proc.pid) - c0, 2)
        # three slow sql calls from three sessions, the bystander's search during them
        n = args.sql_rows
        sids = [session(port) for _ in range(3)]
        call = {"name": "sql", "arguments": {"query": SLOW.format(n=n), "timeout": 60}}
        done: list[float] = []
        t0 = time.perf_counter()
        threads = [
            threading.Thread(
                target=lambda s=s: (
                    post(
                        port, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, s
                    ),
                    done.append(time.perf_counter() - t0),
                )
            )
            for s in sids
        ]
        for t in threads:
            t.start()
        time.sleep(1.0)
        out["search_during_3_sql_s"] = round(search(port, by), 3)
        for t in threads:
            t.join()
        out["sql_done_s"] = [round(d, 1) for d in sorted(done)]
        # initialize in a loop
        before = rss_mb(proc.pid)
        t0, opened = time.perf_counter(), 0
        while opened < args.inits and time.perf_counter() - t0 < 30:
            post(port, INIT)
            opened += 1
        out["inits"] = opened
        out["inits_s"] = round(time.perf_counter() - t0, 1)
        status, sid = post(port, INIT)
        out["new_client_initialize_status"] = status
        out["new_client_search_s"] = round(search(port, sid), 3) if status == 200 else None
        out["rss_mb_before_after_inits"] = [round(before), round(rss_mb(proc.pid))]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    # a huge stdio line
    p = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(db), "mcp"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert p.stdin and p.stdout
    p.stdin.write(json.dumps(INIT).encode() + b"\n")
    p.stdin.flush()
    p.stdout.readline()
    time.sleep(1)
    idle = rss_mb(p.pid)
    head = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "search", '
    head += b'"arguments": {"query": "'
    p.stdin.write(head)
    block = b"tomato " * (1 << 17)
    for _ in range(args.line_mb * (1 << 20) // len(block)):
        p.stdin.write(block)
    p.stdin.write(b'"}}}\n')
    p.stdin.flush()
    p.stdout.readline()
    time.sleep(1)
    out["stdio_line_mb"] = args.line_mb
    out["stdio_rss_mb_idle_peak_after"] = [
        round(idle),
        round(rss_mb(p.pid, "VmHWM")),
        round(rss_mb(p.pid)),
    ]
    p.stdin.close()
    p.wait(timeout=120)
    print(label, json.dumps(out), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rev", help="also measure git archive REV (A) before this checkout (B)")
    ap.add_argument("--aborts", default="200,2000")
    ap.add_argument("--inits", type=int, default=10_000)
    ap.add_argument("--sql-rows", type=int, default=12_000_000, help="rows the slow query counts")
    ap.add_argument("--line-mb", type=int, default=300)
    args = ap.parse_args(argv)
    args.aborts = [int(x) for x in args.aborts.split(",") if x]
    work = Path(tempfile.mkdtemp(prefix="kbase-mcp-hostile-"))
    vault = work / "vault"
    vault.mkdir()
    for i in range(200):
        (vault / f"Note {i}.md").write_text(f"# Note {i}\n\nTomatoes and compost, note {i}.\n")
    db = work / "index.db"
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", str(vault), "--no-embed", "-q"],
        cwd=REPO,
        check=True,
    )
    print("load", os.getloadavg(), flush=True)
    if args.rev:
        a = work / "a"
        a.mkdir()
        archive = subprocess.run(["git", "archive", args.rev], cwd=REPO, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(a)], input=archive.stdout, check=True)
        run_tree(f"A {args.rev}", a, db, args)
    run_tree("B this checkout", REPO, db, args)
    print("load", os.getloadavg(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
