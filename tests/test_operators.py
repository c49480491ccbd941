"""Obsidian's search operators (issue 23 part 5): path:, file:, tag:#x, "exact phrase", -word,
OR, with every mode, in the CLI, the API, the TUI and the MCP tools; a bad operator is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError
from kbase.search.query import Operator, parse_query
from tests.conftest import write


# --- parsing ---------------------------------------------------------------------------------
def test_operators_are_read_and_left_out_of_the_words():
    q = parse_query('path:"Daily notes" -tag:#draft tag:a OR tag:b/c plan -old "next week"')
    assert q.operators == (
        (Operator("path", "Daily notes"),),
        (Operator("tag", "draft", negated=True),),
        (Operator("tag", "a"), Operator("tag", "b/c")),
    )
    assert q.to_fts() == '("plan" AND "next week") NOT "old"'
    assert q.text == 'plan -old "next week"'  # what the embedding model reads
    assert q.error is None


@pytest.mark.parametrize(
    "text, fts",
    [
        ("(path:a OR path:b) c", '"c"'),  # Obsidian's parentheses
        ("File:2024 x", '"x"'),  # any case
        ("content:hello world", '"hello" AND "world"'),  # content:x is the word x
        ('"path:x" y', '"path x" AND "y"'),  # inside a phrase: words
        ("task: call Bob", '"task" AND "call" AND "Bob"'),  # an operator's name and a space
        ("http://example.com 10:30 std::vec", '"http example com" AND "10 30" AND "std vec"'),
    ],
)
def test_what_is_and_is_not_an_operator(text, fts):
    q = parse_query(text)
    assert q.to_fts() == fts and q.error is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("line:(buy milk)", "kbase does not support Obsidian's line: operator"),
        ("section:Goals plan", "kbase does not support Obsidian's section: operator"),
        ("path: plan", "path: needs a value, e.g. path:journal/"),
        ("tag:# plan", "tag: needs a value, e.g. tag:#project"),
        ("plan OR tag:x", "OR joins two words or two operators, not a word and tag:x"),
        ("plan path:[", "path:[: the '[' is never closed"),  # GLOB would match no path
        ("plan -file:a[]b", "file:a[]b: the '[' is never closed"),  # ('[]b' is a set of ']b')
    ],
)
def test_a_bad_operator_is_an_error_saying_what(text, message):
    assert parse_query(text).error[0] == message


# --- searching -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ops")
    vault = write(
        root / "vault",
        {
            "Daily notes/2024-05-01.md": "Plan the garden. #journal\n",
            "Daily notes/2024-05-02.md": "Plan the trip. #journal #draft\n",
            "Projects/Garden plan.md": "---\ntags: [project/garden]\n---\nPlan: beds, compost.\n",
            "Projects/Trip.md": "Trip plan: trains. #project/travel\n",
            "Archive/Old plan.md": "An old plan for the garden. #project\n",
            "Readme.txt": "Plan nothing here.\n",
        },
    )
    db = root / "ops.db"
    k = kbase.open(db)
    k.index([vault], embed=False)
    k.close()
    return db


@pytest.fixture
def kb(index):
    k = kbase.open(index)
    yield k
    k.close()


def paths(hits) -> set[str]:
    return {h.path for h in hits}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("plan path:daily", {"Daily notes/2024-05-01.md", "Daily notes/2024-05-02.md"}),
        ('plan path:"daily notes/2024-05-01"', {"Daily notes/2024-05-01.md"}),
        (
            "plan -path:daily -path:archive",
            {"Projects/Garden plan.md", "Projects/Trip.md", "Readme.txt"},
        ),
        ("plan file:.txt", {"Readme.txt"}),
        ("plan file:plan", {"Projects/Garden plan.md", "Archive/Old plan.md"}),
        ("plan file:2024-05-0*", {"Daily notes/2024-05-01.md", "Daily notes/2024-05-02.md"}),
        (
            "plan tag:#project",  # nested tags too
            {"Projects/Garden plan.md", "Projects/Trip.md", "Archive/Old plan.md"},
        ),
        (
            "plan tag:project/garden OR tag:project/travel",
            {"Projects/Garden plan.md", "Projects/Trip.md"},
        ),
        ("plan tag:journal -tag:draft", {"Daily notes/2024-05-01.md"}),
        ('"the garden" tag:journal', {"Daily notes/2024-05-01.md"}),
        ("garden OR trip path:projects", {"Projects/Garden plan.md", "Projects/Trip.md"}),
        ("plan -garden path:daily", {"Daily notes/2024-05-02.md"}),
    ],
)
def test_operators_restrict_the_notes(kb, query, expected):
    assert paths(kb.search(query, mode="keyword")) == expected


def test_operators_alone_list_the_notes_they_keep_by_path(kb):
    hits = kb.search("tag:#project", mode="keyword")
    assert [h.path for h in hits] == [
        "Archive/Old plan.md",
        "Projects/Garden plan.md",
        "Projects/Trip.md",
    ]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert paths(kb.search("tag:journal -draft")) == {"Daily notes/2024-05-01.md"}
    assert paths(kb.search("path:archive", mode="semantic")) == {"Archive/Old plan.md"}


def test_operators_combine_with_the_options(kb):
    assert paths(kb.search("plan tag:#project", mode="keyword", path="Projects/")) == {
        "Projects/Garden plan.md",
        "Projects/Trip.md",
    }


def test_a_bad_operator_is_an_input_error(kb):
    with pytest.raises(InputError, match="does not support Obsidian's line: operator"):
        kb.search("line:plan x")


def test_a_glob_that_can_match_nothing_is_an_input_error_naming_it(kb):
    with pytest.raises(InputError, match=r"^path '\[draft': the '\[' is never closed"):
        kb.search("plan", path="[draft")
    with pytest.raises(InputError, match=r"^excluded path 'a\['"):
        kb.search("plan", exclude=["a["])
    assert paths(kb.search("plan path:*[[]*")) == set()  # '[[]' is a literal '['
    assert paths(kb.search("plan", path="projects/[gt]*")) == {
        "Projects/Garden plan.md",
        "Projects/Trip.md",
    }


def test_cli_operators_and_a_bad_one_in_one_line(index):
    r = CliRunner().invoke(cli, ["--db", str(index), "search", "--json", "plan", "tag:#journal"])
    assert r.exit_code == 0 and {h["path"] for h in json.loads(r.stdout)} == {
        "Daily notes/2024-05-01.md",
        "Daily notes/2024-05-02.md",
    }
    r = CliRunner().invoke(cli, ["--db", str(index), "search", "block:^abc", "plan"])
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.splitlines()[0] == "Error: kbase does not support Obsidian's block: operator"


def test_mcp_search_reads_operators(kb):
    from kbase.mcp import tools

    reply = tools.search(kb, "plan -tag:draft path:daily", mode="keyword")
    assert [h.path for h in reply.structured.hits] == ["Daily notes/2024-05-01.md"]


@pytest.mark.slow
def test_hybrid_with_operators(tmp_path):
    """With embeddings (the real model), hybrid and semantic keep only what the operators keep,
    and the model reads the words alone."""
    from kbase.embed import embedder

    v = write(
        tmp_path / "v",
        {
            "a/Sun.md": "Tomatoes need sun and water. #garden\n",
            "b/Shade.md": "Ferns grow in the shade. #garden\n",
            "b/Car.md": "The car needs new tyres.\n",
        },
    )
    model = embedder.default_embedder()
    seen: list[str] = []
    query = model.embed_query

    class Spy:
        def __getattr__(self, name):
            return getattr(model, name)

        def embed_query(self, text):
            seen.append(text)
            return query(text)

    k = kbase.open(tmp_path / "h.db", embedder=Spy())
    k.index([v])
    assert paths(k.search("plants that need light tag:#garden", mode="hybrid")) <= {
        "a/Sun.md",
        "b/Shade.md",
    }
    assert paths(k.search("plants that need light path:b/", mode="semantic")) <= {
        "b/Shade.md",
        "b/Car.md",
    }
    assert seen[-1] == "plants that need light"
    k.close()


@pytest.mark.asyncio
async def test_tui_says_what_is_wrong_with_a_query(index):
    """A glob that can match nothing (in the query or the filter bar) or an operator kbase does
    not read, alone too, is said (a notification, and in the preview), not 0 results."""
    from tests.test_tui import main, make_app, notifications, settle, type_query

    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main(app)
        for query in ("plan path:[", "path:[", "task:x"):
            await type_query(pilot, "plan")
            assert screen.results.hits
            await type_query(pilot, query)
            assert not screen.results.hits and screen.preview.location is None
            said = "never closed" if "[" in query else "does not support Obsidian's task:"
            assert said in notifications(app)[-1].message
        await type_query(pilot, "plan")
        screen.set_filters("[", "")
        await settle(pilot)
        assert "path '[': the '[' is never closed" in notifications(app)[-1].message


@pytest.mark.asyncio
async def test_tui_searches_operators_alone(index):
    from tests.test_tui import main, make_app, type_query

    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "tag:#journal")
        screen = main(app)
        assert {h.path for h in screen.results.hits} == {
            "Daily notes/2024-05-01.md",
            "Daily notes/2024-05-02.md",
        }
