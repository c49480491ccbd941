"""-word leaves out notes, not passages: a note that holds an excluded word anywhere (another chunk,
its title) is never returned, in every mode and through every face (API, CLI, MCP, the TUI and
kbase_search() in SQL share the engine). Real files, the real index, the real model."""

from __future__ import annotations

import asyncio
import json

import pytest

import kbase
from kbase.mcp.backend import Backend
from kbase.mcp.server import build_server
from tests.conftest import kbase_cli, write

NOTES = {
    # "garden" in one chunk, "tomatoes" in another (a section of its own)
    "projects/Garden plan.md": "# Garden plan\n\n"
    + "The garden gets compost and a new gravel path this spring. " * 8
    + "\n\n## Beds\n\n"
    + "Tomatoes go in the south bed, with beans along the fence and basil between them. " * 6
    + "\n",
    "Shed.md": "# Shed\n\nThe garden tools hang in the shed by the door.\n",
    "journal/2026-03-14.md": "# 14 March\n\nPlanted tomato seedlings for the garden.\n",
    "Tomatoes.md": "# Tomatoes\n\nA garden favourite.\n",  # the word only in the title
    "zh/花园.md": "# 花园\n\ngarden 的番茄长得很好。\n",  # an excluded word in a run
}
KEPT = ["Shed.md", "zh/花园.md"]  # what 'garden -tomatoes' finds


@pytest.fixture
def index(tmp_path):
    vault = write(tmp_path / "vault", NOTES)
    db = tmp_path / "index.db"
    with kbase.open(db) as kb:
        kb.index([vault], embed=False)
    return db


def paths(kb, query: str, mode: str = "keyword") -> list[str]:
    return [h.path for h in kb.search(query, mode=mode, limit=20)]


def test_a_note_holding_the_excluded_word_in_another_chunk_is_left_out(index):
    with kbase.open(index) as kb:
        beds = kb.sql(
            "SELECT count(*) FROM chunks JOIN documents AS d ON d.id = doc_id"
            " WHERE d.path = 'projects/Garden plan.md'"
        ).rows
        assert beds == [(2,)]  # "garden" and "tomatoes" in different chunks
        assert "projects/Garden plan.md" in paths(kb, "garden")  # it matches without the -word
        # porter stems tomato/tomatoes alike; the title counts; so do words in other chunks
        assert sorted(paths(kb, "garden -tomatoes")) == KEPT
        assert sorted(paths(kb, "garden -番茄")) == [
            "Shed.md",
            "Tomatoes.md",
            "journal/2026-03-14.md",
            "projects/Garden plan.md",
        ]
        assert "projects/Garden plan.md" not in paths(kb, 'garden -"south bed"')
        assert "projects/Garden plan.md" in paths(kb, 'garden -"bed south"')  # a phrase, in order
        # operators alone (a listing) and an OR query leave them out too
        assert paths(kb, "path:projects -beans") == []
        assert "projects/Garden plan.md" not in paths(kb, "compost OR shed -fence")
        assert "Shed.md" in paths(kb, "compost OR shed -fence")
        rows = kb.sql("SELECT path FROM kbase_search('garden -tomatoes', 'keyword', 20)").rows
        assert sorted(r[0] for r in rows) == KEPT


def test_every_face_leaves_the_note_out(index):
    out = kbase_cli(index, "search", "-m", "keyword", "garden -tomatoes", "--json")
    assert sorted(h["path"] for h in json.loads(out.stdout)) == KEPT

    server = build_server(Backend(index))
    r = asyncio.run(server.call_tool("search", {"query": "garden -tomatoes", "limit": 20}))
    assert not r.is_error
    assert sorted(h["path"] for h in r.structured_content["hits"]) == KEPT
    assert "Garden plan" not in r.content[0].text


@pytest.mark.asyncio
async def test_the_tui_leaves_the_note_out(index):
    from tests.test_tui import main, make_app, type_query

    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "garden -tomatoes")
        assert sorted(h.path for h in main(app).results.hits) == KEPT


@pytest.mark.slow
def test_semantic_and_hybrid_leave_the_note_out(tmp_path):
    """The nearest passages of a note that holds the word elsewhere are not results either."""
    vault = write(tmp_path / "vault", NOTES)
    with kbase.open(tmp_path / "e.db") as kb:
        kb.index([vault])
        for mode in ("semantic", "hybrid"):
            assert "projects/Garden plan.md" in paths(kb, "garden beds", mode)
            found = paths(kb, "garden beds -tomatoes", mode)
            assert found and set(found) <= {"Shed.md", "zh/花园.md"}, (mode, found)
            rows = kb.sql(
                f"SELECT path FROM kbase_search('garden beds -tomatoes', '{mode}', 20)"
            ).rows
            assert [r[0] for r in rows] == found
