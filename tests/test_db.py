import sqlite3

import apsw
import pytest

from kbase import db
from kbase.errors import DatabaseError, IndexBusyError
from kbase.migrations import SCHEMA_VERSION


def test_new_index_is_stamped_and_has_the_schema(db_path):
    con = db.connect(db_path, create=True)
    assert con.execute("PRAGMA application_id").get == db.APPLICATION_ID
    assert con.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").get == "wal"
    assert con.execute("PRAGMA foreign_keys").get == 1
    assert con.execute("SELECT vec_version()").get.startswith("v")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_schema")}
    assert {"documents", "chunks", "chunks_fts", "tags", "notes", "chunk_texts"} <= names


def test_double_quoted_strings_are_errors(db_path):
    con = db.connect(db_path, create=True)
    with pytest.raises(apsw.SQLError):
        con.execute('SELECT "no such column"').fetchall()


def test_missing_index_is_a_clear_error(db_path):
    with pytest.raises(DatabaseError, match="no index at") as e:
        db.connect(db_path, readonly=True)
    assert "kbase index" in e.value.hint
    assert not db_path.exists()


def test_refuses_a_file_that_is_not_sqlite(db_path):
    db_path.write_text("my precious notes\n")
    with pytest.raises(DatabaseError, match="not a SQLite database"):
        db.connect(db_path, create=True)
    assert db_path.read_text() == "my precious notes\n"


def test_refuses_another_sqlite_database(db_path):
    other = sqlite3.connect(db_path)
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    with pytest.raises(DatabaseError, match="not a kbase index"):
        db.connect(db_path, create=True)
    with pytest.raises(DatabaseError, match="not a kbase index"):
        db.connect(db_path, readonly=True)


def test_refuses_an_index_from_a_newer_kbase(db_path):
    db.connect(db_path, create=True).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(DatabaseError, match="newer kbase"):
        db.connect(db_path)


def test_migrations_run_in_order(db_path, monkeypatch):
    db.connect(db_path, create=True).close()
    from kbase import migrations

    steps = {SCHEMA_VERSION + 1: "CREATE TABLE extra_one (x)", SCHEMA_VERSION + 2: "ALTER TABLE extra_one ADD COLUMN y"}
    monkeypatch.setattr(db, "MIGRATIONS", {**migrations.MIGRATIONS, **steps})
    monkeypatch.setattr(db, "SCHEMA_VERSION", SCHEMA_VERSION + 2)
    con = db.connect(db_path, readonly=True)  # a reader triggers the upgrade through a writer
    assert con.execute("PRAGMA user_version").get == SCHEMA_VERSION + 2
    assert [r[1] for r in con.execute("PRAGMA table_info(extra_one)")] == ["x", "y"]


def test_readonly_connection_cannot_write(db_path):
    db.connect(db_path, create=True).close()
    con = db.connect(db_path, readonly=True)
    with pytest.raises(apsw.ReadOnlyError):
        con.execute("INSERT INTO meta VALUES ('a', 'b')")


def test_second_writer_is_told_an_index_run_is_in_progress(db_path):
    db.connect(db_path, create=True).close()
    with db.writer_lock(db_path):
        with pytest.raises(IndexBusyError, match="already writing"):
            with db.writer_lock(db_path):
                pass
    with db.writer_lock(db_path):  # released
        pass


def test_default_db_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("KBASE_DB", str(tmp_path / "x.db"))
    assert db.default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("KBASE_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert db.default_db_path() == tmp_path / "xdg" / "kbase" / "index.db"
