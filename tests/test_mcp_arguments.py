"""The MCP tools' arguments as an agent gets them wrong, through the server kbase mcp runs
(MCPServer.call_tool: validation, the tool, both result forms): each mistake is a one-line tool
error naming the argument and the fix, and a place written as search writes it is read there."""

from __future__ import annotations

import asyncio
import re

import pytest

import kbase
from kbase.mcp.backend import Backend
from kbase.mcp.server import build_server
from tests.conftest import write

LONG = "# Long\n\n" + "".join(f"Line {i} of the long note.\n" for i in range(3, 201))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-args")
    vault = write(
        root / "vault",
        {
            "Long.md": LONG,
            "Garden.md": "# Garden\n\nTomatoes need sun.\n",
            "Sections.md": "# Sections\n\n## First\n\nOne.\n\n## Second\n\nTwo.\n",
            "Plain.md": "Text without a heading.\n",
        },
    )
    db = root / "index.db"
    kbase.open(db).index([vault], embed=False)
    return build_server(Backend(db))


def call(server, tool: str, args: dict):
    r = asyncio.run(server.call_tool(tool, args))
    return r, "\n".join(c.text for c in r.content)


@pytest.mark.parametrize(
    ("tool", "args", "named"),
    [
        ("search", {"query": "sun", "limt": 3}, '"limt"'),
        ("search", {"query": "sun", "folder": "x/", "limt": 3}, '"folder", "limt"'),
        ("read", {"note": "Garden", "line": 3}, '"line"'),
        ("status", {"verbose": True}, '"verbose"'),
    ],
)
def test_an_argument_the_tool_does_not_take_is_an_error_naming_it(server, tool, args, named):
    """A misspelt argument was dropped without a word: the call ran with the default (all ten
    hits, not three; every folder, not x/)."""
    r, text = call(server, tool, args)
    assert r.is_error and "\n" not in text, text
    assert f"{tool} takes no argument" in text and named in text
    assert "hint: its arguments are " in text and "budget" in text


def test_a_huge_unknown_argument_name_is_not_echoed_whole(server):
    r, text = call(
        server, "search", {"query": "sun", "x" * 100_000: 1, **{f"k{i}": i for i in range(20)}}
    )
    assert r.is_error and len(text) < 600 and "and 16 more" in text


def test_a_search_offset_near_the_end_is_blamed_on_the_offset_not_a_limit_never_given(server):
    """offset 995 with limit 10 asked KB.search for 1,005 hits: 'limit 1,005 is too large'."""
    r, text = call(server, "search", {"query": "sun", "offset": 995, "limit": 10})
    assert not r.is_error and "after the first 995" in text, text
    r, text = call(server, "search", {"query": "sun", "offset": 1000})
    assert r.is_error and text.startswith("offset 1,000 is past the last hit"), text
    assert "limit" not in text


def test_read_takes_a_place_as_search_writes_it(server):
    """'Long.md:100' (a hit's place, as search's text gives it) was read as a misspelt name: 'did
    you mean Long?', and the note from line 1, so that line 100 could be cut off by the budget."""
    r, text = call(server, "read", {"note": "Long.md:100"})
    s = r.structured_content
    assert not r.is_error and "did you mean" not in text
    assert (s["first_line"], s["last_line"]) == (90, 110) and "Line 100 of" in s["text"]
    r, _ = call(server, "read", {"note": "Long.md:100-102"})
    assert r.structured_content["text"].splitlines() == [
        f"Line {i} of the long note." for i in (100, 101, 102)
    ]
    r, text = call(server, "read", {"note": "Long.md:900"})
    assert r.is_error and "Long.md has lines 1-200, not 900" in text


def test_a_section_read_says_the_lines_after_it_follow_the_part_read(server):
    r, text = call(server, "read", {"note": "Sections#First"})
    assert not r.is_error and "One." in text and "Two." not in text
    assert "4 more lines follow the part read" in text, text  # not "400 lines at most"
    assert "at most" not in text


# The CLI's words: a command (kbase show, kbase status, kbase sql), an option (--page), the
# notation of kbase show's NOTE:LINE.
CLI_WORDS = re.compile(r"\bkbase (show|status|search|sql|embed|index|check)\b|--\w|:LINE\b|PATH:")


@pytest.mark.parametrize(
    ("tool", "args", "says"),
    [
        ("read", {"note": "Garden", "page": 2}, "leave page out and give start_line, end_line"),
        ("read", {"note": "Gardne.md", "page": 1}, None),  # (a typo away: read, no pages)
        ("read", {"note": "Nothing like it"}, "call status for the roots, or search"),
        ("links", {"note": "Nothing like it"}, "call status for the roots, or search"),
        ("read", {"note": "Plain#Nope"}, "give start_line, end_line instead"),
        ("search", {"query": "sun", "mode": "semantic"}, "search with mode='keyword'"),
        ("search", {"query": "sun", "mode": "hybrid"}, "search with mode='keyword'"),
        ("sql", {"query": "DELETE FROM documents"}, "sql is read-only; refused: DELETE"),
        ("sql", {"query": "SELECT 1; SELECT 2"}, "sql runs one statement"),
        ("sql", {"query": "SELECT 1", "timeout": 0.000001}, None),
    ],
)
def test_errors_are_worded_in_the_tools_arguments_not_the_clis(server, tool, args, says):
    """read with page on a Markdown note hinted 'show a line instead: Garden.md:LINE' (kbase
    show's notation); an unknown note 'see kbase status ..., or kbase search'; a write through
    sql 'change the index with kbase commands (index, embed, check --fix)'."""
    r, text = call(server, tool, args)
    if r.is_error:
        assert not CLI_WORDS.search(text), text
        assert says is None or says in text, text
    else:
        assert says is None, text
