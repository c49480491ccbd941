"""Search in scripts without spaces (issues 13 and 24): the Chinese and Japanese Rust book
(../shared/data/vaults/rust-book-zh, rust-book-ja), and small Korean and Thai fixtures.

    python -m bench.cjk                     # both tables, keyword mode
    python -m bench.cjk --hybrid            # also hybrid (embeds the vaults once: minutes)
    python -m bench.cjk --hybrid --questions-only --model multilingual-e5-small
    python -m bench.cjk --seed 2 --n 40
    python -m bench.cjk --segmenter pairs   # as without icu4py: a run's words are its pairs
    python -m bench.cjk --segmenter dict    # rjieba / sudachipy / pythainlp instead of ICU
    python -m bench.cjk --segmenters        # each segmenter's size, load time, ms per query
    python -m bench.cjk --index-side        # ICU words in the index against character pairs

Drawn queries (seeded, so every run asks the same; issue 13):
- phrase: 4 characters of one run (Han, kana, ...) that occur in at most 3 notes; right when
  the note it was taken from is in the top 3;
- pair: two 2-character words from different lines of one note, both in at most 10 notes and
  together in at most 5; right when the note is in the top 10.

Questions typed as people type them (issue 24): bench/questions/rust-book-zh.json and
rust-book-ja.json (40 each, no spaces, question words and particles), and the fixtures
tests/data/cjk-notes/ko.json and th.json (13 each on 8 notes written for the tests: no Korean or
Thai vault is shared, so these are a check, not a benchmark). Per mode: top-1, top-3, MRR@10,
the questions that got no match at all, the median query time and the CPU time per query.

--segmenter dict needs ``pip install rjieba sudachipy sudachidict-core pythainlp`` (not kbase
dependencies); it swaps ICU for them per script, to compare.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw

import kbase
from bench.common import REPO
from bench.questions import first_rank, load_questions, scores
from kbase.search import cjk
from kbase.store import cjk_table

try:  # absent before issue 24: the question table still runs, for the numbers before
    from kbase.search import segment
except ImportError:
    segment = None  # type: ignore[assignment]

VAULTS = REPO.parent / "shared" / "data" / "vaults"
QUESTIONS = REPO / "bench" / "questions"
FIXTURES = REPO / "tests" / "data" / "cjk-notes"
BOOKS = ("rust-book-zh", "rust-book-ja")


def draw_queries(bodies: dict[str, str], n: int, seed: int) -> tuple[list, list]:
    """(phrase queries, pair queries): lists of (query, path)."""
    rng = random.Random(seed)
    paths = sorted(p for p, b in bodies.items() if cjk.has_runs(b))
    phrases: list[tuple[str, str]] = []
    tries = 0
    while len(phrases) < n and tries < 100 * n:
        tries += 1
        path = rng.choice(paths)
        runs = [m.group(0) for m in cjk.RUN.finditer(bodies[path]) if len(m.group(0)) >= 4]
        if not runs:
            continue
        run = rng.choice(runs)
        i = rng.randrange(len(run) - 3)
        phrase = run[i : i + 4]
        if sum(phrase in b for b in bodies.values()) <= 3 and (phrase, path) not in phrases:
            phrases.append((phrase, path))
    pairs: list[tuple[str, str]] = []
    tries = 0
    while len(pairs) < n and tries < 200 * n:
        tries += 1
        path = rng.choice(paths)
        lines = [
            ln
            for ln in bodies[path].splitlines()
            if any(len(m.group(0)) >= 2 for m in cjk.RUN.finditer(ln))
        ]
        if len(lines) < 2:
            continue
        a, b = rng.sample(lines, 2)
        wa, wb = _word(rng, a), _word(rng, b)
        if wa == wb or wa in b or wb in a:
            continue
        with_a = {p for p, t in bodies.items() if wa in t}
        with_b = {p for p, t in bodies.items() if wb in t}
        if len(with_a) <= 10 and len(with_b) <= 10 and len(with_a & with_b) <= 5:
            pairs.append((f"{wa} {wb}", path))
    return phrases, pairs


def _word(rng: random.Random, line: str) -> str:
    run = rng.choice([m.group(0) for m in cjk.RUN.finditer(line) if len(m.group(0)) >= 2])
    i = rng.randrange(len(run) - 1)
    return run[i : i + 2]


def score(kb, queries, top: int, mode: str) -> tuple[int, list[float]]:
    right, times = 0, []
    for q, path in queries:
        t0 = time.perf_counter()
        hits = kb.search(q, mode=mode, limit=top)
        times.append(time.perf_counter() - t0)
        right += path in [h.path for h in hits]
    return right, times


def question_sets() -> list[tuple[str, Path, dict, str]]:
    """(name, vault folder, question set, what it is) for the sets that are here."""
    sets = []
    for name in BOOKS:
        if (VAULTS / name).is_dir():
            sets.append((name, VAULTS / name, load_questions(QUESTIONS / f"{name}.json"), "book"))
    for lang in ("ko", "th"):
        qset = json.loads((FIXTURES / f"{lang}.json").read_text(encoding="utf-8"))
        sets.append((f"{lang} (fixture)", FIXTURES / lang, qset, "fixture"))
    return sets


def ask(kb, qset: dict, mode: str) -> dict:
    ranks, times, empty = [], [], 0
    cpu = time.process_time()
    for q in qset["questions"]:
        t0 = time.perf_counter()
        hits = kb.search(q["question"], mode=mode, limit=10)
        times.append(time.perf_counter() - t0)
        empty += not hits
        ranks.append(first_rank([h.path for h in hits], set(q["answers"])))
    cpu = time.process_time() - cpu
    return {
        **scores(ranks),
        "empty": empty,
        "p50": statistics.median(times) * 1000,
        "cpu": cpu / len(ranks) * 1000,
    }


def use_segmenter(name: str) -> None:
    """Swap the segmenter kbase.search.segment uses (for comparison only)."""
    if name == "icu" or segment is None:
        return
    segment._icu.cache_clear()
    if name == "pairs":
        segment._icu = lambda: None  # type: ignore[method-assign]
        return
    import rjieba
    from pythainlp.tokenize import word_tokenize
    from sudachipy import dictionary, tokenizer

    icu = segment._icu()
    assert icu is not None
    sudachi = dictionary.Dictionary(dict="core").create()
    mode = tokenizer.Tokenizer.SplitMode.C

    def split(text: str) -> list[str]:
        if segment.KANA.search(text):
            return [m.surface() for m in sudachi.tokenize(text, mode)]
        if segment.HAN.search(text):
            return rjieba.cut(text)
        if re.search("[\u0e00-\u0e7f]", text):
            return [w for w in word_tokenize(text, engine="newmm") if w.strip()]
        return icu(text)

    segment._icu = lambda: split  # type: ignore[method-assign]


SEGMENTERS = {
    # name: (distributions whose installed files are counted, setup, one call on q, sample text)
    "icu4py (ICU 78: zh ja th lo km my)": (
        ["icu4py"],
        "from icu4py.breakers import WordBreaker",
        "list(WordBreaker(q, 'en'))",
        "zh",
    ),
    "rjieba (zh)": (["rjieba"], "import rjieba", "rjieba.cut(q)", "zh"),
    "sudachipy + sudachidict-core (ja)": (
        ["sudachipy", "sudachidict-core"],
        "from sudachipy import dictionary; tok = dictionary.Dictionary(dict='core').create()",
        "tok.tokenize(q)",
        "ja",
    ),
    "pythainlp (th)": (
        ["pythainlp"],
        "from pythainlp.tokenize import word_tokenize",
        "word_tokenize(q)",
        "th",
    ),
    "kiwipiepy + model (ko)": (
        ["kiwipiepy", "kiwipiepy-model"],
        "from kiwipiepy import Kiwi; kiwi = Kiwi()",
        "kiwi.tokenize(q)",
        "ko",
    ),
}
SAMPLES = {
    "zh": "如何处理可恢复的错误",
    "ja": "エラーを処理する方法",
    "th": "ติดตั้งปลั๊กอินจากชุมชน",
    "ko": "복구 가능한 에러를 처리하는 방법",
}


def installed_mb(dists: list[str]) -> float | None:
    from importlib import metadata

    total = 0
    for d in dists:
        try:
            files = metadata.distribution(d).files or []
        except metadata.PackageNotFoundError:
            return None
        total += sum(f.locate().stat().st_size for f in files if f.locate().is_file())
    return total / 1e6


def print_segmenters() -> None:
    print(
        "| segmenter | installed MB | import + first call, ms (median of 3, fresh process)"
        " | ms per query after |"
    )
    print("|---|---|---|---|")
    for name, (dists, setup, call, lang) in SEGMENTERS.items():
        mb = installed_mb(dists)
        if mb is None:
            print(f"| {name} | not installed | | |")
            continue
        loads, each = [], []
        for _ in range(3):
            code = (
                f"import time; q = {SAMPLES[lang]!r}; t0_ = time.perf_counter(); {setup}; {call}"
                "; t1_ = time.perf_counter()\nfor _ in range(200): " + call + "\n"
                "print((t1_ - t0_) * 1000, (time.perf_counter() - t1_) / 200 * 1000)"
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"error: {name}: {out.stderr.strip().splitlines()[-1]}")
            load, per = out.stdout.strip().splitlines()[-1].split()
            loads.append(float(load))
            each.append(float(per))
        print(
            f"| {name} | {mb:.0f} | {statistics.median(loads):.0f} |"
            f" {statistics.median(each):.3f} |"
        )


def index_side() -> None:
    """Index-side segmentation against the pair index: a scratch FTS5 table of each kind over the
    book's chunks, queried with the same words, ranked alike (all words in a chunk, then any)."""
    from icu4py.breakers import WordBreaker

    def icu(text: str) -> str:
        return " ".join(w for w in WordBreaker(text, "en") if w.strip())

    def by_words(text: str) -> str:
        return cjk.RUN.sub(lambda m: " " + icu(m.group(0)) + " ", text)

    tok = "tokenize = 'unicode61 remove_diacritics 2 categories ''L* N* Co M*'''"
    print("| book | index | top-1 | top-3 |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in BOOKS:
            kb = kbase.open(Path(tmp) / f"{name}.db")
            kb.index([VAULTS / name], embed=False)
            rows = kb.reader.execute(
                "SELECT c.id, d.path, f.title, f.headings, f.body FROM chunks AS c"
                " JOIN documents AS d ON d.id = c.doc_id JOIN chunks_fts_content AS f"
                " ON f.id = c.id"
            ).fetchall()
            kb.close()
            con = apsw.Connection(":memory:")
            path = {cid: p for cid, p, *_ in rows}
            for table, write in (("pairs", cjk_table.index_text), ("words", by_words)):
                con.execute(
                    f"CREATE VIRTUAL TABLE {table} USING fts5(body, title, headings, {tok})"
                )
                con.executemany(
                    f"INSERT INTO {table} (rowid, body, title, headings) VALUES (?, ?, ?, ?)",
                    [(cid, write(b), write(t), write(h)) for cid, _, t, h, b in rows],
                )
            qset = load_questions(QUESTIONS / f"{name}.json")
            for table in ("pairs", "words"):
                top1 = top3 = 0
                for q in qset["questions"]:
                    terms = []
                    for piece in re.split(f"({cjk.RUN.pattern})", q["question"]):
                        if not cjk.RUN.fullmatch(piece):
                            terms += [f'"{w}"' for w in re.findall(r"\w+", piece)]
                            continue
                        for w in segment.words(piece):
                            if table == "words":
                                terms.append(f'"{icu(w)}"')
                            else:
                                one = len(w) == 1
                                terms.append('"' + " ".join(cjk.pairs(w)) + '"' + "*" * one)
                    ranked: list[str] = []
                    for expr in (" AND ".join(terms), " OR ".join(terms)):
                        for (cid,) in con.execute(
                            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rank"
                            " LIMIT 200",
                            (expr,),
                        ):
                            if path[cid] not in ranked:
                                ranked.append(path[cid])
                    top1 += bool(ranked) and ranked[0] in q["answers"]
                    top3 += any(a in ranked[:3] for a in q["answers"])
                n = len(qset["questions"])
                print(f"| {name} | {table} | {top1} of {n} | {top3} of {n} |")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=20, help="queries per column")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hybrid", action="store_true", help="also hybrid mode (embeds the vaults)")
    ap.add_argument(
        "--vault", action="append", help="vault folder names (default rust-book-zh, rust-book-ja)"
    )
    ap.add_argument("--segmenter", choices=("icu", "pairs", "dict"), default="icu")
    ap.add_argument("--model", help="the embedding model of the question indexes (with --hybrid)")
    ap.add_argument("--segmenters", action="store_true", help="only the segmenters' costs")
    ap.add_argument("--questions-only", action="store_true", help="only the question table")
    ap.add_argument(
        "--index-side", action="store_true", help="only: words in the index against pairs"
    )
    args = ap.parse_args()
    if args.segmenters:
        print_segmenters()
        return
    if args.index_side:
        index_side()
        return
    use_segmenter(args.segmenter)
    modes = ["keyword"] + (["hybrid"] if args.hybrid else [])
    with tempfile.TemporaryDirectory() as tmp:
        if not args.questions_only:
            print(
                "| vault | mode | 4-char phrase: note in top 3 | two 2-char words: note in top 10"
                " | query p50 ms |"
            )
            print("|---|---|---|---|---|")
            for name in args.vault or list(BOOKS):
                root = VAULTS / name
                if not root.is_dir():
                    print(f"| {name} | absent | | | |")
                    continue
                kb = kbase.open(Path(tmp) / f"{name}.db")
                kb.index([root], embed=args.hybrid)
                bodies = dict(kb.reader.execute("SELECT path, body FROM documents").fetchall())
                phrases, pairs = draw_queries(bodies, args.n, args.seed)
                for mode in modes:
                    r1, t1 = score(kb, phrases, 3, mode)
                    r2, t2 = score(kb, pairs, 10, mode)
                    p50 = statistics.median(t1 + t2) * 1000
                    print(
                        f"| {name} | {mode} | {r1} of {len(phrases)} | {r2} of {len(pairs)} |"
                        f" {p50:.1f} |"
                    )
                kb.close()
            print()
        print(
            f"Questions (segmenter: {args.segmenter}):\n\n"
            "| set | mode | n | top-1 | top-3 | MRR@10 | no match | p50 ms | CPU ms/query |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for name, root, qset, _ in question_sets():
            kb = kbase.open(Path(tmp) / f"q-{root.name}.db")
            kb.index([root], embed=args.hybrid, model=args.model)
            for mode in modes:
                r = ask(kb, qset, mode)
                print(
                    f"| {name} | {mode} | {r['n']} | {r['top1']:.2f} | {r['top3']:.2f} |"
                    f" {r['mrr10']:.3f} | {r['empty']} | {r['p50']:.1f} | {r['cpu']:.1f} |"
                )
            kb.close()


if __name__ == "__main__":
    main()
