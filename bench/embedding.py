"""Embedding throughput and memory, and hybrid query latency at 100,000 chunks.

    python -m bench.embedding [--chunks 400] [--scale 100000]

1. Throughput: the same chunk texts embedded by the model directly (``embed_batch`` on all of
   them, batch 8, what kbase uses) and through ``kbase embed`` (reading chunks, reuse lookups,
   writing vec0 rows); the ratio should be within 10%. (bench/speed.py compares revisions.)
2. Peak memory of a ``kbase index`` process that embeds (ru_maxrss of the child).
3. Latency at scale: a synthetic vault indexed keyword-only until it has about ``--scale``
   chunks, then synthetic unit vectors for every chunk (the model would take hours here);
   keyword, semantic and hybrid queries in-process (p50/p95), with the in-memory vector matrix
   (what the TUI and the Python API use) and with sqlite-vec's own k-NN (what one-shot CLI
   commands use). Query embedding time with the real model is reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kbase
from bench.common import REPO
from kbase.embed import (
    embedder,
    vectors,
)
from kbase.ingest import embed_text
from kbase.search import (
    hybrid,
    keyword,
    semantic,
)
from kbase.store import db

KBASE = [sys.executable, "-m", "kbase"]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def throughput(n: int, work: Path) -> dict:
    from bench.gen_vault import generate

    vault = work / "tp-vault"
    generate(vault, max(20, n // 3), seed=3)
    kb = kbase.open(work / "tp.db")
    kb.index([vault], embed=False)
    con = kb.reader
    rows = con.execute(
        "SELECT d.title, c.heading_path,"
        " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
        " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.id LIMIT ?",
        (n,),
    ).fetchall()
    texts = [embed_text.embed_input(t, h, x) for t, h, x in rows]
    model = embedder.default_embedder()
    model.embed_batch(texts[:8])  # warm up
    t0 = time.perf_counter()
    model.embed_batch(texts)
    direct = time.perf_counter() - t0
    # kbase embeds exactly these chunks: drop the others so both sides see the same texts.
    w = db.connect(kb.path)
    w.execute(
        "DELETE FROM documents WHERE id NOT IN (SELECT doc_id FROM chunks WHERE id IN"
        " (SELECT id FROM chunks ORDER BY id LIMIT ?))",
        (n,),
    )
    w.execute(
        "DELETE FROM chunks WHERE id NOT IN (SELECT id FROM chunks ORDER BY id LIMIT ?)", (n,)
    )
    count = w.execute("SELECT count(*) FROM chunks").fetchone()[0]
    t0 = time.perf_counter()
    result = vectors.embed_missing(w, model)
    through = time.perf_counter() - t0
    return {
        "chunks": count,
        "direct_per_s": round(len(texts) / direct, 1),
        "kbase_per_s": round(result["embedded"] / through, 1),
        "kbase_vs_direct": round((result["embedded"] / through) / (len(texts) / direct), 3),
    }


def peak_memory(work: Path) -> dict:
    from bench.gen_vault import generate

    vault = work / "mem-vault"
    generate(vault, 60, seed=4)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run([*KBASE, "--db", str(work / "mem.db"), "index", "-q", str(vault)], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "notes": 60,
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(max(before, after) / 1024, 1),
    }


def fill_synthetic_vectors(con, seed: int = 7) -> int:
    """Give every chunk a random unit vector, recorded as the real model's (so queries embed with
    it); how many chunks. The model itself would take hours on a large synthetic vault."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors.ensure_vector_table(con, embedder.default_embedder())
    ids = [r for (r,) in con.execute("SELECT id FROM chunks ORDER BY id")]
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        vecs = rng.standard_normal((len(part), 384)).astype("<f4")
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with con:
            con.executemany(
                "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                [(i, v.tobytes()) for i, v in zip(part, vecs)],
            )
            con.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in part])
    return len(ids)


def scale(target_chunks: int, work: Path, queries: int) -> dict:
    from bench.gen_vault import generate

    path = work / "scale.db"
    notes = max(
        100, round(target_chunks / 5.4)
    )  # gen_vault's ~2 KB notes make about 5.4 chunks each
    vault = work / "scale-vault"
    generate(vault, notes, seed=5)
    kb = kbase.open(path)
    t0 = time.perf_counter()
    kb.index([vault], embed=False)
    index_s = time.perf_counter() - t0
    con = db.connect(path)
    n = fill_synthetic_vectors(con)
    words = [
        w
        for (w,) in con.execute(
            "SELECT term FROM (SELECT DISTINCT title AS term FROM documents) LIMIT ?", (queries,)
        )
    ]
    model = embedder.default_embedder()
    t0 = time.perf_counter()
    qvecs = [model.embed_query(w) for w in words]
    query_embed_ms = (time.perf_counter() - t0) / len(words) * 1000
    out = {
        "notes": notes,
        "chunks": n,
        "keyword_index_s": round(index_s, 1),
        "query_embedding_ms_mean": round(query_embed_ms, 2),
    }
    for label, cache in (("matrix", True), ("sqlite-vec", False)):
        k = kbase.open(path, embedder=model, cache_vectors=cache)
        k.search(words[0], mode="hybrid")  # load the matrix, warm the caches
        lat = {"keyword": [], "semantic": [], "hybrid": []}
        for w, v in zip(words, qvecs):
            con_r = k.reader
            t = time.perf_counter()
            keyword.keyword_search(con_r, w, limit=10)
            lat["keyword"].append(time.perf_counter() - t)
            t = time.perf_counter()
            semantic.semantic_search(con_r, v, limit=10, cache=k.vector_cache)
            lat["semantic"].append(time.perf_counter() - t)
            t = time.perf_counter()
            hybrid.hybrid_search(con_r, w, v, limit=10, cache=k.vector_cache)
            lat["hybrid"].append(time.perf_counter() - t)
            if not cache and len(lat["hybrid"]) >= 20:
                break  # sqlite-vec is slow at this size; 20 queries tell enough
        out[label] = {f"{m}_p50_ms": round(statistics.median(x) * 1000, 1) for m, x in lat.items()}
        out[label].update({f"{m}_p95_ms": round(pct(x, 0.95) * 1000, 1) for m, x in lat.items()})
        k.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=400, help="chunks for the throughput comparison")
    ap.add_argument(
        "--scale", type=int, default=100_000, help="chunks for the latency test (0: skip)"
    )
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "out" / "embedding.json")
    a = ap.parse_args()
    os.environ.setdefault("XDG_DATA_HOME", str(REPO / "bench" / "out" / "data"))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results["throughput"] = throughput(a.chunks, work)
        print(json.dumps(results["throughput"]), flush=True)
        results["memory"] = peak_memory(work)
        print(json.dumps(results["memory"]), flush=True)
        if a.scale:
            results["scale"] = scale(a.scale, work, a.queries)
            print(json.dumps(results["scale"], indent=2), flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
