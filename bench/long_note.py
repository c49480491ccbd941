"""Does one giant list note top unrelated queries? (issue 12, "long notes")

    python -m bench.long_note

A 3,000-line list note is generated from the lines of the other shared vaults (list items, links,
sentences: what an "everything I read" or "index" note looks like) and indexed, as a second root,
into a copy of bench/questions.py's cached index of that vault. Every question of the vault's
question set then runs in each mode, for several length priors side by side: how often the list
note is in the top 5 (it answers none of them), and the questions' top-3 and MRR@10.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import kbase
from bench import questions as qbench
from kbase.search import (
    hits,
    keyword,
    semantic,
)

LINES = 3000
PRIORS = {  # (keyword bm25 per log unit, semantic cosine per log unit, chunks free of it)
    "none": (0.0, 0.0, 1),
    "0.5 / 0.01 from 1 chunk": (0.5, 0.01, 1),
    "0.5 / 0.01 from 32 chunks (shipped)": (0.5, 0.01, 32),
    "1.0 / 0.02 from 32 chunks": (1.0, 0.02, 32),
}


def list_note(vaults: list[Path], seed: int = 1) -> str:
    """3,000 list items drawn from the lines of ``vaults`` (other vaults than the one searched: the
    note must answer none of the questions, while sharing their everyday words)."""
    lines = [
        ln.strip()
        for v in vaults
        for p in sorted(v.rglob("*.md"))
        for ln in p.read_text(encoding="utf-8").splitlines()
        if len(ln.strip()) > 20 and not ln.lstrip().startswith(("#", "```", "|", ">", "---"))
    ]
    rng = random.Random(seed)
    return (
        "# Everything\n\n"
        + "\n".join("- " + rng.choice(lines).lstrip("-*+ ") for _ in range(LINES))
        + "\n"
    )


def main() -> None:
    for path in qbench.question_files():
        qset = qbench.load_questions(path)
        cached = qbench.open_index(qset["vault"], qbench.newest_cached(qset["vault"]), False).path
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "index.db"
            shutil.copy(cached, db)
            extra = Path(tmp) / "lists"
            extra.mkdir()
            others = [
                qbench.vault_folder(v)
                for v in ("foam-docs", "obsidian-tasks-docs", "rust-book")
                if v != qset["vault"]
            ]
            (extra / "Everything.md").write_text(list_note(others), encoding="utf-8")
            kb = kbase.open(db)
            kb.index([extra])
            (chunks,) = kb.reader.execute(
                "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " WHERE d.path = ?",
                ("Everything.md",),
            ).fetchone()
            print(f"\n{qset['vault']}: list note of {LINES} lines, {chunks} chunks")
            print(f"{'prior':<38}{'mode':<10}{'list in top 5':>14}{'top-3':>8}{'MRR@10':>8}")
            saved = keyword.LENGTH_PRIOR, semantic.SEMANTIC_LENGTH_PRIOR, hits.LENGTH_FREE_CHUNKS
            for name, (kw, sem, free) in PRIORS.items():
                keyword.LENGTH_PRIOR, semantic.SEMANTIC_LENGTH_PRIOR, hits.LENGTH_FREE_CHUNKS = (
                    kw,
                    sem,
                    free,
                )
                for mode in ("keyword", "semantic", "hybrid"):
                    in_top5, ranks = 0, []
                    for q in qset["questions"]:
                        paths = [h.path for h in kb.search(q["question"], mode=mode, limit=10)]
                        in_top5 += "Everything.md" in paths[:5]
                        ranks.append(qbench.first_rank(paths, set(q["answers"])))
                    s = qbench.scores(ranks)
                    print(
                        f"{name:<38}{mode:<10}{in_top5:>8} of {len(ranks):<3}"
                        f"{s['top3']:>8.2f}{s['mrr10']:>8.3f}"
                    )
            keyword.LENGTH_PRIOR, semantic.SEMANTIC_LENGTH_PRIOR, hits.LENGTH_FREE_CHUNKS = saved
            kb.close()


if __name__ == "__main__":
    main()
