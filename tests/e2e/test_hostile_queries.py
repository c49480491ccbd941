"""Arbitrary queries (Hypothesis, first written for issue 7): any text is a keyword, semantic or
hybrid query, any filters are fine or one input error, any argv to `kbase search` an answer or
one error line. Queries without end (issue 27): hostile queries per mode end quickly with an
answer or one line, bounds dedupe and cut and say so, a search that runs too long stops."""

from __future__ import annotations

import json
import random
import re
import time

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError, KbaseError
from kbase.search.query import parse_query
from tests.conftest import examples, write
from tests.helpers import WordsEmbedder

# Any text a user can type, including lone surrogates (what Python makes of argv bytes that are
# not UTF-8).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=80)


QUERY_TEXT = st.one_of(
    ANY_TEXT,
    st.lists(
        st.sampled_from(
            [
                '"',
                "*",
                "-",
                "OR",
                "AND",
                "NOT",
                "NEAR(",
                ")",
                "(",
                "^",
                ":",
                "c++",
                "e.g.",
                "tomato",
                "garden",
                "sqlite",
                "'",
                "\\",
                "\x00",
                "🎉",
                "ß",
                "İ",
                "﷽",
                "\u0301",
                "a" * 300,
            ]
        ),
        max_size=8,
    ).map(" ".join),
)


PROPERTY = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.fixture(scope="module")
def query_index(tmp_path_factory):
    """A small index with embeddings from the real model (loaded once for the module)."""
    from kbase.embed.embedder import default_embedder

    tmp = tmp_path_factory.mktemp("queries")
    vault = write(
        tmp / "vault",
        {
            "Garden.md": "---\ntags: [garden, home/outside]\ndate: 2024-05-01\n---\n"
            "# Garden\n\nTomatoes need sun.\n\n"
            "## Beds\n\nRaised beds drain well. [[SQLite]]\n",
            "SQLite.md": "# SQLite\n\n"
            "Write-ahead logging lets readers and writers work at once. #db/sqlite\n\n"
            "```sql\nPRAGMA journal_mode = WAL;\n```\n",
            "notes.txt": "Plain text about checkpoints, C++ and e.g. abbreviations. ß İ 🎉\n",
            "Unicode.md": "# Ünïcödé\n\nCafé naïve 日本語 текст ﷽\n",
        },
    )
    dbp = tmp / "q.db"
    kb = kbase.KB(dbp, embedder=default_embedder())
    kb.index([vault])
    assert kb.status().chunks > 0
    return dbp, kb


@pytest.mark.slow
@given(q=QUERY_TEXT)
@settings(**PROPERTY, max_examples=examples(2000))
def test_any_text_is_a_keyword_query(query_index, q):
    _, kb = query_index
    parsed = parse_query(q)
    if parsed.error:  # an operator kbase cannot read ("PATH:"): its own one error
        with pytest.raises(InputError, match=re.escape(parsed.error[0])):
            kb.search(q, mode="keyword", limit=5)
        return
    if parsed.empty and not parsed.operators:  # no word to search for: one error, in every mode
        with pytest.raises(InputError, match="no words to search for"):
            kb.search(q, mode="keyword", limit=5)
        return
    for h in kb.search(q, mode="keyword", limit=5):
        assert h.path and h.line >= 1


@given(
    q=QUERY_TEXT,
    path=st.one_of(st.none(), ANY_TEXT),
    tags=st.lists(ANY_TEXT, max_size=2),
    since=st.one_of(st.none(), ANY_TEXT, st.dates().map(str)),
    limit=st.integers(-3, 50),
)
@settings(**PROPERTY, max_examples=examples(500))
def test_any_filters_are_fine_or_an_input_error(query_index, q, path, tags, since, limit):
    _, kb = query_index
    try:
        kb.search(q, mode="keyword", limit=limit, path=path, tags=tags, since=since)
    except (
        KbaseError
    ) as e:  # only an unreadable --since, a limit under 1 or a query without words is an error
        assert (
            (since is not None and "is not a date" in e.message)
            or (limit < 1 and "limit must be at least 1" in e.message)
            or parse_query(q).empty
        )


@pytest.mark.slow
@given(q=QUERY_TEXT, mode=st.sampled_from(["semantic", "hybrid"]))
@settings(**PROPERTY, max_examples=examples(600))
def test_any_text_is_a_semantic_and_hybrid_query(query_index, q, mode):
    _, kb = query_index
    if parse_query(q).empty:
        with pytest.raises(InputError, match="no words to search for"):
            kb.search(q, mode=mode, limit=5)
        return
    hits = kb.search(q, mode=mode, limit=5)
    assert all(h.path for h in hits)


@given(
    words=st.lists(ANY_TEXT, min_size=1, max_size=4),
    dashdash=st.booleans(),
    extra=st.lists(
        st.sampled_from(
            [
                ["-m", "keyword"],
                ["-m", "semantic"],
                ["-m", "hybrid"],
                ["--json"],
                ["--csv"],
                ["--jsonl"],
                ["-n", "3"],
                ["--tag", "garden"],
                ["--path", "*.md"],
                ["--since", "2w"],
                ["--until", "2024-01-01"],
                ["--explain"],
            ]
        ),
        max_size=3,
    ),
)
@pytest.mark.slow
@settings(**PROPERTY, max_examples=examples(300))
def test_any_argv_to_kbase_search_is_an_answer_or_one_error_line(
    query_index, words, dashdash, extra
):
    dbp, _ = query_index
    args = [
        "--db",
        str(dbp),
        "search",
        *[a for pair in extra for a in pair],
        *(["--"] if dashdash else []),
        *words,
    ]
    r = CliRunner().invoke(cli, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
    assert r.exit_code in (0, 1, 2), (
        args,
        r.output,
    )  # 2: click's usage error (e.g. an unknown -option)
    if r.exit_code == 1:
        assert r.stderr.startswith("Error: "), (args, r.stderr)
    if r.exit_code == 0 and ("--json" in args) and not dashdash:
        json.loads(r.stdout)


FUZZ_NOTES = {
    "Garden.md": "---\ntags: [garden]\n---\n# Garden\n\nTomatoes need sun and water.\n\n"
    "## Beds\n\nRaised beds drain well. [[SQLite]]\n",
    "SQLite.md": "# SQLite\n\nWrite-ahead logging lets readers and writers work at once. #db\n\n"
    "```sql\nPRAGMA journal_mode = WAL;\n```\n",
    "Tasks.md": "# Tasks\n\n"
    + "".join(f"- [ ] task {i} about tasks and dates\n" for i in range(60)),
    "cjk.md": "# 所有权\n\n所有权是 Rust 最独特的功能。日本語のテキスト。한국어 텍스트.\n",
    "notes.txt": "Plain text about checkpoints, C++ and e.g. abbreviations. ß İ 🎉\n",
}


_ALPHABET = (
    ['"', "*", "-", "OR", "AND", "NOT", "NEAR(", ")", "(", "^", ":", "{", "}", "+", "title:"]
    + ["tasks", "garden", "sqlite", "a", "the", "所有权", "日本語", "한국어", "c++", "e.g."]
    + ["\x00", "\u200b", "\u0301", "🎉", "ß", "İ", "\ud800", "\t", "\n", "\u3000", "﷽"]
)


def hostile_queries(n: int, seed: int) -> list[str]:
    """``n`` seeded queries of the kinds that broke or could break the query path: a word
    repeated thousands of times, thousands of distinct words, prefixes, operators, unbalanced
    quotes, giant tokens, CJK runs without spaces, control and combining characters."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 8
        if kind == 0:
            q = (rng.choice(_ALPHABET[15:25]) + " ") * rng.randint(100, 5000)
        elif kind == 1:
            q = " ".join(f"w{rng.randrange(10**6)}" for _ in range(rng.randint(33, 3000)))
        elif kind == 2:
            q = " ".join(rng.choice("abcdefghijklmnopqrstuvwxyz") + "*" for _ in range(200))
        elif kind == 3:
            q = " OR ".join(rng.choice(_ALPHABET) for _ in range(rng.randint(2, 1500)))
        elif kind == 4:
            q = rng.choice(["x", "所", "a1"]) * rng.randint(1000, 100_000)
        elif kind == 5:
            q = "".join(
                rng.choice("所有权是最独特的功能日本語のテキスト")
                for _ in range(rng.randint(300, 5000))
            )
        elif kind == 6:
            q = '"' * rng.randint(1, 300) + " ".join(rng.choices(_ALPHABET, k=400))
        else:
            q = "".join(rng.choices(_ALPHABET, k=rng.randint(1, 2000)))
        out.append(q)
    return out


@pytest.fixture(scope="module")
def fuzz_kb(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    vault = write(tmp / "vault", FUZZ_NOTES)
    kb = kbase.KB(tmp / "f.db", embedder=WordsEmbedder())
    kb.index([vault])
    assert kb.coverage()[0] == kb.coverage()[1] > 0
    kb.search_timeout = 5.0  # far above what any query here needs on this index (milliseconds)
    yield kb
    kb.close()


# Per mode: each query is new (generated from its seed), so a few hundred cover the generator's
# kinds many times over (2,000 took a minute of the suite per mode).
HOSTILE_QUERIES = 600


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_hostile_queries_per_mode_end_quickly_with_an_answer_or_one_line(fuzz_kb, mode):
    from kbase.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, bound_query, parse_query

    slowest = (0.0, "")
    errors = 0
    for q in hostile_queries(
        HOSTILE_QUERIES, seed={"keyword": 1, "semantic": 2, "hybrid": 3}[mode]
    ):
        bounded, notice = bound_query(q)
        assert len(bounded) <= MAX_QUERY_CHARS
        parsed = parse_query(bounded)
        terms = {t for clause in parsed.clauses for t in clause} | set(parsed.excluded)
        assert len(terms) <= MAX_QUERY_TERMS
        t0 = time.perf_counter()
        try:
            hits = fuzz_kb.search(q, mode=mode, limit=5)
        except InputError as e:
            errors += 1
            assert "time limit" not in e.message, q[:200]  # no query needed the limit
            assert parse_query(bounded).empty and "no words to search for" in e.message
            assert "\n" not in str(e).replace(repr(q), "")
            continue
        slowest = max(slowest, (time.perf_counter() - t0, q[:80]))
        assert hits.notice == notice
        assert all(h.path and h.line >= 1 for h in hits)
    print(
        f"{mode}: {HOSTILE_QUERIES} hostile queries, {errors} without words;"
        f" slowest {slowest[0]:.3f} s"
    )


def test_query_bounds_dedupe_cut_and_say_so(fuzz_kb):
    from kbase.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS

    hits = fuzz_kb.search("tasks " * 2000, mode="keyword")
    assert hits and hits[0].path == "Tasks.md"
    assert hits.notice == "query 1,999 repeated terms counted once"
    assert (
        fuzz_kb.search("Tasks tasks", mode="keyword").notice == "query 1 repeated term counted once"
    )
    many = " ".join(f"w{i}" for i in range(MAX_QUERY_TERMS)) + " tasks"
    assert (
        f"its first {MAX_QUERY_TERMS} distinct terms" in fuzz_kb.search(many, mode="keyword").notice
    )
    assert fuzz_kb.search("tasks garden", mode="keyword").notice is None
    long = fuzz_kb.search("tasks " + "x" * 10 * MAX_QUERY_CHARS, mode="semantic")
    assert "cut to its first" in long.notice
    with pytest.raises(InputError, match="at most 1,000 results"):
        fuzz_kb.search("tasks", limit=10**9)


def test_a_search_that_runs_too_long_stops_with_one_line(fuzz_kb, monkeypatch):
    from kbase.search import keyword

    real = keyword._ranked_docs

    def slow(con, *a, **k):  # a statement that never ends by itself
        con.execute(
            "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
        ).fetchall()
        return real(con, *a, **k)

    monkeypatch.setattr(keyword, "_ranked_docs", slow)
    monkeypatch.setattr(fuzz_kb, "search_timeout", 0.5)
    t0 = time.monotonic()
    with pytest.raises(InputError) as e:
        fuzz_kb.search("tasks", mode="keyword")
    assert time.monotonic() - t0 < 5
    assert "search stopped after the 0.5 s time limit" in e.value.message and e.value.hint
    monkeypatch.undo()
    assert fuzz_kb.search("tasks", mode="keyword")  # the connection is fine afterwards


def test_kbase_search_cli_with_a_2000_word_query(tmp_path):
    vault = write(tmp_path / "v", FUZZ_NOTES)
    dbp = tmp_path / "c.db"
    kbase.open(dbp).index([vault], embed=False)
    for q in ("a " * 2000, "tasks " * 2000, " ".join(f"w{i}" for i in range(2000)) + " tasks"):
        r = CliRunner().invoke(cli, ["--db", str(dbp), "search", "-m", "keyword", q])
        assert r.exit_code in (0, 1) and "Traceback" not in r.output, r.output
        assert r.stderr.startswith("note: query ") or r.stderr.startswith("Error: no words")
