"""kbase sql: read-only, time-limited, every output format, kbase's SQL functions."""

import json

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli import cli
from kbase.errors import InputError


def run(db_path, *args, input=None):
    return CliRunner().invoke(cli, ["--db", str(db_path), "sql", *args], input=input)


@pytest.mark.parametrize("statement", [
    "DELETE FROM documents",
    "UPDATE documents SET title = 'x'",
    "INSERT INTO meta VALUES ('a', 'b')",
    "DROP TABLE tags",
    "CREATE TABLE t (x)",
    "CREATE TEMP TABLE t (x)",
    "ATTACH 'other.db' AS o",
    "PRAGMA query_only = 0",
    "PRAGMA journal_mode = DELETE",
    "VACUUM",
    "SELECT 1; DELETE FROM documents",
    "INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')",
])
def test_writes_are_refused_and_nothing_changes(kb, db_path, statement):
    before = kb.sql("SELECT count(*), sum(length(title)) FROM documents").rows
    r = run(db_path, statement)
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: kbase sql is read-only; refused:") or r.stderr.startswith("Error: SQL error")
    assert kb.sql("SELECT count(*), sum(length(title)) FROM documents").rows == before


def test_time_limit_interrupts_a_runaway_query(kb):
    with pytest.raises(InputError, match="time limit"):
        kb.sql("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r", timeout=0.3)
    assert kb.sql("SELECT count(*) FROM documents").rows == [(4,)]  # the connection is still usable


def test_formats_and_inputs(kb, db_path, tmp_path):
    q = "SELECT path, title FROM notes ORDER BY path LIMIT 2"
    table = run(db_path, q).stdout.splitlines()
    assert table[0].split() == ["path", "title"] and table[2].startswith("Garden.md")
    assert json.loads(run(db_path, q, "--json").stdout) == [
        {"path": "Garden.md", "title": "Garden"}, {"path": "Welcome.md", "title": "Welcome home"}]
    assert [json.loads(x)["path"] for x in run(db_path, q, "--jsonl").stdout.splitlines()] == ["Garden.md", "Welcome.md"]
    assert run(db_path, q, "--csv").stdout.splitlines() == ["path,title", "Garden.md,Garden", "Welcome.md,Welcome home"]
    assert run(db_path, "-", "--csv", input=q).stdout.startswith("path,title")
    f = tmp_path / "q.sql"
    f.write_text(q)
    assert run(db_path, "--file", str(f), "--csv").stdout.startswith("path,title")
    empty = run(db_path, "SELECT path FROM notes WHERE 0", "--json")
    assert json.loads(empty.stdout) == []


def test_sqlite_vec_and_kbase_functions(db_path, vault):
    k = kbase.open(db_path)
    k.index([vault])
    assert k.sql("SELECT vec_version()").rows[0][0].startswith("v")
    (dim,) = k.sql("SELECT vec_length(kbase_embed('tomatoes in the garden'))").rows[0]
    assert dim == 384
    rows = k.sql("SELECT c.path FROM chunks_vec v JOIN chunk_texts c ON c.id = v.rowid"
                 " WHERE v.embedding MATCH kbase_embed('vegetables that need sun') AND k = 1").rows
    assert rows == [("Garden.md",)]
    found = k.sql("SELECT rank, path FROM kbase_search('raised beds', 'keyword', 3)").rows
    assert found == [(1, "Garden.md")]
    hybrid = k.sql("SELECT path FROM kbase_search('sun for tomatoes')").rows
    assert hybrid[0] == ("Garden.md",)
    blob = json.loads(CliRunner().invoke(cli, ["--db", str(db_path), "sql", "SELECT kbase_embed('x') AS v", "--json"]).stdout)
    assert len(blob[0]["v"]) == 2048  # 384 float32 as base64
    k.close()


def test_sql_errors_are_one_line(kb, db_path):
    r = run(db_path, "SELECT * FROM no_such_table")
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == "Error: SQL error: no such table: no_such_table"
    r = run(db_path, "   ")
    assert r.exit_code == 1 and r.stderr.startswith("Error: no SQL given")
