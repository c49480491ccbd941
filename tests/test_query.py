import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbase.search.query import parse_query
from tests.conftest import examples


@pytest.fixture(scope="module")
def fts():
    con = apsw.Connection(":memory:")
    con.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
    )
    con.executemany(
        "INSERT INTO t(body) VALUES (?)",
        [("c++ and e.g. rust",), ("alpha beta gamma",), ("near and not",)],
    )
    return con


@pytest.mark.parametrize(
    "text,expected",
    [
        ("hello world", '"hello" AND "world"'),
        ('"exact phrase" -bad', '("exact phrase") NOT "bad"'),
        ("pre* OR post", '("pre"* OR "post")'),
        ("a OR b c", '("a" OR "b") AND "c"'),
        ("c++ e.g.", '"c" AND "e g"'),
        ("AND NOT NEAR( OR", '"AND" AND "NOT" AND "NEAR"'),
        ('"unbalanced phrase', '"unbalanced phrase"'),
        ('foo-bar -"x y"', '("foo bar") NOT "x y"'),
        ('say "hi"" there', '"say" AND "hi" AND "there"'),
        ("🎉 party", '"party"'),
        ("-only", ""),
        ("* ( ) : ^", ""),
    ],
)
def test_query_translation(text, expected):
    assert parse_query(text).to_fts() == expected


def test_any_mode_ors_the_clauses():
    assert parse_query("x b -c").to_fts(match_any=True) == '("x" OR "b") NOT "c"'


def test_any_mode_leaves_out_stop_words_unless_nothing_else_is_left():
    q = parse_query('the role of "the who" in music*')
    assert (
        q.to_fts() == '"the" AND "role" AND "of" AND "the who" AND "in" AND "music"*'
    )  # all words: as typed
    assert (
        q.to_fts(match_any=True) == '"role" OR "the who" OR "music"*'
    )  # phrases and prefixes stay
    assert (
        parse_query("to be or not to be").to_fts(match_any=True)
        == '"to" OR "be" OR "or" OR "not" OR "to" OR "be"'
    )


@settings(max_examples=examples(2000), deadline=None)
@given(st.text(max_size=60))
def test_any_text_makes_a_valid_fts5_query(fts, text):
    q = parse_query(text)
    for expr in {q.to_fts(), q.to_fts(match_any=True)} - {""}:
        fts.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchall()


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ['"', "-", "*", "OR", "AND", "NOT", "NEAR(", ")", "(", "c++", "x", ":", "^", " ", "'"]
        ),
        max_size=12,
    )
)
def test_operator_soup_never_breaks(fts, parts):
    q = parse_query(" ".join(parts))
    if not q.empty:
        fts.execute("SELECT count(*) FROM t WHERE t MATCH ?", (q.to_fts(),)).fetchall()


def test_any_mode_leaves_out_single_letters():
    q = parse_query("vitamin d and k levels")
    assert q.to_fts(match_any=True) == '"vitamin" OR "levels"'
    assert q.to_fts() == '"vitamin" AND "d" AND "and" AND "k" AND "levels"'  # all words: as typed
    assert (
        parse_query("today's x").to_fts(match_any=True) == '"today s"'
    )  # a possessive is a phrase
    assert parse_query("x").to_fts(match_any=True) == '"x"'  # nothing else left: kept
