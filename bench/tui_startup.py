"""Time from launching ``kbase browse`` to its first paint, in a real pseudo-terminal.

    python -m bench.tui_startup INDEX.db [--runs 5] [--query memory] [--size 80x24]
        [--entry cli|run]

Each run starts a fresh Python process on a pty (as a terminal would): ``python -m kbase --db
INDEX.db browse`` (``--entry cli``, what a user runs) or ``kbase.tui.app.run`` directly
(``--entry run``, without the CLI's imports). It reads what the app draws:

- first paint: the search box's placeholder is on the screen (the main screen is up);
- status: the status line shows the index's note count (first worker finished: the index is
  open and ``KB.status()`` answered);
- results: after typing QUERY, a "N results" title appears (debounce + keyword search + draw).

Then it sends ctrl+q. Prints each run and the medians. Build a 10,000-note index with:

    python -m bench.gen_vault /tmp/v --notes 10000 && kbase --db /tmp/v.db index --no-embed /tmp/v
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import termios
import time
from pathlib import Path

ANSI = re.compile(
    r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)"
    r"|P[^\x1b]*\x1b\\|[()][0-9A-Za-z]|[=>78cDEHMNOZ])"
)
REPO = Path(__file__).resolve().parents[1]


def run_once(
    db: Path, query: str, cols: int, rows: int, entry: str = "cli", timeout: float = 30.0
) -> dict:
    if entry == "cli":
        argv = [sys.executable, "-m", "kbase", "--db", str(db), "browse"]
    else:
        code = (
            "import sys; from pathlib import Path; from kbase.tui.app import run;"
            " run(Path(sys.argv[1]))"
        )
        argv = [sys.executable, "-c", code, str(db)]
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    env.pop("TEXTUAL", None)
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, with the pty as its terminal
        os.chdir(REPO)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    marks: dict[str, float] = {}
    raw = b""
    typed = False
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                raw += chunk
                text = ANSI.sub("", raw.decode("utf-8", "replace"))
                now = time.perf_counter() - t0
                if "paint" not in marks and "Search your notes" in text:
                    marks["paint"] = now
                if "status" not in marks and re.search(r"[\d,]+ notes ·", text):
                    marks["status"] = now
                if typed and "results" not in marks and re.search(r"\d+ results? · keyword", text):
                    marks["results"] = now
                    break
                if "no index at" in text:
                    raise SystemExit(f"no index at {db}")
            if "paint" in marks and "status" in marks and not typed:
                os.write(fd, query.encode())
                typed = True
                marks["typed"] = time.perf_counter() - t0
                raw = b""  # only output after typing counts for the results mark
    finally:
        try:
            os.write(fd, b"\x11")  # ctrl+q
            deadline = time.time() + 5
            while time.time() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                select.select([fd], [], [], 0.05)
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)
    if "results" in marks and "typed" in marks:
        marks["search"] = marks["results"] - marks["typed"]
    return marks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--query", default="memory")
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--entry", choices=("cli", "run"), default="cli")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    results = []
    for i in range(args.runs):
        m = run_once(args.db.resolve(), args.query, cols, rows, args.entry)
        results.append(m)
        print(
            f"run {i + 1}: first paint {m.get('paint', float('nan')):.3f} s · status shown "
            f"{m.get('status', float('nan')):.3f} s · typed→results "
            f"{m.get('search', float('nan')):.3f} s",
            flush=True,
        )
    for key, label in (
        ("paint", "first paint"),
        ("status", "status line"),
        ("search", "typed→results"),
    ):
        values = [m[key] for m in results if key in m]
        if values:
            print(
                f"median {label}: {statistics.median(values):.3f} s  "
                f"(min {min(values):.3f}, max {max(values):.3f})"
            )


if __name__ == "__main__":
    main()
