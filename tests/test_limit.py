"""A search's first hits do not depend on the limit asked (issue 32): every tier and pass runs on
the same candidates whatever the limit, so a page of 3 is the first 3 of a page of 10 or 1,000,
in every mode and through every face (the Python API, the CLI, the MCP search tool, the TUI).

On a real vault (foam-docs, 86 notes) with the real model, over its question sets' questions and
its notes' names. (Building the index takes minutes on a busy machine: a longer time limit.)"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest
from click.testing import CliRunner

import kbase
from tests.conftest import shared

REPO = Path(__file__).resolve().parents[1]
VAULT = "foam-docs"
MODES = ("keyword", "semantic", "hybrid")
LIMITS = (1, 3, 10)  # and 1,000 for every eighth query (a page of every note: slower)


def queries() -> list[str]:
    """The vault's questions (every set of bench/questions that names it), its notes' names,
    and a few words that most notes hold (where the "some words" pass was skipped)."""
    out: list[str] = []
    for f in sorted((REPO / "bench" / "questions").rglob("*.json")):
        qset = json.loads(f.read_text(encoding="utf-8"))
        if qset.get("vault") == VAULT:
            out += [q["question"] for q in qset["questions"]]
    names = sorted(PurePosixPath(p).stem for p in _paths())
    out += names[::4]
    out += ["foam", "note", "wikilink graph", "daily note template", "foam vscode settings"]
    return list(dict.fromkeys(out))


def _paths() -> list[str]:
    root = shared("vaults", VAULT)
    return [p.relative_to(root).as_posix() for p in root.rglob("*.md")]


@pytest.fixture
def foam(foam_kb):
    return foam_kb


def shown(hits) -> list[tuple]:
    return [(h.path, h.line, h.snippet) for h in hits]


def agree(pages: dict[int, list]) -> bool:
    """Each page is the first hits of every larger one (and a short page is the whole list)."""
    limits = sorted(pages)
    for small, large in zip(limits, limits[1:]):
        a, b = pages[small], pages[large]
        if a != b[: len(a)] or (len(a) < small and len(b) != len(a)):
            return False
    return True


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_first_hits_of_every_limit_agree_through_the_api(foam):
    asked = queries()
    assert len(asked) >= 130
    differ = {}
    for mode in MODES:
        for i, q in enumerate(asked):
            limits = (*LIMITS, 1000) if i % 8 == 0 else LIMITS
            pages = {n: shown(foam.search(q, mode=mode, limit=n)) for n in limits}
            if not agree(pages):
                differ.setdefault(mode, []).append(q)
    assert not differ, differ


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_first_hits_agree_through_the_cli_the_mcp_tool_and_the_tui(foam):
    import asyncio

    from kbase.cli.app import cli
    from kbase.mcp import tools

    asked = queries()[::12]
    runner = CliRunner()
    for mode in MODES:
        for q in asked:
            api = [h.path for h in foam.search(q, mode=mode, limit=50)]
            # the CLI (a new process's KB, the model loaded again: the slow part) at one limit
            r = runner.invoke(
                cli,
                ["--db", str(foam.path), "search", q, "-m", mode, "-n", "3", "--format", "json"],
                catch_exceptions=False,
            )
            assert r.exit_code == 0, r.output
            assert [h["path"] for h in json.loads(r.stdout)] == api[:3], (mode, q)
            for n in (3, 10):
                mcp = [h["path"] for h in tools.search(foam, q, mode=mode, limit=n).data()["hits"]]
                assert mcp == api[:n], (mode, q, n)
            # a second page of the MCP tool continues the first
            page2 = tools.search(foam, q, mode=mode, limit=3, offset=3).data()["hits"]
            assert [h["path"] for h in page2] == api[3:6], (mode, q)
    asyncio.run(_tui_agrees(foam, asked[:4]))


async def _tui_agrees(kb: kbase.KB, asked: list[str]) -> None:
    """The TUI's search (its page of tui.logic.SEARCH_LIMIT hits, in each mode) begins with the
    API's page of 10."""
    from tests.test_tui import main, make_app, settle, type_query

    app = make_app(kb.path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, timeout=60)
        screen = main(app)
        for mode in MODES:
            while screen.mode != mode:
                await pilot.press("ctrl+t")
            for q in asked:
                await type_query(pilot, q, timeout=60)  # a loaded machine renders slowly
                assert screen.results.source == mode, (mode, q)
                got = [h.path for h in screen.results.hits]
                assert got[:10] == [h.path for h in kb.search(q, mode=mode, limit=10)], (mode, q)
