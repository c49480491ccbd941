"""Chunking quality and throughput on real vaults and the synthetic one.

    python -m bench.chunking [--notes 2000] [--json bench/out/chunking.json]

For each vault: documents, chunks, mean and p95 tokens (MiniLM WordPiece), oversized chunks,
diagnostics by kind, and the structural checks the chunker promises: code fences and tables
never split, no heading-only chunk. Throughput is MB of Markdown per second for chunking alone
(token counting included, with a cold and a warm word cache) and for parse + chunk.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import REPO
from kbase.ingest.chunk import OVERSIZED, ChunkSettings, ModelTokenCounter, chunk
from kbase.ingest.parse import parse

SHARED = REPO.parent / "shared" / "data" / "vaults"


def load(folder: Path) -> list[tuple[str, str]]:
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.suffix in (".md", ".markdown", ".txt")
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    return [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in files]


def structural_problems(doc, chunks) -> Counter:
    bad: Counter = Counter()
    for blk in doc.blocks:
        if blk.kind in ("code", "table"):
            for c in chunks:
                if (
                    c.start < blk.end
                    and blk.start < c.end
                    and not (c.start <= blk.start and blk.end <= c.end)
                ):
                    bad[f"split_{blk.kind}"] += 1
    heads = [(b.start, b.end) for b in doc.blocks if b.kind == "heading"]
    last_content = max((b.end for b in doc.blocks if b.kind not in ("heading", "hr")), default=-1)
    for c in chunks:
        rest = doc.text[c.start : c.end]
        for a, b in heads:
            if c.start <= a and b <= c.end:
                rest = rest.replace(doc.text[a:b], "", 1)
        if not rest.strip() and c.start < last_content:
            bad["heading_only"] += 1
    return bad


def measure(name: str, files: list[tuple[str, str]]) -> dict:
    settings = ChunkSettings()
    mb = sum(len(t.encode("utf-8")) for _, t in files) / 1e6
    counter = ModelTokenCounter()
    docs = [parse(t, n) for n, t in files]
    t0 = time.perf_counter()
    results = [chunk(d, counter, settings) for d in docs]
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = [chunk(d, counter, settings) for d in docs]
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n, t in files:
        chunk(parse(t, n), counter, settings)
    both = time.perf_counter() - t0
    tokens = sorted(c.tokens for r in results for c in r.chunks)
    problems: Counter = Counter()
    diags: Counter = Counter()
    for d, r in zip(docs, results):
        problems += structural_problems(d, r.chunks)
        diags.update(x.kind for x in r.diagnostics)
    fences = sum(1 for d in docs for b in d.blocks if b.kind == "code")
    tables = sum(1 for d in docs for b in d.blocks if b.kind == "table")
    return {
        "vault": name,
        "documents": len(docs),
        "mb": round(mb, 2),
        "code_blocks": fences,
        "tables": tables,
        "chunks": len(tokens),
        "mean_tokens": round(statistics.mean(tokens), 1) if tokens else 0,
        "p95_tokens": tokens[int(0.95 * (len(tokens) - 1))] if tokens else 0,
        "oversized": sum(1 for r in results for c in r.chunks if c.flags & OVERSIZED),
        "split_code": problems["split_code"],
        "split_table": problems["split_table"],
        "heading_only": problems["heading_only"],
        "diagnostics": dict(diags),
        "chunk_mb_s_cold": round(mb / cold, 1),
        "chunk_mb_s_warm": round(mb / warm, 1),
        "parse_chunk_mb_s": round(mb / both, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=2000, help="synthetic vault size (0: skip it)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    rows = []
    for folder in sorted(SHARED.glob("*")) if SHARED.exists() else []:
        rows.append(measure(folder.name, load(folder)))
    if a.notes:
        from bench.gen_vault import generate

        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp), a.notes, seed=1)
            rows.append(measure(f"synthetic-{a.notes}", load(Path(tmp))))
    cols = [
        "vault",
        "documents",
        "mb",
        "code_blocks",
        "tables",
        "chunks",
        "mean_tokens",
        "p95_tokens",
        "oversized",
        "split_code",
        "split_table",
        "heading_only",
        "chunk_mb_s_cold",
        "chunk_mb_s_warm",
        "parse_chunk_mb_s",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    for r in rows:
        if r["diagnostics"]:
            print(f"{r['vault']}: diagnostics {r['diagnostics']}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
