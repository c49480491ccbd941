"""Question sets: does kbase put the note that answers a user's question first? (issue 12)

    python -m bench.questions              # every question set, modes keyword/semantic/hybrid
    python -m bench.questions --verbose    # + each question missed in the top 3, what came first
    python -m bench.questions --names      # + query = each note's file name (five shared vaults)
    python -m bench.questions --snippets   # + share of top-3 snippets that show Markdown markup
    python -m bench.questions --json       # the same, machine-readable, on stdout
    python -m bench.questions --vault foam-docs --db /tmp/foam.db   # one vault, this index file

Question files: bench/questions/<vault>.json, where <vault> is a folder of ../shared/data/vaults:

    {
      "vault": "foam-docs",                # the file's name, unless "material" is given
      "material": "bench/material/x",      # optional: the notes' folder, from the repository
      "about": "free text",
      "questions": [
        {"id": "f01",                      # unique in the file; names the question in reports
         "kind": "howto",                  # howto | symptom | vocabulary | keyword | feature
         "question": "open today's journal page with a keyboard shortcut",
         "answers": ["user/features/daily-notes.md", "user/getting-started/first-workspace.md"],
         "section": "Creating Daily Notes",  # optional: the heading in answers[0] that answers best
         "line": 8,                          # the line of answers[0] (from 1) that answers
         "answer": "- **Shortcut:** `Alt+D`"}  # a verbatim excerpt of that line
      ]
    }

``answers`` lists every note that answers the question (root-relative paths, "/" separators),
the best first. Scores are document-level: a hit counts when its path is one of the answers.
top-1 and top-3 are the share of questions with an answer at rank 1 / within ranks 1-3; MRR@10 is
the mean of 1/rank of the first answer in the top 10 (0 when none).

Held-out split (issue 23): questions with an odd number in their id ("t01", "f51") are the tuning
half, even ones the held-out half; both halves are reported, so a constant tuned on one half that
does not hold on the other shows. Answer lines: ``line``/``answer`` name the line of answers[0]
that answers (checked against the vault before a run: the excerpt must be on that line). For the
hit of answers[0] in the top 10, "snippet" counts the questions whose snippet shows the answer (5
consecutive words of the excerpt, or all of a shorter one, in the snippet's words) and "line" those
whose reported line is the answer line; both out of the questions whose answers[0] is in the top 10.

--names: for every document of a vault, query = its file name without extension; a hit counts when
the first result has that file name (any folder: a name shared by two notes counts for either).
--snippets: every snippet of the top 3 hits of every question, checked with bench/markup.py.

Indexes (with embeddings, the local model) are cached in bench/.cache/<vault>-<key>.db, where the
key hashes schema.sql and the source of every kbase module that indexing runs (ingest, store,
embed, db, migrations and what they import). A ranking or snippet change reuses the index; a
change to parsing, chunking, titles or storage builds a new one (about 5 minutes per docs vault on
2 busy cores, most of it embedding). A reused index is brought up to date with ``kb.index`` first;
``--rebuild`` starts afresh.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import kbase
from bench.common import REPO
from bench.markup import markup_in
from kbase.ingest.markup import plain

VAULTS = REPO.parent / "shared" / "data" / "vaults"
QUESTIONS = REPO / "bench" / "questions"
CACHE = REPO / "bench" / ".cache"
MODES = ("keyword", "semantic", "hybrid")
NAME_VAULTS = ("obsidian-tasks-docs", "foam-docs", "rust-book", "rust-book-zh", "rust-book-ja")
DEPTH = 10  # results asked per query: MRR@10
TOP = 3  # "in the top 3", and the snippets checked per question
KINDS = ("howto", "symptom", "vocabulary", "keyword", "feature")
# Modules whose code decides what an index holds; the cache key follows them and their imports.
INDEX_MODULES = ("ingest", "store", "embed")


# --- question files -----------------------------------------------------------------------------
def load_questions(path: Path) -> dict:
    """A question file, checked: a clear error names the file, the question and the fix."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read the question file: {e}") from e
    where = f"{path.name}"
    if not isinstance(data, dict) or not isinstance(data.get("vault"), str):
        raise ValueError(f'{where}: expected an object with "vault" and "questions"')
    if data["vault"] != path.stem and not data.get("material"):
        raise ValueError(f'{where}: "vault" is {data["vault"]!r}; name the file after its vault')
    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise ValueError(f'{where}: "questions" must be a non-empty list')
    seen: set[str] = set()
    for i, q in enumerate(questions):
        qid = q.get("id") if isinstance(q, dict) else None
        at = f"{where}: question {qid or f'#{i + 1}'}"
        if not isinstance(qid, str) or not qid or qid in seen:
            raise ValueError(f'{at}: every question needs a unique "id"')
        seen.add(qid)
        if not isinstance(q.get("question"), str) or not q["question"].strip():
            raise ValueError(f'{at}: "question" must be a non-empty string')
        answers = q.get("answers")
        if not (
            isinstance(answers, list) and answers and all(isinstance(a, str) and a for a in answers)
        ):
            raise ValueError(f'{at}: "answers" must be a non-empty list of note paths')
        for a in answers:
            if a.startswith("/") or "\\" in a or ".." in PurePosixPath(a).parts:
                raise ValueError(f'{at}: answer {a!r} must be relative to the vault, "/" separated')
        if len(set(answers)) != len(answers):
            raise ValueError(f"{at}: an answer is listed twice")
        if q.get("kind", "howto") not in KINDS:
            raise ValueError(f'{at}: "kind" must be one of {", ".join(KINDS)}')
        if "section" in q and not (isinstance(q["section"], str) and q["section"]):
            raise ValueError(f'{at}: "section" must be a heading of answers[0]')
        if ("line" in q) != ("answer" in q):
            raise ValueError(
                f'{at}: "line" and "answer" go together (the answer line and its text)'
            )
        if "line" in q and not (
            isinstance(q["line"], int) and q["line"] >= 1 and isinstance(q["answer"], str)
        ):
            raise ValueError(f'{at}: "line" must be a line number from 1, "answer" its text')
        if "answer" in q and not q["answer"].strip():
            raise ValueError(f'{at}: "answer" must be a non-empty excerpt of the answer line')
    return data


def split(qid: str) -> str:
    """'tune' for ids whose number is odd, 'held' for even ones (and ids without a number)."""
    digits = "".join(ch for ch in qid if ch.isdigit())
    return "tune" if digits and int(digits) % 2 else "held"


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def check_answer_lines(qset: dict, vault: Path) -> None:
    """Each labelled excerpt is on its line of answers[0] (whitespace and case aside): a clear
    error names the question when the vault changed under the labels."""
    for q in qset["questions"]:
        if "line" not in q:
            continue
        lines = (vault / q["answers"][0]).read_text(encoding="utf-8").splitlines()
        got = lines[q["line"] - 1] if q["line"] <= len(lines) else ""
        if _folded(q["answer"]) not in _folded(got):
            raise ValueError(
                f"{qset['vault']}.json: question {q['id']}: {q['answer']!r} is not on line"
                f" {q['line']} of {q['answers'][0]}; label the line again"
            )


_WORDS = re.compile(r"\w+")
SHOWN_RUN = 5  # consecutive words of the answer excerpt a snippet must show


def shows_answer(snippet: str, answer: str) -> bool:
    """True when the snippet shows the answer: SHOWN_RUN consecutive words of the excerpt (as
    read, Markdown removed), or all of it when it is shorter, appear in a row in the snippet."""
    want = [w.casefold() for w in _WORDS.findall(plain(answer))]
    have = [w.casefold() for w in _WORDS.findall(snippet)]
    run = min(SHOWN_RUN, len(want))
    if not run:
        return False
    shown = {tuple(have[i : i + run]) for i in range(len(have) - run + 1)}
    return any(tuple(want[i : i + run]) in shown for i in range(len(want) - run + 1))


def question_files() -> list[Path]:
    return sorted(QUESTIONS.glob("*.json"))


# --- indexes ------------------------------------------------------------------------------------
def _module_file(module: str) -> Path | None:
    """The source file of a kbase module ('kbase.store.db'; a package: its __init__.py)."""
    base = REPO.joinpath(*module.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _kbase_imports(path: Path) -> set[str]:
    """kbase modules (dotted names) that a source file imports, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kbase":
            for a in node.names:  # "from kbase.search import cjk" imports a module
                sub = f"{node.module}.{a.name}"
                found.add(sub if _module_file(sub) else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kbase")
    return {m for m in found if _module_file(m)}


def index_sources() -> list[Path]:
    """schema.sql and the kbase modules that indexing runs (every module of the INDEX_MODULES
    packages and the closure of their imports)."""
    todo = [
        f"kbase.{pkg}.{f.stem}" if f.stem != "__init__" else f"kbase.{pkg}"
        for pkg in INDEX_MODULES
        for f in sorted((REPO / "kbase" / pkg).glob("*.py"))
    ]
    done: set[str] = set()
    while todo:
        m = todo.pop()
        if m not in done:
            done.add(m)
            todo.extend(_kbase_imports(_module_file(m)) - done)
    return [REPO / "schema.sql", *sorted({_module_file(m) for m in done})]


def index_key() -> str:
    h = hashlib.sha1()
    for f in index_sources():
        h.update(f.relative_to(REPO).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def git_revision() -> str:
    """The last commit that changed the engine (kbase/, schema.sql), '+dirty' with local changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return done.stdout.strip()

    rev = git("log", "-1", "--format=%h", "--", "kbase", "schema.sql") or "unknown"
    return rev + ("+dirty" if git("status", "--porcelain", "--", "kbase", "schema.sql") else "")


def vault_folder(vault: str) -> Path:
    folder = VAULTS / vault
    if not folder.is_dir():
        sys.exit(f"error: vault {folder} is absent (../shared beside the repository holds them)")
    return folder


def newest_cached(vault: str) -> Path | None:
    """The most recently built cached index of ``vault``, whatever its key (for benchmarks that
    compare ranking on the same index while indexing code changes), or None."""
    built = sorted(CACHE.glob(f"{vault}-*.db"), key=lambda p: p.stat().st_mtime)
    return built[-1] if built else None


def open_index(vault: str, db: Path | None, rebuild: bool) -> kbase.KB:
    """The vault's index, built (with embeddings) or brought up to date; progress on stderr."""
    path = db or CACHE / f"{vault}-{index_key()}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    if rebuild:
        for f in path.parent.glob(path.name + "*"):
            if f.name in (path.name, path.name + "-wal", path.name + "-shm"):
                f.unlink()
    fresh = not path.exists()
    kb = kbase.open(path)
    t0 = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 < 8:
            print(f"\r  embedding {vault}: {done}/{total}", end="", file=sys.stderr, flush=True)

    report = kb.index([vault_folder(vault)], embed_progress=progress)
    what = "built" if fresh else "reused"
    changed = report.new + report.updated + report.removed
    print(
        f"\r{what} {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
        f" ({changed} notes indexed, {time.perf_counter() - t0:.0f} s)".ljust(70),
        file=sys.stderr,
    )
    return kb


# --- measures -----------------------------------------------------------------------------------
def first_rank(paths: list[str], answers: set[str]) -> int | None:
    return next((i for i, p in enumerate(paths, 1) if p in answers), None)


def scores(ranks: list[int | None]) -> dict:
    n = len(ranks)
    return {
        "n": n,
        "top1": round(sum(r == 1 for r in ranks) / n, 4),
        "top3": round(sum(r is not None and r <= TOP for r in ranks) / n, 4),
        "mrr10": round(statistics.mean(1 / r if r and r <= DEPTH else 0.0 for r in ranks), 4),
    }


def run_questions(kb: kbase.KB, qset: dict, modes: tuple[str, ...]) -> dict:
    """Per mode: every question's rank and top hits, and the scores."""
    out = {}
    for mode in modes:
        rows = []
        for q in qset["questions"]:
            hits = kb.search(q["question"], mode=mode, limit=DEPTH)
            paths = [h.path for h in hits]
            best = next((h for h in hits if h.path == q["answers"][0]), None)
            passage = {}
            if "line" in q and best is not None:
                passage = {
                    "snippet": best.snippet,
                    "snippet_line": best.line,
                    "shows_answer": shows_answer(best.snippet, q["answer"]),
                    "on_answer_line": best.line == q["line"],
                }
            rows.append(
                {
                    "id": q["id"],
                    "kind": q.get("kind", "howto"),
                    "split": split(q["id"]),
                    "question": q["question"],
                    "answers": q["answers"],
                    "rank": first_rank(paths, set(q["answers"])),
                    "answer_line": q.get("line"),
                    **({"best_note": passage} if passage else {}),
                    "top": [
                        {"path": h.path, "title": h.title, "line": h.line, "snippet": h.snippet}
                        for h in hits[:TOP]
                    ],
                }
            )
        out[mode] = {**summary(rows), "questions": rows}
    return out


def summary(rows: list[dict]) -> dict:
    """Scores over the rows, per split, and the answer-line counts."""
    out = scores([r["rank"] for r in rows])
    for part in ("tune", "held"):
        picked = [r["rank"] for r in rows if r.get("split") == part]
        if picked:
            out[part] = scores(picked)
    seen = [r["best_note"] for r in rows if "best_note" in r]
    out["passages"] = {
        "labelled": sum(r.get("answer_line") is not None for r in rows),
        "answer_note_in_top": len(seen),
        "snippet_shows_answer": sum(p["shows_answer"] for p in seen),
        "line_is_answer_line": sum(p["on_answer_line"] for p in seen),
    }
    return out


def run_names(kb: kbase.KB, modes: tuple[str, ...]) -> dict:
    """Per mode: the share of notes whose own file name brings a note of that name first."""
    docs = [p for (p,) in kb.sql("SELECT path FROM documents ORDER BY path").rows]
    out = {}
    for mode in modes:
        ranks, failures = [], []
        for path in docs:
            name = PurePosixPath(path).stem
            hits = kb.search(name, mode=mode, limit=DEPTH)
            names = [PurePosixPath(h.path).stem.casefold() for h in hits]
            rank = next((i for i, s in enumerate(names, 1) if s == name.casefold()), None)
            ranks.append(rank)
            if rank != 1:
                failures.append(
                    {
                        "name": name,
                        "path": path,
                        "rank": rank,
                        "first": hits[0].path if hits else None,
                    }
                )
        out[mode] = {"notes": len(docs), **scores(ranks), "failures": failures}
    return out


def pooled(results: dict) -> dict:
    """Per mode, the scores over the questions of every set together."""
    modes = dict.fromkeys(m for per_mode in results.values() for m in per_mode)
    return {
        m: summary(
            [q for per_mode in results.values() if m in per_mode for q in per_mode[m]["questions"]]
        )
        for m in modes
    }


def snippet_markup(results: dict) -> dict:
    """Per vault and mode, and over all: snippets of the top hits that show markup."""
    out: dict = {}
    total: dict[str, dict] = {}
    for vault, per_mode in results.items():
        for mode, res in per_mode.items():
            checked = [
                (q["id"], t["path"], t["snippet"], markup_in(t["snippet"]))
                for q in res["questions"]
                for t in q["top"]
            ]
            marked = [c for c in checked if c[3]]
            patterns: dict[str, int] = {}
            for *_, found in marked:
                for name in found:
                    patterns[name] = patterns.get(name, 0) + 1
            out.setdefault(vault, {})[mode] = {
                "snippets": len(checked),
                "with_markup": len(marked),
                "share": round(len(marked) / max(len(checked), 1), 4),
                "patterns": dict(sorted(patterns.items(), key=lambda kv: -kv[1])),
                "examples": [
                    {"id": i, "path": p, "snippet": s, "markup": f} for i, p, s, f in marked
                ],
            }
            t = total.setdefault(mode, {"snippets": 0, "with_markup": 0})
            t["snippets"] += len(checked)
            t["with_markup"] += len(marked)
    for t in total.values():
        t["share"] = round(t["with_markup"] / max(t["snippets"], 1), 4)
    out["all"] = total
    return out


# --- reports ------------------------------------------------------------------------------------
def print_questions(results: dict, verbose: bool) -> None:
    print(
        f"{'vault':<22}{'mode':<10}{'n':>4}{'top-1':>7}{'top-3':>7}{'MRR@10':>8}"
        f"{'tune t1':>9}{'held t1':>9}{'tune MRR':>9}{'held MRR':>9}{'snippet':>10}{'line':>9}"
    )
    rows = [(v, m, r) for v, per_mode in results.items() for m, r in per_mode.items()]
    if len(results) > 1:
        rows += [("all", m, r) for m, r in pooled(results).items()]
    for vault, mode, r in rows:
        t, h, p = r.get("tune", {}), r.get("held", {}), r["passages"]
        seen = p["answer_note_in_top"]
        print(
            f"{vault:<22}{mode:<10}{r['n']:>4}{r['top1']:>7.2f}{r['top3']:>7.2f}{r['mrr10']:>8.3f}"
            f"{t.get('top1', 0):>9.2f}{h.get('top1', 0):>9.2f}"
            f"{t.get('mrr10', 0):>9.3f}{h.get('mrr10', 0):>9.3f}"
            + (
                f"{p['snippet_shows_answer']:>5}/{seen:<4}{p['line_is_answer_line']:>4}/{seen:<4}"
                if p["labelled"]
                else ""
            )
        )
    print(
        "  tune/held: odd/even question numbers; snippet/line: of the questions whose best note"
        " is in the top 10, its snippet shows the answer line / its line is the answer line"
    )
    if not verbose:
        return
    for vault, per_mode in results.items():
        for mode, r in per_mode.items():
            missed = [q for q in r["questions"] if not q["rank"] or q["rank"] > TOP]
            print(f"\n{vault} / {mode}: {len(missed)} of {r['n']} missed in the top {TOP}")
            for q in missed:
                got = q["top"][0]["path"] if q["top"] else "(nothing)"
                where = (
                    f"answer at rank {q['rank']}" if q["rank"] else f"no answer in the top {DEPTH}"
                )
                print(
                    f"  {q['id']} [{q['kind']}] {q['question']}\n"
                    f"      expected: {' | '.join(q['answers'])}\n"
                    f"      first:    {got}   ({where})"
                )


def print_names(names: dict, verbose: bool) -> None:
    print(f"{'vault':<22}{'mode':<10}{'notes':>6}{'first':>8}{'top-3':>8}")
    for vault, per_mode in names.items():
        for mode, r in per_mode.items():
            print(f"{vault:<22}{mode:<10}{r['notes']:>6}{r['top1']:>8.2f}{r['top3']:>8.2f}")
    if verbose:
        for vault, per_mode in names.items():
            for mode, r in per_mode.items():
                print(f"\n{vault} / {mode}: {len(r['failures'])} names not ranked first")
                for f in r["failures"]:
                    where = f"rank {f['rank']}" if f["rank"] else f"not in the top {DEPTH}"
                    print(f"  {f['path']}  ({where}; first: {f['first']})")


def print_snippets(snip: dict, verbose: bool) -> None:
    print(f"{'vault':<22}{'mode':<10}{'snippets':>9}{'markup':>8}{'share':>8}")
    for vault, per_mode in snip.items():
        if vault == "all" and len(snip) == 2:
            continue  # one vault: "all" repeats it
        for mode, r in per_mode.items():
            print(f"{vault:<22}{mode:<10}{r['snippets']:>9}{r['with_markup']:>8}{r['share']:>8.2f}")
    for vault, per_mode in snip.items():
        if vault == "all":
            continue
        for mode, r in per_mode.items():
            common = ", ".join(f"{k} {v}" for k, v in r["patterns"].items())
            print(f"  {vault} / {mode}: {common or 'none'}")
            if verbose:
                for e in r["examples"]:
                    print(
                        f"      {e['id']} {e['path']}: {e['snippet']!r}  [{', '.join(e['markup'])}]"
                    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--vault", action="append", help="only this vault (repeatable); default: all")
    ap.add_argument("--mode", action="append", choices=MODES, help="only this mode (repeatable)")
    ap.add_argument("--names", action="store_true", help="also: query = each note's file name")
    ap.add_argument("--snippets", action="store_true", help="also: top-3 snippets that show markup")
    ap.add_argument("--verbose", "-v", action="store_true", help="list the misses")
    ap.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    ap.add_argument("--db", type=Path, help="index file to build or reuse (with one --vault)")
    ap.add_argument("--rebuild", action="store_true", help="build the indexes afresh")
    args = ap.parse_args(argv)
    modes = tuple(args.mode or MODES)

    qsets = {}
    for f in question_files():
        try:
            qset = load_questions(f)
        except ValueError as e:
            sys.exit(f"error: {e}")
        qsets[qset["vault"]] = qset
    q_vaults = [v for v in qsets if not args.vault or v in args.vault]
    n_vaults = [v for v in (args.vault or NAME_VAULTS)] if args.names else []
    unknown = [v for v in args.vault or [] if v not in qsets and not args.names]
    if unknown:
        sys.exit(
            f"error: no question file for {', '.join(unknown)} in {QUESTIONS} (or add --names)"
        )
    vaults = list(dict.fromkeys(q_vaults + n_vaults))
    if args.db and len(vaults) != 1:
        sys.exit("error: --db names one index file; choose its vault with --vault NAME")

    report: dict = {
        "revision": git_revision(),
        "index_key": index_key(),
        "date": datetime.date.today().isoformat(),
        "depth": DEPTH,
    }
    results, names = {}, {}
    t0 = time.perf_counter()
    for vault in vaults:
        kb = open_index(vault, args.db, args.rebuild)
        try:
            if vault in q_vaults:
                try:
                    check_answer_lines(qsets[vault], vault_folder(vault))
                except ValueError as e:
                    sys.exit(f"error: {e}")
                results[vault] = run_questions(kb, qsets[vault], modes)
            if vault in n_vaults:
                names[vault] = run_names(kb, modes)
        finally:
            kb.close()
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["questions"] = results
    report["questions_all"] = pooled(results) if results else {}
    if names:
        report["names"] = names
    if args.snippets:
        report["snippets"] = snippet_markup(results)

    if args.json:
        json.dump(report, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return 0
    print(f"kbase {report['revision']}, index key {report['index_key']}, {report['date']}\n")
    if results:
        print("Questions (document level: a hit counts when its path is one of the answers)")
        print_questions(results, args.verbose)
    if names:
        print(
            "\nNote names (query = file name without extension;"
            " first = a note of that name ranks 1)"
        )
        print_names(names, args.verbose)
    if args.snippets:
        print(
            f"\nSnippets showing Markdown markup (top {TOP} hits of every question;"
            " bench/markup.py)"
        )
        print_snippets(report["snippets"], args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
