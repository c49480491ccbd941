"""The CPU a worker spends on a vault's notes (kbase.indexer.prepare: decode, parse, chunk, each
note's links), revision A against revision B (``git archive``; ``.`` is the working tree): each
side in a process of its own, the sides alternating, every round a fresh token counter (its
tokenizer loaded before the clock starts) over every note of each vault, and the bytes compared.

    python -m bench.prepare_ab main . ../shared/data/vaults/rust-book-ja
    python -m bench.prepare_ab main . --rounds 9 ../shared/data/vaults/*

Prints a Markdown table of median CPU ms per vault (and B / A), then whether the two sides
prepared the same notes (the pickled results, hashed).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, ab_arguments, export_revision

CHILD = r"""
import hashlib, json, pickle, sys, time
from pathlib import Path
from kbase.indexer.prepare import prepare
from kbase.ingest.chunk import ChunkSettings, ModelTokenCounter

out = {}
settings = ChunkSettings()
for vault in sys.argv[1:]:
    notes = [(p.name, p.read_bytes()) for p in sorted(Path(vault).rglob("*.md"))]
    warm = ModelTokenCounter()
    for name, data in notes[:3]:  # the modules' first use, off the clock
        prepare(name, data, settings, warm)
    counter = ModelTokenCounter()
    counter._tok
    t = time.process_time()
    results = [prepare(name, data, settings, counter) for name, data in notes]
    cpu = time.process_time() - t
    out[vault] = [cpu, hashlib.sha256(pickle.dumps(results)).hexdigest()]
print(json.dumps(out))
"""


def _env(src: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(cache))
    return env


def main() -> None:
    ap = ab_arguments(__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    vaults = [str(v) for v in args.vaults]
    with tempfile.TemporaryDirectory(prefix="kbase-prepare-ab-") as t:
        tmp = Path(t)
        sides = {
            side: REPO if rev == "." else export_revision(rev, tmp / f"src-{side}")
            for side, rev in (("A", args.a), ("B", args.b))
        }
        cpu: dict[str, dict[str, list[float]]] = {s: {v: [] for v in vaults} for s in sides}
        digests: dict[str, dict[str, str]] = {s: {} for s in sides}
        for _ in range(args.rounds):
            for side, src in sides.items():
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, *vaults],
                    env=_env(src, tmp / f"pycache-{side}"),
                    cwd=tmp,  # not a checkout: ``-c`` puts the working folder first on sys.path
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for vault, (seconds, digest) in json.loads(done.stdout).items():
                    cpu[side][vault].append(seconds)
                    digests[side][vault] = digest
    print(f"| vault | A ({args.a}) CPU ms | B ({args.b}) CPU ms | B / A |")
    print("|---|---:|---:|---:|")
    for vault in vaults:
        a, b = (statistics.median(cpu[s][vault]) for s in ("A", "B"))
        print(f"| {Path(vault).name} | {a * 1000:.0f} | {b * 1000:.0f} | {b / a:.2f} |")
    same = [Path(v).name for v in vaults if digests["A"][v] == digests["B"][v]]
    print(f"median of {args.rounds} rounds, A and B alternating; the same results: {same}")
    if len(same) < len(vaults):
        print("results differ:", [Path(v).name for v in vaults if Path(v).name not in same])


if __name__ == "__main__":
    main()
