"""Arbitrary queries (Hypothesis, first written for issue 7): any text is a keyword, semantic or
hybrid query, any filters are fine or one input error, any argv to `kbase search` an answer or
one error line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError, KbaseError
from kbase.search.query import parse_query
from tests.conftest import examples, write

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
    if parse_query(q).empty:  # no word to search for: one error, in every mode
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
