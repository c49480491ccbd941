"""Fresh-index time and index size of two revisions side by side, alternating A and B (the
machine's speed drifts, so each pair of runs sees the same conditions).

    python -m bench.ab_index main HEAD                       # the English vaults in ../shared
    python -m bench.ab_index main HEAD --runs 7 --vault ../shared/data/vaults/rust-book-zh

Each run is ``kbase index --no-embed`` in a new process on a new index file, from a ``git archive``
of the revision (the working tree for ``.``), with a bytecode cache as an installed kbase has it.
Prints per vault: median wall and CPU time (user + system, the workers' included) of each side,
the ratios B/A, the database size (identical from run to run) and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, export_revision

VAULTS = REPO.parent / "shared" / "data" / "vaults"
ENGLISH = ["rust-book", "obsidian-tasks-docs", "foam-docs"]


def tree(rev: str, tmp: Path) -> Path:
    if rev == ".":
        return REPO
    return export_revision(rev, tmp / rev.replace("/", "_"))


def run(src: Path, vault: Path, db: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, index bytes) of one fresh index."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(db.parent / "pycache" / src.name))
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        f.unlink(missing_ok=True)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", "--no-embed", "-q", str(vault)],
        env=env,
        check=True,
        capture_output=True,
        cwd=db.parent,  # not this checkout: ``-m`` puts the working folder first on sys.path
    )
    seconds = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    con_size = sum(os.path.getsize(f) for f in (str(db), f"{db}-wal") if os.path.exists(f))
    return seconds, cpu, con_size


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--vault", action="append", type=Path)
    args = ap.parse_args()
    vaults = args.vault or [VAULTS / v for v in ENGLISH]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        src = {"A": tree(args.a, tmp), "B": tree(args.b, tmp)}
        for side in "AB":  # compile the bytecode cache (not timed)
            run(src[side], vaults[0], tmp / f"{side}.db")
        print(f"A = {args.a}, B = {args.b}, {args.runs} runs each, alternating\n")
        print(
            "| vault | A wall s | B wall s | B/A wall | A CPU s | B CPU s | B/A CPU"
            " | A bytes | B bytes | B/A size | load |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for vault in vaults:
            times: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
            sizes: dict[str, int] = {}
            load = os.getloadavg()[0]
            for i in range(args.runs):
                for side in "AB" if i % 2 == 0 else "BA":
                    s, cpu, size = run(src[side], vault, tmp / f"{side}.db")
                    times[side].append((s, cpu))
                    sizes[side] = size
            a, b = (statistics.median(w for w, _ in times[k]) for k in "AB")
            ac, bc = (statistics.median(c for _, c in times[k]) for k in "AB")
            print(
                f"| {vault.name} | {a:.3f} | {b:.3f} | {b / a:.3f} | {ac:.3f} | {bc:.3f}"
                f" | {bc / ac:.3f} | {sizes['A']:,} | {sizes['B']:,}"
                f" | {sizes['B'] / sizes['A']:.4f} | {load:.1f}-{os.getloadavg()[0]:.1f} |"
            )


if __name__ == "__main__":
    main()
