"""kbase mcp as an agent meets it (issue 26), through the SDK's client and a real server process:
log messages at the level the client sets, completion of note names, prompts, results that fit
the budget with a way to continue, errors in the words of the arguments, empty results in one
line."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import PromptReference, ResourceTemplateReference

import kbase
from kbase.mcp.budget import tokens
from tests.conftest import write
from tests.test_mcp import NOTES, _argv, _env, text
from tests.test_mcp import index as _index

index = _index  # the fixture, under its name here
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@asynccontextmanager
async def session(db: Path, *args: str, mode: str = "auto", **client_options):
    params = StdioServerParameters(
        command=sys.executable,
        args=_argv(db, *args),
        env=_env(),
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    with open(db.with_suffix(".agent.log"), "w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            read_timeout_seconds=120,
            mode=mode,
            **client_options,
        ) as client:
            yield client


class Messages:
    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    async def __call__(self, params) -> None:
        self.got.append((params.level, str(params.data)))

    def take(self) -> list[tuple[str, str]]:
        got, self.got = self.got, []
        return got


async def _until(predicate, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.2)
    return False


@pytest.mark.asyncio
async def test_log_messages_follow_the_level_the_client_sets(index):
    db, vault = index
    # a note changed after indexing: the server says so, at level info
    garden = vault / "Garden.md"
    garden.write_text(NOTES["Garden.md"] + "\nMore later.\n", encoding="utf-8")
    os.utime(garden, (time.time() + 5, time.time() + 5))
    messages = Messages()
    async with session(db, mode="legacy", logging_callback=messages) as c:
        assert c.server_capabilities.logging is not None
        r = await c.call_tool("read", {"note": "Garden", "start_line": 1, "end_line": 2})
        assert not r.is_error and messages.take() == []  # the default level is warning
        await c.set_logging_level("info")
        r = await c.call_tool("read", {"note": "Garden", "start_line": 1, "end_line": 2})
        await _until(lambda: messages.got, 10)
        assert messages.take() == [("info", "Garden.md changed on disk since it was indexed")]
        r = await c.call_tool("search", {"query": "tomatoes", "path": "Garden.md"})
        await _until(lambda: messages.got, 10)
        assert messages.take() == [
            ("info", "1 of the notes found changed on disk since they were indexed")
        ]
        await c.set_logging_level("error")
        await c.call_tool("read", {"note": "Garden", "start_line": 1, "end_line": 2})
        await asyncio.sleep(0.5)
        assert messages.take() == []
    # a client of the 2026 protocol asks per request, and gets the same
    messages = Messages()
    async with session(db, logging_callback=messages, log_level="info") as c:
        await c.call_tool("read", {"note": "Garden", "start_line": 1, "end_line": 2})
        await _until(lambda: messages.got, 10)
        assert messages.take() == [("info", "Garden.md changed on disk since it was indexed")]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_background_work_reaches_a_client_at_its_level(index):
    """With --watch: the watch's runs and idle embedding's progress reach a client that asked
    for info, as log messages."""
    db, vault = index
    messages = Messages()
    async with session(db, "--watch", mode="legacy", logging_callback=messages) as c:
        await c.set_logging_level("info")
        await c.call_tool("status", {})
        (vault / "Leeks.md").write_text("# Leeks\n\nLeeks like deep trenches.\n", "utf-8")
        assert await _until(lambda: any("1 new" in m for _, m in messages.got))
        assert ("info", "watch: 1 new, 0 updated, 0 renamed, 0 removed") in messages.got
        assert await _until(lambda: any("idle embedding: done" in m for _, m in messages.got), 300)
        st = (await c.call_tool("status", {})).structured_content
        assert st["embedded_chunks"] == st["chunks"]
        assert not any(level == "debug" for level, _ in messages.take())  # below the level


@pytest.mark.asyncio
async def test_note_names_complete_as_they_are_typed(index):
    db, _ = index
    async with session(db, mode="legacy") as c:
        assert c.server_capabilities.completions is not None
        template = ResourceTemplateReference(type="ref/resource", uri="kbase://note/{+path}")
        r = await c.complete(template, {"name": "path", "value": "te"})
        assert r.completion.values == ["tech/SQLite.md", "tech/index.md"]
        r = await c.complete(template, {"name": "path", "value": "sql"})  # a file name, any case
        assert r.completion.values == ["tech/SQLite.md"]
        r = await c.complete(template, {"name": "path", "value": ""})
        assert r.completion.total == len(NOTES) and len(r.completion.values) == len(NOTES)
        for name in ("summarize-note", "connect-note", "read", "related"):
            r = await c.complete(
                PromptReference(type="ref/prompt", name=name), {"name": "note", "value": "Gar"}
            )
            assert r.completion.values == ["Garden.md"], name
        r = await c.complete(  # the title, not only the path
            PromptReference(type="ref/prompt", name="summarize-note"),
            {"name": "note", "value": "Tech ind"},
        )
        assert r.completion.values == ["tech/index.md"]
        r = await c.complete(  # not a note argument: nothing, and no error
            PromptReference(type="ref/prompt", name="answer-from-notes"),
            {"name": "question", "value": "Gar"},
        )
        assert r.completion.values == []


@pytest.mark.asyncio
async def test_prompts_for_agents(index):
    db, _ = index
    async with session(db) as c:
        listed = {p.name: p for p in (await c.list_prompts()).prompts}
        assert set(listed) == {"answer-from-notes", "summarize-note", "connect-note"}
        for p in listed.values():
            assert p.description and p.arguments and p.arguments[0].required
        r = await c.get_prompt("answer-from-notes", {"question": "When do tomatoes need water?"})
        body = r.messages[0].content.text
        assert "When do tomatoes need water?" in body
        assert "`search`" in body and "`read`" in body and "[path:line]" in body
        assert "do not answer" in body
        r = await c.get_prompt("summarize-note", {"note": "Garden.md"})
        assert "note='Garden.md'" in r.messages[0].content.text


@pytest.mark.asyncio
async def test_a_bad_prompt_request_is_a_json_rpc_error_without_a_traceback(index):
    """prompts/get of no such prompt, or without its argument, was 'Internal server error' to
    the client and a traceback on the server's stderr: invalid params, one line naming the
    prompt or argument and the fix, and nothing on stderr."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    db, _ = index
    async with session(db) as c:
        for name, arguments, says in [
            ("summarise-note", {"note": "Garden"}, "no prompt named 'summarise-note' (hint:"),
            ("summarize-note", {}, "prompt summarize-note: its argument 'note' is missing"),
            ("summarize-note", None, "its argument 'note' is missing (hint: its one argument"),
            ("answer-from-notes", {"question": "  "}, "its argument 'question' is empty"),
            ("connect-note", {"nte": "Garden"}, "prompt connect-note takes no argument 'nte'"),
        ]:
            with pytest.raises(MCPError) as e:
                await c.get_prompt(name, arguments)
            assert e.value.code == INVALID_PARAMS, (name, e.value.message)
            assert says in e.value.message and "\n" not in e.value.message, e.value.message
        r = await c.get_prompt("summarize-note", {"note": "Garden.md"})  # and it serves on
        assert "note='Garden.md'" in r.messages[0].content.text
    log = db.with_suffix(".agent.log").read_text()
    assert "Traceback" not in log and "Error" not in log, log[-3000:]


@pytest.mark.asyncio
async def test_results_say_what_was_left_out_and_how_to_continue(tmp_path):
    long_line = "word " * 20_000  # 100,000 characters on one line
    notes = {
        "Hub.md": "# Hub\n\n"
        + "".join(f"- [[Note {i}]] and more about note {i}\n" for i in range(600)),
        "Wide.md": "# Wide\n\n" + long_line + "\n",
        "Big.md": "# Big\n\n" + "".join(f"line {i} " + "x" * 200 + "\n" for i in range(3, 1535)),
        **{
            f"n/Note {i}.md": f"# Note {i}\n\nBack to [[Hub]]. Shared words here.\n"
            for i in range(600)
        },
    }
    vault = write(tmp_path / "vault", notes)
    db = tmp_path / "big.db"
    kbase.open(db).index([vault], embed=False)
    async with session(db) as c:
        # links: limit, then the budget; each cut result names the call that continues it
        r = await c.call_tool("links", {"note": "Hub", "direction": "outgoing"})
        s = r.structured_content
        assert len(s["outgoing"]) == 50 and s["outgoing_total"] == 600 and s["next_offset"] == 50
        assert text(r).endswith(
            "More links follow: call links again with offset=50, direction='outgoing'."
        )
        r = await c.call_tool("links", {"note": "Hub", "limit": 1000, "budget": 2000})
        s = r.structured_content
        assert tokens(text(r)) <= 2000 and 0 < len(s["outgoing"]) < 600
        assert "left out to keep within the 2,000-token budget" in s["left_out"]
        seen, offset = [], 0
        while offset is not None:  # following the continuation gets every link once
            r = await c.call_tool(
                "links", {"note": "Hub", "direction": "backlinks", "limit": 1000, "offset": offset}
            )
            seen += [lk[1] for lk in r.structured_content["backlinks"]]
            offset = r.structured_content.get("next_offset")
        assert sorted(seen) == sorted(f"n/Note {i}.md" for i in range(600))
        # read: an explicit range is capped too, and says where to go on
        r = await c.call_tool("read", {"note": "Big", "start_line": 1, "end_line": 1534})
        s = r.structured_content
        assert tokens(text(r)) <= 8000 and s["truncated"] and s["last_line"] < 1534
        n = s["next_start_line"]
        assert n == s["last_line"] + 1
        assert f"read again with start_line={n}, end_line=1534" in text(r)
        r = await c.call_tool("read", {"note": "Big", "start_line": n, "end_line": n})
        assert r.structured_content["text"].startswith(f"line {n} ")  # line 3 holds "line 3"
        # one line longer than the budget: cut inside it, continued by start_char
        r = await c.call_tool("read", {"note": "Wide", "start_line": 3, "end_line": 3})
        s = r.structured_content
        assert s["next_start_line"] == 3 and s["next_start_char"] > 1000
        got, start = s["text"], s["next_start_char"]
        while start:
            r = await c.call_tool(
                "read", {"note": "Wide", "start_line": 3, "end_line": 3, "start_char": start}
            )
            got += r.structured_content["text"]
            start = r.structured_content.get("next_start_char")  # (absent: done)
        assert got == long_line.rstrip("\n")
        # sql: cells are cut alike in both forms, and rows stop at the budget
        r = await c.call_tool(
            "sql", {"query": "SELECT path, body FROM documents", "max_rows": 5000}
        )
        s = r.structured_content
        assert tokens(text(r)) <= 8000 and s["truncated"] and s["next_offset"] == len(s["rows"])
        for _path, body in s["rows"]:
            assert len(body) <= 1000 and body in text(r).replace("⏎", "\n")
        # search takes offset: the next page starts where the last ended
        r1 = await c.call_tool("search", {"query": "shared words", "limit": 5})
        r2 = await c.call_tool("search", {"query": "shared words", "limit": 5, "offset": 5})
        paths = [h["path"] for h in r1.structured_content["hits"] + r2.structured_content["hits"]]
        assert len(set(paths)) == 10 and r1.structured_content["next_offset"] == 5
        assert r2.structured_content["offset"] == 5 and "\n6. " in text(r2)  # ranks go on


@pytest.mark.asyncio
async def test_errors_name_the_arguments_and_empty_results_say_so(index):
    db, _ = index
    async with session(db) as c:
        r = await c.call_tool(
            "sql",
            {
                "query": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
                " SELECT count(*) FROM n",
                "timeout": 0.3,
            },
        )
        assert r.is_error and "timeout" in text(r) and "--" not in text(r), text(r)
        r = await c.call_tool("search", {"query": "x", "until": "soon"})
        assert r.is_error and text(r).startswith("until 'soon'") and "--" not in text(r)
        for tool, args, expect in (
            ("search", {"query": "zucchini"}, "No notes match 'zucchini' (keyword)."),
            (  # a filter that keeps no note at all is why
                "search",
                {"query": "tomatoes", "tags": ["gardn"], "path": "journal"},
                "No notes match 'tomatoes' (keyword): no note has the tag 'gardn' (or one under"
                " it).",
            ),
            ("links", {"note": "journal/index.md"}, "has no outgoing links and no backlinks."),
            ("sql", {"query": "SELECT path FROM notes WHERE 0"}, "The query returned no rows"),
            ("search", {"query": "tomatoes", "offset": 50}, "No more notes match 'tomatoes'"),
        ):
            r = await c.call_tool(tool, args)
            assert not r.is_error and "\n" not in text(r) and expect in text(r), (tool, text(r))
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for t in tools.values():  # each says how to call it, with an example
            assert "Example: {" in t.description, t.name
            assert "budget" in t.input_schema["properties"], t.name
        # the main views with their columns, the others by name (tools/list <= 2,000 tokens)
        for view in ("notes", "note_tags", "document_stats"):
            assert f"{view}(" in tools["sql"].description
        for view in ("backlinks", "chunk_texts", "resolved_links", "documents", "links"):
            assert (
                f" {view}," in tools["sql"].description or f" {view} " in tools["sql"].description
            )
        for tool in ("search", "links", "related"):
            assert "limit" in tools[tool].input_schema["properties"]


@pytest.mark.asyncio
async def test_a_note_deleted_after_indexing_is_said_gone_not_changed(index):
    """An agent told 'changed on disk' reads the note again; a deleted one is not there to read."""
    db, vault = index
    (vault / "Compost.md").unlink()
    async with session(db) as c:
        r = await c.call_tool("read", {"note": "Compost"})
        assert not r.is_error and r.structured_content["missing"] is True
        assert "gone from disk (moved or deleted) since indexed" in text(r)
        r = await c.call_tool("search", {"query": "scraps", "passages": 0})
        hit = r.structured_content["hits"][0]
        assert hit["path"] == "Compost.md" and hit["stale"] and hit["missing"]
        assert "Compost.md:3 (score" in text(r) and "[gone from disk" in text(r)
        r = await c.call_tool("read", {"note": "Garden"})  # (still there: no flag at all)
        assert "missing" not in r.structured_content and "gone from disk" not in text(r)
