"""Issue 28 item 9: does the index file stay near its compact size while notes are edited?

    python -m bench.growth [--vault DIR] [--batches 200] [--code DIR] [--compact-first]

Indexes ``--vault`` (a copy; default: the shared obsidian-tasks-docs) with embeddings, then runs
``--batches`` watch-like batches through one long-lived KB that keeps a read connection open (as
``kbase watch``, the TUI and an MCP server do): each appends a paragraph to one note, runs
``kb.index`` and ``kb.embed_step``. Every tenth of the way it prints the file's size, the WAL's,
the free pages; at the end the largest tables (dbstat) and what ``kbase compact`` makes of it.
``--code`` runs another checkout (e.g. a ``git worktree`` of a base revision) for a side by side.
The embedder is the real model; the first index run embeds the vault once.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--vault", type=Path, default=REPO.parent / "shared/data/vaults/obsidian-tasks-docs"
    )
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout to run")
    ap.add_argument("--db", type=Path, help="start from a copy of this embedded index of --vault")
    ap.add_argument("--compact-first", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(a.code))
    import apsw

    import kbase

    work = Path(tempfile.mkdtemp(prefix="kbase-growth-"))
    vault = work / "vault"
    shutil.copytree(a.vault, vault)
    db = work / "index.db"
    if a.db:
        shutil.copy(a.db, db)
        kb = kbase.open(db)
        (old,) = [r.path for r in kb.roots()]
        kb.move_root(old, str(vault))
    else:
        kb = kbase.open(db)
        kb.index([vault])
    if a.compact_first:
        kb.compact()
    kb.reader.execute("SELECT 1 FROM meta").fetchall()  # a reader stays open, as watch's does

    def mib(p: Path) -> float:
        return p.stat().st_size / 2**20 if p.exists() else 0.0

    def show(i: int) -> None:
        c = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        free = c.execute("PRAGMA freelist_count").fetchone()[0]
        free *= c.execute("PRAGMA page_size").fetchone()[0]
        c.close()
        wal = Path(f"{db}-wal")
        print(
            f"batch {i:4d}: file {mib(db):6.2f} MiB  WAL {mib(wal):6.2f} MiB"
            f"  free pages {free / 2**20:5.2f} MiB  total {mib(db) + mib(wal):6.2f} MiB",
            flush=True,
        )

    notes = sorted(p for p in vault.rglob("*.md"))
    show(0)
    cpu = time.process_time()
    for i in range(1, a.batches + 1):
        with (notes[(i * 7) % len(notes)]).open("a", encoding="utf-8") as f:
            f.write(f"\n\nA small edit number {i} about recurring tasks and due dates.\n")
        kb.index([vault], embed=False)
        kb.embed_step(limit=64)
        if i % max(1, a.batches // 10) == 0:
            show(i)
    print(f"{a.batches} batches: {time.process_time() - cpu:.1f} s CPU")
    kb.close()
    c = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    top = c.execute(
        "SELECT name, sum(pgsize) FROM dbstat GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
    ).fetchall()
    c.close()
    print("largest:", ", ".join(f"{n} {b / 2**20:.2f} MiB" for n, b in top))
    r = kbase.open(db).compact()
    print(f"compact: {r.bytes_before / 2**20:.2f} -> {r.bytes_after / 2**20:.2f} MiB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
