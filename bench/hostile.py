"""Issue 27 part 5: memory and time on small hostile files, one file per index run.

    python -m bench.hostile [--rev REV] [--rounds 2] [--only NAME ...]

Generates the hostile set into bench/out/hostile/ (deterministic), then indexes each file alone
(``kbase index FILE --no-embed -q --max-size 128M`` into a fresh index) as a process, and reports
for each file its size, the peak resident memory of the run (the largest of kbase and its worker
processes, from wait4), the peak as a multiple of the file's size, wall and CPU seconds, and
what the run said on stderr (skips, warnings, "working on" lines). With ``--rev``, the same runs
with ``git archive REV`` (A) alternate with this checkout (B), A first in odd rounds, B first in
even ones; medians over the rounds. Results go to bench/out/hostile.json.

The set: what issue 27 reported (a 2 MB table of 20,000 columns and 50 rows, a 50 MB note,
2,000 nested callouts, 300,000 lines of front matter) and a few of the same kinds (a table of a
million cells in 200,000 rows, 100,000 headings, a 5 MB paragraph without a full stop, 5,000
list items nested 1,000 deep, a 9 MB note of CJK text), and issue 33's (a 6 MB PDF whose page
tree names one page 1,000,000 times, a few KB of nested page tree naming 216,225 pages, canvases
of 100,000 file cards and of 100,000 and 1,000,000 text cards, a note of 1,000,000 wikilinks, a
3.8 MB note);
for the PDF and the 3.8 MB note, ``kbase check`` on the index made is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, export_revision

OUT = REPO / "bench" / "out"
HOSTILE = OUT / "hostile"


def _table(cols: int, rows: int) -> str:
    head = "|" + "|".join(f"c{i}" for i in range(cols)) + "|\n"
    sep = "|" + "|".join("-" for _ in range(cols)) + "|\n"
    row = "|" + "|".join("x" for _ in range(cols)) + "|\n"
    return "# Table\n\n" + head + sep + row * (rows - 2)


def _prose(total: int, rng: random.Random) -> str:
    words = (
        "the quick brown fox jumps over a lazy dog while notes index search memory vault link "
        "heading table garden tomato sqlite write ahead log reader writer checkpoint"
    ).split()
    out, n = [], 0
    while n < total:
        if len(out) % 20 == 0:
            part = f"## Section {len(out)}\n\n"
        else:
            part = " ".join(rng.choice(words) for _ in range(80)) + ".\n\n"
        out.append(part)
        n += len(part)
    return "".join(out)


def _canvas(cards: int, kind: str) -> str:
    """A canvas of ``cards`` file cards (each naming a note) or text cards (a few words each)."""
    if kind == "file":
        node = (
            '{"id":"c%d","type":"file","file":"notes/n%d.md","x":%d,"y":0,"width":400,"height":400}'
        )
    else:
        node = '{"id":"c%d","type":"text","text":"card %d","x":%d,"y":0}'
    # One node a line, as Obsidian writes them (a line of over 1,000,000 characters is skipped).
    nodes = ",\n\t\t".join(node % (i, i, i) for i in range(cards))
    return '{\n\t"nodes":[\n\t\t' + nodes + '\n\t],\n\t"edges":[]\n}\n'


def _wikilinks(n: int) -> str:
    """A note of ``n`` wikilinks, three to a line."""
    lines = (" ".join(f"[[t{i + j}]]" for j in range(3)) for i in range(0, n, 3))
    return "# Links\n\n" + "\n".join(lines) + "\n"


def _pdf(kind: str) -> bytes:
    sys.path.insert(0, str(REPO))
    from tests.pdfgen import nested_repeat_pdf, repeated_page_pdf

    if kind == "repeated":  # one 3-word page named 1,000,000 times: 6 MB
        return repeated_page_pdf(1_000_000, "three word page")
    return nested_repeat_pdf(465, 2, "three word page")  # 216,225 pages in a few KB


# Issue 33's files: indexed, then `kbase check` on the index they made (check_wall_s, check_cpu_s).
CHECKED = ("pdf-one-page-named-1000000-times.pdf", "note-3.8mb-many-chunks.md")


def generate() -> dict[str, Path]:
    """The hostile files (written once; kept between runs)."""
    HOSTILE.mkdir(parents=True, exist_ok=True)
    rng = random.Random(27)
    makers = {
        "table-20000x50.md": lambda: _table(20_000, 50),
        "table-5x200000.md": lambda: _table(5, 200_000),
        "note-50mb.md": lambda: _prose(50_000_000, rng),
        "callouts-2000-nested.md": lambda: "".join(
            "> " * i + f"[!note] level {i}\n" for i in range(1, 2001)
        ),
        "frontmatter-300000-lines.md": lambda: (
            "---\n"
            + "".join(f"key{i}: value {i}\n" for i in range(300_000))
            + "---\n# Body\n\ntext\n"
        ),
        "headings-100000.md": lambda: "".join(f"## Heading {i}\n" for i in range(100_000)),
        "paragraph-5mb-no-stop.md": lambda: "".join(
            " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "epsilon"]) for _ in range(12))
            + "\n"
            for _ in range(75_000)
        ),
        "list-5000-nested.md": lambda: "".join(
            "  " * (i % 1000) + f"- item {i}\n" for i in range(5_000)
        ),
        "cjk-9mb.md": lambda: "".join(
            "所有权是 Rust 最为与众不同的特性，它让 Rust 无需垃圾回收即可保障内存安全。\n\n"
            for _ in range(90_000)
        ),
        # issue 33
        "pdf-one-page-named-1000000-times.pdf": lambda: _pdf("repeated"),
        "pdf-nested-tree-216225-pages.pdf": lambda: _pdf("nested"),
        "canvas-100000-file-cards.canvas": lambda: _canvas(100_000, "file"),
        "canvas-100000-text-cards.canvas": lambda: _canvas(100_000, "text"),
        "canvas-1000000-text-cards.canvas": lambda: _canvas(1_000_000, "text"),
        "wikilinks-1000000.md": lambda: _wikilinks(1_000_000),
        "note-3.8mb-many-chunks.md": lambda: _prose(3_800_000, rng),
    }
    paths = {}
    for name, make in makers.items():
        p = HOSTILE / name
        if not p.exists():
            content = make()
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content, encoding="utf-8")
        paths[name] = p
    return paths


_MEASURE = (
    "import resource, subprocess, sys; rc = subprocess.call(sys.argv[2:]);"
    " open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss));"
    " sys.exit(rc)"
)


def run_one(code: Path, file: Path, work: Path, timeout: float = 900) -> dict:
    """Index ``file`` alone with the kbase at ``code``: peak RSS (MB), wall and CPU seconds."""
    db = work / "h.db"
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        f.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(code), "KBASE_DB": str(db)}
    cmd = [sys.executable, "-m", "kbase", "index", str(file), "--no-embed", "--max-size", "128M"]
    err, peak = work / "stderr.txt", work / "peak.txt"
    peak.write_text("")
    # Through a small Python process that waits for kbase and reports its children's peak: a
    # child forked straight from a large process (pytest) counts its parent's pages until exec.
    cmd = [sys.executable, "-c", _MEASURE, str(peak), *cmd]
    t0 = time.perf_counter()
    with open(err, "w") as e:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=e, env=env, cwd=str(code))
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
    wall = time.perf_counter() - t0
    said = [ln for ln in err.read_text(errors="replace").splitlines() if ln.strip()]
    out = {
        "rc": os.waitstatus_to_exitcode(status),
        # the largest of kbase and its workers (kilobytes on Linux)
        "peak_mb": int(peak.read_text() or usage.ru_maxrss) / 1024,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "stderr": said[-4:],
        "lines": len(said),
    }
    if file.name in CHECKED:
        t0 = time.perf_counter()
        with open(os.devnull, "w") as null:
            p = subprocess.Popen(
                [sys.executable, "-m", "kbase", "check"],
                stdout=null,
                stderr=null,
                env=env,
                cwd=str(code),
            )
            _pid, status, usage = os.wait4(p.pid, 0)
        out["check_wall_s"] = time.perf_counter() - t0
        out["check_cpu_s"] = usage.ru_utime + usage.ru_stime
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rev", help="a base revision to run side by side (A)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="file names (or parts of them) to run")
    a = ap.parse_args()
    files = generate()
    if a.only:
        files = {n: p for n, p in files.items() if any(o in n for o in a.only)}
    work = Path(tempfile.mkdtemp(prefix="kbase-hostile-"))
    sides = {"B": REPO}
    if a.rev:
        sides = {"A": export_revision(a.rev, work / "A"), "B": REPO}
    results: dict[str, dict[str, list[dict]]] = {n: {s: [] for s in sides} for n in files}
    print(f"load {os.getloadavg()[0]:.1f}; {len(files)} files; sides {list(sides)}", flush=True)
    try:
        for r in range(a.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name, path in files.items():
                for side in order:
                    m = run_one(sides[side], path, work)
                    results[name][side].append(m)
                    size = path.stat().st_size / 2**20
                    check = (
                        f"  check wall {m['check_wall_s']:.1f} s cpu {m['check_cpu_s']:.1f} s"
                        if "check_wall_s" in m
                        else ""
                    )
                    print(
                        f"round {r + 1} {side} {name:30s} {size:6.1f} MB  peak {m['peak_mb']:7.0f}"
                        f" MB ({m['peak_mb'] / size:5.1f}x)  wall {m['wall_s']:6.1f} s"
                        f"  cpu {m['cpu_s']:6.1f} s  rc {m['rc']}  lines {m['lines']}{check}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {}
    print(f"\nload {os.getloadavg()[0]:.1f}; medians over {a.rounds} round(s)")
    cols = " | ".join(f"{s} peak MB (x size) | {s} wall s | {s} cpu s" for s in sides)
    print(f"| file | MB | {cols} |")
    print("|---|---:|" + "---:|---:|---:|" * len(sides))
    for name, by_side in results.items():
        size = files[name].stat().st_size / 2**20
        row = [name, f"{size:.1f}"]
        summary[name] = {"mb": size}
        for side, ms in by_side.items():
            peak = statistics.median(m["peak_mb"] for m in ms)
            wall = statistics.median(m["wall_s"] for m in ms)
            cpu = statistics.median(m["cpu_s"] for m in ms)
            row += [f"{peak:.0f} ({peak / size:.1f}x)", f"{wall:.1f}", f"{cpu:.1f}"]
            summary[name][side] = {"peak_mb": peak, "wall_s": wall, "cpu_s": cpu, "runs": ms}
        print("| " + " | ".join(row) + " |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "hostile.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    main()
