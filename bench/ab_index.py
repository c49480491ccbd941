"""Fresh-index time and index size of two revisions side by side, alternating A and B (the
machine's speed drifts, so each pair of runs sees the same conditions).

    python -m bench.ab_index main HEAD                       # the English vaults in ../shared
    python -m bench.ab_index main HEAD --runs 7 --vault ../shared/data/vaults/rust-book-zh

Each run is ``kbase index --no-embed`` in a new process on a new index file, from a ``git archive``
of the revision (the working tree for ``.``). Prints per vault: median wall time of each side, the
ratio B/A, and the database size (identical from run to run).
"""

from __future__ import annotations

import argparse
import os
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


def run(src: Path, vault: Path, db: Path) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="")
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        f.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", "--no-embed", "-q", str(vault)],
        env=env,
        check=True,
        capture_output=True,
    )
    seconds = time.perf_counter() - t0
    con_size = sum(os.path.getsize(f) for f in (str(db), f"{db}-wal") if os.path.exists(f))
    return seconds, con_size


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
        print(f"A = {args.a}, B = {args.b}, {args.runs} runs each, alternating\n")
        print("| vault | A s (median) | B s (median) | B/A time | A bytes | B bytes | B/A size |")
        print("|---|---|---|---|---|---|---|")
        for vault in vaults:
            times: dict[str, list[float]] = {"A": [], "B": []}
            sizes: dict[str, int] = {}
            for i in range(args.runs):
                for side in "AB" if i % 2 == 0 else "BA":
                    s, size = run(src[side], vault, tmp / f"{side}.db")
                    times[side].append(s)
                    sizes[side] = size
            a, b = statistics.median(times["A"]), statistics.median(times["B"])
            print(
                f"| {vault.name} | {a:.3f} | {b:.3f} | {b / a:.3f} | {sizes['A']:,} |"
                f" {sizes['B']:,} |"
                f" {sizes['B'] / sizes['A']:.4f} |"
            )


if __name__ == "__main__":
    main()
