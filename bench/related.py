"""How well kbase related finds the notes a note is linked with, against its keyword fallback.

    python -m bench.related INDEX.db [INDEX.db ...] [-k 10]

Ground truth: the notes a note is linked with (it links to them or they link to it), the
neighbours its author chose. For every note with at least one such neighbour, each method ranks
all other notes (linked ones included) and we report Recall@k (the share of a note's neighbours in
its top k), MRR (the reciprocal rank of the first neighbour) and nDCG@k, averaged over notes; plus
the keyword fallback (the note's distinctive terms through bm25) for reference, and the time per
note. The indexes must have embeddings (kbase index without --no-embed). Three other ways of
comparing notes were measured with this script and dropped (BENCHMARKS.md, "Related notes").
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import kbase
from kbase.notes import related as rel
from kbase.notes.graph import Note


def neighbours(kb) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for s, t in kb.reader.execute(
        "SELECT DISTINCT l.doc_id, l.target_id"
        " FROM links l JOIN documents d ON d.id = l.target_id"
        " WHERE l.target_id IS NOT NULL AND l.target_id <> l.doc_id AND d.kind = 'markdown'"
    ):
        out.setdefault(s, set()).add(t)
        out.setdefault(t, set()).add(s)
    return out


def metrics(ranked: list[int], relevant: set[int], k: int) -> tuple[float, float, float]:
    top = ranked[:k]
    recall = len(relevant.intersection(top)) / len(relevant)
    mrr = next((1 / i for i, d in enumerate(ranked, 1) if d in relevant), 0.0)
    dcg = sum(1 / math.log2(i + 1) for i, d in enumerate(top, 1) if d in relevant)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(k, len(relevant)) + 1))
    return recall, mrr, dcg / ideal


def evaluate(db: str, k: int) -> list[dict]:
    kb = kbase.open(db)
    truth = neighbours(kb)
    notes = {i: p for i, p in kb.reader.execute("SELECT id, path FROM documents")}
    rows = []
    for name in ("mean", "keyword"):
        scores, seconds = [], []
        for doc_id, relevant in sorted(truth.items()):
            note = Note(doc_id, notes[doc_id], "")
            t0 = time.perf_counter()
            if name == "keyword":
                _, ranked = kb._read(rel.by_keywords, note.id, {note.id}, 100)
                ids = [r[0] for r in ranked]
            else:
                ranked = kb._read(rel.by_vectors, note.id, kb.vector_cache, {note.id}, 100)
                ids = [r[0] for r in ranked or []]
            seconds.append(time.perf_counter() - t0)
            scores.append(metrics(ids, relevant, k))
        rows.append(
            {
                "vault": Path(db).stem,
                "method": name,
                "notes": len(scores),
                f"recall@{k}": statistics.fmean(s[0] for s in scores),
                "mrr": statistics.fmean(s[1] for s in scores),
                f"ndcg@{k}": statistics.fmean(s[2] for s in scores),
                "ms": 1000 * statistics.median(seconds),
            }
        )
    kb.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("dbs", nargs="+")
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()
    print(f"| vault | method | notes | Recall@{args.k} | MRR | nDCG@{args.k} | ms/note (p50) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for db in args.dbs:
        for r in evaluate(db, args.k):
            print(
                f"| {r['vault']} | {r['method']} | {r['notes']} | {r[f'recall@{args.k}']:.3f}"
                f" | {r['mrr']:.3f}"
                f" | {r[f'ndcg@{args.k}']:.3f} | {r['ms']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
