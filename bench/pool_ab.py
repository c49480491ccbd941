"""A fresh keyword index of one vault with the parsing workers against forced into one process,
alternating, as processes with a bytecode cache (issue 36 part 3: what the workers bring under
the machine's current load).

    python -m bench.pool_ab VAULT [--rounds 4]
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

from bench.common import REPO

RUN = (
    "import runpy, sys\n"
    "from kbase.indexer import prepare\n"
    "if sys.argv[3] == 'single':\n"
    "    prepare.POOL_MIN_FILES = prepare.POOL_MIN_BYTES = 10**12\n"
    "sys.argv = ['kbase', '--db', sys.argv[1], 'index', '-q', '--no-embed', sys.argv[2]]\n"
    "runpy.run_module('kbase', run_name='__main__')\n"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(REPO / "bench" / "out" / "pycache")
    sides = ("pool", "single")
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                db = Path(tmp) / f"{side}-{r}.db"
                c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                w0 = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-c", RUN, str(db), str(a.vault), side],
                    env=env,
                    cwd=REPO,
                    check=True,
                    capture_output=True,
                )
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
                runs[side].append((time.perf_counter() - w0, cpu))
    loads.append(os.getloadavg()[0])
    for side, rs in runs.items():
        wall = statistics.median(w for w, _ in rs)
        cpu = statistics.median(c for _, c in rs)
        print(f"{side}: wall {wall:.3f} s, CPU {cpu:.3f} s (medians of {len(rs)})")
    print(f"1-min load {loads[0]:.1f} -> {loads[1]:.1f}")


if __name__ == "__main__":
    main()
