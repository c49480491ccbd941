"""Link parsing and resolution speed: 10,000 notes with 10 links each.

python -m bench.links [--notes 10000]
"""

from __future__ import annotations

import argparse
import time

from tests.test_links import link_corpus, parse_and_resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10_000)
    a = ap.parse_args()
    corpus = link_corpus(a.notes)
    timings = []
    for _ in range(3):
        t0 = time.perf_counter()
        count, resolved = parse_and_resolve(*corpus)
        timings.append(time.perf_counter() - t0)
    print(
        f"{a.notes:,} notes, {count:,} links ({resolved:,} resolved): "
        f"best of 3 {min(timings):.2f} s, "
        f"{count / min(timings):,.0f} links/s"
    )


if __name__ == "__main__":
    main()
