"""Embedding time saved on a docs site by leaving runs that are not text out of chunks (issue 34):
the chunks of the Vue docs as kbase cut them before (CHUNKER_VERSION 4) and now, embedded with the
bundled model in one process, alternating A and B, CPU and wall time each.

    python bench/docsites_embed.py BEFORE.db AFTER.db [--rounds 2]

BEFORE.db and AFTER.db: keyword indexes of bench/material/vue-docs/src made by the two versions
(``kbase --db X index bench/material/vue-docs/src --no-embed``). The embedder sees what kbase gives
it: title, heading path and chunk text (kbase.embed.embedder.embed_input).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import apsw  # noqa: E402

import kbase  # noqa: E402


def inputs(db: str) -> list[str]:
    from kbase.ingest.embed_text import embed_input

    con = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    rows = con.execute(
        "SELECT d.title, c.heading_path,"
        " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
        " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.id"
    ).fetchall()
    return [embed_input(t, h, x) for t, h, x in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    sets = {"before": inputs(a.before), "after": inputs(a.after)}
    embedder = kbase.open(a.after).embedder
    embedder.embed_batch(["warm up"])
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sets}
    for _ in range(a.rounds):
        for name, texts in sets.items():
            w, c = time.perf_counter(), time.process_time()
            for i in range(0, len(texts), 64):
                embedder.embed_batch(texts[i : i + 64])
            times[name].append((time.perf_counter() - w, time.process_time() - c))
    print(f"load {os.getloadavg()[0]:.1f}")
    for name, texts in sets.items():
        wall = min(t[0] for t in times[name])
        cpu = min(t[1] for t in times[name])
        print(f"{name}: {len(texts)} chunks, best wall {wall:.1f} s, best CPU {cpu:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
