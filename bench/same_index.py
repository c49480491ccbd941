"""Do two revisions write the same index? A fresh ``kbase index --no-embed`` of each vault by
revision A and by revision B (``git archive``; ``.`` is the working tree), compared row by row:

- every table but FTS5's shadow tables, the timestamps left out (columns, and meta keys, ending
  in ``_at``);
- both FTS5 indexes (chunks_fts, chunks_cjk) through ``fts5vocab`` instance tables: every
  (term, row, column, offset) they hold;
- the ``chunks_fts_content`` view, and FTS5's integrity check on both tables;
- the top 10 (path, score, line) of 100 keyword searches a vault, one and two words drawn
  (seeded) from its chunks, all run by B's code (search is not what is compared).

    python -m bench.same_index main . ../shared/data/vaults/foam-docs ../shared/data/vaults/rust-bo*

Prints one line a vault and exits 1 if any differs.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import apsw

from bench.common import REPO, ab_arguments, export_revision

SHADOW = re.compile(r"^chunks_(fts|cjk)(_config|_data|_docsize|_idx)?$")
SEARCH = (
    "import sys, json, kbase\n"
    "kb = kbase.open(sys.argv[1])\n"
    "out = []\n"
    "for q in json.loads(sys.argv[2]):\n"
    "    hits = kb.search(q, mode='keyword', limit=10)\n"
    "    out.append([(h.path, round(h.score, 9), h.line) for h in hits])\n"
    "print(json.dumps(out))\n"
)


def _env(src: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(cache / "pycache" / src.name))
    return env


def build(src: Path, vault: Path, db: Path) -> None:
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        f.unlink(missing_ok=True)
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", "--no-embed", "-q", str(vault)],
        env=_env(src, db.parent),
        check=True,
        capture_output=True,
        cwd=db.parent,  # not a checkout: ``-m`` puts the working folder first on sys.path
    )


def dump(db: Path) -> dict[str, list]:
    """Everything the comparison looks at, by name."""
    out: dict[str, list] = {}
    con = apsw.Connection(str(db))
    try:
        tables = [
            n
            for (n,) in con.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
            if not SHADOW.match(n)
        ]
        for t in sorted(tables):
            info = con.execute(f"PRAGMA table_info({t})").fetchall()
            cols = [r[1] for r in info if not r[1].endswith("_at")]
            rows = con.execute(f"SELECT {', '.join(cols)} FROM {t}").fetchall()
            if t == "meta":
                rows = [r for r in rows if not str(r[0]).endswith("_at")]
            out[t] = sorted(rows, key=repr)
        for name in ("chunks_fts", "chunks_cjk"):
            con.execute(
                f"CREATE VIRTUAL TABLE temp.v_{name} USING fts5vocab(main, {name}, instance)"
            )
            out[f"{name} instances"] = con.execute(
                f"SELECT * FROM temp.v_{name} ORDER BY 1, 2, 3, 4"
            ).fetchall()
            con.execute(f"INSERT INTO {name} ({name}, rank) VALUES ('integrity-check', 1)")
        out["chunks_fts_content"] = con.execute(
            "SELECT * FROM chunks_fts_content ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    return out


def queries(db: Path, n: int = 100) -> list[str]:
    con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        words = [
            w
            for (body,) in con.execute("SELECT body FROM chunks_fts_content ORDER BY 1")
            for w in re.findall(r"\w{3,}", body)
        ]
    finally:
        con.close()
    if not words:
        return []
    rnd = random.Random(7)
    ones = [rnd.choice(words) for _ in range(n * 3 // 5)]
    twos = [f"{rnd.choice(words)} {rnd.choice(words)}" for _ in range(n - len(ones))]
    return ones + twos


def searches(src: Path, db: Path, qs: list[str]) -> list:
    p = subprocess.run(
        [sys.executable, "-c", SEARCH, str(db), json.dumps(qs)],
        env=_env(src, db.parent),
        check=True,
        capture_output=True,
        text=True,
        cwd=db.parent,
    )
    return json.loads(p.stdout)


def main() -> None:
    ap = ab_arguments(__doc__)
    args = ap.parse_args()
    differ = False
    with tempfile.TemporaryDirectory(prefix="kbase-same-") as tmp_name:
        tmp = Path(tmp_name)
        src = {
            side: REPO if rev == "." else export_revision(rev, tmp / f"src-{side}")
            for side, rev in (("a", args.a), ("b", args.b))
        }
        total = 0
        for vault in args.vaults:
            a, b = tmp / "a.db", tmp / "b.db"
            build(src["a"], vault, a)
            build(src["b"], vault, b)
            da, db_ = dump(a), dump(b)
            bad = sorted(t for t in da.keys() | db_.keys() if da.get(t) != db_.get(t))
            rows = sum(len(v) for v in da.values())
            total += rows
            qs = queries(a)
            same_search = searches(src["b"], a, qs) == searches(src["b"], b, qs)
            differ = differ or bool(bad) or not same_search
            print(
                f"{vault.name}: {rows:,} rows compared, differing: {', '.join(bad) or 'none'};"
                f" {len(qs)} searches {'the same' if same_search else 'DIFFER'}",
                flush=True,
            )
        print(f"{total:,} rows in all")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
