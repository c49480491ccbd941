"""The index in other SQLite clients (issue 35): SQLite 3.40 (Debian 12's sqlite3 shell, Python's
sqlite3 module there) opens every table and view; chunks_cjk needs no FTS5 option newer SQLite
has; an index made with contentless_delete migrates; Datasette with the kbase[datasette] plugin
serves hybrid search over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import apsw
import httpx
import pytest

import kbase
from kbase.store import cjk_table, db, migrations
from tests.conftest import REPO, write

NOTES = {
    "zh/同步.md": "# 同步设置\n\n我们用 Obsidian 同步笔记，手机和电脑保持一致。\n",
    "zh/备份.md": "---\naliases: [备份策略]\n---\n# 备份\n\n备份笔记库到外部硬盘，每周一次。\n",
    "ja/型.md": "# データ型\n\nRust は静的型付け言語です。コンパイラが型を推論します。\n",
    "en/Sync.md": "# Sync\n\nObsidian sync keeps the vault the same on every device.\n",
    "en/同期.md": "# Sync notes\n\nAn English note whose file name is Japanese.\n",
}


@pytest.fixture
def vault(tmp_path):
    return write(tmp_path / "v", NOTES)


@pytest.fixture
def kb(tmp_path, vault):
    k = kbase.open(tmp_path / "kb.db")
    k.index([vault], embed=False)
    yield k
    k.close()


def _vocab(con: apsw.Connection) -> list[tuple]:
    """chunks_cjk's terms with their row and hit counts (what a wrong 'delete' would leave)."""
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, chunks_cjk, row)")
    try:
        return con.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term").fetchall()
    finally:
        con.execute("DROP TABLE temp.v")


def _rebuilt_vocab(path) -> list[list[tuple]]:
    """chunks_cjk's vocabulary as it is, and after a rebuild from the chunks."""
    con = db.connect(path)
    try:
        with con:
            before = _vocab(con)
            cjk_table.rebuild(con)
            after = _vocab(con)
    finally:
        con.close()
    return [before, after]


def _schema_sql(con) -> dict[str, str]:
    return {
        name: " ".join((sql or "").split())
        for name, sql in con.execute("SELECT name, sql FROM sqlite_schema")
    }


def test_no_fts5_option_sqlite_340_lacks(kb):
    ddl = " ".join(_schema_sql(kb.reader).values())
    assert "contentless_delete" not in ddl


def test_python_sqlite3_reads_every_table_and_view(kb):
    """Python's sqlite3 (3.40.1 on Debian 12) opens every table and view of a new index and
    searches both keyword indexes (vec0 tables aside: sqlite-vec is loaded separately)."""
    con = sqlite3.connect(f"file:{kb.path}?mode=ro", uri=True)
    try:
        names = [
            n
            for (n,) in con.execute(
                "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')"
                " AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'chunks_vec%'"
            )
        ]
        assert "chunks_cjk" in names and "notes" in names
        for name in names:
            con.execute(f"SELECT * FROM {name} LIMIT 1").fetchall()
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        found = con.execute(
            "SELECT d.path FROM chunks_cjk JOIN chunks c ON c.id = chunks_cjk.rowid"
            " JOIN documents d ON d.id = c.doc_id WHERE chunks_cjk MATCH '\"手机 机和\"'"
        ).fetchall()
        assert found == [("zh/同步.md",)]
        sync = con.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'obsidian'"
        ).fetchone()
        assert sync == (2,)
    finally:
        con.close()


def test_the_sqlite3_shell_opens_the_index_with_sqlite_vec(kb):
    """Debian 12's sqlite3 shell (3.40): the commands docs/SCHEMA.md shows, .load included."""
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("no sqlite3 shell on PATH (apt-get install sqlite3)")
    import sqlite_vec

    script = (
        f".load {sqlite_vec.loadable_path()}\n"
        "SELECT vec_version();\n"
        "SELECT count(*) FROM chunks_cjk WHERE chunks_cjk MATCH '\"推論\"';\n"
        "SELECT path FROM notes ORDER BY path LIMIT 1;\n"
    )
    out = subprocess.run(
        [shell, "-readonly", str(kb.path)],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stderr == ""
    version, hits, first = out.stdout.split("\n")[:3]
    assert version.startswith("v") and hits == "1" and first == "en/Sync.md"


def test_rows_written_renamed_and_deleted_keep_chunks_cjk_exact(kb, vault, tmp_path):
    """A chunks_cjk row is deleted with the pair text it was written with: after edits, a
    rename that changes the title column, an alias change and deletes, the table holds exactly
    what a rebuild from the chunks gives (a wrong 'delete' would leave stray term counts)."""
    (vault / "zh" / "同步.md").write_text(
        "# 同步设置\n\n冲突时保留较新的版本。\n", encoding="utf-8"
    )
    (vault / "zh" / "备份.md").write_text(
        "---\naliases: [外部硬盘]\n---\n# 备份\n\n每周一次。\n", encoding="utf-8"
    )
    (vault / "ja" / "型.md").rename(vault / "ja" / "データ型の話.md")
    (vault / "en" / "同期.md").rename(vault / "en" / "Sync notes.md")  # the title loses its run
    (vault / "en" / "Sync.md").rename(vault / "en" / "同步 English.md")  # gains one
    kb.index(embed=False)
    kb.close()
    before, after = _rebuilt_vocab(tmp_path / "kb.db")
    assert before == after and before
    k = kbase.open(tmp_path / "kb.db")
    try:
        assert [h.path for h in k.search("冲突", mode="keyword")] == ["zh/同步.md"]
        assert [h.path for h in k.search("手机", mode="keyword")] == []
        assert [h.path for h in k.search("データ型の話", mode="keyword")][:1] == [
            "ja/データ型の話.md"
        ]
        assert [h.path for h in k.search("同期", mode="keyword")] == []
        (vault / "ja" / "データ型の話.md").unlink()
        k.index(embed=False)
    finally:
        k.close()
    before, after = _rebuilt_vocab(tmp_path / "kb.db")
    assert before == after
    # The rename triggers (kbase.indexer.writes.move_document): a new file name in the title column.
    con = db.connect(tmp_path / "kb.db")
    with con:
        con.execute("UPDATE documents SET path = 'zh/冲突.md' WHERE path = 'zh/同步.md'")
        con.execute("UPDATE documents SET path = 'en/Backup.md' WHERE path = 'zh/备份.md'")
    con.close()
    before, after = _rebuilt_vocab(tmp_path / "kb.db")
    assert before == after


def _as_version_11(path) -> None:
    """Give a new index chunks_cjk as schema version 11 made it: with contentless_delete and its
    old delete trigger, and rename triggers that leave chunks_cjk alone (the rest of the file
    stays new: the step itself is tested, as later steps do not apply to a faked old file)."""
    con = db.connect(path)
    with con:
        for trigger in (
            "chunks_cjk_before_delete",
            "documents_before_rename",
            "documents_after_rename",
        ):
            con.execute(f"DROP TRIGGER {trigger}")
        con.execute("DROP TABLE chunks_cjk")
        migrations.MIGRATIONS[8](con)  # type: ignore[operator]
        for trigger in migrations._RENAME_TRIGGERS_6:
            con.execute(trigger)
    con.close()


def test_an_index_with_contentless_delete_migrates(tmp_path, vault):
    k = kbase.open(tmp_path / "new.db")
    k.index([vault], embed=False)
    k.close()
    shutil.copy(tmp_path / "new.db", tmp_path / "old.db")
    _as_version_11(tmp_path / "old.db")
    old = sqlite3.connect(tmp_path / "old.db")
    with pytest.raises(sqlite3.OperationalError, match="contentless_delete"):
        old.execute("SELECT count(*) FROM chunks_cjk").fetchall()  # what Datasette met
    old.close()

    con = db.connect(tmp_path / "old.db")
    new = db.connect(tmp_path / "new.db")
    try:
        with con:
            migrations.MIGRATIONS[12](con)  # type: ignore[operator]
        assert _schema_sql(con) == _schema_sql(new)
        assert _vocab(con) == _vocab(new)
    finally:
        con.close()
        new.close()
    stock = sqlite3.connect(tmp_path / "old.db")
    assert stock.execute(
        "SELECT count(*) FROM chunks_cjk WHERE chunks_cjk MATCH '推論'"
    ).fetchone() == (1,)
    stock.close()


# ---- Datasette with the kbase[datasette] plugin --------------------------------------------


def _plugin_site(tmp_path) -> Path:
    """A folder for PYTHONPATH holding a distribution's metadata with pyproject.toml's Datasette
    entry point, as `pip install kbase[datasette]` writes it (the worktree is not installed)."""
    entry = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "entry-points"
    ]["datasette"]
    info = tmp_path / "site" / "kbase_plugin-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kbase-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[datasette]\n" + "".join(f"{k} = {v}\n" for k, v in entry.items())
    )
    return info.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Datasette serving an embedded index of examples/notes on 127.0.0.1 (a free port), with
    the plugin found through its entry point; stopped after the module's tests."""
    pytest.importorskip("datasette", reason="the kbase[datasette] extra is not installed")
    tmp = tmp_path_factory.mktemp("datasette")
    k = kbase.open(tmp / "kb.db")
    assert k.index([REPO / "examples" / "notes"]).embedding.embedded > 0
    k.close()
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{_plugin_site(tmp)}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "datasette", "serve", str(tmp / "kb.db"), "-h", "127.0.0.1"]
        + ["-p", str(port), "--setting", "sql_time_limit_ms", "20000"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/-/plugins.json", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"datasette did not start: {out[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _rows(base: str, sql: str) -> list[dict]:
    r = httpx.get(f"{base}/kb.json", params={"sql": sql, "_shape": "array"}, timeout=60)
    assert r.status_code == 200, r.text[:500]
    return r.json()


@pytest.mark.slow
def test_datasette_finds_the_plugin_by_its_entry_point(served):
    plugins = httpx.get(f"{served}/-/plugins.json", timeout=10).json()
    assert [p["name"] for p in plugins] == ["kbase-plugin"]  # the distribution, as installed
    assert set(plugins[0]["hooks"]) >= {"prepare_connection", "startup", "canned_queries"}


@pytest.mark.slow
def test_hybrid_search_over_datasettes_json_api(served):
    rows = _rows(
        served,
        "SELECT value ->> 'rank' AS rank, value ->> 'path' AS path, value ->> 'line' AS line"
        " FROM json_each(kbase_search('how do readers and writers share the database',"
        " 'hybrid', 3))",
    )
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["path"] == "SQLite WAL mode.md" and rows[0]["line"] >= 1
    canned = httpx.get(
        f"{served}/kb/kbase_search.json",
        params={"q": "keeping backups safe", "mode": "hybrid", "lim": "2", "_shape": "array"},
        timeout=60,
    ).json()
    assert len(canned) == 2 and canned[0]["path"].endswith(".md") and canned[0]["snippet"]
    bad = _rows(
        served, "SELECT value ->> 'error' AS error FROM json_each(kbase_search('x', 'fast'))"
    )
    assert bad and "mode" in bad[0]["error"]
    bad = httpx.get(  # the canned form: one row with the error and its hint, as SCHEMA.md says
        f"{served}/kb/kbase_search.json",
        params={"q": "x", "mode": "fast", "_shape": "array"},
        timeout=60,
    ).json()
    assert len(bad) == 1 and "mode" in bad[0]["error"] and "keyword" in bad[0]["hint"]


@pytest.mark.slow
def test_datasette_reads_vectors_and_views(served):
    """sqlite-vec is loaded in Datasette's connections: chunks_vec with kbase_embed(), and the
    views browse (Datasette's own check of every table passed at start)."""
    nearest = _rows(
        served,
        "WITH n AS (SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH"
        " kbase_embed('how do readers and writers share the database') AND k = 3)"
        " SELECT c.path FROM n JOIN chunk_texts AS c ON c.id = n.rowid ORDER BY n.distance",
    )
    assert nearest[0]["path"] == "SQLite WAL mode.md"
    notes = httpx.get(f"{served}/kb/notes.json", params={"_shape": "array"}, timeout=30).json()
    assert any(n["path"] == "SQLite WAL mode.md" for n in notes)


def test_a_stuck_search_worker_is_stopped_and_replaced(tmp_path, monkeypatch):
    """A worker that gives no answer (here stopped with SIGSTOP) costs one query an error after
    plugin.ANSWER_TIMEOUT, not every later query of its index (and Datasette's thread) forever;
    the next query gets a new worker and its answer."""
    pytest.importorskip("datasette", reason="the kbase[datasette] extra is not installed")
    from kbase.datasette import plugin

    k = kbase.open(tmp_path / "kb.db")
    k.index([REPO / "examples" / "notes"], embed=False)  # keyword: the worker loads no model
    k.close()
    path = str(tmp_path / "kb.db")
    monkeypatch.setattr(plugin, "_workers", {})
    search, _ = plugin._functions(path)

    def first(answer: str) -> dict:
        return json.loads(answer)[0]

    try:
        assert first(search("write-ahead log", "keyword", 3))["path"] == "SQLite WAL mode.md"
        stuck = plugin._workers[path]
        assert stuck is not None
        os.kill(stuck.proc.pid, signal.SIGSTOP)
        # (the limit is cut for the stuck query alone: a loaded machine's first search of a
        # new worker may take a second)
        default = plugin.ANSWER_TIMEOUT
        monkeypatch.setattr(plugin, "ANSWER_TIMEOUT", 1.0)
        answer = first(search("write-ahead log", "keyword", 3))
        assert "gave no answer in 1 s" in answer["error"] and stuck.proc.poll() is not None
        monkeypatch.setattr(plugin, "ANSWER_TIMEOUT", default)
        assert first(search("write-ahead log", "keyword", 3))["path"] == "SQLite WAL mode.md"
        assert plugin._workers[path] is not stuck
    finally:
        for w in plugin._workers.values():
            if w is not None and w.proc.poll() is None:
                w.proc.kill()
