"""Issue 15, side by side: a base revision (A) against the working tree (B), alternating rounds.

    python -m bench.speed cli   [--rev 1092f36] [--notes 10000] [--rounds 7]
    python -m bench.speed embed [--rev 1092f36] [--notes 100] [--rounds 3]

``cli``: ``kbase search`` as a process (hybrid, the default once an index has vectors, and
keyword) on a synthetic vault of ``--notes`` notes indexed keyword-only, with synthetic unit
vectors for every chunk (the model would take an hour here; the query is embedded by the real
model). Each round runs every query once with A, then once with B (or B first, alternating).

``embed``: ``kbase embed`` as a process over the same chunks (a keyword-only index copied afresh
for every run), A and B alternating; passages/s by wall time, CPU seconds (user + sys of the
child) and CPU utilisation (CPU / wall; 2.0 is both cores busy), then the lowest cosine between
A's and B's vectors of each chunk.

A is ``git archive REV`` run from a temporary folder (its dependencies must be installed in this
Python: the base revision used fastembed); B is this checkout. Both get a bytecode cache
(``PYTHONPYCACHEPREFIX``) and one shared data folder, warmed before anything is timed (B's
derived model graph is built there once). Medians are reported; results go to
bench/out/speed-<part>.json.
"""

from __future__ import annotations

import argparse
import json
import os
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

QUERIES = [
    "memory cache design",
    "how to plan a review meeting",
    "database engine layer",
    "release notes history",
    "network function error",
    "team research paper",
    "storage key record",
    "user question example",
]


def env_for(code: Path, data: Path) -> dict:
    """A bytecode cache as an installed kbase has (this machine sets PYTHONDONTWRITEBYTECODE)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "KBASE_MODEL_CACHE")
    }
    return {
        **env,
        "PYTHONPATH": str(code),
        "XDG_DATA_HOME": str(data),
        "PYTHONPYCACHEPREFIX": str(OUT / "pycache"),
    }


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout). The child runs in the code's parent folder:
    ``python -m`` puts the working directory first on sys.path, which would otherwise pick this
    checkout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        cmd, env=env, capture_output=True, text=True, check=True, cwd=Path(env["PYTHONPATH"]).parent
    ).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def keyword_index(vault: Path, db: Path, env: dict) -> None:
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", "-q", "--no-embed", str(vault)],
        env=env,
        check=True,
        cwd=Path(env["PYTHONPATH"]).parent,
    )


def fake_vectors(db: Path) -> int:
    """Unit vectors for every chunk, recorded as the real model's (what hybrid search needs)."""
    import numpy as np

    from kbase.embed import vectors
    from kbase.embed.embedder import MINILM_FINGERPRINT
    from kbase.store import db as kdb

    con = kdb.connect(db)
    vectors.ensure_vector_table(
        con, type("M", (), {"fingerprint": MINILM_FINGERPRINT, "dimension": 384})()
    )
    ids = [r for (r,) in con.execute("SELECT id FROM chunks ORDER BY id")]
    rng = np.random.default_rng(7)
    for s in range(0, len(ids), 5000):
        part = ids[s : s + 5000]
        v = rng.standard_normal((len(part), 384)).astype("<f4")
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        with con:
            con.executemany(
                "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                [(i, x.tobytes()) for i, x in zip(part, v)],
            )
            con.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in part])
    con.close()
    return len(ids)


def cli(a, work: Path, sides: dict[str, Path], data: Path) -> dict:
    from bench.gen_vault import generate

    vault = work / "vault"
    generate(vault, a.notes, seed=1)
    db = work / "cli.db"
    keyword_index(vault, db, env_for(sides["B"], data))
    chunks = fake_vectors(db)
    runs = {(s, m): [] for s in sides for m in ("hybrid", "keyword")}
    for _s, code in sides.items():  # warm: page cache, bytecode, B's derived graph
        timed(
            [sys.executable, "-m", "kbase", "--db", str(db), "search", "warm up"],
            env_for(code, data),
        )
    for r in range(a.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for q in QUERIES:
            for s in order:
                for mode in ("hybrid", "keyword"):
                    wall, cpu, _ = timed(
                        [sys.executable, "-m", "kbase", "--db", str(db), "search", "-m", mode, q],
                        env_for(sides[s], data),
                    )
                    runs[(s, mode)].append((wall, cpu))
    result = {"notes": a.notes, "chunks": chunks, "rounds": a.rounds, "queries": len(QUERIES)}
    for (s, mode), xs in runs.items():
        result[f"{s}_{mode}_wall_s"] = round(statistics.median(x[0] for x in xs), 3)
        result[f"{s}_{mode}_cpu_s"] = round(statistics.median(x[1] for x in xs), 3)
        result[f"{s}_{mode}_wall_p90_s"] = round(
            sorted(x[0] for x in xs)[int(0.9 * (len(xs) - 1))], 3
        )
    return result


def embed(a, work: Path, sides: dict[str, Path], data: Path) -> dict:
    import numpy as np

    from bench.gen_vault import generate

    vault = work / "vault"
    generate(vault, a.notes, seed=3)
    base = work / "base.db"
    keyword_index(vault, base, env_for(sides["B"], data))
    runs: dict[str, list] = {s: [] for s in sides}
    vectors: dict[str, dict] = {}
    generate(work / "warm-vault", 3, seed=9)
    for s, code in sides.items():  # warm: B's derived graph is built here
        warm = work / f"warm-{s}.db"
        keyword_index(work / "warm-vault", warm, env_for(code, data))
        timed(
            [sys.executable, "-m", "kbase", "--db", str(warm), "embed", "-q"], env_for(code, data)
        )
    for r in range(a.rounds):
        for s in list(sides) if r % 2 == 0 else list(reversed(sides)):
            db = work / f"run-{s}.db"
            for f in work.glob(f"run-{s}.db*"):
                f.unlink()
            shutil.copy(base, db)
            wall, cpu, out = timed(
                [sys.executable, "-m", "kbase", "--db", str(db), "embed", "-q"],
                env_for(sides[s], data),
            )
            runs[s].append((wall, cpu))
            print(f"round {r} {s}: {wall:.1f} s wall, {cpu:.1f} s CPU ({out.strip()})", flush=True)
            if r == 0:
                import apsw
                import sqlite_vec

                con = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
                con.enable_load_extension(True)
                con.load_extension(sqlite_vec.loadable_path())
                vectors[s] = dict(con.execute("SELECT rowid, embedding FROM chunks_vec").fetchall())
                n = len(vectors[s])
                con.close()
    ids = sorted(vectors["A"])
    va = np.stack([np.frombuffer(vectors["A"][i], dtype="<f4") for i in ids])
    vb = np.stack([np.frombuffer(vectors["B"][i], dtype="<f4") for i in ids])
    cos = (va * vb).sum(1)
    result = {
        "notes": a.notes,
        "chunks": n,
        "rounds": a.rounds,
        "cosine_A_B_min": round(float(cos.min()), 6),
        "cosine_A_B_mean": round(float(cos.mean()), 7),
    }
    for s, xs in runs.items():
        wall, cpu = statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)
        result[f"{s}_wall_s"], result[f"{s}_cpu_s"] = round(wall, 2), round(cpu, 2)
        result[f"{s}_passages_per_s"] = round(n / wall, 1)
        result[f"{s}_passages_per_cpu_s"] = round(n / cpu, 1)
        result[f"{s}_cpu_utilisation"] = round(statistics.median(x[1] / x[0] for x in xs), 2)
    result["B_over_A_wall"] = round(result["A_wall_s"] / result["B_wall_s"], 2)
    result["B_over_A_cpu"] = round(result["A_cpu_s"] / result["B_cpu_s"], 2)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["cli", "embed"])
    ap.add_argument(
        "--rev", default="1092f36", help="the base revision (A; default: kbase before issue 15)"
    )
    ap.add_argument("--notes", type=int, help="synthetic notes (default: cli 10000, embed 100)")
    ap.add_argument("--rounds", type=int, help="alternating rounds (default: cli 7, embed 3)")
    a = ap.parse_args()
    a.notes = a.notes or (10_000 if a.part == "cli" else 100)
    a.rounds = a.rounds or (7 if a.part == "cli" else 3)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sides = {"A": export_revision(a.rev, work / "A"), "B": REPO}
        data = work / "data"
        for code in sides.values():  # each side runs its own code
            _, _, where = timed(
                [sys.executable, "-c", "import kbase; print(kbase.__file__)"], env_for(code, data)
            )
            assert Path(where.strip()).is_relative_to(code), (code, where)
        t0, load0 = time.time(), os.getloadavg()
        result = (cli if a.part == "cli" else embed)(a, work, sides, data)
        result.update(
            rev_A=a.rev,
            rev_B=subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
            + " (+ working tree)",
            seconds=round(time.time() - t0),
            loadavg_before=load0,
            loadavg_after=os.getloadavg(),
        )
    print(json.dumps(result, indent=2))
    (OUT / f"speed-{a.part}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
