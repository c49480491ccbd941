"""Typos (issue 23 part 3): does a misspelt name or word still find what was meant?

    python -m bench.typos                    # every vault of the set, modes keyword and hybrid
    python -m bench.typos --modes keyword    # one mode (no model needed)
    python -m bench.typos --verbose          # + every miss
    python -m bench.typos --suggest          # + apsw's Table.query_suggest on the same words
    python -m bench.typos --json             # machine-readable, on stdout

The set, bench/questions/typos.tsv (tab-separated: vault, kind, typo, intended, answer):

- kind ``name``: one typo of every note's name on three shared vaults, a letter dropped or two
  neighbours swapped, never a word's first letter, placed by a random generator seeded with the
  name (the name: the file name in the Obsidian vault obsidian-tasks-docs, the heading that opens
  the note where file names are slugs, foam-docs and rust-book). A hit counts when the first
  result is ``answer`` (or a note of that name).
- kind ``word``: misspellings written by hand (doubled or dropped letters, swaps, phonetic ones
  such as 'recieve'), alone or in a short query. A row counts as *corrected* when kbase searched
  the intended words, as the index stems them (or needed no correction: porter already finds the
  stem, 'recuring' -> 'recur'), and as *same first* when the first hit is the intended query's
  first hit.

Also: how many correctly spelt queries kbase changed (the question sets' questions and every
note name), which should be none. Indexes are bench/questions.py's (cached, with embeddings).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]

TYPOS = REPO / "bench" / "questions" / "typos.tsv"


@dataclass(frozen=True)
class Typo:
    vault: str
    kind: str  # 'name' or 'word'
    typo: str
    intended: str
    answer: str  # name rows: the note's path inside the vault


def load_typos(path: Path = TYPOS) -> list[Typo]:
    with path.open(encoding="utf-8", newline="") as f:
        rows = [Typo(**r) for r in csv.DictReader(f, delimiter="\t")]
    for r in rows:
        if r.kind not in ("name", "word") or not r.typo or not r.intended:
            raise ValueError(f"{path.name}: bad row {r}")
    return rows


def _first_is(hits, row: Typo) -> bool:
    if not hits:
        return False
    h = hits[0]
    return h.path == row.answer or row.intended.casefold() in (
        h.title.casefold(),
        PurePosixPath(h.path).stem.casefold(),
    )


def run(kb, rows: list[Typo], mode: str, verbose: bool) -> dict:
    names = [r for r in rows if r.kind == "name"]
    words = [r for r in rows if r.kind == "word"]
    t0, cpu0 = time.perf_counter(), time.process_time()
    name_first = 0
    for r in names:
        ok = _first_is(kb.search(r.typo, mode=mode, limit=5), r)
        name_first += ok
        if verbose and not ok:
            print(f"  miss {mode} name {r.typo!r} (want {r.answer})", file=sys.stderr)
    corrected = same = 0
    for r in words:
        hits = kb.search(r.typo, mode=mode, limit=5)
        want = kb.search(r.intended, mode=mode, limit=5)
        searched = getattr(hits, "corrected", None) or r.typo
        right = _stems(kb, searched) == _stems(kb, r.intended) or (
            searched == r.typo and _found_as_typed(kb, r.typo)
        )
        corrected += right
        first = bool(hits) and bool(want) and hits[0].path == want[0].path
        same += first
        if verbose and not (right and first):
            print(
                f"  miss {mode} word {r.typo!r} -> {searched!r}"
                f" first {hits[0].path if hits else None} (want {want[0].path if want else None})",
                file=sys.stderr,
            )
    return {
        "names": len(names),
        "names_first": name_first,
        "words": len(words),
        "words_corrected": corrected,
        "words_same_first": same,
        "seconds": round(time.perf_counter() - t0, 2),
        "cpu_seconds": round(time.process_time() - cpu0, 2),
    }


def _stems(kb, text: str) -> list[str]:
    """The words of ``text`` as the keyword index has them (porter stems): what is searched."""
    from apsw import fts5

    table = fts5.Table(kb.reader, "chunks_fts")
    return [t[2] for t in table.tokenize(text.encode(), include_offsets=True)]


def _found_as_typed(kb, text: str) -> bool:
    """Does the keyword index hold every word as typed (porter stems)? Then nothing needed
    correcting."""
    from kbase.search.query import parse_query

    q = parse_query(text)
    return all(
        kb.reader.execute(
            "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (t.fts(),)
        ).fetchone()
        for clause in q.clauses
        for t in clause
    )


def changed_when_right(kb, vault: str) -> tuple[int, int, list[str]]:
    """(queries kbase changed, queries) over correctly spelt text: the vault's question set and
    its note names."""
    queries = [PurePosixPath(p).stem for (p,) in kb.sql("SELECT path FROM documents").rows if p]
    qfile = REPO / "bench" / "questions" / f"{vault}.json"
    if qfile.exists():
        queries += [q["question"] for q in json.loads(qfile.read_text())["questions"]]
    changed = []
    for q in queries:
        try:
            hits = kb.search(q, mode="keyword", limit=1)
        except Exception:  # a name that is no query (punctuation only)
            continue
        if getattr(hits, "corrected", None):
            changed.append(f"{q!r} -> {hits.corrected!r}")
    return len(changed), len(queries), changed


def suggest(kb, rows: list[Typo]) -> tuple[int, int]:
    """apsw's own spelling correction (Table.query_suggest, threshold 0: unknown words only) on
    the word rows: (rows it corrects to the intended words or leaves alone rightly, rows)."""
    import apsw.fts5

    con = kb.reader
    table = apsw.fts5.Table(con, "chunks_fts")
    con.execute("PRAGMA query_only = OFF")  # apsw creates fts5vocab tables in temp
    right = 0
    words = [r for r in rows if r.kind == "word"]
    try:
        for r in words:
            s = table.query_suggest(r.typo, threshold=0)
            text = " ".join((s or r.typo).replace('"', " ").split())
            right += text.casefold() == r.intended.casefold() or (
                s is None and _found_as_typed(kb, r.typo)
            )
    finally:
        con.execute("PRAGMA query_only = ON")
    return right, len(words)


def main(argv: list[str] | None = None) -> int:
    from bench.questions import open_index

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="keyword,hybrid")
    ap.add_argument("--vault", action="append", help="only this vault (repeatable)")
    ap.add_argument("--db", type=Path, help="with one --vault: this index file")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--suggest", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = load_typos()
    vaults = args.vault or list(dict.fromkeys(r.vault for r in rows))
    report: dict = {}
    for vault in vaults:
        kb = open_index(vault, args.db, args.rebuild)
        these = [r for r in rows if r.vault == vault]
        per = report[vault] = {"modes": {}}
        for mode in args.modes.split(","):
            per["modes"][mode] = run(kb, these, mode, args.verbose)
        n, total, changed = changed_when_right(kb, vault)
        per["changed_when_right"] = {"changed": n, "queries": total, "examples": changed[:10]}
        if args.suggest:
            right, words = suggest(kb, these)
            per["query_suggest_words_right"] = right
        kb.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("| vault | mode | names first | words corrected | words: same first hit | s (cpu) |")
    print("|---|---|---:|---:|---:|---:|")
    for vault, per in report.items():
        for mode, m in per["modes"].items():
            print(
                f"| {vault} | {mode} | {m['names_first']}/{m['names']}"
                f" ({100 * m['names_first'] / max(m['names'], 1):.0f}%)"
                f" | {m['words_corrected']}/{m['words']} | {m['words_same_first']}/{m['words']}"
                f" | {m['seconds']} ({m['cpu_seconds']}) |"
            )
    for vault, per in report.items():
        c = per["changed_when_right"]
        print(f"{vault}: correctly spelt queries changed: {c['changed']} of {c['queries']}")
        for example in c["examples"]:
            print(f"    {example}")
        if "query_suggest_words_right" in per:
            words = next(iter(per["modes"].values()))["words"]
            print(
                f"{vault}: apsw query_suggest right on {per['query_suggest_words_right']}/{words}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
