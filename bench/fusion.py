"""Fusion functions for hybrid search, side by side on SciFact and on the question sets (issue 12).

    python -m bench.fusion              # SciFact (bench/retrieval.py's cached index)
                                        # + question sets
    python -m bench.fusion --no-scifact # the question sets only
    python -m bench.fusion --no-questions  # SciFact only

The keyword and semantic document lists are computed once per query through kbase's own ranked
lists (keyword.keyword_ranked / semantic_ranked, length prior included); every fusion variant is
then a pure function of those lists, so the comparison is exact and cheap. SciFact gives nDCG@10;
the question sets give top-1 / top-3 / MRR@10 (document level, bench/questions.py's answers). A
constant is only worth shipping if it holds on both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace

import kbase
from bench import questions as qbench
from bench import retrieval
from kbase.search import (
    fusion,
    hits,
    keyword,
    semantic,
)
from kbase.search.fusion import rrf

DEPTH = 100
Lists = tuple[list[hits.Ranked], list[hits.Ranked]]


def rrf_fusion(
    k: float, floor: float = fusion.PARAMS.min_similarity, w_sem: float = 1.0
) -> Callable[[Lists], list[int]]:
    def fuse(lists: Lists) -> list[int]:
        kw, sem = lists
        sem = [r for r in sem if r.explain["similarity"] >= floor]
        fused = rrf(
            {"keyword": [r.doc_id for r in kw], "semantic": [r.doc_id for r in sem]},
            k=k,
            weights={"keyword": 1.0, "semantic": w_sem},
        )
        return [f.key for f in fused]

    return fuse


def score_fusion(
    alpha: float, floor: float = 0.0, tiers: bool = True, floor_alone: bool = False
) -> Callable[[Lists], list[int]]:
    """Convex combination of normalised scores (Bruch et al. 2023): keyword bm25 / the list's best,
    plus the tier as a step; cosine similarity min-max over the list. ``floor_alone``: the floor
    only keeps out notes that the keyword list does not hold."""

    def fuse(lists: Lists) -> list[int]:
        kw, sem = lists
        in_kw = {r.doc_id for r in kw} if floor_alone else set()
        sem = [r for r in sem if r.explain["similarity"] >= floor or r.doc_id in in_kw]
        out: dict[int, float] = {}
        if kw:
            top = max(r.score % 1 for r in kw) or 1.0
            for r in kw:
                out[r.doc_id] = (1 - alpha) * (
                    (r.score % 1) / top + (int(r.score) - 1 if tiers else 0)
                )
        if sem:
            hi, lo = sem[0].score, sem[-1].score
            for r in sem:
                out[r.doc_id] = out.get(r.doc_id, 0.0) + alpha * (
                    (r.score - lo) / (hi - lo) if hi > lo else 1.0
                )
        return sorted(out, key=lambda d: -out[d])

    return fuse


def spanned_fusion(
    alpha: float = fusion.PARAMS.alpha,
    second: float = fusion.PARAMS.second_passage,
    keyword_span: int = fusion.PARAMS.keyword_span,
    semantic_span: int = fusion.PARAMS.semantic_span,
    all_words_step: float = 0.0,
    floor: float = fusion.PARAMS.min_similarity,
) -> Callable[[Lists], list[int]]:
    """The shipped fusion (kbase.search.fusion.fuse), its constants as parameters: each list
    scaled between its best and its span-th best, a note's second passage as semantic evidence,
    name steps only (``all_words_step`` puts the old step for all words back)."""
    params = replace(
        fusion.PARAMS,
        alpha=alpha,
        second_passage=second,
        keyword_span=keyword_span,
        semantic_span=semantic_span,
        min_similarity=floor,
        name_steps=(*fusion.PARAMS.name_steps, ("all words", all_words_step)),
    )

    def fuse(lists: Lists) -> list[int]:
        return [f.key for f in fusion.fuse(lists[0], lists[1], params)]

    return fuse


VARIANTS: dict[str, Callable[[Lists], list[int]]] = {
    "keyword": lambda lists: [r.doc_id for r in lists[0]],
    "semantic": lambda lists: [r.doc_id for r in lists[1]],
    "rrf k=10 floor .3 (shipped before)": rrf_fusion(10),
    "rrf k=60 no floor (naive)": rrf_fusion(60, 0.0),
    "rrf k=10 no floor": rrf_fusion(10, 0.0),
    "rrf k=5 floor .3": rrf_fusion(5),
    "rrf k=20 floor .3": rrf_fusion(20),
    "rrf k=10 floor .3 w_sem 1.5": rrf_fusion(10, w_sem=1.5),
    **{f"score a={a}": score_fusion(a) for a in (0.3, 0.4, 0.5, 0.6, 0.7)},
    **{
        f"score a={a} floor .3 alone": score_fusion(a, 0.3, floor_alone=True)
        for a in (0.4, 0.5, 0.6)
    },
    **{f"score a={a} floor .3": score_fusion(a, 0.3) for a in (0.5, 0.6)},
    **{f"score a={a} no tiers": score_fusion(a, tiers=False) for a in (0.5, 0.6)},
    "spanned a=0.5 (shipped, issue 23)": spanned_fusion(),
    **{f"spanned a={a}": spanned_fusion(a) for a in (0.4, 0.6)},
    "spanned, no second passage": spanned_fusion(second=0.0),
    "spanned, whole-list min-max": spanned_fusion(keyword_span=10**6, semantic_span=10**6),
    "spanned, all-words step 2": spanned_fusion(all_words_step=2.0),
}


def scifact_lists() -> tuple[dict[str, Lists], dict, Callable[[int], str]]:
    db = retrieval.OUT / "index.db"
    if not db.exists():
        sys.exit(f"{db} is absent: run python -m bench.retrieval first")
    kb = kbase.open(db)
    con = kb.reader
    queries = {
        q["_id"]: q["text"] for q in map(json.loads, (retrieval.DATA / "queries.jsonl").open())
    }
    qrels = {q: r for q, r in retrieval.load_qrels().items() if q in queries}
    path_of = dict(con.execute("SELECT id, path FROM documents").fetchall())
    lists = {}
    for q in qrels:
        vector = kb.embedder.embed_query(queries[q])
        lists[q] = (
            keyword.keyword_ranked(con, queries[q], DEPTH),
            semantic.semantic_ranked(con, vector, DEPTH, cache=kb.vector_cache),
        )
    return lists, qrels, lambda doc_id: path_of[doc_id].rsplit(".", 1)[0]


def question_lists() -> dict[str, tuple[dict, dict[str, Lists], dict[int, str]]]:
    out = {}
    for path in qbench.question_files():
        qset = qbench.load_questions(path)
        kb = qbench.open_index(qset["vault"], qbench.newest_cached(qset["vault"]), False)
        con = kb.reader
        path_of = dict(con.execute("SELECT id, path FROM documents").fetchall())
        lists = {}
        for q in qset["questions"]:
            vector = kb.query_vector(q["question"])
            lists[q["id"]] = (
                keyword.keyword_ranked(con, q["question"], DEPTH),
                semantic.semantic_ranked(con, vector, DEPTH, cache=kb.vector_cache),
            )
        out[qset["vault"]] = (qset, lists, path_of)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-scifact", action="store_true")
    ap.add_argument("--no-questions", action="store_true")
    a = ap.parse_args()
    table: dict[str, dict] = {name: {} for name in VARIANTS}
    if not a.no_scifact:
        lists, qrels, did = scifact_lists()
        for name, fuse in VARIANTS.items():
            runs = {q: [did(d) for d in fuse(lists[q])] for q in qrels}
            table[name]["scifact ndcg@10"] = retrieval.evaluate(runs, qrels)["ndcg@10"]
    for vault, (qset, lists, path_of) in ({} if a.no_questions else question_lists()).items():
        for name, fuse in VARIANTS.items():
            ranks = [
                qbench.first_rank(
                    [path_of[d] for d in fuse(lists[q["id"]])][:10], set(q["answers"])
                )
                for q in qset["questions"]
            ]
            s = qbench.scores(ranks)
            table[name][f"{vault} top3"] = s["top3"]
            table[name][f"{vault} mrr"] = s["mrr10"]
    cols = list(next(iter(table.values())))
    print(f"{'variant':<36}" + "".join(f"{c:>26}" for c in cols))
    for name, row in table.items():
        print(f"{name:<36}" + "".join(f"{row[c]:>26}" for c in cols))
    for c in cols:
        best = max(table, key=lambda n: table[n][c])
        print(f"best {c}: {best} {table[best][c]}", file=sys.stderr)
    mean = {n: statistics.mean(v for c, v in row.items()) for n, row in table.items()}
    print(
        "mean over columns, best first:", sorted(mean, key=lambda n: -mean[n])[:5], file=sys.stderr
    )


if __name__ == "__main__":
    main()
