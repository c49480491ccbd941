"""Search in scripts without spaces (issue 13): the issue's table for the Chinese and Japanese Rust
book (../shared/data/vaults/rust-book-zh, rust-book-ja).

    python bench/cjk.py                 # keyword mode
    python bench/cjk.py --hybrid        # also hybrid (embeds the vaults once: minutes)
    python bench/cjk.py --seed 2 --n 40

Queries are drawn from the notes themselves (seeded, so every run asks the same):
- phrase: 4 characters of one run (Han, kana, ...) that occur in at most 3 notes; right when
  the note it was taken from is in the top 3;
- pair: two 2-character words from different lines of one note, both in at most 10 notes and
  together in at most 5; right when the note is in the top 10.
Also timed: the median query and the index's size against a vault indexed without chunks_cjk.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import kbase  # noqa: E402
from kbase.search import cjk  # noqa: E402

VAULTS = REPO.parent / "shared" / "data" / "vaults"


def draw_queries(bodies: dict[str, str], n: int, seed: int) -> tuple[list, list]:
    """(phrase queries, pair queries): lists of (query, path)."""
    rng = random.Random(seed)
    paths = sorted(p for p, b in bodies.items() if cjk.has_runs(b))
    phrases: list[tuple[str, str]] = []
    tries = 0
    while len(phrases) < n and tries < 100 * n:
        tries += 1
        path = rng.choice(paths)
        runs = [m.group(0) for m in cjk.RUN.finditer(bodies[path]) if len(m.group(0)) >= 4]
        if not runs:
            continue
        run = rng.choice(runs)
        i = rng.randrange(len(run) - 3)
        phrase = run[i : i + 4]
        if sum(phrase in b for b in bodies.values()) <= 3 and (phrase, path) not in phrases:
            phrases.append((phrase, path))
    pairs: list[tuple[str, str]] = []
    tries = 0
    while len(pairs) < n and tries < 200 * n:
        tries += 1
        path = rng.choice(paths)
        lines = [
            ln
            for ln in bodies[path].splitlines()
            if any(len(m.group(0)) >= 2 for m in cjk.RUN.finditer(ln))
        ]
        if len(lines) < 2:
            continue
        a, b = rng.sample(lines, 2)
        wa, wb = _word(rng, a), _word(rng, b)
        if wa == wb or wa in b or wb in a:
            continue
        with_a = {p for p, t in bodies.items() if wa in t}
        with_b = {p for p, t in bodies.items() if wb in t}
        if len(with_a) <= 10 and len(with_b) <= 10 and len(with_a & with_b) <= 5:
            pairs.append((f"{wa} {wb}", path))
    return phrases, pairs


def _word(rng: random.Random, line: str) -> str:
    run = rng.choice([m.group(0) for m in cjk.RUN.finditer(line) if len(m.group(0)) >= 2])
    i = rng.randrange(len(run) - 1)
    return run[i : i + 2]


def score(kb, queries, top: int, mode: str) -> tuple[int, list[float]]:
    right, times = 0, []
    for q, path in queries:
        t0 = time.perf_counter()
        hits = kb.search(q, mode=mode, limit=top)
        times.append(time.perf_counter() - t0)
        right += path in [h.path for h in hits]
    return right, times


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=20, help="queries per column")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hybrid", action="store_true", help="also hybrid mode (embeds the vaults)")
    ap.add_argument(
        "--vault", action="append", help="vault folder names (default rust-book-zh, rust-book-ja)"
    )
    args = ap.parse_args()
    modes = ["keyword"] + (["hybrid"] if args.hybrid else [])
    print(
        "| vault | mode | 4-char phrase: note in top 3 | two 2-char words: note in top 10 |"
        " query p50 ms |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.vault or ["rust-book-zh", "rust-book-ja"]:
            root = VAULTS / name
            if not root.is_dir():
                print(f"| {name} | absent | | | |")
                continue
            kb = kbase.open(Path(tmp) / f"{name}.db")
            kb.index([root], embed=args.hybrid)
            bodies = dict(kb.reader.execute("SELECT path, body FROM documents").fetchall())
            phrases, pairs = draw_queries(bodies, args.n, args.seed)
            for mode in modes:
                r1, t1 = score(kb, phrases, 3, mode)
                r2, t2 = score(kb, pairs, 10, mode)
                p50 = statistics.median(t1 + t2) * 1000
                print(
                    f"| {name} | {mode} | {r1} of {len(phrases)} | {r2} of {len(pairs)} |"
                    f" {p50:.1f} |"
                )
            kb.close()


if __name__ == "__main__":
    main()
