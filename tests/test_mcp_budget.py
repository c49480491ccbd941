"""No tool result passes its budget, for any argument, on a big vault (issue 26: 2,000 notes from
bench/gen_vault.py plus notes built to overflow: a hub with thousands of links, a line of
200,000 characters, a title of 5,000 characters, hundreds of tags). Every tool is walked with large
arguments through the server kbase mcp runs (MCPServer.call_tool: validation, the tool, both
result forms), and each cut result says how to continue."""

from __future__ import annotations

import asyncio

import pytest

import kbase
from kbase.mcp.backend import Backend
from kbase.mcp.budget import json_tokens, tokens
from kbase.mcp.server import build_server
from tests.conftest import write

NOTES = 2_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from bench.gen_vault import generate

    root = tmp_path_factory.mktemp("budget")
    vault = root / "vault"
    generate(vault, NOTES, seed=4)
    write(
        vault,
        {
            "Hub.md": "# Hub\n\n"
            + "".join(f"- [[Note {i}]] is about {'x' * (i % 50)}\n" for i in range(4000)),
            "Wide.md": "# Wide\n\n" + "wide " * 40_000 + "\n",
            "Long title.md": "---\ntitle: " + "T" * 5000 + "\n---\n\nBody [[Hub]].\n",
            "Tags.md": "# Tags\n\n" + " ".join(f"#tag{i}" for i in range(600)) + "\n",
            "Quotes.md": "# Quotes\n\n" + ('"\\' * 5000 + "\n") * 50,
            "日本語.md": "# 日本語\n\n" + "日本語の文章です。" * 5_000 + "\n",
            **{f"spokes/Spoke {i}.md": f"# Spoke {i}\n\nSee [[Hub]].\n" for i in range(1500)},
        },
    )
    db = root / "big.db"
    kbase.open(db).index([vault], embed=False)
    return db


CALLS = [
    ("search", {"query": "the", "limit": 100}),
    ("search", {"query": "note OR hub OR wide", "limit": 100, "offset": 50}),
    ("search", {"query": "日本語", "limit": 100}),
    ("read", {"note": "Hub"}),
    ("read", {"note": "Hub", "start_line": 1, "end_line": 1_000_000}),
    ("read", {"note": "Wide"}),
    ("read", {"note": "Wide", "start_line": 3, "end_line": 3, "start_char": 100_000}),
    ("read", {"note": "Quotes", "start_line": 1, "end_line": 52}),
    ("read", {"note": "日本語.md"}),
    ("read", {"note": "Long title.md"}),
    ("read", {"note": "Tags"}),
    ("links", {"note": "Hub", "limit": 1000}),
    ("links", {"note": "Hub", "direction": "backlinks", "limit": 1000, "offset": 100}),
    ("links", {"note": "Long title.md", "limit": 1000}),
    ("related", {"note": "Hub", "limit": 100, "include_linked": True}),
    ("related", {"note": "Wide", "limit": 100}),
    ("sql", {"query": "SELECT * FROM documents", "max_rows": 5000}),
    ("sql", {"query": "SELECT * FROM chunk_texts", "max_rows": 5000, "offset": 1000}),
    ("sql", {"query": "SELECT path, title, body, body FROM documents", "max_rows": 5000}),
    ("sql", {"query": "SELECT * FROM links", "max_rows": 5000}),
    ("sql", {"query": "SELECT randomblob(100000), zeroblob(5000)", "max_rows": 10}),
    ("status", {}),
]


def _sizes(result) -> tuple[int, int]:
    text = "\n".join(c.text for c in result.content)
    data = result.structured_content
    return tokens(text), json_tokens(data) if data is not None else 0


@pytest.mark.slow
@pytest.mark.parametrize("budget", [500, 2_000, 8_000, 30_000])
def test_no_result_passes_the_budget(big, budget):
    server = build_server(Backend(big))

    async def walk():
        out = []
        for tool, args in CALLS:
            r = await server.call_tool(tool, {**args, "budget": budget})
            out.append((tool, args, budget, r))
        if budget == 8_000:  # and without the argument: the default, the same 8,000
            for tool, args in CALLS:
                out.append((tool, args, 8_000, await server.call_tool(tool, args)))
        return out

    over, uncontinued = [], []
    for tool, args, limit, r in asyncio.run(walk()):
        text_t, json_t = _sizes(r)
        if text_t > limit or json_t > limit:
            over.append((tool, args, limit, text_t, json_t))
        s = r.structured_content
        if r.is_error or s is None:
            continue
        cut = s.get("next_offset") is not None or s.get("next_start_line") is not None
        if cut and "again with" not in r.content[0].text:
            uncontinued.append((tool, args))
    assert over == [] and uncontinued == []


@pytest.mark.slow
def test_following_the_continuations_gets_everything(big):
    """The hub's 4,000 links, a page at a time as the results say, are all there once."""
    server = build_server(Backend(big))

    async def follow():
        got, offset = [], 0
        while offset is not None:
            r = await server.call_tool(
                "links",
                {"note": "Hub", "direction": "outgoing", "limit": 1000, "offset": offset},
            )
            got += [lk[0] for lk in r.structured_content["outgoing"]]
            offset = r.structured_content.get("next_offset")
        return got

    got = asyncio.run(follow())
    assert got == list(range(3, 4003))  # the hub's 4,000 link lines, each once


# --- structured content no larger than the text (issue 35 item 6) --------------------------------
SHAPES = {
    # short links, an anchor, an unresolved link
    "Hub.md": "# The hub of it all\n\n- [[Spoke 1]]\n- [[Spoke 2#Part]]\n- [[Nowhere]]\n",
    **{
        f"Spoke {i}.md": f"---\ntitle: Spoke number {i}\n---\n# Part\n\nBack to [[Hub]]. Spokes"
        f" share words like wheel and rim {i}.\n"
        for i in (1, 2, 3)
    },
    "Lonely.md": "# Lonely\n\nNo links here, only a wheel.\n",
}


def _calls(notes):
    for note in notes:
        for direction in ("both", "outgoing", "backlinks"):
            yield "links", {"note": note, "direction": direction}
        yield "links", {"note": note, "limit": 1}
        yield "related", {"note": note}
        yield "related", {"note": note, "include_linked": True, "limit": 2}


def _over(db, notes) -> list:
    """The calls whose structured content (as the server sends it) is larger than the text."""
    server = build_server(Backend(db))

    async def walk():
        return [(t, a, await server.call_tool(t, a)) for t, a in _calls(notes)]

    over = []
    for tool, args, r in asyncio.run(walk()):
        assert not r.is_error, (tool, args, r.content[0].text)
        text_t, json_t = _sizes(r)
        if json_t > text_t:
            over.append((tool, args, text_t, json_t))
    return over


def test_links_and_related_structured_content_is_no_larger_than_the_text(tmp_path):
    vault = write(tmp_path / "v", SHAPES)
    db = tmp_path / "s.db"
    kbase.open(db).index([vault], embed=False)
    assert _over(db, [p.removesuffix(".md") for p in SHAPES]) == []
    server = build_server(Backend(db))
    r = asyncio.run(server.call_tool("links", {"note": "Hub"}))
    s = r.structured_content
    assert s["outgoing"] == [  # rows, as docs/mcp.md gives them
        [3, "Spoke 1.md", "- [[Spoke 1]]"],
        [4, "Spoke 2.md", "- [[Spoke 2#Part]]", "Part"],
        [5, None, "- [[Nowhere]]", None, "Nowhere"],
    ]
    assert s["backlinks"] == [
        [6, f"Spoke {i}.md", f"Back to [[Hub]]. Spokes share words like wheel and rim {i}."]
        for i in (1, 2, 3)
    ]
    assert "title" not in s and "outgoing_total" not in s  # (the text's) whole: no totals
    r = asyncio.run(server.call_tool("links", {"note": "Hub", "limit": 1}))
    assert (r.structured_content["outgoing_total"], r.structured_content["next_offset"]) == (3, 1)
    r = asyncio.run(server.call_tool("related", {"note": "Spoke 1", "include_linked": True}))
    rows = r.structured_content["notes"]
    # [path, line, title ("": the file's name, as a Markdown note's title is), snippet, {...}]
    assert rows[0] == [
        "Spoke 2.md",
        6,
        "",
        "…Back to Hub. Spokes share words like wheel and rim 2.",
    ]
    assert next(n for n in rows if n[0] == "Hub.md")[4] == {"linked": True, "links_here": True}


@pytest.mark.slow
@pytest.mark.parametrize("vault", ["foam-docs", "rust-book"])
def test_structured_content_no_larger_on_real_vaults(tmp_path, vault):
    from tests.conftest import shared

    db = tmp_path / "r.db"
    with kbase.open(db) as kb:
        kb.index([shared("vaults", vault)], embed=False)
        notes = [p for (p,) in kb.sql("SELECT path FROM notes ORDER BY path").rows]
    assert len(notes) > 80 and _over(db, notes) == []


def test_mcp_sql_counts_every_row_it_left_out(tmp_path, db_path):
    from kbase.mcp import tools

    vault = write(
        tmp_path / "big",
        {f"n{i:03}.md": f"# Note {i}\n\n" + "word " * 60 + "\n" for i in range(300)},
    )
    with kbase.open(db_path) as kb:
        kb.index([vault], embed=False)
        total = kb.sql("SELECT count(*) FROM chunk_texts").rows[0][0]
        assert total >= 300
        reply = tools.sql(kb, "SELECT * FROM chunk_texts", max_rows=250, budget=2_000)
        shown = len(reply.structured.rows)
        assert 0 < shown < 250  # the budget cut the page of 250 rows asked for
        assert reply.structured.next_offset == shown
        left = f"{total - shown:,} more rows left out to keep within the 2,000-token budget"
        assert reply.structured.left_out.startswith(left), reply.structured.left_out
        assert left in reply.text
        # A query that cannot be counted again (a ';' in it) says "at least".
        reply = tools.sql(kb, "SELECT *, ';' FROM chunk_texts", max_rows=250, budget=2_000)
        assert reply.structured.left_out.startswith(
            f"at least {250 - shown + 1} more rows left out"
        )
