import sqlite3
from pathlib import Path

import apsw
import pytest

import kbase
from kbase import paths
from kbase.errors import DatabaseError, IndexBusyError
from kbase.store import db
from kbase.store.migrations import SCHEMA_VERSION


def test_new_index_is_stamped_and_has_the_schema(db_path):
    con = db.connect(db_path, create=True)
    assert con.execute("PRAGMA application_id").get == db.APPLICATION_ID
    assert con.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").get == "wal"
    assert con.execute("PRAGMA foreign_keys").get == 1
    assert con.execute("SELECT vec_version()").get.startswith("v")
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_schema")}
    assert {"documents", "chunks", "chunks_fts", "tags", "notes", "chunk_texts"} <= names
    # made without waiting for the disk at each step (WAL: a crash loses no committed data)
    assert con.execute("PRAGMA synchronous").get == 1  # NORMAL
    assert db.schema_sql() == (Path(__file__).parents[1] / "schema.sql").read_text()


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
    from kbase.store import migrations

    steps = {
        SCHEMA_VERSION + 1: "CREATE TABLE extra_one (x)",
        SCHEMA_VERSION + 2: "ALTER TABLE extra_one ADD COLUMN y",
    }
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
    assert paths.default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("KBASE_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert paths.default_db_path() == tmp_path / "xdg" / "kbase" / "index.db"


V1_SCHEMA = Path(__file__).parent / "data" / "schema_v1.sql"


def _shape(con: apsw.Connection) -> dict:
    """What a schema is made of, independent of how its DDL text was written."""
    shape = {}
    for kind, name, table in con.execute(
        "SELECT type, name, tbl_name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"
    ):
        entry: tuple = (kind, table)
        if kind == "table":
            entry += (tuple(con.execute(f"PRAGMA table_xinfo({name})").fetchall()),)
        elif kind == "index":
            sql = con.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).get
            entry += (
                tuple(con.execute(f"PRAGMA index_xinfo({name})").fetchall()),
                " ".join(sql.split()),
            )
        elif kind in ("view", "trigger"):
            sql = con.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).get
            entry += (" ".join(sql.split()),)
        shape[name] = entry
    return shape


def test_an_index_from_schema_1_migrates_to_what_a_new_index_is(tmp_path):
    old = tmp_path / "v1.db"
    con = apsw.Connection(str(old))
    db._load_sqlite_vec(con)
    con.execute(V1_SCHEMA.read_text(encoding="utf-8"))
    con.execute(f"PRAGMA application_id = {db.APPLICATION_ID}; PRAGMA user_version = 1")
    con.execute("INSERT INTO roots (id, path, added_at) VALUES (1, '/notes', 'now')")
    con.execute(
        "INSERT INTO documents (id, root_id, path, kind, title, size, mtime_ns, hash, encoding,"
        " indexed_at, body)"
        " VALUES (1, 1, 'a.md', 'markdown', 'Alpha', 11, 0, 'h', 'utf_8', 'now', 'hello world')"
    )
    # Indexed before front matter warnings were kept: the migration finds them in the stored text.
    con.execute(
        "INSERT INTO documents (id, root_id, path, kind, title, size, mtime_ns, hash, encoding,"
        " indexed_at, body) VALUES (2, 1, 'b.md', 'markdown', 'b', 9, 0, 'h2', 'utf_8', 'now', ?),"
        " (3, 1, 'c.md', 'markdown', 'c', 9, 0, 'h3', 'utf_8', 'now', ?)",
        ("---\nx: [1\ny: 2\n---\nbody\n", "---\n- a list\n---\nbody\n"),
    )
    con.execute(
        "INSERT INTO chunks (id, doc_id, seq, start_char, end_char, line, end_line, tokens, hash,"
        " embed_hash, embedded)"
        " VALUES (7, 1, 0, 0, 11, 1, 1, 2, 'x', '00112233445566778899aabbccddeeff', 1)"
    )
    con.execute(
        "INSERT INTO links (source_id, start_char, end_char, line, kind, embed, target, target_id,"
        " target_path) VALUES (1, 0, 5, 1, 'wiki', 0, 'a', 1, 'a.md'),"
        " (1, 5, 9, 1, 'wiki', 1, 'p', NULL, 'p.png')"
    )
    vectors = (
        "CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[4] distance_metric=cosine)"
    )
    con.execute(vectors)
    con.execute(
        "CREATE TRIGGER chunks_vec_after_delete AFTER DELETE ON chunks WHEN old.embedded BEGIN"
        " DELETE FROM chunks_vec WHERE rowid = old.id; END"
    )
    con.close()

    migrated = db.connect(old)
    new = db.connect(tmp_path / "new.db", create=True)
    from kbase.embed.vectors import VECTOR_TRIGGER

    new.execute(vectors)  # what an index with vectors has
    new.execute(VECTOR_TRIGGER)
    assert migrated.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert _shape(migrated) == _shape(new)
    # The rows survive: the chunk keeps its id, its hash is the same 8 bytes, the keyword index
    # finds it.
    assert migrated.execute("SELECT id, embed_hash, embedded FROM chunks").fetchall() == [
        (7, bytes.fromhex("0011223344556677"), 1)
    ]
    assert migrated.execute(
        "SELECT rowid, highlight(chunks_fts, 0, '[', ']') FROM chunks_fts"
        " WHERE chunks_fts MATCH 'alpha hello'"
    ).fetchall() == [(7, "[hello] world")]
    assert migrated.execute("SELECT target_id, target_path FROM links ORDER BY id").fetchall() == [
        (1, None),
        (None, "p.png"),
    ]  # a note is its id, an attachment its path
    assert migrated.execute("SELECT count(*) FROM unresolved_links").get == 0
    assert migrated.execute(
        "SELECT path, line, detail FROM frontmatter_warnings ORDER BY path"
    ).fetchall() == [
        (
            "b.md",
            3,
            "malformed front matter at line 3: did not find expected ',' or ']';"
            " body indexed without it",
        ),
        ("c.md", 1, "front matter is a list, not a mapping; ignored"),
    ]
    from kbase.indexer.maintenance import check

    assert [p for p in check(migrated) if p.kind != "vectors"] == []


def test_a_migration_step_does_not_read_todays_schema(tmp_path, monkeypatch):
    """Each step carries its own DDL: a later change to chunks in schema.sql is not applied to a
    version-4 file by step 5 (it would be applied twice once a later step adds it)."""
    from kbase.store.migrations import MIGRATIONS

    old = tmp_path / "v4.db"
    con = apsw.Connection(str(old))
    db._load_sqlite_vec(con)
    con.execute(V1_SCHEMA.read_text(encoding="utf-8"))
    for version in (2, 3, 4):
        con.execute(MIGRATIONS[version])
    con.execute(f"PRAGMA application_id = {db.APPLICATION_ID}; PRAGMA user_version = 4")
    con.close()
    today = db.schema_sql()
    changed = today.replace(
        "CREATE TABLE chunks (\n", "CREATE TABLE chunks (\n    later INTEGER,\n", 1
    )
    assert changed != today
    monkeypatch.setattr(db, "schema_sql", lambda: changed)

    migrated = db.connect(old)
    assert migrated.execute("PRAGMA user_version").get == SCHEMA_VERSION
    assert "later" not in [row[1] for row in migrated.execute("PRAGMA table_info(chunks)")]
    fresh = db.connect(tmp_path / "new.db", create=True)  # a new index is made from schema.sql
    assert "later" in [row[1] for row in fresh.execute("PRAGMA table_info(chunks)")]


def test_an_index_with_links_source_id_is_migrated(tmp_path, vault):
    from kbase.store import migrations

    path = tmp_path / "v8.db"
    kbase.open(path).index([vault], embed=False)
    con = db.connect(path)
    links = con.execute("SELECT id, doc_id, target FROM links ORDER BY id").fetchall()
    with con:  # back to version 8: the column as it was named, the views as they were
        for name in migrations._LINK_VIEWS_10:
            con.execute(f"DROP VIEW {name}")
        con.execute("DROP INDEX links_doc")
        con.execute("ALTER TABLE links RENAME COLUMN doc_id TO source_id")
        con.execute("CREATE INDEX links_source ON links(source_id)")
    assert migrations._schema_10 in migrations.MIGRATIONS.values()
    with con:  # the step, as db.connect runs it (later steps are not this test's)
        migrations._schema_10(con)
    assert con.execute("SELECT id, doc_id, target FROM links ORDER BY id").fetchall() == links
    assert con.execute("SELECT count(*) FROM backlinks").get > 0
    names = {r[1] for r in con.execute("PRAGMA index_list(links)")}
    assert "links_doc" in names and "links_source" not in names
