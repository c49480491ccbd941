"""What an agent pays before and after its first call (issue 35 item 6): tools/list within 2,000
tokens, search hits that carry the passage that answers (its numbered lines, with their range),
and a structured form no larger than the text of the same result.

Tokens are kbase.mcp.budget's estimate (four ASCII characters a token, one for any other
character), as for the result budget."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp_types import ListToolsResult

import kbase
from kbase.mcp import tools
from kbase.mcp.backend import Backend
from kbase.mcp.budget import json_tokens, tokens
from kbase.mcp.server import build_server
from tests.conftest import write

TOOLS_LIST_TOKENS = 2_000

GUIDE = (
    "# Guide\n\n## Reading input\n\n"
    + "".join(
        f"Context line {i} about the standard library and its many modules.\n" for i in range(20)
    )
    + "Call `io::stdin().read_line(&mut guess)` to read one line of input from the user.\n"
    + "".join(f"More about buffers, line {i}, and what the handle does.\n" for i in range(12))
    + "\n## Numbers\n\nParse the line with `guess.trim().parse()` to get a number.\n"
)
ANSWER_LINE = 4 + 20 + 1  # the read_line line of GUIDE (1-based)


@pytest.fixture
def kb(tmp_path):
    vault = write(
        tmp_path / "vault",
        {
            "Guide.md": GUIDE,
            "Other.md": "# Other\n\nInput and output in general; see [[Guide#Reading input]].\n",
            "Links.md": "# Links\n\n"
            + "".join(f"- [[Guide]] and [[Other]] {i}\n" for i in range(30)),
        },
    )
    db = tmp_path / "kb.db"
    k = kbase.open(db)
    k.index([vault], embed=False)
    yield k
    k.close()


def test_tools_list_is_within_2000_tokens(kb):
    listed = asyncio.run(build_server(Backend(kb.path)).list_tools())
    wire = ListToolsResult(tools=listed).model_dump_json(by_alias=True, exclude_none=True)
    assert tokens(wire) <= TOOLS_LIST_TOKENS, tokens(wire)
    # still whole: every tool with a description, an input and an output schema
    for t in listed:
        assert t.description and t.input_schema["type"] == "object" and t.output_schema
        assert '"title":' not in json.dumps(t.input_schema)  # no titles


def test_a_search_hit_carries_the_passage_that_answers_with_its_lines(kb):
    r = tools.search(kb, "read a line of input from the user", mode="keyword")
    hit = r.structured.hits[0]  # type: ignore[union-attr]
    assert hit.path == "Guide.md" and hit.passage and hit.lines
    first, last = hit.lines
    assert first <= ANSWER_LINE <= last and last - first < tools.PASSAGE_LINES
    assert "read_line(&mut guess)" in hit.passage
    # the passage is the note's own lines, numbered in the text for citation
    body = (kb.path.parent / "vault" / "Guide.md").read_text().split("\n")
    assert hit.passage.split("\n") == body[first - 1 : last]
    assert f"{ANSWER_LINE} | Call `io::stdin().read_line(&mut guess)`" in r.text
    # snippets only, as before, when asked
    plain = tools.search(kb, "read a line of input from the user", mode="keyword", passages=0)
    assert plain.structured.hits[0].passage is None and plain.structured.hits[0].snippet  # type: ignore[union-attr]


def test_passages_keep_to_the_budget(kb):
    for budget in (500, 1_000, 8_000):
        r = tools.search(kb, "line", mode="keyword", budget=budget, passages=100)
        assert tokens(r.text) <= budget and json_tokens(r.data()) <= budget


@pytest.mark.parametrize("passages", [0, 3, 10])
def test_the_structured_form_of_a_search_is_no_larger_than_its_text(kb, passages):
    for query in ("line", "read input", "guide numbers parse", "Other"):
        r = tools.search(kb, query, mode="keyword", passages=passages)
        assert json_tokens(r.data()) <= tokens(r.text), (query, r.data())
