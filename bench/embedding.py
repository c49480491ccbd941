"""Embedding throughput and memory, and hybrid query latency at 100,000 chunks.

    python -m bench.embedding [--chunks 400] [--scale 100000]
    python -m bench.embedding --parts limit [--notes 60] [--rounds 2] [--base REV]   # issue 36

0. The limit (``--parts limit``, issue 36): real chunks (the first ``--notes`` notes, spread over
   the shared vaults obsidian-tasks-docs, foam-docs and rust-book; synthetic ones without them),
   embedded by every way of running this model file worth trying, alternating round by round
   (the order reversed every other round), CPU seconds (every thread and child) beside wall:
   plain fastembed on the same model file (its defaults); the int8 file as fastembed loads it
   (ORT_ENABLE_ALL) under kbase's batching; kbase's derived graph without and with the GELU
   fusion (graph versions 1 and 2); batch 4 / 8 / 16 / 32; sorted by token length over the whole
   job, within windows of 256 (what the pipeline sees) or not at all (the padding cost); one
   process with two onnxruntime threads against two Python threads each running a one-thread
   session, and two processes of one thread; dynamic int8 quantisation of the matrix products
   with the model's own int8 weights (VNNI/AMX kernels; rejected below cosine 0.999). Then
   kbase's own pipeline on the same chunks: ``kbase embed`` on the keyword-only index, and
   ``kbase index`` of the vault from nothing (reading, parsing, writing and embedding), as
   processes (and, with ``--base REV``, ``kbase embed`` as committed at REV). Each row:
   chunks/s by wall, CPU ms a chunk, padding share, lowest cosine against the int8 file's
   vectors (today's). The limit is the fastest row with cosine >= 0.999.
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


# --- issue 36: the limit, and kbase's pipeline against it -----------------------------------------
SHARED = REPO.parent / "shared" / "data" / "vaults"
REAL_VAULTS = ("obsidian-tasks-docs", "foam-docs", "rust-book")
WINDOW_ORDER = 256  # kbase.embed.vectors.WINDOW when this was written


def real_vault(into: Path, notes: int) -> Path:
    """The first ``notes`` Markdown files (by path) of the shared vaults, taken in turn; a
    synthetic vault when they are absent."""
    import shutil

    from bench.gen_vault import generate

    sources = [SHARED / v for v in REAL_VAULTS if (SHARED / v).is_dir()]
    if not sources:
        generate(into, notes, seed=3)
        return into
    files = [sorted(s.rglob("*.md")) for s in sources]
    taken = 0
    for i in range(max(len(f) for f in files)):
        for src, fs in zip(sources, files):
            if i < len(fs) and taken < notes:
                dst = into / src.name / fs[i].relative_to(src)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fs[i], dst)
                taken += 1
    return into


def pipeline_texts(db_path: Path) -> list[str]:
    """The embedder inputs of every chunk, in the order ``kbase embed`` takes them."""
    con = db.connect(db_path)
    rows = con.execute(
        "SELECT d.title, c.heading_path,"
        " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
        " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
        " ORDER BY d.mtime_ns DESC, c.doc_id, c.seq"
    ).fetchall()
    con.close()
    return [embed_text.embed_input(t, h, x) for t, h, x in rows]


def graph_v1(work: Path) -> Path:
    """kbase's derived graph as graph version 1 made it (no GELU fusion), for the comparison."""
    import onnxruntime as ort

    from kbase.embed import onnx_graph

    out = work / "graph-v1"
    out.mkdir(exist_ok=True)
    source = onnx_graph.source_model(embedder.MODEL_SHA256)
    onnx_graph.optimise(source, out / "folded.onnx", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    onnx_graph._fuse_attention(out / "folded.onnx", out / "fused.onnx")
    onnx_graph.optimise(
        out / "fused.onnx", out / "model.onnx", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    )
    return out / "model.onnx"


def graph_int8(graph: Path, work: Path) -> Path:
    """``graph`` with each weight matrix product (out-projection, both feed-forward ones; the
    query/key/value product stays inside the fused Attention) run as DynamicQuantizeMatMul on
    the model file's own int8 weights and per-column scales: activations quantised per tensor
    at run time, integer products on the CPU's VNNI/AMX kernels."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from kbase.embed import onnx_graph

    source = onnx.load(str(onnx_graph.source_model(embedder.MODEL_SHA256)))
    quantised = {t.name: numpy_helper.to_array(t) for t in source.graph.initializer}
    model = onnx.load(str(graph))
    g = model.graph
    nodes, added = [], []
    for n in g.node:
        w = n.input[1] if n.op_type == "MatMul" else ""
        if w + "_q" in quantised:
            scale = quantised[w + "_scale"].reshape(-1).astype(np.float32)
            added += [
                numpy_helper.from_array(quantised[w + "_q"], w + "_q"),
                numpy_helper.from_array(scale, w + "_s"),
            ]
            n = helper.make_node(
                "DynamicQuantizeMatMul",
                [n.input[0], w + "_q", w + "_s"],
                list(n.output),
                domain="com.microsoft",
            )
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    live = [t for t in g.initializer if t.name in used] + added
    del g.initializer[:]
    g.initializer.extend(live)
    out = work / "graph-int8" / "model.onnx"
    out.parent.mkdir(exist_ok=True)
    onnx.save_model(
        model,
        str(out),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="model.onnx.data",
        size_threshold=1024,
    )
    return out


def fastembed_folder(work: Path) -> Path:
    """The model file and kbase's tokenizer files in one folder, as fastembed loads a model."""
    from kbase.embed import onnx_graph

    folder = work / "fastembed-model"
    folder.mkdir(exist_ok=True)
    (folder / "model.onnx").symlink_to(onnx_graph.source_model(embedder.MODEL_SHA256))
    for f in onnx_graph.TOKENIZER_DIR.iterdir():
        if f.suffix == ".json":
            (folder / f.name).symlink_to(f)
    return folder


def _session_for(graph: Path, threads: int, level: str = "disable"):
    import onnxruntime as ort

    from kbase.embed import onnx_graph

    if level == "disable":
        return onnx_graph.session(graph, threads=threads)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])


def _batches(lengths: list[int], batch: int, order: str) -> list[list[int]]:
    n = len(lengths)
    if order == "job":
        idx = sorted(range(n), key=lengths.__getitem__)
    elif order == "window":
        idx = []
        for w in range(0, n, WINDOW_ORDER):
            idx += sorted(range(w, min(n, w + WINDOW_ORDER)), key=lengths.__getitem__)
    else:
        idx = list(range(n))
    return [idx[i : i + batch] for i in range(0, n, batch)]


def _run_graph(session, texts, batch, order, workers=1):
    """Vectors of ``texts`` (tokenised as kbase does) in their order, and the padding share."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from kbase.embed.embedder import _vectors

    tok = embedder.default_embedder().tokenizer
    enc = tok.encode_batch([embedder.well_formed(t) for t in texts])
    lengths = [sum(e.attention_mask) for e in enc]
    parts = _batches(lengths, batch, order)
    padded = sum(len(p) * max(lengths[i] for i in p) for p in parts)
    out: list = [None] * len(texts)

    def one(part):
        for i, v in zip(part, _vectors(session, [enc[i] for i in part])):
            out[i] = v

    if workers == 1:
        for p in parts:
            one(p)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, parts))
    return np.stack(out), 1 - sum(lengths) / padded


def _process_worker_init(graph: str) -> None:
    global _WORKER_SESSION
    _WORKER_SESSION = _session_for(Path(graph), 1)


def _process_worker(texts: list[str]):
    from kbase.embed.embedder import _vectors

    tok = embedder.default_embedder().tokenizer
    return _vectors(_WORKER_SESSION, tok.encode_batch(texts))


def _run_processes(graph: Path, texts, batch):
    """Two processes of one onnxruntime thread each, fed sorted batches (started, and their
    CPU counted, within the measurement)."""
    import multiprocessing

    import numpy as np

    tok = embedder.default_embedder().tokenizer
    lengths = [sum(e.attention_mask) for e in tok.encode_batch(texts)]
    parts = _batches(lengths, batch, "job")
    ctx = multiprocessing.get_context("spawn")
    out: list = [None] * len(texts)
    with ctx.Pool(2, initializer=_process_worker_init, initargs=(str(graph),)) as pool:
        for part, vecs in zip(
            parts, pool.imap(_process_worker, [[texts[i] for i in p] for p in parts])
        ):
            for i, v in zip(part, vecs):
                out[i] = v
        pool.close()
        pool.join()
    return np.stack(out), None


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def limit(
    notes: int, rounds: int, work: Path, only: list[str] | None, base: str | None = None
) -> dict:
    """Every way of running the model (see the module's doc), alternating; then the pipeline."""

    import numpy as np

    from kbase.embed import onnx_graph

    vault = real_vault(work / "limit-vault", notes)
    base_db = work / "limit-keyword.db"
    subprocess.run(
        [*KBASE, "--db", str(base_db), "index", "-q", "--no-embed", str(vault)], check=True
    )
    texts = pipeline_texts(base_db)
    model = embedder.default_embedder()
    v2 = onnx_graph.derived_graph(embedder.MODEL_SHA256, embedder.model_cache_dir())
    v1 = graph_v1(work)
    int8_file = onnx_graph.source_model(embedder.MODEL_SHA256)
    int8_dyn = graph_int8(v2, work)
    sessions: dict = {}

    def graph_run(graph, threads, batch, order, workers=1, level="disable"):
        def run():
            key = (graph, threads, level)
            if key not in sessions:
                sessions[key] = _session_for(graph, threads, level)
            return _run_graph(sessions[key], texts, batch, order, workers)

        return run

    def fastembed_run():
        from fastembed import TextEmbedding

        if "fastembed" not in sessions:
            sessions["fastembed"] = TextEmbedding(
                "sentence-transformers/all-MiniLM-L6-v2",
                specific_model_path=str(fastembed_folder(work)),
            )
        vecs = np.array(list(sessions["fastembed"].embed(texts)), dtype=np.float64)
        return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype("<f4"), None

    configs = {
        "fastembed, plain (its defaults: batch 256, onnxruntime's threads)": fastembed_run,
        "int8 file as fastembed loads it, batch 8 sorted, 2 threads": graph_run(
            int8_file, 2, 8, "job", level="all"
        ),
        "graph v1 (today), batch 8 in windows of 256, 2 threads": graph_run(v1, 2, 8, "window"),
        "graph v2 (GELU fused), batch 8 in windows of 256, 2 threads": graph_run(
            v2, 2, 8, "window"
        ),
        "graph v2, batch 8 unsorted, 2 threads": graph_run(v2, 2, 8, "none"),
        "graph v2, batch 8 sorted over the job, 2 threads": graph_run(v2, 2, 8, "job"),
        "graph v2, batch 4 sorted, 2 threads": graph_run(v2, 2, 4, "job"),
        "graph v2, batch 16 sorted, 2 threads": graph_run(v2, 2, 16, "job"),
        "graph v2, batch 32 sorted, 2 threads": graph_run(v2, 2, 32, "job"),
        "graph v2, batch 2 sorted, 2 Python threads x 1-thread session": graph_run(
            v2, 1, 2, "job", workers=2
        ),
        "graph v2, batch 4 sorted, 2 Python threads x 1-thread session": graph_run(
            v2, 1, 4, "job", workers=2
        ),
        "graph v2, batch 8 sorted, 2 Python threads x 1-thread session": graph_run(
            v2, 1, 8, "job", workers=2
        ),
        "graph v2, batch 16 sorted, 2 Python threads x 1-thread session": graph_run(
            v2, 1, 16, "job", workers=2
        ),
        "graph v2, batch 8 sorted, 2 processes x 1 thread": lambda: _run_processes(v2, texts, 8),
        "graph v2, batch 8 sorted, 1 thread (CPU a chunk without threading)": graph_run(
            v2, 1, 8, "job"
        ),
        "int8 products (DynamicQuantizeMatMul), batch 8 sorted, 2 threads": graph_run(
            int8_dyn, 2, 8, "job"
        ),
    }
    if only:
        configs = {k: f for k, f in configs.items() if any(o in k for o in only)}
    reference, _ = graph_run(int8_file, 1, 8, "job", level="all")()  # today's vectors
    # kbase's own pipeline, as processes on the same chunks, with a bytecode cache as an
    # installed kbase has (this machine sets PYTHONDONTWRITEBYTECODE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(REPO / "bench" / "out" / "pycache")

    def kbase_embed(code: Path = REPO):
        def run():
            target = work / "limit-embed.db"
            shutil_copy(base_db, target)
            subprocess.run(
                [*KBASE, "--db", str(target), "embed", "-q"],
                check=True,
                env={**env, "PYTHONPATH": str(code)},
                cwd=code,
            )
            return stored_vectors(target, texts), None

        return run

    def kbase_index():
        target = work / "limit-index.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(target) + suffix).unlink(missing_ok=True)
        subprocess.run(
            [*KBASE, "--db", str(target), "index", "-q", str(vault)], check=True, env=env
        )
        return stored_vectors(target, texts), None

    configs["kbase embed (process: the keyword-only index)"] = kbase_embed()
    if base:  # the same, as committed at ``base``
        from bench.common import export_revision

        code = export_revision(base, work / "base", "kbase", "schema.sql")
        configs[f"kbase embed at {base} (process: the keyword-only index)"] = kbase_embed(code)
    configs["kbase index (process: the vault from nothing, with embedding)"] = kbase_index
    model.embed_batch(texts[:8])  # the derived graph built, caches warm
    warm = work / "warm-vault"
    warm.mkdir()
    (warm / "warm.md").write_text("# Warm up\n\nFills the bytecode cache.\n")
    for code in dict.fromkeys([REPO, work / "base" if base else REPO]):
        subprocess.run(
            [*KBASE, "--db", str(work / f"warm-{code.name}.db"), "index", "-q", str(warm)],
            check=True,
            env={**env, "PYTHONPATH": str(code)},
            cwd=code,
        )
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in configs}
    cosines: dict[str, float] = {}
    padding: dict[str, float | None] = {}
    names = list(configs)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            c0, k0, w0 = time.process_time(), _children_cpu(), time.perf_counter()
            vecs, pad = configs[name]()
            wall = time.perf_counter() - w0
            cpu = time.process_time() - c0 + _children_cpu() - k0
            times[name].append((wall, cpu))
            cosines[name] = float((vecs * reference).sum(axis=1).min())
            padding[name] = pad
            print(f"  round {r + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    n = len(texts)
    rows = {}
    for name, ts in times.items():
        wall = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        rows[name] = {
            "chunks_per_s": round(n / wall, 2),
            "cpu_ms_per_chunk": round(cpu / n * 1000, 1),
            "padding": None if padding[name] is None else round(padding[name], 3),
            "min_cosine": round(cosines[name], 6),
        }
    faithful = {
        k: v for k, v in rows.items() if v["min_cosine"] >= 0.999 and not k.startswith("kbase ")
    }
    best = max(faithful, key=lambda k: faithful[k]["chunks_per_s"]) if faithful else None
    fe = next((v for k, v in rows.items() if k.startswith("fastembed")), None)
    summary = {
        "notes": notes,
        "chunks": n,
        "tokens_mean": round(
            statistics.mean(sum(e.attention_mask) for e in model.tokenizer.encode_batch(texts)), 1
        ),
        "rounds": rounds,
        "load_before_after": LOAD[:1] + [round(x, 1) for x in os.getloadavg()],
        "limit": best,
    }
    for k in (
        "kbase embed (process: the keyword-only index)",
        "kbase index (process: the vault from nothing, with embedding)",
    ):
        if best and k in rows:
            summary[k.split(" (")[0] + " / limit"] = round(
                rows[k]["chunks_per_s"] / rows[best]["chunks_per_s"], 3
            )
            summary[k.split(" (")[0] + " / limit, by CPU a chunk"] = round(
                rows[best]["cpu_ms_per_chunk"] / rows[k]["cpu_ms_per_chunk"], 3
            )
            if fe:
                summary[k.split(" (")[0] + " / fastembed"] = round(
                    rows[k]["chunks_per_s"] / fe["chunks_per_s"], 2
                )
                summary[k.split(" (")[0] + " / fastembed, by CPU a chunk"] = round(
                    fe["cpu_ms_per_chunk"] / rows[k]["cpu_ms_per_chunk"], 2
                )
    return {"summary": summary, "rows": rows}


LOAD: list = []


def shutil_copy(src: Path, dst: Path) -> None:
    import shutil

    for suffix in ("", "-wal", "-shm"):
        Path(str(dst) + suffix).unlink(missing_ok=True)
    con = db.connect(src)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    shutil.copyfile(src, dst)


def stored_vectors(path: Path, texts: list[str]):
    """The stored vector of each text (by the chunk it came from), in ``texts``' order."""
    import numpy as np

    con = db.connect(path)
    rows = con.execute(
        "SELECT d.title, c.heading_path,"
        " substr(d.body, c.start_char + 1, c.end_char - c.start_char), v.embedding"
        " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
        " JOIN chunks_vec AS v ON v.rowid = c.id"
    ).fetchall()
    con.close()
    by_text = {embed_text.embed_input(t, h, x): v for t, h, x, v in rows}
    return np.stack([np.frombuffer(by_text[t], dtype="<f4") for t in texts])


def print_limit(result: dict) -> None:
    print(json.dumps(result["summary"], indent=2))
    print("| way of running it | chunks/s (wall) | CPU ms a chunk | padding | lowest cosine |")
    print("|---|---:|---:|---:|---:|")
    for name, r in result["rows"].items():
        pad = "" if r["padding"] is None else f"{r['padding']:.0%}"
        cells = [name, r["chunks_per_s"], r["cpu_ms_per_chunk"], pad, f"{r['min_cosine']:.6f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--parts",
        default="throughput,memory,scale",
        help="comma-separated: limit (issue 36), throughput, memory, scale",
    )
    ap.add_argument("--chunks", type=int, default=400, help="chunks for the throughput comparison")
    ap.add_argument(
        "--scale", type=int, default=100_000, help="chunks for the latency test (0: skip)"
    )
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--notes", type=int, default=60, help="limit: real notes to embed")
    ap.add_argument("--rounds", type=int, default=2, help="limit: alternating rounds")
    ap.add_argument(
        "--only", action="append", help="limit: only the rows whose name has this (repeatable)"
    )
    ap.add_argument("--base", help="limit: also time `kbase embed` as committed at this revision")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "out" / "embedding.json")
    a = ap.parse_args()
    parts = a.parts.split(",")
    os.environ.setdefault("XDG_DATA_HOME", str(REPO / "bench" / "out" / "data"))
    LOAD.append(round(os.getloadavg()[0], 1))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "limit" in parts:
            results["limit"] = limit(a.notes, a.rounds, work, a.only, a.base)
            print_limit(results["limit"])
        if "throughput" in parts:
            results["throughput"] = throughput(a.chunks, work)
            print(json.dumps(results["throughput"]), flush=True)
        if "memory" in parts:
            results["memory"] = peak_memory(work)
            print(json.dumps(results["memory"]), flush=True)
        if "scale" in parts and a.scale:
            results["scale"] = scale(a.scale, work, a.queries)
            print(json.dumps(results["scale"], indent=2), flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
