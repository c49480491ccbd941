"""kbase sql: read-only, time-limited, every output format, kbase's SQL functions."""

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError
from kbase.sqlapi import ReadOnlyViolation
from tests.conftest import kbase_cli
from tests.helpers import stdio_session, text


def kbase_sql(db_path, *args, input=None):
    return kbase_cli(db_path, "sql", *args, input=input, catch_exceptions=True)


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM documents",
        "UPDATE documents SET title = 'x'",
        "INSERT INTO meta VALUES ('a', 'b')",
        "DROP TABLE tags",
        "CREATE TABLE t (x)",
        "CREATE TEMP TABLE t (x)",
        "ATTACH 'other.db' AS o",
        "PRAGMA query_only = 0",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA journal_mode = delete",
        "PRAGMA user_version = 3",
        "PRAGMA main.user_version = 3",
        "PRAGMA application_id = 1",
        "PRAGMA schema_version = 1",
        "PRAGMA writable_schema = ON",
        "PRAGMA foreign_keys = OFF",
        "PRAGMA cache_size = 10",
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "PRAGMA wal_checkpoint",
        "PRAGMA optimize",
        "PRAGMA incremental_vacuum",
        "SELECT * FROM pragma_table_info('links'); PRAGMA user_version = 3",
        "VACUUM",
        "SELECT 1; DELETE FROM documents",
        "INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')",
    ],
)
def test_writes_are_refused_and_nothing_changes(kb, db_path, statement):
    before = kb.sql("SELECT count(*), sum(length(title)) FROM documents").rows
    r = kbase_sql(db_path, statement)
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: kbase sql is read-only; refused:") or r.stderr.startswith(
        "Error: SQL error"
    )
    assert kb.sql("SELECT count(*), sum(length(title)) FROM documents").rows == before


def test_time_limit_interrupts_a_runaway_query(kb):
    with pytest.raises(InputError, match="time limit"):
        kb.sql(
            "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"
            " SELECT count(*) FROM r",
            timeout=0.3,
        )
    assert kb.sql("SELECT count(*) FROM documents").rows == [(4,)]  # the connection is still usable


def test_formats_and_inputs(kb, db_path, tmp_path):
    q = "SELECT path, title FROM notes ORDER BY path LIMIT 2"
    table = kbase_sql(db_path, q).stdout.splitlines()
    assert table[0].split() == ["path", "title"] and table[2].startswith("Garden.md")
    assert json.loads(kbase_sql(db_path, q, "--json").stdout) == [
        {"path": "Garden.md", "title": "Garden"},
        {"path": "Welcome.md", "title": "Welcome"},
    ]
    assert [
        json.loads(x)["path"] for x in kbase_sql(db_path, q, "--jsonl").stdout.splitlines()
    ] == [
        "Garden.md",
        "Welcome.md",
    ]
    assert kbase_sql(db_path, q, "--csv").stdout.splitlines() == [
        "path,title",
        "Garden.md,Garden",
        "Welcome.md,Welcome",
    ]
    assert kbase_sql(db_path, "-", "--csv", input=q).stdout.startswith("path,title")
    f = tmp_path / "q.sql"
    f.write_text(q)
    assert kbase_sql(db_path, "--file", str(f), "--csv").stdout.startswith("path,title")
    empty = kbase_sql(db_path, "SELECT path FROM notes WHERE 0", "--json")
    assert json.loads(empty.stdout) == []


@pytest.mark.slow  # (the fast loop: 6-14 s each on a 2-core machine)
def test_sqlite_vec_and_kbase_functions(db_path, vault):
    k = kbase.open(db_path)
    k.index([vault])
    assert k.sql("SELECT vec_version()").rows[0][0].startswith("v")
    (dim,) = k.sql("SELECT vec_length(kbase_embed('tomatoes in the garden'))").rows[0]
    assert dim == 384
    rows = k.sql(
        "SELECT c.path FROM chunks_vec v JOIN chunk_texts c ON c.id = v.rowid"
        " WHERE v.embedding MATCH kbase_embed('vegetables that need sun') AND k = 1"
    ).rows
    assert rows == [("Garden.md",)]
    found = k.sql("SELECT rank, path FROM kbase_search('raised beds', 'keyword', 3)").rows
    assert found == [(1, "Garden.md")]
    hybrid = k.sql("SELECT path FROM kbase_search('sun for tomatoes')").rows
    assert hybrid[0] == ("Garden.md",)
    blob = json.loads(
        CliRunner()
        .invoke(cli, ["--db", str(db_path), "sql", "SELECT kbase_embed('x') AS v", "--json"])
        .stdout
    )
    assert len(blob[0]["v"]) == 2048  # 384 float32 as base64
    k.close()


def test_sql_errors_are_one_line(kb, db_path):
    r = kbase_sql(db_path, "SELECT * FROM no_such_table")
    assert (
        r.exit_code == 1
        and r.stderr.splitlines()[0] == "Error: SQL error: no such table: no_such_table"
    )
    r = kbase_sql(db_path, "   ")
    assert r.exit_code == 1 and r.stderr.startswith("Error: no SQL given")
    # two statements ran one after the other, the second's rows under the first's columns
    r = kbase_sql(db_path, "SELECT 1 AS one; SELECT 2, 3")
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.splitlines() == [
        "Error: kbase sql runs one statement; this holds more: SELECT 2, 3",
        "  hint: run each statement on its own",
    ]
    for one in ("SELECT 1 AS one;", "SELECT 1 AS one; -- done", "SELECT 1 AS one; /* x */ ;;"):
        assert kbase_sql(db_path, one).stdout == "one\n---\n1\n", one


@pytest.mark.parametrize(
    "query,expected",
    [
        ("PRAGMA table_info(links)", "doc_id"),
        ("PRAGMA table_info = links", "doc_id"),
        ("PRAGMA main.table_xinfo('chunks')", "start_char"),
        ("SELECT name, type FROM pragma_table_info('links') ORDER BY cid", "target_id"),
        ("PRAGMA index_list(links)", "links_doc"),
        ("SELECT name FROM pragma_index_list('links')", "links_target"),
        ("PRAGMA index_info(links_doc)", "doc_id"),
        ("SELECT * FROM pragma_index_xinfo('links_target')", "target_id"),
        ("PRAGMA foreign_key_list(links)", "documents"),
        ('SELECT "table", "from" FROM pragma_foreign_key_list(\'chunks\')', "documents"),
        ("SELECT name, type FROM pragma_table_list WHERE schema = 'main' ORDER BY name", "notes"),
        ("PRAGMA user_version", None),
        ("SELECT user_version FROM pragma_user_version", None),
        ("PRAGMA journal_mode", "wal"),
        ("PRAGMA foreign_keys", None),
        ("PRAGMA quick_check", "ok"),
    ],
)
def test_read_only_pragmas_describe_the_schema(kb, db_path, query, expected):
    r = kbase_sql(db_path, query, "--csv")
    assert r.exit_code == 0, r.output
    rows = r.stdout.splitlines()[1:]
    assert rows, query
    if expected is not None:
        assert any(expected in row for row in rows), rows


def test_a_refused_pragma_changes_nothing_on_the_connection(kb):
    before = kb.sql(
        "SELECT * FROM pragma_foreign_keys, pragma_cache_size, pragma_user_version"
    ).rows
    for statement in (
        "PRAGMA foreign_keys = OFF",
        "PRAGMA cache_size = 10",
        "PRAGMA user_version = 3",
    ):
        with pytest.raises(InputError, match="read-only"):
            kb.sql(statement)
    assert (
        kb.sql("SELECT * FROM pragma_foreign_keys, pragma_cache_size, pragma_user_version").rows
        == before
    )


@pytest.fixture
def long_values(run, tmp_path):
    v = tmp_path / "long"
    v.mkdir()
    (v / "a.md").write_text("# A\n\n" + "word " * 100 + "END\n")
    (v / "同步设置.md").write_text("# 同步设置\n\n" + "同步设置很重要" * 20 + "\n")
    run("index", "--no-embed", v)
    return "SELECT path, body FROM documents ORDER BY path"


def test_sql_fits_the_table_to_the_terminal(run, long_values, monkeypatch):
    from kbase.cli.render import cell_width

    for columns in (80, 220):
        monkeypatch.setenv("COLUMNS", str(columns))
        r = run("sql", long_values)
        lines = r.stdout.splitlines()
        assert max(cell_width(line) for line in lines) <= columns, columns
        assert all(line.endswith("…") for line in lines[2:]), lines  # cut to fit, and marked
        assert "--json, --jsonl or --csv print every value whole" in r.stderr
    monkeypatch.setenv("COLUMNS", "1000")
    r = run("sql", long_values)
    assert "word END" in r.stdout and "…" not in r.stdout and r.stderr == ""
    assert len(r.stdout.splitlines()[2]) > 500  # the whole value when the terminal has room


def test_sql_machine_formats_and_pipes_never_cut(run, long_values, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    rows = json.loads(run("sql", long_values, "--json").stdout)
    assert rows[0]["body"].endswith("word END\n")
    assert "word END" in run("sql", long_values, "--csv").stdout
    monkeypatch.delenv("COLUMNS")  # a pipe, no terminal width: the whole value
    assert "word END" in run("sql", long_values).stdout


def test_columns_of_one_name_each_keep_their_value_in_json_and_csv(run, long_values):
    """SELECT 1 AS a, 2 AS a --csv printed 'a,a' over '2,2' (and --json {"a": 2}): the first
    column's values were lost. They are named as SQLite names a CREATE TABLE AS's columns."""
    query = "SELECT d.path, 1 AS n, 2 AS n, 3 AS 'n:1' FROM documents AS d ORDER BY d.path LIMIT 1"
    assert run("sql", query).stdout.splitlines()[0].split() == ["path", "n", "n", "n:1"]
    record = {"path": "a.md", "n": 1, "n:1": 2, "n:1:1": 3}
    assert json.loads(run("sql", query, "--json").stdout) == [record]
    assert json.loads(run("sql", query, "--jsonl").stdout) == record
    assert run("sql", query, "--csv").stdout.splitlines() == ["path,n,n:1,n:1:1", "a.md,1,2,3"]


def test_links_name_their_document_doc_id(run, vault):
    run("index", "--no-embed", vault)
    r = run("sql", "SELECT l.doc_id, d.path FROM links AS l JOIN documents AS d ON d.id = l.doc_id")
    assert r.exit_code == 0 and "Welcome.md" in r.stdout
    for view in ("resolved_links", "unresolved_links", "broken_anchors"):
        cols = [c for c in json.loads(run("sql", f"PRAGMA table_info({view})", "--json").stdout)]
        assert "doc_id" in [c["name"] for c in cols] and "source_id" not in [
            c["name"] for c in cols
        ]


def _sql(dbp: Path, query: str, *args: str):
    return CliRunner().invoke(cli, ["--db", str(dbp), "sql", *args, query])


def _one_error_line(r, *needles: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and lines and lines[0].startswith("Error: "), r.output
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("  hint: ")), r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    for needle in needles:
        assert needle in r.stderr, r.stderr


LOOP = "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n})"


@pytest.mark.parametrize(
    "query, needle",
    [
        ("SELECT zeroblob(2000000000)", "a value would pass 64 MB"),
        ("SELECT length(printf('%.*c', 2000000000, 'x'))", "a value would pass 64 MB"),
        ("SELECT length(randomblob(1000000000))", "a value would pass 64 MB"),
        (
            LOOP.format(n=100) + " SELECT length(group_concat(randomblob(1000000))) FROM g",
            "a value would pass",
        ),
        ("SELECT kbase_embed(printf('%.*c', 5000000, 'x'))", "5,000,000 characters is too long"),
        ("SELECT kbase_embed(1)", "takes one text argument"),
        ("SELECT * FROM kbase_search", "kbase_search got no query"),
        ("SELECT * FROM kbase_search(x'00ff')", "the query must be text"),
        ("SELECT * FROM kbase_search('tasks', 'keyword', 'many')", "lim must be a number"),
        ("SELECT * FROM kbase_search('tasks', 'keyword', 1000000000)", "at most 1,000 results"),
        ("SELECT * FROM kbase_search('tasks', 'nonsense')", "unknown search mode"),
        (LOOP.format(n=10**12) + " SELECT count(*) FROM g", "time limit"),
        (LOOP.format(n=40) + " SELECT randomblob(60000000) FROM g", "the result passed 256 MB"),
        ("SELECT " + "1 + " * 400_000 + "1", "characters long"),
    ],
    ids=lambda v: v[:40],
)
def test_sql_overruns_are_one_line_within_bounds(kb, query, needle):
    r = _sql(kb.path, query, "--timeout", "2" if needle == "time limit" else "120")
    _one_error_line(r, needle)


def test_one_long_call_is_stopped_at_the_time_limit(kb):
    # 40 sorted blobs of 50 MB: a few long steps that a step-counting handler alone let run 20 s
    # past its limit; and kbase_search fed from every document, a nested search per row.
    for query in (
        LOOP.format(n=40)
        + " SELECT count(*) FROM (SELECT randomblob(50000000) AS b FROM g ORDER BY b)",
        LOOP.format(n=10**6)
        + " SELECT count(*) FROM documents AS d, g, kbase_search(d.title || ' ' || g.i) AS k",
    ):
        t0 = time.monotonic()
        r = _sql(kb.path, query, "--timeout", "1")
        assert time.monotonic() - t0 < 6, query
        _one_error_line(r, "time limit")


@pytest.mark.parametrize(
    ("query", "needles"),
    [
        (";", ("no SQL given in ';': only semicolons, comments or spaces", "hint: pass a query")),
        (" ;; ", ("no SQL given in ';;'",)),
        ("-- the notes\n;", ("no SQL given in '-- the notes\\n;'",)),
        ("/* nothing */", ("only semicolons, comments or spaces",)),
        ("SELECT * FROM kbase_search('')", ("kbase_search(query): no words to search for in ''",)),
        ("SELECT * FROM kbase_search(' ')", ("no words to search for in ' '",)),
        ("SELECT path FROM kbase_search('!!', 'keyword')", ("no words to search for in '!!'",)),
    ],
)
def test_no_statement_and_an_empty_search_are_errors_naming_what_was_given(kb, query, needles):
    """kbase sql ';' printed nothing and exited 0; kbase_search('') gave no rows without a word:
    one error line each, naming what was given, and the fix."""
    r = _sql(kb.path, query)
    _one_error_line(r, *needles)
    assert "call it as kbase_search('words'" in r.stderr or "kbase_search" not in query
    with pytest.raises(InputError):
        kb.sql(query)


def test_kbase_search_fed_from_a_join_column(kb):
    r = _sql(
        kb.path,
        "SELECT d.path, k.path FROM documents AS d,"
        " kbase_search(d.title, 'keyword', 1) AS k ORDER BY 1",
        "--json",
    )
    assert r.exit_code == 0, r.output
    import json

    rows = json.loads(r.stdout)
    assert rows and all(row["path"] for row in rows)
    r = _sql(
        kb.path,
        "SELECT count(*) AS n FROM (SELECT '!!!' AS q) AS t, kbase_search(t.q) AS k",
        "--json",
    )
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"n": 0}], r.output  # no words: no rows
    # from a column, an empty text (an empty note's body) is no words either: no rows, no error
    r = _sql(
        kb.path,
        "SELECT count(*) AS n FROM (SELECT '' AS q UNION ALL SELECT ' ') AS t, kbase_search(t.q)",
        "--json",
    )
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"n": 0}], r.output
    # a query of operators alone is a search, as kbase search's (it gave no rows)
    rows = kb.sql("SELECT path FROM kbase_search('path:tech', 'keyword')").rows
    assert rows and rows == [(h.path,) for h in kb.search("path:tech", mode="keyword")]


@pytest.mark.asyncio
async def test_mcp_sql_errors_are_one_line(kb, tmp_path):
    async with stdio_session(kb.path) as c:
        for query, needle in [
            ("SELECT zeroblob(2000000000)", "a value would pass"),
            ("SELECT * FROM documents AS d, kbase_search(d.title) AS k", None),
            ("SELECT length(randomblob(1000000000))", "a value would pass"),
            ("SELECT kbase_embed(printf('%.*c', 5000000, 'x'))", "too long"),
            (";", "no SQL given in ';'"),
            ("SELECT * FROM kbase_search('  ')", "no words to search for in '  '"),
        ]:
            r = await c.call_tool("sql", {"query": query, "timeout": 5})
            if needle is None:
                assert not r.is_error, text(r)
                continue
            assert r.is_error and needle in text(r), text(r)
            assert "Error executing tool" not in text(r) and len(text(r).splitlines()) == 1
        for query in ("", "   "):  # the search tool: the same error as kbase search's
            r = await c.call_tool("search", {"query": query})
            assert r.is_error and f"no words to search for in {query!r}" in text(r), text(r)
        r = await c.call_tool("search", {"query": "tomatoes " * 2000, "mode": "keyword"})
        assert not r.is_error and "repeated terms counted once" in text(r)
        assert r.structured_content["notice"] == "query 1,999 repeated terms counted once"
    log = kb.path.with_suffix(".log").read_text()
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM notes",
        "INSERT INTO notes(path) VALUES ('x')",
        "UPDATE notes SET path = 'x'",
        "DELETE FROM kbase_search",
        "DELETE FROM documents",  # a table: the authorizer's refusal, as before
    ],
)
def test_every_write_on_a_view_gets_the_read_only_message(pdfs, db_path, sql):
    with kbase.open(db_path) as kb:
        with pytest.raises(ReadOnlyViolation, match=r"^kbase sql is read-only; refused: "):
            kb.sql(sql)
        assert kb.sql("SELECT count(*) FROM notes").rows == [(2,)]  # nothing was changed
    res = kbase_cli(db_path, "sql", sql)
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: kbase sql is read-only; refused: {sql}\n")
    assert "because it is a view" not in res.output


@pytest.mark.parametrize(
    "args, problem",
    [
        (("tasks", "keyword", "many"), "lim must be a number, not 'many'"),
        (("tasks", 3), "the mode must be text"),
        ((b"\x00",), "the query must be text"),
    ],
)
def test_kbase_search_argument_errors_show_the_call_not_a_missing_query(args, problem):
    """kbase sql's and Datasette's kbase_search: a lim of the wrong type was hinted 'kbase_search
    needs a query', which it had."""
    from kbase.errors import InputError
    from kbase.sqlapi import search_rows

    with pytest.raises(InputError) as e:
        search_rows(None, *args)
    assert problem in e.value.message
    assert e.value.hint == "call it as kbase_search('words' [, 'hybrid' [, 10]])"


def test_a_query_that_begins_with_a_comment_is_the_query(run, long_values, tmp_path, monkeypatch):
    """kbase sql "-- the notes\nSELECT ..." was "Error: No such option '-- the notes ...'"."""
    r = run("sql", "-- how many notes\nSELECT count(*) AS n FROM documents", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"n": 2}], r.output
    r = run("sql", "--timeout", "5", "--one\nSELECT 1 AS one", "--csv")
    assert r.exit_code == 0 and r.stdout.splitlines() == ["one", "1"], r.output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-a query.sql").write_text("SELECT 2 AS two")  # an option's value stays its
    assert run("sql", "-f", "-a query.sql", "--csv").stdout.splitlines() == ["two", "2"]
    r = run("sql", "SELECT 1", "--nope")  # an unknown option is still one
    assert r.exit_code == 2 and "No such option '--nope'" in r.output
