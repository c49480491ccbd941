"""kbase mcp: the server runs as a subprocess (python -m kbase ... mcp) and these tests talk to it
with the MCP SDK's own client, over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import kbase
from tests.conftest import write

NOTES = {
    "Garden.md": "---\ntags: [garden]\naliases: [Veg patch]\ndate: 2024-04-01\n---\n# Garden\n\n"
    "Tomatoes need sun and water. See [[Compost]] and [[Beds#Soil]].\n\n"
    "## Beds\n\nRaised beds drain well.\n",
    "Compost.md": "# Compost\n\nKitchen scraps rot into compost that feeds tomatoes and beans.\n\n"
    "Turn the heap weekly; [[Garden]] beds love it.\n",
    "Beds.md": "# Beds\n\n## Soil\n\nLoam with compost suits tomatoes; clay soil drains badly.\n",
    "tech/SQLite.md": "# SQLite\n\nWrite-ahead logging lets readers and writers work at once.\n\n"
    "A checkpoint copies the WAL back into the database file. #db\n",
    "tech/index.md": "# Tech index\n\n- [[SQLite]]\n",
    "journal/index.md": "# Journal index\n\nNothing yet.\n",
    "long.md": "# Long\n\n" + "".join(f"line {i}\n" for i in range(3, 1001)),
}


@pytest.fixture
def index(tmp_path) -> tuple[Path, Path]:
    vault = write(tmp_path / "vault", NOTES)
    db = tmp_path / "index.db"
    kbase.open(db).index([vault], embed=False)
    return db, vault


def _env() -> dict[str, str]:
    keep = ("HOME", "XDG_DATA_HOME", "PATH", "PYTHONPATH")
    return {k: os.environ[k] for k in keep if k in os.environ}


def _argv(db: Path, *args: str) -> list[str]:
    return ["-m", "kbase", "--db", str(db), "mcp", *args]


@asynccontextmanager
async def stdio_session(db: Path, *args: str, log: Path | None = None):
    log = log or db.with_suffix(".log")
    params = StdioServerParameters(
        command=sys.executable,
        args=_argv(db, *args),
        env=_env(),
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    with open(log, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            yield client


def text(result) -> str:
    return "\n".join(c.text for c in result.content)


def file_digest(db: Path) -> str:
    h = hashlib.sha256()
    for f in (db, Path(f"{db}-wal")):
        if f.exists():
            h.update(f.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_every_tool_over_stdio(index):
    db, _ = index
    async with stdio_session(db) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == {"search", "read", "links", "related", "sql", "status"}
        for t in tools.values():  # described for an agent, with schemas both ways, read-only
            assert (
                len(t.description) > 80 and t.input_schema["type"] == "object" and t.output_schema
            )
            assert t.annotations.read_only_hint is True
        assert tools["search"].input_schema["properties"]["limit"]["minimum"] == 1
        assert set(tools["search"].input_schema["properties"]) >= {
            "query",
            "mode",
            "limit",
            "path",
            "tags",
            "since",
            "until",
            "exclude",
        }

        r = await c.call_tool("search", {"query": "tomatoes", "limit": 5, "path": "Garden.md"})
        assert not r.is_error
        hits = r.structured_content["hits"]
        assert [h["path"] for h in hits] == ["Garden.md"] and r.structured_content[
            "mode"
        ] == "keyword"
        # the first hits come with their passage (the lines that matched, and their range)
        first, last = hits[0]["lines"]
        assert hits[0]["line"] == 8 and first <= 8 <= last and "Tomatoes" in hits[0]["passage"]
        assert hits[0]["tags"] == ["garden"] and "stale" not in hits[0]  # (False: left out)
        assert "1. Garden — Garden.md:8" in text(r)
        r = await c.call_tool("search", {"query": "tomatoes", "tags": ["garden"]})
        assert [h["path"] for h in r.structured_content["hits"]] == ["Garden.md"]

        r = await c.call_tool("read", {"note": "Garden", "start_line": 8, "end_line": 9})
        s = r.structured_content
        assert (s["path"], s["first_line"], s["last_line"], s["total_lines"]) == (
            "Garden.md",
            8,
            9,
            12,
        )
        assert s["text"].startswith("Tomatoes need sun") and s["aliases"] == ["Veg patch"]
        assert s["date"] == "2024-04-01" and s["tags"] == ["garden"] and not s.get("truncated")
        assert "\n8 | Tomatoes need sun and water." in text(r)
        r = await c.call_tool("read", {"note": "long.md"})
        assert r.structured_content["truncated"] and r.structured_content["last_line"] == 400
        assert "read again with start_line=401" in text(r)
        r = await c.call_tool(
            "read", {"note": "index"}
        )  # the same matching as kbase show: ambiguous
        assert r.is_error and "journal/index.md" in text(r) and "tech/index.md" in text(r)

        r = await c.call_tool("links", {"note": "Garden"})
        # rows: [line, path, context] (and an anchor); the totals only when a list is cut
        line = "Tomatoes need sun and water. See [[Compost]] and [[Beds#Soil]]."
        out = r.structured_content["outgoing"]
        assert sorted(out) == [[8, "Beds.md", line, "Soil"], [8, "Compost.md", line]]
        back = r.structured_content["backlinks"]
        assert [(line, path) for line, path, _ in back] == [(5, "Compost.md")]
        assert "heap weekly" in back[0][2]
        assert "outgoing_total" not in r.structured_content
        r = await c.call_tool("links", {"note": "Veg patch", "direction": "backlinks"})  # by alias
        assert r.structured_content["path"] == "Garden.md"
        assert "outgoing" not in r.structured_content  # (not asked for: an empty list, left out)

        r = await c.call_tool("related", {"note": "Compost", "limit": 3})
        s = r.structured_content
        assert (
            s["method"] == "keyword" and s["terms"] and "keyword" in text(r)
        )  # no embeddings: says so
        # rows: [path, line, title ("" when the file's name), snippet] (and {page, linked, ...})
        assert "Garden.md" not in [n[0] for n in s["notes"]]  # Compost links to Garden
        assert s["notes"][0][:3] == ["Beds.md", 5, ""]
        r = await c.call_tool("related", {"note": "Compost", "include_linked": True})
        assert any(n[0] == "Garden.md" and n[4]["linked"] for n in r.structured_content["notes"])

        r = await c.call_tool(
            "sql", {"query": "SELECT path FROM notes ORDER BY path", "max_rows": 2}
        )
        assert r.structured_content == {
            "columns": ["path"],
            "rows": [["Beds.md"], ["Compost.md"]],
            "truncated": True,
            "next_offset": 2,  # (offset 0, the default, is left out)
            "left_out": "More rows follow: call sql again with offset=2 (or raise max_rows).",
        }
        assert text(r).endswith(
            "More rows follow: call sql again with offset=2 (or raise max_rows)."
        )
        r = await c.call_tool(
            "sql", {"query": "SELECT path FROM notes ORDER BY path", "max_rows": 2, "offset": 2}
        )
        assert r.structured_content["rows"] == [["Garden.md"], ["journal/index.md"]]
        r = await c.call_tool("status", {})
        assert (
            r.structured_content["documents"] == len(NOTES)
            and r.structured_content["embedded_chunks"] == 0
        )

        resources = (await c.list_resources()).resources
        assert sorted(str(x.uri) for x in resources) == sorted(f"kbase://note/{p}" for p in NOTES)
        body = (await c.read_resource("kbase://note/tech/SQLite.md")).contents[0].text
        assert body == NOTES["tech/SQLite.md"]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_bad_input_is_a_tool_error_and_the_server_lives_on(index):
    db, _ = index
    async with stdio_session(db) as c:
        for args, expect in [
            ({"query": "x", "limit": -1}, "limit: Input should be greater than or equal to 1"),
            (
                {"query": "x", "mode": "fuzzy"},
                "mode: Input should be 'keyword', 'semantic' or 'hybrid'",
            ),
            ({"query": "x", "since": "yesterday"}, "since 'yesterday' is not a date"),
            ({}, "query: Field required"),
            (
                {"query": "x", "mode": "semantic"},
                "this index has no embeddings yet (hint: search with mode='keyword')",
            ),
        ]:
            r = await c.call_tool("search", args)
            assert r.is_error and expect in text(r) and "\n" not in text(r), (args, text(r))
        r = await c.call_tool("read", {"note": "Nowhere"})
        assert r.is_error and text(r).startswith("no indexed document matches 'Nowhere'")
        r = await c.call_tool("read", {"note": "Garden", "start_line": 50})
        assert r.is_error and "Garden.md has 12 lines" in text(r)
        r = await c.call_tool("read", {"note": "/etc/passwd"})  # never a file outside the index
        assert r.is_error and "no indexed document" in text(r)
        r = await c.call_tool("related", {"note": "Garden", "limit": 0})
        assert r.is_error and "limit: Input should be greater than or equal to 1" in text(r)
        r = await c.call_tool(
            "sql",
            {
                "query": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
                " SELECT count(*) FROM n",
                "timeout": 0.3,
            },
        )
        assert r.is_error and "query stopped after the 0.3 s time limit" in text(r)
        r = await c.call_tool("sql", {"query": "SELEC nonsense"})
        assert r.is_error and "SQL error" in text(r)
        r = await c.call_tool("sql", {"query": "  "})  # the hint in the tool's words, not the CLI's
        assert r.is_error and "no SQL given" in text(r) and "kbase sql" not in text(r)
        for uri in (
            "kbase://note/../../etc/passwd",
            "kbase://note//etc/passwd",
            "kbase://note/missing.md",
        ):
            with pytest.raises(MCPError):
                await c.read_resource(uri)
        r = await c.call_tool("search", {"query": "checkpoint"})  # still serving
        assert not r.is_error and r.structured_content["hits"][0]["path"] == "tech/SQLite.md"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_writes_are_refused_and_the_file_is_unchanged(index):
    db, _ = index
    before = file_digest(db)
    async with stdio_session(db) as c:
        for statement in (
            "DELETE FROM documents",
            "UPDATE documents SET title = 'x'",
            "DROP TABLE links",
            "INSERT INTO meta VALUES ('k', 'v')",
            "PRAGMA user_version = 99",
            "ATTACH DATABASE ':memory:' AS m",
            "CREATE TABLE t (x)",
            "VACUUM",
        ):
            r = await c.call_tool("sql", {"query": statement})
            assert r.is_error and ("read-only" in text(r) or "not authorized" in text(r)), (
                statement,
                text(r),
            )
        r = await c.call_tool("sql", {"query": "SELECT count(*) FROM documents"})
        assert r.structured_content["rows"] == [[len(NOTES)]]
    assert file_digest(db) == before


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_reindex_and_a_rebuilt_file_are_seen_without_a_restart(index, tmp_path):
    db, vault = index
    async with stdio_session(db) as c:
        r = await c.call_tool("search", {"query": "rhubarb"})
        assert r.structured_content["hits"] == []
        (vault / "Rhubarb.md").write_text(
            "# Rhubarb\n\nRhubarb crowns want compost.\n", encoding="utf-8"
        )
        kbase.open(db).index([vault], embed=False)
        r = await c.call_tool("search", {"query": "rhubarb"})
        assert [h["path"] for h in r.structured_content["hits"]] == ["Rhubarb.md"]
        # the index deleted and built again: a new file under the same name
        for f in db.parent.glob(db.name + "*"):
            f.unlink()
        other = write(tmp_path / "other", {"Kale.md": "# Kale\n\nKale survives frost.\n"})
        kbase.open(db).index([other], embed=False)
        r = await c.call_tool("search", {"query": "frost"})
        assert [h["path"] for h in r.structured_content["hits"]] == ["Kale.md"]
        r = await c.call_tool("status", {})
        assert r.structured_content["documents"] == 1


def _start_http(
    db: Path, *args: str, env: dict | None = None
) -> tuple[subprocess.Popen, str, Path]:
    log = db.with_suffix(".http.log")
    with open(log, "w") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [sys.executable, *_argv(db, "--http", "127.0.0.1:0", *args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**_env(), **(env or {})},
            cwd=str(Path(__file__).resolve().parents[1]),
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"serving on (http://\S+)", log.read_text())
        if m:
            return proc, m.group(1), log
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server did not start: {log.read_text()}")


@pytest.mark.slow
@pytest.mark.asyncio
async def test_http_with_a_token_origin_checks_and_no_cors(index):
    db, _ = index
    proc, url, _ = _start_http(db, env={"KBASE_MCP_TOKEN": "s3cret"})
    try:
        assert url.startswith("http://127.0.0.1:")
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        async with httpx2.AsyncClient(timeout=60) as raw:
            r = await raw.post(url, json=init, headers=headers)
            assert r.status_code == 401  # no token
            r = await raw.post(url, json=init, headers={**headers, "authorization": "Bearer wrong"})
            assert r.status_code == 401
            auth = {**headers, "authorization": "Bearer s3cret"}
            r = await raw.post(url, json=init, headers={**auth, "origin": "http://evil.example"})
            assert r.status_code == 403  # DNS rebinding: a page from elsewhere
            r = await raw.post(url, json=init, headers={**auth, "host": "evil.example:80"})
            assert r.status_code == 421
            r = await raw.options(
                url,
                headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
            )
            assert "access-control-allow-origin" not in r.headers
            r = await raw.post(url, json=init, headers={**auth, "origin": "http://localhost:3000"})
            assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        async with httpx2.AsyncClient(
            headers={"Authorization": "Bearer s3cret"}, timeout=60
        ) as http:
            async with Client(streamable_http_client(url, http_client=http)) as c:
                r = await c.call_tool("search", {"query": "write-ahead"})
                assert r.structured_content["hits"][0]["path"] == "tech/SQLite.md"
                r = await c.call_tool(
                    "read", {"note": "tech/SQLite.md", "start_line": 1, "end_line": 1}
                )
                assert r.structured_content["text"] == "# SQLite"
                r = await c.call_tool("search", {"query": "x", "limit": 1000})
                assert r.is_error and "less than or equal to 100" in text(r)
                r = await c.call_tool("sql", {"query": "DELETE FROM chunks"})
                assert r.is_error and "read-only" in text(r)
                r = await c.call_tool("links", {"note": "Compost"})
                assert [lk[1] for lk in r.structured_content["outgoing"]] == ["Garden.md"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.slow
def test_http_refuses_other_interfaces_without_a_token_and_stdio_refuses_a_token(index):
    db, _ = index
    r = subprocess.run(
        [sys.executable, *_argv(db, "--http", "0.0.0.0:0")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 1 and "without a token" in r.stderr and "--token" in r.stderr
    r = subprocess.run(
        [sys.executable, *_argv(db, "--token", "x")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 2 and "--token applies to --http only" in r.stderr
    r = subprocess.run(
        [sys.executable, *_argv(db.with_name("none.db"))],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 1 and r.stderr.startswith("Error: no index at")


@pytest.mark.slow
@pytest.mark.asyncio
async def test_watch_indexes_changes_and_embeds_while_idle(index):
    """With --watch: a new note becomes searchable, and chunks get vectors between calls (newest
    notes first), after which semantic search and related notes by meaning work."""
    db, vault = index
    async with stdio_session(db, "--watch") as c:
        (vault / "Leeks.md").write_text("# Leeks\n\nLeeks like deep trenches.\n", encoding="utf-8")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = await c.call_tool("search", {"query": "trenches", "mode": "keyword"})
            if r.structured_content["hits"]:
                break
            await asyncio.sleep(0.5)
        assert [h["path"] for h in r.structured_content["hits"]] == ["Leeks.md"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            await asyncio.sleep(3)  # idle: the server embeds
            st = (await c.call_tool("status", {})).structured_content
            if st["embedded_chunks"] == st["chunks"]:
                break
        assert st["embedded_chunks"] == st["chunks"] > 0 and st["server"]["watching"]
        r = await c.call_tool(
            "search", {"query": "vegetables growing in a garden", "mode": "semantic", "limit": 3}
        )
        assert not r.is_error and r.structured_content["hits"]
        r = await c.call_tool("related", {"note": "Compost"})
        assert r.structured_content["method"] == "semantic"


@pytest.mark.skipif(
    "exclude" not in __import__("inspect").signature(kbase.KB.search).parameters,
    reason="KB.search has no exclude filter yet in this branch (it comes with the search work)",
)
@pytest.mark.slow
@pytest.mark.asyncio
async def test_search_exclude_is_passed_through(index):
    db, _ = index
    async with stdio_session(db) as c:
        r = await c.call_tool("search", {"query": "compost", "limit": 10})
        assert "Compost.md" in [h["path"] for h in r.structured_content["hits"]]
        r = await c.call_tool(
            "search", {"query": "compost", "limit": 10, "exclude": ["Compost.md", "tech/"]}
        )
        paths = [h["path"] for h in r.structured_content["hits"]]
        assert paths and "Compost.md" not in paths and not any(p.startswith("tech/") for p in paths)
