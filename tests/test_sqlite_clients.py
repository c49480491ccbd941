"""The index in other SQLite clients (issue 35): SQLite 3.40 (Debian 12's sqlite3 shell, Python's
sqlite3 module there) opens every table and view; chunks_cjk needs no FTS5 option newer SQLite
has; an index made with contentless_delete migrates."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess

import apsw
import pytest

import kbase
from kbase.search import cjk
from kbase.store import db, migrations
from tests.conftest import write

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
            cjk.rebuild(con)
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
    # The rename triggers (kbase.store.writes.move_document): a new file name in the title column.
    con = db.connect(tmp_path / "kb.db")
    with con:
        con.execute("UPDATE documents SET path = 'zh/冲突.md' WHERE path = 'zh/同步.md'")
        con.execute("UPDATE documents SET path = 'en/Backup.md' WHERE path = 'zh/备份.md'")
    con.close()
    before, after = _rebuilt_vocab(tmp_path / "kb.db")
    assert before == after


def _as_version_11(path) -> None:
    """Turn a new index into what schema version 11 made: chunks_cjk with contentless_delete and
    its old delete trigger, rename triggers that leave chunks_cjk alone."""
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
        con.execute("PRAGMA user_version = 11")
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

    con = db.connect(tmp_path / "old.db")  # migrates
    new = db.connect(tmp_path / "new.db")
    try:
        assert con.execute("PRAGMA user_version").get == migrations.SCHEMA_VERSION
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
