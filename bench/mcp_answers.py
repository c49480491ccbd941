"""Does one MCP search call give an agent the text that answers? (issue 35 item 6)

    python bench/mcp_answers.py                 # every question set, keyword (and hybrid when
                                                # the cached index has embeddings)
    python bench/mcp_answers.py --vault rust-book --modes keyword
    python bench/mcp_answers.py --shapes        # links, related: structured over text

For each question of bench/questions/*.json that names its answer line (``line``, ``answer``),
the MCP search tool (kbase.mcp.tools.search, as the server calls it, default budget) is called
with the question, once with the default passages and once with ``passages=0`` (snippets only,
as before). A call *answers* when a hit of the answering note (answers[0]) returns the answer
line: its passage's line range holds the line and the passage shows the excerpt, or (no passage)
its snippet shows the excerpt (bench/questions.shows_answer: five words of it in a row). Reported
per set and mode: the share of questions answered in one call, among all and among those whose
note is in the hits at all, and the text tokens of a call (budget.tokens: 4 ASCII characters or
one other character a token). Indexes come from bench/questions.py's cache (bench/.cache).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import questions as qs  # noqa: E402

from kbase.mcp import tools  # noqa: E402
from kbase.mcp.budget import json_tokens, tokens  # noqa: E402


def answered(reply: tools.Reply, q: dict) -> tuple[bool, bool]:
    """(the answer line is in the returned text, the answering note is among the hits)"""
    hits = [h for h in reply.structured.hits if h.path == q["answers"][0]]  # type: ignore[union-attr]
    for h in hits:
        if h.passage is not None and h.lines:
            if h.lines[0] <= q["line"] <= h.lines[1] and qs.shows_answer(h.passage, q["answer"]):
                return True, True
        elif qs.shows_answer(h.snippet, q["answer"]):
            return True, True
    return False, bool(hits)


def run(kb, qset: dict, mode: str) -> dict:
    rows = {}
    for label, extra in (("passages", {}), ("snippets", {"passages": 0})):
        got = found = 0
        cost, ratio = [], []
        asked = [q for q in qset["questions"] if "line" in q]
        for q in asked:
            r = tools.search(kb, q["question"], mode=mode, **extra)
            yes, there = answered(r, q)
            got += yes
            found += there
            cost.append(tokens(r.text))
            ratio.append(json_tokens(r.data()) / max(1, tokens(r.text)))
        rows[label] = {
            "questions": len(asked),
            "answered": got,
            "rate": round(got / len(asked), 3) if asked else None,
            "note_in_hits": found,
            "rate_when_found": round(got / found, 3) if found else None,
            "text_tokens_median": statistics.median(cost) if cost else None,
            "structured_over_text_max": round(max(ratio), 3) if ratio else None,
        }
    return rows


def shapes(kb) -> dict:
    """Structured content over text (both in budget.tokens) of the links and related tools for
    every note of the index, as the server calls them with their defaults: mean and max."""
    notes = [p for (p,) in kb.sql("SELECT path FROM notes ORDER BY path").rows]
    out = {}
    for name in ("links", "related"):
        ratio = []
        for path in notes:
            r = getattr(tools, name)(kb, path)
            ratio.append(json_tokens(r.data()) / max(1, tokens(r.text)))
        out[name] = {
            "notes": len(notes),
            "structured_over_text_mean": round(statistics.mean(ratio), 3),
            "structured_over_text_max": round(max(ratio), 3),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--vault", action="append", help="only this question set (repeatable)")
    ap.add_argument("--modes", default="keyword,hybrid")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--shapes",
        action="store_true",
        help="links and related: structured content over text on every note, instead",
    )
    args = ap.parse_args(argv)
    results = {}
    for path in qs.question_files():
        qset = qs.load_questions(path)
        name = path.stem
        if args.vault and name not in args.vault:
            continue
        if not any("line" in q for q in qset["questions"]):
            continue
        import kbase

        cached = qs.newest_cached(qset["vault"])
        kb = kbase.open(cached) if cached is not None else None
        if kb is None or kb.coverage()[0] < kb.coverage()[1]:  # none, or still being built
            # keyword only, without embeddings (bench/questions.py builds the full ones)
            db = REPO / "bench" / "out" / "mcp_answers" / f"{qset['vault']}.db"
            db.parent.mkdir(parents=True, exist_ok=True)
            kb = kbase.open(db)
            folder = (
                REPO / qset["material"] if qset.get("material") else qs.vault_folder(qset["vault"])
            )
            kb.index([folder], embed=False)
        if args.shapes:
            results[name] = shapes(kb)
            kb.close()
            continue
        modes = [m for m in args.modes.split(",") if m == "keyword" or kb.coverage()[0]]
        results[name] = {mode: run(kb, qset, mode) for mode in modes}
        kb.close()
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    if args.shapes:
        print("set / tool: structured content over text, mean and max over every note")
        for name, by_tool in results.items():
            for tool, r in by_tool.items():
                mean, top = r["structured_over_text_mean"], r["structured_over_text_max"]
                print(f"{name:22} {tool:8} {r['notes']:4} notes: mean {mean:.3f}, max {top:.3f}")
        return 0
    print("set / mode / form: answered in one call (of questions; of those whose note is a hit)")
    for name, by_mode in results.items():
        for mode, rows in by_mode.items():
            for label, r in rows.items():
                print(
                    f"{name:22} {mode:8} {label:9} {r['answered']:3}/{r['questions']:<3}"
                    f" = {r['rate']:.2f}; of found {r['rate_when_found']}; text tokens median"
                    f" {r['text_tokens_median']:.0f}; structured/text max"
                    f" {r['structured_over_text_max']}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
