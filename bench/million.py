"""One million chunks (issue 16 part 3): a synthetic index, search latency, memory and recall.

    python -m bench.million build [--chunks 1000000]  # once: vault, index, vectors, queries
    python -m bench.million run [--queries 100]        # in-process + CLI latency, RSS, recall@10
    python -m bench.million sizes                      # exact vs quantised time by index size

Everything is generated, cached under bench/out/million (gitignored):

- the text: bench/gen_vault.py notes (seed 11; 10,000 notes make 54,315 chunks, so about 18.4
  notes per 100 chunks), indexed with ``kb.index(..., embed=False)``; the ingest rate is measured
  here, at this scale;
- the vectors: computing 1M vectors with the model would take about 15 hours on this machine
  (section 10: 18.8 passages/s), so each chunk gets a perturbation of a *real* MiniLM vector: the
  SciFact chunks' vectors (bench/out/scifact/index.db, built by bench/retrieval.py; copied into
  memory, never modified) and, where present, the question-set indexes of bench/.cache. A chunk's
  vector is a point on the segment between a real vector and one of its 10 nearest real
  neighbours, plus isotropic noise, normalised: the clusters (topics) and the spread inside
  them are the real model's, at 60-80 times the density. Random Gaussian vectors would have no
  clusters, and would make quantised search look worse (or, with the noise scaled wrong, better)
  than it is on real notes;
- the queries: 100 SciFact test claims embedded with the real model (``embed_query``); their
  text (for the keyword side of hybrid) is a note title of the synthetic vault, as in section 5,
  since claims share almost no words with the synthetic vocabulary;
- the ground truth: exact float32 cosine over the same 1M vectors (numpy, blockwise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import kbase
from bench.common import REPO, export_revision
from kbase.embed import embedder
from kbase.embed import nearest as embed
from kbase.store import db

OUT = REPO / "bench" / "out" / "million"
SCIFACT = REPO / "bench" / "out" / "scifact" / "index.db"
QUESTION_INDEXES = REPO / "bench" / ".cache"
CLAIMS = REPO.parent / "shared" / "data" / "retrieval" / "scifact-beir"
CHUNKS_PER_NOTE = 54_315 / 10_000  # gen_vault's default notes, measured in BENCHMARKS.md section 1
SEED = 11
TRUTH_K = 100


def real_vectors():
    """Every real MiniLM vector at hand: (n, 384) float32, unit rows."""
    import numpy as np

    sources = [SCIFACT, *sorted(QUESTION_INDEXES.glob("*.db"))]
    parts = []
    for path in sources:
        if not path.exists():
            continue
        con = db.connect(path, readonly=True)
        try:
            if not embed.has_vectors(con):
                continue
            blob = b"".join(v for (v,) in con.execute("SELECT embedding FROM chunks_vec"))
        finally:
            con.close()
        parts.append(np.frombuffer(blob, dtype="<f4").reshape(-1, 384))
        print(f"real vectors: {len(parts[-1]):,} from {path.name}", file=sys.stderr)
    if not parts:
        sys.exit(f"no real vectors: run python -m bench.retrieval first (builds {SCIFACT})")
    return np.concatenate(parts)


def synthetic_vectors(real, n: int, seed: int = SEED, noise: float = 0.5):
    """``n`` unit vectors made from the real ones (see the module docstring), as a generator of
    float32 blocks."""
    import numpy as np

    rng = np.random.default_rng(seed)
    # each real vector's 10 nearest real neighbours (itself excluded)
    nbrs = np.empty((len(real), 10), dtype=np.int64)
    for s in range(0, len(real), 2048):
        sims = real[s : s + 2048] @ real.T
        for i in range(len(sims)):
            sims[i, s + i] = -2
        nbrs[s : s + 2048] = np.argpartition(-sims, 10, axis=1)[:, :10]
    block = 50_000
    for s in range(0, n, block):
        m = min(block, n - s)
        i = rng.integers(0, len(real), m)
        j = nbrs[i, rng.integers(0, 10, m)]
        t = rng.uniform(0, 0.5, (m, 1)).astype("<f4")
        v = real[i] * (1 - t) + real[j] * t
        v += rng.standard_normal((m, 384)).astype("<f4") * (noise / np.sqrt(384))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        yield v.astype("<f4")


def build(chunks: int, text_only: bool = False) -> None:
    import numpy as np

    from bench.gen_vault import generate

    OUT.mkdir(parents=True, exist_ok=True)
    notes = round(chunks / CHUNKS_PER_NOTE)
    vault, path = OUT / "vault", OUT / "index.db"
    facts = json.loads((OUT / "build.json").read_text()) if (OUT / "build.json").exists() else {}
    if not vault.exists():
        t0 = time.perf_counter()
        generate(vault.with_suffix(".tmp"), notes, seed=SEED)
        vault.with_suffix(".tmp").rename(vault)
        facts["generate_s"] = round(time.perf_counter() - t0, 1)
        print(f"vault: {notes:,} notes in {facts['generate_s']} s", file=sys.stderr)
    if "index_s" not in facts:
        for f in OUT.glob("index.db*"):
            f.unlink()
        kb = kbase.open(path)
        t0, c0 = time.perf_counter(), time.process_time()
        report = kb.index([vault], embed=False)
        facts.update(
            index_s=round(time.perf_counter() - t0, 1),
            index_cpu_s=round(time.process_time() - c0, 1),
            notes=report.new,
        )
        kb.close()
        print(f"keyword index: {facts}", file=sys.stderr)
        (OUT / "build.json").write_text(json.dumps(facts, indent=2))
    con = db.connect(path)
    if text_only:
        return
    if "vectors_s" not in facts:
        real = real_vectors()
        embed.ensure_vector_table(con, embedder.default_embedder())
        ids = np.array(
            [r for (r,) in con.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64
        )
        t0 = time.perf_counter()
        done = 0
        for block in synthetic_vectors(real, len(ids)):
            part = ids[done : done + len(block)]
            with con:
                con.executemany(
                    "INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                    [(i, v.tobytes()) for i, v in zip(part.tolist(), block)],
                )
                con.executemany(
                    "UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in part.tolist()]
                )
            done += len(block)
            print(f"\rvectors {done:,}/{len(ids):,}", end="", file=sys.stderr)
        print(file=sys.stderr)
        facts.update(
            chunks=int(len(ids)),
            real_vectors=int(len(real)),
            vectors_s=round(time.perf_counter() - t0, 1),
        )
        (OUT / "build.json").write_text(json.dumps(facts, indent=2))
    if not (OUT / "queries.npz").exists():
        make_queries(con)
    con.close()
    facts["db_bytes"] = path.stat().st_size
    (OUT / "build.json").write_text(json.dumps(facts, indent=2))
    print(json.dumps(facts, indent=2))


def all_vectors(con):
    """(ids, float32 matrix) of chunks_vec, in rowid order."""
    import numpy as np

    ids, blobs = [], []
    for rowid, v in con.execute("SELECT rowid, embedding FROM chunks_vec ORDER BY rowid"):
        ids.append(rowid)
        blobs.append(v)
    return np.array(ids, dtype=np.int64), np.frombuffer(b"".join(blobs), dtype="<f4").reshape(
        len(ids), -1
    )


def make_queries(con, n: int = 100) -> None:
    """Query vectors (SciFact claims, real model), query texts (titles), exact top TRUTH_K."""
    import numpy as np

    claims = [json.loads(line) for line in (CLAIMS / "queries.jsonl").open(encoding="utf-8")]
    test = {
        line.split("\t")[0] for line in (CLAIMS / "qrels" / "test.tsv").read_text().splitlines()[1:]
    }
    claims = [c["text"] for c in claims if c["_id"] in test][:n]
    model = embedder.default_embedder()
    model.embed_query(claims[0])
    t0 = time.perf_counter()
    qv = np.stack([np.frombuffer(model.embed_query(c), dtype="<f4") for c in claims])
    embed_ms = (time.perf_counter() - t0) / len(claims) * 1000
    titles = [t for (t,) in con.execute("SELECT title FROM documents ORDER BY id LIMIT ?", (n,))]
    ids, matrix = all_vectors(con)
    sims = np.empty((len(qv), len(ids)), dtype="<f4")
    for s in range(0, len(ids), 100_000):
        sims[:, s : s + 100_000] = qv @ matrix[s : s + 100_000].T
    top = np.argpartition(-sims, TRUTH_K, axis=1)[:, :TRUTH_K]
    order = np.take_along_axis(sims, top, 1).argsort(axis=1)[:, ::-1]
    top = np.take_along_axis(top, order, 1)
    np.savez(
        OUT / "queries.npz",
        vectors=qv,
        claims=np.array(claims),
        titles=np.array(titles),
        truth_ids=ids[top],
        truth_sims=np.take_along_axis(sims, top, 1),
        embed_ms=embed_ms,
    )
    print(f"queries: {len(qv)}, embedding {embed_ms:.1f} ms each", file=sys.stderr)


CHILD = r"""
import json, sys, time, statistics
sys.path.insert(0, sys.argv[1])
import numpy as np
import kbase

from kbase.embed import nearest

def rss():
    f = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    mb = lambda key: int(f[key].split()[0]) // 1024
    return {"rss_mb": mb("VmRSS"), "peak_mb": mb("VmHWM")}

db, qfile, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
q = np.load(qfile)
titles, qv, truth = [str(t) for t in q["titles"][:n]], q["vectors"][:n], q["truth_ids"][:n]
out = {"start": rss()}
kb = kbase.open(db)
t = time.perf_counter()
kb.search(titles[0], mode="hybrid")
out["first_query_s"] = round(time.perf_counter() - t, 2)
out["loaded"] = rss()
lat, emb, sem, kw, found10, found100 = [], [], [], [], [], []
con = kb.reader
for title, v in zip(titles, qv):
    t = time.perf_counter()
    kb.search(title, mode="hybrid")
    lat.append(time.perf_counter() - t)
    t = time.perf_counter()
    kb.search(title, mode="keyword")
    kw.append(time.perf_counter() - t)
    t = time.perf_counter()
    kb.query_vector(title)
    emb.append(time.perf_counter() - t)
    t = time.perf_counter()
    near = kb.vector_cache.nearest(con, v.tobytes(), 480)  # what hybrid asks for (k = 4 x 120)
    sem.append(time.perf_counter() - t)
    found10.append([c for c, _ in near[:10]])
    found100.append([c for c, _ in near[:100]])
ms = lambda xs, p=50: round(float(np.percentile(xs, p)) * 1000, 1)
recall = lambda found, k: round(float(np.mean([len(set(t[:k]) & set(f)) / k
                                                for t, f in zip(truth, found)])), 3)
out.update(hybrid_p50_ms=ms(lat), hybrid_p95_ms=ms(lat, 95), embed_p50_ms=ms(emb),
           hybrid_minus_embed_p50_ms=ms([a - b for a, b in zip(lat, emb)]), keyword_p50_ms=ms(kw),
           nearest480_p50_ms=ms(sem), nearest480_p95_ms=ms(sem, 95),
           recall10=recall(found10, 10), recall100=recall(found100, 100),
           quantized=bool(getattr(kb.vector_cache, "quantized", False)), after=rss())
print(json.dumps(out))
"""


def source_of(rev: str) -> Path:
    """A checkout of ``rev``'s kbase package (for the A side of an A/B run)."""
    dest = OUT / f"src-{rev}"
    if not dest.exists():
        export_revision(rev, dest, "kbase")
    return dest


def run(queries: int, rounds: int, base: str, cli_queries: int, only: str | None = None) -> dict:
    import subprocess

    import numpy as np

    from kbase.embed import nearest

    path = OUT / "index.db"
    con = db.connect(path)
    if not embed.has_codes(con):
        t0 = time.perf_counter()
        n = embed.rebuild_codes(con)
        print(
            f"codes: {n:,} made from chunks_vec in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
    q = np.load(OUT / "queries.npz")
    truth = q["truth_ids"][:queries]
    found = [
        [c for c, _ in nearest.nearest_oneshot(con, v.tobytes(), 10)]
        for v in q["vectors"][:queries]
    ]
    results = {
        "load": os.getloadavg(),
        "oneshot_recall10": round(
            float(np.mean([len(set(t[:10]) & set(f)) / 10 for t, f in zip(truth, found)])), 3
        ),
    }
    print(json.dumps(results), file=sys.stderr)
    con.close()
    sides = {"A": str(source_of(base)), "B": str(REPO)}
    for r in range(rounds if only != "cli" else 0):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    sides[side],
                    str(path),
                    str(OUT / "queries.npz"),
                    str(queries),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["load"] = os.getloadavg()[0]
            results.setdefault(f"process_{side}", []).append(res)
            print(side, json.dumps(res), file=sys.stderr)
    words = [str(t) for t in q["titles"][:cli_queries]]
    for r in range(rounds if only != "process" else 0):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            env = {**os.environ, "PYTHONPATH": sides[side]}
            walls = []
            for w in words:
                t0 = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "kbase", "--db", str(path), "search", *w.split()],
                    env=env,
                    cwd=OUT,  # not the repository: python -m puts the working folder first
                    capture_output=True,
                    check=True,
                )
                walls.append(time.perf_counter() - t0)
            results.setdefault(f"cli_{side}", []).extend(walls)
            print(side, "cli", [round(x, 3) for x in walls], file=sys.stderr)
    for side in "AB" if only != "process" else "":
        walls = results.pop(f"cli_{side}")
        results[f"cli_{side}_p50_s"] = round(float(np.median(walls)), 3)
        results[f"cli_{side}_p90_s"] = round(float(np.percentile(walls, 90)), 3)
    results["load_end"] = os.getloadavg()
    return results


def sizes(queries: int = 50) -> dict:
    """Where quantised search starts to pay (vectors.QUANTIZE_FROM): per-query time of the exact
    float32 product and of the quantised pipeline (Hamming, cut, int8 ranking; the exact
    rescoring of RESCORE chunks adds a fixed ~10 ms) over the first N vectors, alternating."""
    import statistics

    import numpy as np

    from kbase.embed import nearest

    con = db.connect(OUT / "index.db", readonly=True)
    _, matrix = all_vectors(con)
    con.close()
    qv = np.load(OUT / "queries.npz")["vectors"][:queries]
    out = {}
    for n in (50_000, 100_000, 200_000, 400_000, len(matrix)):
        m = np.ascontiguousarray(matrix[:n])
        scale = np.abs(m).max(axis=0) / 127
        small = np.clip(np.rint(m / scale), -127, 127).astype(np.int8)
        words = nearest.code_columns(nearest.sign_codes(m))
        exact, quant = [], []
        for q in qv:
            t = time.perf_counter()
            sims = m @ q
            np.argpartition(-sims, 480)[:480]
            exact.append(time.perf_counter() - t)
            t = time.perf_counter()
            rows = nearest._nearest_codes(
                nearest.hamming(words, nearest.sign_codes(q[None, :])[0]), nearest.SHORTLIST
            )
            s = small[rows].astype("<f4") @ (q * scale)
            np.argpartition(-s, 480)[:480]
            quant.append(time.perf_counter() - t)
        out[n] = {
            "exact_ms": round(statistics.median(exact) * 1000, 1),
            "quantised_ms_without_rescoring": round(statistics.median(quant) * 1000, 1),
            "exact_matrix_mb": round(m.nbytes / 2**20),
            "quantised_mb": round((small.nbytes + words.nbytes) / 2**20),
        }
        print(n, out[n], file=sys.stderr)
        del m, small, words
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--chunks", type=int, default=1_000_000)
    b.add_argument("--text-only", action="store_true", help="stop after the keyword index")
    r = sub.add_parser("run")
    r.add_argument("--queries", type=int, default=100)
    r.add_argument("--rounds", type=int, default=2, help="A/B rounds, alternating the order")
    r.add_argument("--base", default="main", help="the A side: a git revision (today's code)")
    r.add_argument("--cli-queries", type=int, default=10)
    r.add_argument("--only", choices=("process", "cli"), help="only the in-process or the CLI part")
    sub.add_parser("sizes", help="exact vs quantised search time by index size")
    a = ap.parse_args()
    os.environ.setdefault("XDG_DATA_HOME", str(REPO / "bench" / "out" / "data"))
    if a.cmd == "build":
        build(a.chunks, a.text_only)
    elif a.cmd == "sizes":
        (OUT / "sizes.json").write_text(json.dumps(sizes(), indent=2))
    else:
        res = run(a.queries, a.rounds, a.base, a.cli_queries, a.only)
        (OUT / f"run{'-' + a.only if a.only else ''}.json").write_text(json.dumps(res, indent=2))
        print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
