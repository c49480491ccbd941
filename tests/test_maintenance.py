"""kbase check finds each kind of damage that can be injected, --fix repairs what the stored texts
allow; compact shrinks a churned index; roots can be re-pointed and follow a moved vault."""

import json
import shutil

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.store import db
from tests.conftest import bump_mtime, write


@pytest.fixture
def kb(db_path, vault):
    k = kbase.open(db_path)
    k.index([vault])
    yield k
    k.close()


def raw(db_path):
    """A connection that bypasses kbase's guards, to damage the file on purpose."""
    return db.connect(db_path)


def kinds(kb):
    return {p.kind for p in kb.check().problems}


def test_healthy_index_checks_ok(kb, db_path):
    assert kb.check().ok
    r = CliRunner().invoke(cli, ["--db", str(db_path), "check"])
    assert r.exit_code == 0 and r.stdout == "ok: the index is consistent\n"


def test_fts_damage_is_found_and_rebuilt(kb, db_path):
    con = raw(db_path)
    cid, title, head, body = con.execute(
        "SELECT id, title, headings, body FROM chunks_fts_content LIMIT 1"
    ).fetchone()
    con.execute(
        "INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)"
        " VALUES ('delete', ?, ?, ?, ?)",
        (cid, title, head, body),
    )
    assert "fts" in kinds(kb)
    r = CliRunner().invoke(cli, ["--db", str(db_path), "check"])
    assert r.exit_code == 1 and "problem: fts" in r.stdout
    result = kb.check(fix=True)
    assert "rebuilt the keyword index" in result.fixed and result.ok
    assert kb.search("raised", mode="keyword")[0].path == "Garden.md"


def test_vector_damage_is_found_and_repaired(kb, db_path):
    con = raw(db_path)
    con.execute("DELETE FROM chunks_vec WHERE rowid = (SELECT min(id) FROM chunks)")
    con.execute(
        "INSERT INTO chunks_vec (rowid, embedding) SELECT 999999, embedding FROM chunks_vec LIMIT 1"
    )
    assert "vectors" in kinds(kb)
    kb.check(fix=True)
    assert kinds(kb) == set()
    assert kb.embed().embedded == 1  # the lost vector is made again, nothing else


def test_dangling_link_and_foreign_model_are_found(kb, db_path):
    con = raw(db_path)
    con.execute("PRAGMA foreign_keys = OFF")
    con.execute("UPDATE links SET target_id = 424242 WHERE rowid = (SELECT min(rowid) FROM links)")
    con.execute("UPDATE meta SET value = '{\"model\": \"other\"}' WHERE key = 'embedder'")
    found = {p.kind: p for p in kb.check().problems}
    assert "links" in found and "embedder" in found and not found["embedder"].fixable
    kb.check(fix=True)
    assert kinds(kb) == {"embedder"}
    with pytest.raises(kbase.KbaseError, match="another embedding model"):
        kb.search("garden", mode="semantic")


def test_bad_offsets_are_found_and_rechunked(kb, db_path):
    con = raw(db_path)
    con.execute("DROP TRIGGER chunks_before_update")  # the schema forbids this; damage on purpose
    con.execute(
        "UPDATE chunks SET end_char = end_char + 100000 WHERE id = (SELECT min(id) FROM chunks)"
    )
    assert "chunk_offsets" in kinds(kb)
    result = kb.check(fix=True)
    assert any("re-chunked" in f for f in result.fixed)
    assert {p.kind for p in result.problems} == set()


def _spans(con) -> list[tuple]:
    return con.execute(
        "SELECT d.path, c.seq, c.start_char, c.end_char FROM chunks AS c"
        " JOIN documents AS d ON d.id = c.doc_id ORDER BY d.path, c.seq"
    ).fetchall()


def test_deleted_chunk_rows_are_found_and_rechunked(kb, db_path):
    """DELETE FROM chunks ... left documents whose text no chunk held (no search found it) and
    kbase check said ok: the first rows, a document's last chunk, every chunk of one; the fix
    check suggests makes the same chunks again, and kbase embed their vectors."""
    kb.close()
    con = raw(db_path)
    before = _spans(con)
    con.execute("DELETE FROM chunks WHERE id IN (SELECT id FROM chunks LIMIT 3)")
    con.execute(
        "DELETE FROM chunks WHERE id = (SELECT max(c.id) FROM chunks AS c"
        " JOIN documents AS d ON d.id = c.doc_id WHERE d.path = 'tech/notes.txt')"
    )
    gone = len(before) - len(_spans(con))
    assert gone >= 4
    found = {p.kind: p for p in kb.check().problems}
    assert found["missing_chunks"].count == 4 and found["missing_chunks"].fixable, found
    r = CliRunner().invoke(cli, ["--db", str(db_path), "check"])
    assert r.exit_code == 1 and "problem: missing_chunks: documents whose chunks" in r.stdout
    assert "run kbase check --fix to repair" in r.stderr  # what it suggests repairs it:
    r = CliRunner().invoke(cli, ["--db", str(db_path), "check", "--fix"])
    assert (
        r.exit_code == 0 and "fixed: re-chunked 4 documents whose chunks were missing" in r.stdout
    )
    assert r.stdout.endswith("ok: the index is consistent\n"), r.stdout
    assert _spans(con) == before
    assert kb.embed().embedded == gone  # the vectors of the chunks made again, nothing else
    assert kb.check().ok


def test_text_no_chunk_holds_by_design_is_no_missing_chunk(tmp_path):
    """A note that ends in a rule or a base64 blob (which no chunk holds), an empty note, one
    of front matter alone: not taken for deleted chunks."""
    png = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
        "rkJggg"
    )
    blob = f"![dot](data:image/png;base64,{png * 40})"  # (kbase.ingest.junk: in no chunk)
    vault = write(
        tmp_path / "v",
        {
            "rule.md": "# Rule\n\nSome text.\n\n---\n",
            "blob.md": f"# Blob\n\nSome text.\n\n{blob}\n",
            "empty.md": "",
            "front.md": "---\ntitle: Only front matter\n---\n",
        },
    )
    k = kbase.open(tmp_path / "i.db")
    k.index([vault], embed=False)
    assert k.check().ok, k.check().problems


def test_page_corruption_is_reported_not_hidden(kb, db_path):
    kb.close()
    con = raw(db_path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = con.execute("PRAGMA page_size").get
    root = con.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'tags_tag'").get
    con.close()
    with open(db_path, "r+b") as f:
        f.seek((root - 1) * page + 8)
        f.write(b"\xff" * 64)
    r = CliRunner().invoke(cli, ["--db", str(db_path), "check"])
    assert r.exit_code == 1
    assert "sqlite_integrity" in r.stdout or "damaged" in r.stderr


def test_an_index_too_damaged_to_open_does_not_send_check_to_itself(kb, db_path):
    """A file cut short (a copy interrupted) cannot be opened, by kbase check either: the error
    says to index again, not 'run kbase check', which answers the same line."""
    kb.close()
    con = raw(db_path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = db_path.read_bytes()
    db_path.write_bytes(data[: len(data) // 4])
    for args in (["check"], ["status"], ["search", "tomatoes"]):
        r = CliRunner().invoke(cli, ["--db", str(db_path), *args])
        assert r.exit_code == 1 and "is damaged" in r.stderr, (args, r.stderr)
        assert "kbase check" not in r.stderr and "index again" in r.stderr, (args, r.stderr)


@pytest.mark.slow
def test_compact_shrinks_a_churned_index(db_path, tmp_path):
    v = write(
        tmp_path / "churn", {f"n{i}.md": f"# Note {i}\n\n" + "words " * 400 for i in range(40)}
    )
    k = kbase.open(db_path)
    k.index([v], embed=False)
    for round_ in range(3):
        for p in v.iterdir():
            p.write_text(f"# Note\n\nround {round_} " + "other words " * 300)
            bump_mtime(p, 10 + round_)
        k.index([v], embed=False)
    for p in list(v.iterdir())[:30]:
        p.unlink()
    k.index([v], embed=False)
    r = k.compact()
    assert r.bytes_after < r.bytes_before
    assert kinds(k) == set()
    assert k.search("round", mode="keyword")


def test_roots_move_and_follow_a_vault_moved_with_its_index(tmp_path):
    home = tmp_path / "home"
    vault = write(home / "notes", {"a.md": "# A\n\nalpha\n"})
    k = kbase.open(home / "index.db")
    k.index([vault], embed=False)
    shutil.move(home, tmp_path / "moved")  # the notes and the index move together
    k2 = kbase.open(tmp_path / "moved" / "index.db")
    (r,) = k2.roots()
    assert not r.exists and r.moved_with_index == str(tmp_path / "moved" / "notes")
    report = k2.index([], embed=False)
    assert report.moved_roots and report.unchanged == 1 and report.new == 0
    assert k2.search("alpha", mode="keyword")[0].abspath == str(
        tmp_path / "moved" / "notes" / "a.md"
    )
    elsewhere = tmp_path / "elsewhere"
    shutil.move(tmp_path / "moved" / "notes", elsewhere)
    out = CliRunner().invoke(
        cli,
        [
            "--db",
            str(tmp_path / "moved" / "index.db"),
            "roots",
            "move",
            str(tmp_path / "moved" / "notes"),
            str(elsewhere),
        ],
    )
    assert out.exit_code == 0 and out.stdout.startswith("moved root")
    assert k2.index([], embed=False).unchanged == 1
    roots = json.loads(
        CliRunner()
        .invoke(cli, ["--db", str(tmp_path / "moved" / "index.db"), "roots", "--json"])
        .stdout
    )
    assert roots[0]["path"] == str(elsewhere) and roots[0]["exists"]


def test_compact_prints_sizes_in_the_binary_units_it_names(db_path, tmp_path):
    v = write(tmp_path / "v", {f"n{i}.md": f"# Note {i}\n\n" + "words " * 200 for i in range(20)})
    kbase.open(db_path).index([v], embed=False)
    run = lambda *a: CliRunner().invoke(cli, ["--db", str(db_path), "compact", *a])  # noqa: E731
    r = json.loads(run("--json").stdout)
    assert (
        r["bytes_saved"] == r["bytes_before"] - r["bytes_after"]
        and r["bytes_after"] == db_path.stat().st_size
    )
    size = db_path.stat().st_size  # compacting again changes nothing: before = after = size
    assert (
        size > 1024
        and run().stdout
        == f"compacted: {size / 1024:.1f} KiB -> {size / 1024:.1f} KiB (0 B saved)\n"
    )


def test_readers_find_a_vault_moved_with_its_index_without_writing(tmp_path):
    home = tmp_path / "home"
    vault = write(home / "notes", {"a.md": "# A\n\nalpha [[b]]\n", "sub/b.md": "# B\n\nbeta\n"})
    kbase.open(home / "index.db").index([vault], embed=False)
    shutil.move(home, tmp_path / "moved")  # `mv home moved`: file times are kept
    dbp = tmp_path / "moved" / "index.db"
    new = tmp_path / "moved" / "notes"
    before = dbp.read_bytes()
    with kbase.open(dbp) as k:
        (hit,) = k.search("alpha", mode="keyword")
        assert hit.abspath == str(new / "a.md") and not hit.stale  # before any re-index
        assert k.document(hit.abspath).abspath == str(new / "a.md")  # what the TUI opens and edits
        assert k.document("sub/b.md").abspath == str(new / "sub" / "b.md")
        assert [lk.target_path for lk in k.links(hit.abspath)] == ["sub/b.md"]
    r = CliRunner().invoke(cli, ["--db", str(dbp), "search", "beta", "--json"])
    assert (
        json.loads(r.stdout)[0]["abspath"] == str(new / "sub" / "b.md")
        and "changed on disk" not in r.stdout
    )
    r = CliRunner().invoke(cli, ["--db", str(dbp), "show", str(new / "sub" / "b.md"), "--json"])
    assert json.loads(r.stdout)["abspath"] == str(new / "sub" / "b.md")
    r = CliRunner().invoke(cli, ["--db", str(dbp), "search", "alpha"])
    assert r.exit_code == 0 and "[changed on disk]" not in r.stdout
    assert dbp.read_bytes() == before  # found, not re-pointed: the next kbase index records it
    (new / "a.md").write_text("# A\n\nalpha, edited\n")
    assert kbase.open(dbp).search("alpha", mode="keyword")[0].stale  # a real change still shows


def test_front_matter_warnings_are_kept_per_note_and_listed_by_status_check_and_a_view(tmp_path):
    vault = write(
        tmp_path / "v",
        {
            "sub/bad.md": "---\ntitle: ok\ntags: [a, b\nother: x\n---\n# Bad\n\nbody text\n",
            "list.md": "---\n- a list\n---\nlisty\n",
            "fine.md": "---\ntitle: Fine\n---\nfine\n",
        },
    )
    dbp = tmp_path / "i.db"
    cli_run = lambda *a: CliRunner().invoke(cli, ["--db", str(dbp), *map(str, a)])  # noqa: E731
    assert "2 warnings" in cli_run("index", "--no-embed", vault).stdout
    assert cli_run("index", "--no-embed", vault).stdout.count("warnings") == 0  # not read again...
    check = cli_run("check")  # ...but still known
    assert check.exit_code == 0  # warnings about notes, not problems of the index
    assert check.stdout.splitlines() == [
        "warning: list.md:1: front matter is a list, not a mapping; ignored",
        "warning: sub/bad.md:4: malformed front matter at line 4: did not find expected ',' or ']';"
        " body indexed without it",
        "ok: the index is consistent",
    ]
    assert json.loads(cli_run("check", "--json").stdout)["warnings"][1] == {
        "path": "sub/bad.md",
        "line": 4,
        "detail": "malformed front matter at line 4: did not find expected ',' or ']';"
        " body indexed without it",
    }
    assert (
        "warnings   2 notes indexed without front matter it could not read"
        "  (kbase check lists them)" in cli_run("status").stdout
    )
    st = json.loads(cli_run("status", "--json").stdout)
    assert st["frontmatter_warnings"] == 2 and "frontmatter" not in st["diagnostics"]
    with kbase.open(dbp) as k:
        assert k.sql("SELECT path, title, line FROM frontmatter_warnings ORDER BY path").rows == [
            ("list.md", "list", 1),
            ("sub/bad.md", "Bad", 4),
        ]
        # The diagnostic's offsets are the line the YAML parser stopped at (or the whole block).
        assert k.sql(
            "SELECT substr(d.body, g.start_char + 1, g.end_char - g.start_char)"
            " FROM diagnostics AS g"
            " JOIN documents AS d ON d.id = g.doc_id ORDER BY d.path"
        ).rows == [("---\n- a list\n---\n",), ("other: x",)]
    (vault / "sub" / "bad.md").write_text("---\ntitle: ok\ntags: [a, b]\n---\n# Bad\n\nbody text\n")
    cli_run("index", "--no-embed", vault)
    assert [w["path"] for w in json.loads(cli_run("check", "--json").stdout)["warnings"]] == [
        "list.md"
    ]


def test_roots_remove_drops_the_documents_in_one_transaction(run, moved, db_path):
    r = run("index")
    assert "kbase roots remove" in r.stderr  # the hint names the command that exists
    assert "kbase roots remove" in run("roots").stdout
    r = run("roots", "remove", moved)
    assert r.exit_code == 0 and "removed root" in r.stdout and "4 documents" in r.stdout
    con = db.connect(db_path, readonly=True)
    for table in ("roots", "documents", "chunks", "links", "tags", "chunks_fts"):
        assert con.execute(f"SELECT count(*) FROM {table}").get == 0, table
    con.close()
    assert "ok: the index is consistent" in run("check").stdout


def test_roots_remove_is_all_or_nothing(run, moved, db_path):
    import apsw

    from kbase.indexer import maintenance

    con = db.connect(db_path)
    with con:  # a failure after the documents are deleted: nothing may be lost
        con.execute(
            "CREATE TRIGGER boom BEFORE DELETE ON roots BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    with pytest.raises(apsw.Error, match="boom"):
        maintenance.remove_root(con, str(moved))
    con.close()
    assert kbase.open(db_path).status().documents == 4


def test_roots_move_and_remove_quiet_still_report_failures(run, moved, tmp_path):
    for args in (
        ("roots", "move", "-q", "/no/such/root", tmp_path),
        ("roots", "move", "-q", moved, tmp_path / "nowhere"),
        ("roots", "remove", "-q", "/no/such/root"),
    ):
        r = run(*args)
        assert r.exit_code == 1 and r.stderr.startswith("Error: "), args
    r = run("roots", "move", "-q", moved, tmp_path / "elsewhere")
    assert r.exit_code == 0 and r.output == ""
    assert "[missing]" not in run("search", "tomatoes").stdout


def test_the_wal_is_truncated_after_each_run_though_a_reader_stays_open(tmp_path, vault):
    dbp = tmp_path / "w.db"
    kb = kbase.open(dbp)
    kb.index([vault], embed=False)
    kb.reader.execute("SELECT 1 FROM meta").fetchall()  # a long-lived reader (watch, TUI, MCP)
    wal = tmp_path / "w.db-wal"
    for i in range(5):
        (vault / "Garden.md").write_text(f"# Garden\n\nTomatoes, edit {i}.\n" + "more " * 300)
        kb.index([vault], embed=False)
        assert not wal.exists() or wal.stat().st_size == 0, (i, wal.stat().st_size)
    kb.close()


def test_the_keyword_index_stays_merged_over_many_small_runs(tmp_path, vault):
    dbp = tmp_path / "m.db"
    kb = kbase.open(dbp)
    kb.index([vault], embed=False)
    for i in range(40):
        (vault / "Garden.md").write_text(f"# Garden\n\nTomatoes, edit {i}.\n" + f"word{i} " * 50)
        kb.index([vault], embed=False)

    def fts_bytes() -> int:
        return kb.sql("SELECT sum(length(block)) FROM chunks_fts_data").rows[0][0]

    grown = fts_bytes()
    con = db.connect(dbp)
    with con:
        con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")
    con.close()
    kb.close()
    assert grown <= 1.5 * fts_bytes(), (grown, fts_bytes())  # without merging: over 4x


def test_holes_left_by_deleted_vectors_are_given_back(tmp_path):
    import struct

    from kbase.embed.vectors import tidy_vectors
    from kbase.indexer import maintenance

    path = tmp_path / "v.db"
    con = db.connect(path, create=True)
    assert con.execute("PRAGMA auto_vacuum").get == 2  # incremental: free pages can be returned
    con.execute("CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[384])")
    vec = struct.pack("384f", *([0.5] * 384))
    with con:
        for i in range(1, 2501):  # three blocks of 1024 slots
            con.execute("INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)", (i, vec))
        for i in range(1, 2501, 2):  # edits: every other vector deleted, as re-embedding does
            con.execute("DELETE FROM chunks_vec WHERE rowid = ?", (i,))
    blocks = lambda: con.execute("SELECT count(*) FROM chunks_vec_chunks").get  # noqa: E731
    assert blocks() == 3
    maintenance.checkpoint(con)
    size = path.stat().st_size
    while tidy_vectors(con):
        pass
    assert blocks() == 2 and con.execute("SELECT count(*) FROM chunks_vec_rowids").get == 1250
    assert sorted(r for (r,) in con.execute("SELECT rowid FROM chunks_vec")) == list(
        range(2, 2501, 2)
    )
    maintenance.release_free_pages(con)
    maintenance.checkpoint(con)
    con.close()
    assert path.stat().st_size < size - 1_000_000  # a 1.5 MB block returned to the disk


def test_an_older_index_is_switched_to_incremental_vacuum_when_pages_are_free(tmp_path, vault):
    from kbase.indexer import maintenance

    path = tmp_path / "old.db"
    write_many = {
        f"bulk/n{i}.md": f"# Note {i}\n\n" + f"filler {i} text " * 900 for i in range(150)
    }
    from tests.conftest import write

    write(vault, write_many)
    kbase.open(path).index([vault], embed=False)
    con = db.connect(path)
    con.execute("PRAGMA auto_vacuum = NONE")
    con.execute("VACUUM")  # as an index made before kbase set auto_vacuum
    assert con.execute("PRAGMA auto_vacuum").get == 0
    shutil.rmtree(vault / "bulk")
    con.close()
    k = kbase.open(path)
    k.reader.execute("SELECT 1 FROM meta").fetchall()  # an idle reader does not stop it
    k.index([vault], embed=False)  # the notes are gone: their pages are free
    con = db.connect(path, readonly=True)
    assert con.execute("PRAGMA auto_vacuum").get == 2
    assert con.execute("PRAGMA freelist_count").get * 16384 <= maintenance.FREE_BYTES_KEPT
    con.close()
    k.close()
