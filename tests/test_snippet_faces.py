"""A hit shows the same passage and line in every face (issue 32 item 5): the Python API, the
CLI's JSON, the MCP search tool (its snippet, and the passage it shows instead) and the TUI's
results and preview; and the line is one the snippet shows (it holds a highlighted word, inside
the hit's chunk). On a real vault (foam-docs) with the real model, questions from its sets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kbase
from kbase.mcp import tools
from kbase.mcp.budget import clip
from tests.conftest import shared

REPO = Path(__file__).resolve().parents[1]
MODES = ("keyword", "semantic", "hybrid")


def questions(n: int) -> list[str]:
    qset = json.loads((REPO / "bench" / "questions" / "foam-docs.json").read_text("utf-8"))
    return [q["question"] for q in qset["questions"] if "answer" in q][:n]


def shown(h) -> tuple:
    """What a face shows of a hit's passage: its chunk, line, snippet and the snippet's marks."""
    return (h.path, h.chunk_id, h.line, h.snippet, tuple(map(tuple, h.highlights)))


def _record(h: dict) -> tuple:
    return (h["path"], h["chunk_id"], h["line"], h["snippet"], tuple(map(tuple, h["highlights"])))


@pytest.fixture
def foam(foam_kb):
    return foam_kb


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_line_is_in_the_snippet_and_in_the_hit_s_chunk(foam):
    root = shared("vaults", "foam-docs")
    checked = 0
    for mode in MODES:
        for q in questions(24):
            for h in foam.search(q, mode=mode, limit=5):
                c = foam.chunk(h.chunk_id)
                assert c.line <= h.line <= c.end_line, (mode, q, h.path)
                if mode == "semantic":  # no words to find: the chunk's start
                    assert h.line == c.line and not h.highlights
                    continue
                marked = [h.snippet[a:b].casefold() for a, b in h.highlights]
                if not marked:  # (every match hidden by rendering: a link's target, say)
                    continue
                line = (root / h.path).read_text("utf-8").splitlines()[h.line - 1].casefold()
                assert any(m in line for m in marked), (mode, q, h.path, h.line, h.snippet)
                checked += 1
    assert checked >= 100


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_cli_mcp_and_tui_show_the_api_s_passage_and_line(foam):
    from kbase.cli.app import cli

    asked = questions(40)[::5]
    runner = CliRunner()
    for mode in MODES:
        for q in asked:
            api = foam.search(q, mode=mode, limit=10)
            assert api, (mode, q)
            r = runner.invoke(
                cli,
                ["--db", str(foam.path), "search", q, "-m", mode, "-n", "10", "--format", "json"],
                catch_exceptions=False,
            )
            assert r.exit_code == 0, r.output
            got = [_record(h) for h in json.loads(r.stdout)]
            assert got == [shown(h) for h in api], (mode, q)
            # MCP: the snippet and line, or (the first hits) the passage's lines around the line
            snippets = tools.search(foam, q, mode=mode, limit=10, passages=0).data()["hits"]
            assert [(h["path"], h["line"]) for h in snippets] == [(h.path, h.line) for h in api]
            assert [h["snippet"] for h in snippets] == [clip(h.snippet, 600) for h in api]
            for item, h in zip(tools.search(foam, q, mode=mode, limit=3).data()["hits"], api):
                assert item["line"] == h.line, (mode, q)
                if item.get("passage"):
                    first, last = item["lines"]
                    assert first <= h.line <= last, (mode, q, item["lines"], h.line)
    asyncio.run(_tui_shows(foam, asked[:3]))


async def _tui_shows(kb: kbase.KB, asked: list[str]) -> None:
    """The TUI's results are the API's hits (chunk, line, snippet), and its preview opens the
    one selected at its line and chunk."""
    from tests.test_tui import main, make_app, settle, type_query

    app = make_app(kb.path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, timeout=60)
        screen = main(app)
        for mode in MODES:
            while screen.mode != mode:
                await pilot.press("ctrl+t")
            for q in asked:
                await type_query(pilot, q, timeout=60)
                api = kb.search(q, mode=mode, limit=10)
                assert [shown(h) for h in screen.results.hits[:10]] == [shown(h) for h in api]
                await settle(pilot, timeout=60)
                hit, where = screen.results.current, screen.history[screen.history_pos]
                assert hit is not None and shown(hit) in {shown(h) for h in api}
                assert (where.path, where.line, where.chunk_id) == (
                    hit.path,
                    hit.line,
                    hit.chunk_id,
                ), (mode, q)
