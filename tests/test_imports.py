"""Issue 28: what a new user tripped over (a silent hour of embedding, moved vaults, empty
listings, watch's lines and exit code, ...). Each test fails without its fix."""

from __future__ import annotations

import json
import shutil

import pytest

import kbase
from kbase.records import EmbedReport
from kbase.store import db
from tests.test_watch import CountingEmbedder


@pytest.fixture
def fake_model(monkeypatch):
    """Every KB the CLI opens embeds with a counting stand-in (no model load)."""
    embedder = CountingEmbedder()
    monkeypatch.setattr("kbase.embed.catalog.for_index", lambda fingerprint=None: embedder)
    return embedder


def embedded(db_path) -> int:
    con = db.connect(db_path, readonly=True)
    try:
        return con.execute("SELECT count(*) FROM chunks WHERE embedded").get
    finally:
        con.close()


# 1. --no-embed sticks ---------------------------------------------------------------------------
def test_no_embed_sticks_until_embed_or_index_embed(run, vault, db_path, fake_model):
    assert run("index", "--no-embed", vault).exit_code == 0
    assert "embedding  off" in run("status").stdout
    r = run("index")  # a plain update: nothing changed, and nothing is embedded
    assert r.exit_code == 0 and "embedding" not in r.stderr and "embedded" not in r.stdout
    (vault / "new.md").write_text("# New\n\nA new note about marmalade.\n")
    assert "1 new" in run("index").stdout
    assert fake_model.embedded == 0 and embedded(db_path) == 0
    assert json.loads(run("status", "--json").stdout)["auto_embed"] is False
    # the API's long-lived callers (watch, browse, an MCP server while idle) leave it alone too
    assert kbase.open(db_path, embedder=fake_model).embed_step() == EmbedReport()
    assert run("index", "--embed").exit_code == 0  # embeds, and turns embedding back on
    assert embedded(db_path) > 0 and "embedding  on" in run("status").stdout
    (vault / "new.md").write_text("# New\n\nA new note about marmalade, edited.\n")
    before = fake_model.embedded
    run("index")
    assert fake_model.embedded > before  # the changed chunk, at once


def test_kbase_embed_turns_embedding_on(run, vault, db_path, fake_model):
    run("index", "--no-embed", vault)
    assert run("embed", "-q").exit_code == 0
    assert "embedding  on" in run("status").stdout
    (vault / "later.md").write_text("# Later\n\nWritten after kbase embed.\n")
    run("index")
    assert embedded(db_path) == kbase.open(db_path).coverage()[1]


def test_an_index_built_with_no_embed_before_the_setting_stays_keyword_only(
    run, vault, db_path, fake_model
):
    run("index", "--no-embed", vault)
    con = db.connect(db_path)
    with con:
        con.execute("DELETE FROM meta WHERE key = 'auto_embed'")  # as an older kbase left it
    con.close()
    assert "embedding  off" in run("status").stdout
    run("index")
    assert fake_model.embedded == 0


def test_a_new_index_embeds_by_default(tmp_path, vault, fake_model):
    k = kbase.open(tmp_path / "fresh.db")
    k.index([vault])
    assert k.auto_embed() and fake_model.embedded > 0


# 4. a moved vault -------------------------------------------------------------------------------
@pytest.fixture
def moved(run, vault, tmp_path):
    assert run("index", "--no-embed", vault).exit_code == 0
    shutil.move(vault, tmp_path / "elsewhere")
    return vault


def test_hits_of_a_missing_file_say_missing(run, moved):
    r = run("search", "tomatoes")
    assert "[missing]" in r.stdout and "[changed on disk]" not in r.stdout
    hit = json.loads(run("search", "tomatoes", "--json").stdout)[0]
    assert hit["missing"] is True and hit["stale"] is True
    assert "is missing on disk" in run("show", "Garden").stderr


def test_a_changed_file_is_not_missing(run, vault):
    run("index", "--no-embed", vault)
    (vault / "Garden.md").write_text("# Garden\n\nTomatoes need sun, water and patience.\n")
    r = run("search", "tomatoes")
    assert "Garden" in r.stdout and "[changed on disk]" in r.stdout and "[missing]" not in r.stdout


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


# 7. empty listings ------------------------------------------------------------------------------
def test_no_orphans_says_so(run, tmp_path):
    v = tmp_path / "linked"
    v.mkdir()
    (v / "a.md").write_text("# A\n\nSee [[b]].\n")
    (v / "b.md").write_text("# B\n\nSee [[a]].\n")
    run("index", "--no-embed", v)
    r = run("orphans")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "No orphans.\n"
    r = run("orphans", "--path", "nosuch/", "--tag", "x")  # a filter that keeps no note: why
    assert r.stderr == (
        "No orphans: no note's path matches 'nosuch/'; no note has the tag 'x' (or one under it).\n"
    )
    r = run("unresolved", "--tag", "x")
    assert r.stderr == "No unresolved links: no note has the tag 'x' (or one under it).\n"
    assert run("orphans", "--json").stdout.strip() == "[]"
    (v / "c.md").write_text("# C\n\nAlone.\n")
    run("index")
    r = run("neighbors", "c")
    assert r.stdout == "" and r.stderr == "No neighbors.\n"


# 8. watch --------------------------------------------------------------------------------------
def test_watch_says_every_chunk_is_embedded_once(capsys):
    from kbase.cli.progress import IdleEmbedLines

    lines = IdleEmbedLines(clock=lambda: 0.0)
    for _ in range(3):  # a change's own chunks: nothing was waiting, nothing to say
        lines(EmbedReport(embedded=2, remaining=0))
    assert capsys.readouterr().out == ""
    for left in (300, 236, 172, 108, 44, 0, 0, 0):  # a backlog, embedded step by step
        lines(EmbedReport(embedded=64, remaining=left))
    out = capsys.readouterr().out.splitlines()
    assert [line[9:] for line in out] == [
        "embedding while idle: 300 chunks still to embed",
        "embedding while idle: every chunk is embedded",
    ]


# 2. the embedding estimate ----------------------------------------------------------------------
def _embedding_run(n=3000, window=256, batch=8, warmup=2.0, seed=7):
    """(time, done) after each batch of a run shaped like kbase's: windows of ``window`` chunks,
    each run shortest first, a batch costing its tokens; the first batch also loads the model."""
    import random

    rnd = random.Random(seed)
    lengths = [rnd.choice((20, 40, 60, 120, 200, 256, 256)) for _ in range(n)]
    t, done, out = 0.0, 0, [(0.0, 0)]
    for w in range(0, n, window):
        part = sorted(lengths[w : w + window])
        for b in range(0, len(part), batch):
            t += sum(part[b : b + batch]) * 0.0004 + (warmup if done == 0 else 0.0)
            done += len(part[b : b + batch])
            out.append((t, done))
    return out


def test_the_estimate_comes_from_the_measured_rate_and_stays_current(capsys):
    from kbase.cli.progress import EmbedEta

    run_ = _embedding_run()
    total, end = run_[-1][1], run_[-1][0]
    now = [0.0]
    eta = EmbedEta(lambda d, t: None, True, clock=lambda: now[0])
    for t, done in run_:
        now[0] = t
        eta(done, total)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("embedding:")]
    assert len(lines) >= 3, lines  # told, then told again as it goes (no terminal: new lines)
    first_at = next(t for t, d in run_ if d >= 256 and t >= 5)
    told = _seconds(lines[0])
    assert abs(told - (end - first_at)) <= 0.25 * (end - first_at), (told, end - first_at)
    assert "of 3,000 chunks done" in lines[1]


def test_nothing_to_embed_is_not_announced(capsys):
    from kbase.cli.progress import EmbedEta

    EmbedEta(lambda d, t: None, True)(0, 0)  # (an index run that found no new chunk)
    assert capsys.readouterr().err == ""
    EmbedEta(lambda d, t: None, True)(0, 1)
    assert capsys.readouterr().err.startswith("keyword search is ready; embedding 1 chunk for")


def _seconds(line: str) -> float:
    import re

    m = re.search(r"about ([\d.]+) (s|min|h) left", line)
    return float(m.group(1)) * {"s": 1, "min": 60, "h": 3600}[m.group(2)]


# 10. snippets keep code and footnote markers ---------------------------------------------------
def test_snippets_keep_code_exactly_and_footnote_markers_readable():
    from kbase.search.snippet import snippet

    text = (
        "# Footnotes\n\nUse this syntax:\n\n```markdown\nThe study.[^1] More **work**.\n\n"
        "[^1]: Smith et al.\n```\n\nHover over `[^1]` or `[[Note|alias]]` to see it.[^note]\n"
    )
    out = snippet(text)[0]
    assert "The study.[^1] More **work**. [^1]: Smith et al." in out  # the code, as written
    assert "Hover over [^1] or [[Note|alias]] to see it.[^note]" in out
    assert "```" not in out and "# Footnotes" not in out
    quoted = "> [!example] Try it\n> ```text\n> # not a heading **x**\n> ```\n> after **it**\n"
    assert snippet(quoted)[0] == "Try it # not a heading **x** after it"


def test_search_for_a_footnote_shows_the_marker(tmp_path):
    from tests.conftest import shared

    foam = shared("vaults", "foam-docs")
    k = kbase.open(tmp_path / "f.db")
    k.index([foam], embed=False)
    hit = k.search("hypothesis methodology", mode="keyword")[0]
    assert hit.path.endswith("footnotes.md")
    assert "The study confirmed the hypothesis.[^1] Further work is needed.[^note]" in hit.snippet
    assert "[^1]: Smith et al." in hit.snippet


# 3. kbase sql: columns sized to the terminal, links.doc_id, the column lists ---------------------
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


def test_links_name_their_document_doc_id(run, vault):
    run("index", "--no-embed", vault)
    r = run("sql", "SELECT l.doc_id, d.path FROM links AS l JOIN documents AS d ON d.id = l.doc_id")
    assert r.exit_code == 0 and "Welcome.md" in r.stdout
    for view in ("resolved_links", "unresolved_links", "broken_anchors"):
        cols = [c for c in json.loads(run("sql", f"PRAGMA table_info({view})", "--json").stdout)]
        assert "doc_id" in [c["name"] for c in cols] and "source_id" not in [
            c["name"] for c in cols
        ]


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


# 6. names with headings and block ids ----------------------------------------------------------
SETTINGS = (
    "# Settings\n\nIntro.\n\n## Editor\n\nFont and size.\n\n### Spellcheck\n\n"
    "Spellcheck looks at every word.\nIt knows 40 languages. ^langs\n\n"
    "- first item\n- second item ^item\n\n## Sync\n\nSync settings.\n"
)


@pytest.fixture
def settings(run, tmp_path):
    v = tmp_path / "settings"
    v.mkdir()
    (v / "Settings.md").write_text(SETTINGS)
    (v / "Other.md").write_text("# Other\n\nSee [[Settings#Spellcheck|spell]].\n")
    run("index", "--no-embed", v)
    return v


@pytest.mark.parametrize(
    "name",
    ["Settings#Spellcheck", "[[Settings#Spellcheck|spell]]", "[[Settings#Editor#Spellcheck]]"],
)
def test_show_opens_at_a_heading(run, settings, name):
    r = run("show", name)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == ">  9 | ### Spellcheck"  # the heading's line, marked
    assert lines[-1].endswith("- second item ^item")  # its section, to the next heading
    assert not any("Sync" in line or "Intro" in line for line in lines)


def test_show_opens_a_block_and_a_section_of_a_higher_level(run, settings):
    r = run("show", "Settings#^langs")
    assert r.stdout.splitlines() == [
        "> 11 | Spellcheck looks at every word.",
        "  12 | It knows 40 languages. ^langs",
    ]
    assert run("show", "[[Settings#^item]]").stdout.splitlines() == ["> 15 | - second item ^item"]
    editor = run("show", "Settings#editor", "--json")
    got = json.loads(editor.stdout)
    assert (got["first_line"], got["last_line"]) == (5, 15)  # Editor holds Spellcheck


def test_a_missing_heading_is_one_line_naming_the_headings(run, settings):
    r = run("show", "Settings#Spelling")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        "Error: Settings.md has no heading 'Spelling'",
        "  hint: its headings: Settings, Editor, Spellcheck, Sync",
    ]


def test_read_and_the_tui_location_open_at_the_heading(settings, db_path):
    k = kbase.open(db_path)
    text = k.read("[[Settings#Spellcheck|spell]]")  # what the MCP read tool calls
    assert (text.first_line, text.last_line) == (9, 15) and text.lines[0] == "### Spellcheck"
    assert k.read("Settings#Spellcheck", 1, 2).lines == ("# Settings", "")  # a range wins
    assert k.document("Settings#^langs").path == "Settings.md"
    assert k.region("Other").whole  # a plain name is the whole note still


# 9. the file stays near its compact size while watching ---------------------------------------
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


# 11. start-up: a command imports only what it needs -------------------------------------------
def _modules_after(*args: str, cwd=None) -> set[str]:
    """The modules loaded once ``kbase ARGS`` has run, as the console script starts it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"sys.argv = ['kbase', *{list(args)!r}]\n"
        "from kbase.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return set(out.stderr.split())


def test_version_imports_neither_click_nor_the_engine():
    loaded = _modules_after("--version")
    assert "click" not in loaded
    assert {m for m in loaded if m.startswith("kbase")} == {"kbase", "kbase.cli"}


def test_help_imports_click_and_the_commands_only():
    loaded = _modules_after("--help")
    assert {m for m in loaded if m.startswith("kbase")} == {
        "kbase",
        "kbase.cli",
        "kbase.cli.admin",
        "kbase.cli.app",
        "kbase.cli.indexing",
        "kbase.cli.notes",
        "kbase.cli.progress",
        "kbase.errors",
    }
    assert not loaded & {"json", "csv", "dataclasses", "apsw", "rich", "numpy"}


def test_a_keyword_search_imports_no_vector_search_nor_the_model(tmp_path, vault):
    kbase.open(tmp_path / "k.db").index([vault], embed=False)
    loaded = _modules_after("--db", str(tmp_path / "k.db"), "search", "-m", "keyword", "garden")
    assert "kbase.search.keyword" in loaded
    unneeded = {
        "kbase.search.hybrid",
        "kbase.search.semantic",
        "kbase.search.segment",  # ICU, for queries in scripts without spaces
        "kbase.embed.embedder",
        "numpy",
        "onnxruntime",
        "importlib.resources",  # schema.sql, to create an index
        "rapidfuzz",  # typo correction, for a word no note holds
        "json",
        "csv",
        "rich",
    }
    assert not loaded & unneeded, loaded & unneeded


def test_the_mcp_read_tool_opens_at_the_heading(settings, db_path):
    from kbase.mcp import tools

    reply = tools.read(kbase.open(db_path), "[[Settings#Spellcheck|spell]]")
    data = reply.data()
    assert (data["first_line"], data["last_line"]) == (9, 15)
    assert "### Spellcheck" in reply.text and "Sync settings" not in reply.text


def test_links_of_a_name_with_a_heading_are_the_notes(run, settings):
    assert run("links", "Other#Other").exit_code == 0
    r = run("backlinks", "[[Settings#Spellcheck|spell]]")
    assert r.exit_code == 0 and "Other.md" in r.stdout


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
