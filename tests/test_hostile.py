"""Hostile input (issue 27): files outside the vault, queries without end, SQL overruns, a
read-only index, a first run on a full disk. Each test reproduces one attack as it was found and
checks the answer kbase gives now. The MCP ones talk to the real server (a subprocess) with the
SDK's own client, over stdio and streamable HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import kbase
from kbase.cli.commands import cli
from kbase.errors import InputError
from tests.conftest import write

REPO = Path(__file__).resolve().parents[1]


# --- the real MCP server ------------------------------------------------------------------------
def _env() -> dict[str, str]:
    keep = ("HOME", "XDG_DATA_HOME", "PATH", "PYTHONPATH")
    return {k: os.environ[k] for k in keep if k in os.environ}


@asynccontextmanager
async def stdio_session(db: Path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbase", "--db", str(db), "mcp"],
        env=_env(),
        cwd=str(REPO),
    )
    with open(db.with_suffix(".log"), "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            yield client


@asynccontextmanager
async def http_session(db: Path):
    log = db.with_suffix(".http.log")
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbase", "--db", str(db), "mcp", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_env(),
            cwd=str(REPO),
        )
    try:
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline and url is None:
            m = re.search(r"serving on (http://\S+)", log.read_text())
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.1)
        assert url, f"the server did not start: {log.read_text()}"
        async with httpx2.AsyncClient(timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def text(result) -> str:
    return "\n".join(c.text for c in result.content)


# --- 1. symlinks out of the vault ---------------------------------------------------------------
@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path, Path]:
    """A vault with a symlink to a secret file, one to a secret folder, and links that stay
    inside; the secrets live next to the vault, outside it."""
    secret = write(
        tmp_path / "secret",
        {"passwd.md": "root:x:0:0:hunter2 secretword\n", "dir/keys.md": "# Keys\n\nsecretword\n"},
    )
    vault = write(
        tmp_path / "vault",
        {"Home.md": "# Home\n\nA note about tomatoes.\n", "sub/Inner.md": "# Inner\n\nbeans\n"},
    )
    (vault / "outside.md").symlink_to(secret / "passwd.md")
    (vault / "etc").symlink_to(secret / "dir")
    (vault / "inner-link.md").symlink_to(vault / "sub" / "Inner.md")  # inside: indexed
    (vault / "subdir-link").symlink_to(vault / "sub")  # inside, but seen already: reported
    return vault, secret, tmp_path / "i.db"


def _paths(kb) -> set[str]:
    return {p for (p,) in kb.reader.execute("SELECT path FROM documents")}


def test_symlinks_out_of_the_vault_are_skipped_with_one_line_each(planted):
    vault, secret, dbp = planted
    r = CliRunner().invoke(cli, ["--db", str(dbp), "index", str(vault), "--no-embed"])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if "outside the indexed roots" in ln]
    assert len(lines) == 2, r.stderr
    assert any("outside.md" in ln and str(secret / "passwd.md") in ln for ln in lines)
    assert any(ln.startswith(f"skipped {vault / 'etc'}:") for ln in lines)
    assert all("--follow-outside" in ln for ln in lines)
    with kbase.open(dbp) as kb:
        assert _paths(kb) == {"Home.md", "sub/Inner.md", "inner-link.md"}
        assert kb.search("secretword", mode="keyword") == []


def test_follow_outside_indexes_them_and_is_remembered(planted):
    vault, _, dbp = planted
    with kbase.open(dbp) as kb:
        r = kb.index([vault], embed=False, follow_outside=True)
        assert not [s for s in r.skipped if "outside" in s[1]]
        assert {"outside.md", "etc/keys.md"} <= _paths(kb)
        kb.index([], embed=False)  # a later run of every root follows them still
        kb.close()
        assert {"outside.md", "etc/keys.md"} <= _paths(kb)
        assert "hunter2" in kb.read("outside.md").lines[0]  # opted in: served


def test_a_symlink_to_another_indexed_root_is_inside(planted, tmp_path):
    vault, secret, dbp = planted
    with kbase.open(dbp) as kb:
        kb.index([secret, vault], embed=False)
        rows = set(kb.reader.execute("SELECT r.path, d.path FROM documents d JOIN roots r"))
    assert (str(vault), "outside.md") in rows and (str(vault), "etc/keys.md") in rows


def test_a_symlink_swapped_in_after_the_listing_is_not_read(planted, monkeypatch):
    from kbase.ingest import pipeline

    vault, secret, dbp = planted
    real_walk = pipeline.walk

    def walk(*a, **k):  # Home.md becomes a link to the secret right after it is listed
        for item in real_walk(*a, **k):
            yield item
            if getattr(item, "relpath", "") == "Home.md":
                (vault / "Home.md").unlink()
                (vault / "Home.md").symlink_to(secret / "passwd.md")

    monkeypatch.setattr(pipeline, "walk", walk)
    with kbase.open(dbp) as kb:
        r = kb.index([vault], embed=False)
        reasons = {Path(p).name: why for p, why in r.skipped}
        assert "outside the indexed roots" in reasons["Home.md"], reasons
        assert "Home.md" not in _paths(kb)
        assert kb.search("hunter2", mode="keyword") == []


def _index_holding_a_secret(planted) -> tuple[Path, Path]:
    """An index that holds outside.md and etc/keys.md (as one made before kbase skipped such
    links did): indexed with --follow-outside, then the opt-in forgotten."""
    vault, _, dbp = planted
    with kbase.open(dbp) as kb:
        kb.index([vault], embed=False, follow_outside=True)
    from kbase.store import db

    con = db.connect(dbp)
    with con:
        con.execute("DELETE FROM meta WHERE key LIKE 'follow_outside:%'")
    con.close()
    return vault, dbp


def test_the_read_path_never_serves_a_file_outside_the_roots(planted):
    vault, dbp = _index_holding_a_secret(planted)
    with kbase.open(dbp) as kb:
        assert "outside.md" in _paths(kb)  # the index holds it ...
        for call in (
            lambda: kb.read("outside.md"),
            lambda: kb.read("etc/keys.md", 1, 2),
            lambda: kb.document_at("outside.md"),
            lambda: kb.region("outside.md:1"),
        ):
            with pytest.raises(InputError, match="outside the indexed roots"):
                call()  # ... but reading it is refused
        assert kb.read("Home.md").lines[0] == "# Home"
    r = CliRunner().invoke(cli, ["--db", str(dbp), "show", "outside.md"])
    assert r.exit_code == 1 and "hunter2" not in r.output and "outside the indexed" in r.stderr
    with kbase.open(dbp) as kb:  # the next index run drops what it holds from outside
        kb.index([vault], embed=False)
        assert not {"outside.md", "etc/keys.md"} & _paths(kb)


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_mcp_read_and_resources_refuse_a_file_outside_the_roots(planted, transport):
    _, dbp = _index_holding_a_secret(planted)
    session = stdio_session if transport == "stdio" else http_session
    async with session(dbp) as c:
        for note in ("outside.md", "etc/keys.md", str(planted[0] / "outside.md")):
            r = await c.call_tool("read", {"note": note})
            assert r.is_error and "outside the indexed roots" in text(r), text(r)
            assert "hunter2" not in text(r) and "secretword" not in text(r)
        for uri in ("kbase://note/outside.md", "kbase://note/etc/keys.md"):
            with pytest.raises(Exception) as e:
                await c.read_resource(uri)
            assert "outside the indexed roots" in str(e.value) and "hunter2" not in str(e.value)
        ok = await c.call_tool("read", {"note": "Home.md"})
        assert not ok.is_error and "tomatoes" in text(ok)
