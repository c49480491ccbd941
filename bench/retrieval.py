"""Retrieval quality on BEIR SciFact through kbase's own pipeline, and the ranking constants.

    python -m bench.retrieval               # build (once, cached in bench/out/scifact) and evaluate
    python -m bench.retrieval --tune        # also sweep fusion constants and print the grid

Each abstract becomes a note ``<id>.md`` ("# title" + abstract) and is indexed with
``kbase index`` (keyword index, chunking, embeddings). The 300 test queries run in keyword,
semantic and hybrid mode through the library (the same calls the CLI makes); nDCG@10 and
Recall@100 are computed against qrels/test.tsv. The per-query ranked lists are computed once, so
the fusion sweep (RRF k, list weights, fusion depth) is cheap.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import kbase
from bench.common import REPO
from kbase.search import (
    fusion,
    hybrid,
    keyword,
    semantic,
)
from kbase.search.fusion import RRF_K, rrf

DATA = REPO.parent / "shared" / "data" / "retrieval" / "scifact-beir"
OUT = REPO / "bench" / "out" / "scifact"
DEPTH = 100


def load_qrels() -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def build(rebuild: bool, model: str | None = None) -> Path:
    """The SciFact index (one per model: index.db, index-multilingual-e5-small.db, ...)."""
    name = "index.db" if model in (None, "all-MiniLM-L6-v2") else f"index-{model}.db"
    vault, db = OUT / "vault", OUT / name.replace("/", "_").replace(":", "_")
    if rebuild and db.exists():
        for f in OUT.glob(db.name + "*"):
            f.unlink()
    if not vault.exists():
        vault.mkdir(parents=True)
        for line in (DATA / "corpus.jsonl").open(encoding="utf-8"):
            d = json.loads(line)
            (vault / f"{d['_id']}.md").write_text(
                f"# {d['title'].strip()}\n\n{d['text'].strip()}\n", encoding="utf-8"
            )
    kb = kbase.open(db)
    t0 = time.perf_counter()
    report = kb.index([vault], embed=False)
    t1 = time.perf_counter()
    emb = kb.embed(
        model=model,
        progress=lambda done, total: (
            print(f"\rembedding {done}/{total}", end="", file=sys.stderr)
            if done % 400 < 8
            else None
        ),
    )
    print(file=sys.stderr)
    if report.new:
        print(
            f"indexed {report.new} abstracts in {t1 - t0:.1f} s; embedded {emb.embedded} chunks in "
            f"{emb.seconds:.0f} s ({emb.embedded / max(emb.seconds, 1e-9):.1f} chunks/s)"
        )
    return db


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(r / math.log2(i + 2) for i, r in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def recall100(ranked: list[str], rel: dict[str, int]) -> float:
    return len(set(ranked[:100]) & set(rel)) / len(rel)


def evaluate(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict:
    return {
        "ndcg@10": round(statistics.mean(ndcg10(runs[q], qrels[q]) for q in qrels), 4),
        "recall@100": round(statistics.mean(recall100(runs[q], qrels[q]) for q in qrels), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rebuild", action="store_true", help="index again from scratch")
    ap.add_argument("--tune", action="store_true", help="sweep the fusion constants")
    ap.add_argument("--json", type=Path, default=OUT.parent / "retrieval.json")
    ap.add_argument("--model", help="the embedding model (kbase index --model), default MiniLM")
    ap.add_argument("--db", type=Path, help="evaluate this index of the SciFact vault as it is")
    a = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"{DATA} is absent: the SciFact data lives in ../shared/data")
    db = a.db or build(a.rebuild, a.model)
    kb = kbase.open(db)
    con = kb.reader
    queries = {}
    for line in (DATA / "queries.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        queries[q["_id"]] = q["text"]
    qrels = load_qrels()
    qrels = {q: r for q, r in qrels.items() if q in queries}
    path_of = dict(con.execute("SELECT id, path FROM documents").fetchall())
    did = lambda doc_id: path_of[doc_id].rsplit(".", 1)[0]  # noqa: E731

    t0 = time.perf_counter()
    vectors = {q: kb.embedder.embed_query(queries[q]) for q in qrels}
    embed_ms = (time.perf_counter() - t0) / len(qrels) * 1000
    kw, sem, lat_kw, lat_sem = {}, {}, [], []
    # (keyword lists use the shipped BM25_WEIGHTS; --tune compares the alternatives)
    for q in qrels:
        t = time.perf_counter()
        kw[q] = keyword.keyword_ranked(con, queries[q], DEPTH)
        lat_kw.append(time.perf_counter() - t)
        t = time.perf_counter()
        sem[q] = semantic.semantic_ranked(con, vectors[q], DEPTH, cache=kb.vector_cache)
        lat_sem.append(time.perf_counter() - t)

    def fused(k=RRF_K, weights=None, depth=DEPTH) -> dict[str, list[str]]:
        # RRF, for comparison (no similarity floor: the sweep shows the fusion itself); the shipped
        # hybrid search fuses scores (kbase.search.fusion.convex; bench/fusion.py compares the two)
        w = weights or {"keyword": 1.0, "semantic": 1.0}
        return {
            q: [
                did(f.key)
                for f in rrf(
                    {
                        "keyword": [r.doc_id for r in kw[q][:depth]],
                        "semantic": [r.doc_id for r in sem[q][:depth]],
                    },
                    k=k,
                    weights=w,
                )
            ]
            for q in qrels
        }

    results = {
        "keyword": evaluate({q: [did(r.doc_id) for r in kw[q]] for q in qrels}, qrels),
        "semantic": evaluate({q: [did(r.doc_id) for r in sem[q]] for q in qrels}, qrels),
        "hybrid (rrf k=10)": evaluate(fused(), qrels),
    }
    # The shipped hybrid path end to end, to check the sweep's fusion is the one users get.
    params = fusion.params_for(kb.embedder)
    floor = params.min_similarity
    t = time.perf_counter()
    shipped = {
        q: [
            did(h.doc_id)
            for h in hybrid.hybrid_search(
                con, queries[q], vectors[q], limit=100, cache=kb.vector_cache, params=params
            )
        ]
        for q in qrels
    }
    lat_hybrid = (time.perf_counter() - t) / len(qrels)
    results["hybrid"] = evaluate(shipped, qrels)
    results["model"] = {"name": kb.model().name, "min_similarity": floor}
    if a.tune:  # the shipped fusion's similarity floor (model-specific: e5's cosines run high)
        results["hybrid_min_similarity"] = {
            str(f): evaluate(
                {
                    q: [
                        did(h.doc_id)
                        for h in hybrid.hybrid_search(
                            con, queries[q], vectors[q], limit=100, cache=kb.vector_cache,
                            params=replace(params, min_similarity=f),
                        )
                    ]
                    for q in qrels
                },
                qrels,
            )["ndcg@10"]
            for f in (0.0, 0.3, 0.75, 0.8, 0.82, 0.83, 0.84, 0.85)
        }  # fmt: skip
        print("hybrid nDCG@10 by floor:", results["hybrid_min_similarity"])
    results["latency_ms"] = {
        "keyword_p50": round(statistics.median(lat_kw) * 1000, 2),
        "semantic_p50": round(statistics.median(lat_sem) * 1000, 2),
        "hybrid_mean_incl_hits": round(lat_hybrid * 1000, 2),
        "query_embedding_mean": round(embed_ms, 2),
    }
    n_chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    results["corpus"] = {"documents": len(path_of), "chunks": n_chunks, "queries": len(qrels)}
    print(json.dumps(results, indent=2))

    if a.tune:
        saved = keyword.BM25_WEIGHTS
        results["bm25_weights"] = {}
        # (body, title, headings), chunks_fts's column order
        for weights in (
            (1.0, 10.0, 4.0),
            (1.0, 5.0, 1.0),
            (1.0, 2.0, 1.0),
            (1.0, 1.0, 1.0),
            (1.0, 1.0, 0.0),
        ):
            keyword.BM25_WEIGHTS = weights
            r = evaluate(
                {
                    q: [did(x.doc_id) for x in keyword.keyword_ranked(con, queries[q], DEPTH)]
                    for q in qrels
                },
                qrels,
            )
            results["bm25_weights"][str(weights)] = r
            print(f"bm25 weights {weights}: {r}")
        keyword.BM25_WEIGHTS = saved
        for floor in (0.0, 0.25, 0.3, 0.35):
            r = evaluate(
                {
                    q: [
                        did(f.key)
                        for f in rrf(
                            {
                                "keyword": [x.doc_id for x in kw[q]],
                                "semantic": [
                                    x.doc_id for x in sem[q] if x.explain["similarity"] >= floor
                                ],
                            },
                            k=RRF_K,
                        )
                    ]
                    for q in qrels
                },
                qrels,
            )
            print(f"semantic floor {floor}: {r}")
        grid = []
        for k in (1, 5, 10, 20, 30, 40, 60, 100):
            for ws in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
                for depth in (20, 50, 100):
                    r = evaluate(fused(k, {"keyword": 1.0, "semantic": ws}, depth), qrels)
                    grid.append({"k": k, "semantic_weight": ws, "depth": depth, **r})
        grid.sort(key=lambda r: -r["ndcg@10"])
        print("top of the fusion grid (k, semantic weight vs keyword 1.0, depth):")
        for r in grid[:15]:
            print(
                f"  k={r['k']:<4} w_sem={r['semantic_weight']:<5} depth={r['depth']:<4} "
                f"ndcg@10={r['ndcg@10']:.4f} recall@100={r['recall@100']:.4f}"
            )
        results["grid"] = grid
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
