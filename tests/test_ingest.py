import os
import shutil

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kbase
from kbase.cli.app import cli
from kbase.indexer import pipeline
from kbase.store import db
from tests.conftest import bump_mtime, examples, shared, write


def snapshot(con):
    """Everything an index run derives from the files, independent of row ids."""
    docs = con.execute(
        "SELECT r.path, d.path, d.title, d.hash, d.encoding, d.frontmatter, d.body FROM documents d"
        " JOIN roots r ON r.id = d.root_id ORDER BY 1, 2"
    ).fetchall()
    chunks = con.execute(
        "SELECT d.path, c.seq, c.start_char, c.end_char, c.heading_path, c.kind, c.embed_hash"
        " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY 1, 2"
    ).fetchall()
    tags = con.execute(
        "SELECT d.path, t.tag FROM tags t JOIN documents d ON d.id = t.doc_id ORDER BY 1, 2"
    ).fetchall()
    return docs, chunks, tags


def assert_consistent(con):
    assert con.execute("PRAGMA integrity_check").get == "ok"
    con.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    n_chunks = con.execute("SELECT count(*) FROM chunks").get
    assert con.execute("SELECT count(*) FROM chunks_fts").get == n_chunks
    for body, start, end, text in con.execute(
        "SELECT d.body, c.start_char, c.end_char, t.text FROM chunks c"
        " JOIN documents d ON d.id = c.doc_id JOIN chunk_texts t ON t.id = c.id"
    ):
        assert body[start:end] == text


@pytest.fixture
def con(db_path):
    return db.connect(db_path, create=True)


def counting(monkeypatch):
    from kbase.indexer import prepare

    calls = {"parse": 0, "decode": 0}
    for module in (pipeline, prepare):  # the run itself, and what reads a file's bytes
        for name in calls:
            if not hasattr(module, name):
                continue
            real = getattr(module, name)

            def wrapper(*a, _real=real, _name=name, **k):
                calls[_name] += 1
                return _real(*a, **k)

            monkeypatch.setattr(module, name, wrapper)
    return calls


def test_fresh_index_then_no_change_run_reads_nothing(con, vault, monkeypatch):
    r = pipeline.index(con, [vault])
    assert (r.new, r.updated, r.unchanged, r.removed, r.skipped) == (4, 0, 0, 0, [])
    assert_consistent(con)
    before = snapshot(con)
    calls = counting(monkeypatch)
    opened = []
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda f, *a, **k: (opened.append(f), real_open(f, *a, **k))[1]
    )
    r = pipeline.index(con, [vault])
    monkeypatch.undo()
    assert (r.new, r.updated, r.unchanged, r.removed) == (0, 0, 4, 0)
    assert calls == {"parse": 0, "decode": 0}
    assert not [f for f in opened if str(vault) in str(f)]
    assert snapshot(con) == before


def test_touched_file_with_same_content_is_not_reparsed(con, vault, monkeypatch):
    pipeline.index(con, [vault])
    bump_mtime(vault / "Garden.md")
    calls = counting(monkeypatch)
    r = pipeline.index(con, [vault])
    assert (r.unchanged, r.updated, calls["parse"]) == (4, 0, 0)
    calls = counting(monkeypatch)
    pipeline.index(con, [vault])
    assert calls["parse"] == 0  # the new stat was remembered


def test_modify_delete_add(con, vault):
    pipeline.index(con, [vault])
    (vault / "Garden.md").write_text("# Garden\n\nNow with cucumbers.\n")
    bump_mtime(vault / "Garden.md")
    (vault / "tech" / "notes.txt").unlink()
    write(vault, {"New.md": "# New\n\nfresh idea\n"})
    r = pipeline.index(con, [vault])
    assert (r.new, r.updated, r.removed, r.unchanged) == (1, 1, 1, 2)
    assert_consistent(con)
    kb_hits = lambda q: [h.path for h in kbase.open(con.filename).search(q, mode="keyword")]  # noqa: E731
    assert kb_hits("cucumbers") == ["Garden.md"]
    assert kb_hits("tomatoes") == []  # the old Garden text and the deleted txt are gone everywhere
    assert kb_hits("fresh") == ["New.md"]
    assert (
        con.execute("SELECT count(*) FROM tags WHERE doc_id NOT IN (SELECT id FROM documents)").get
        == 0
    )


def test_a_move_keeps_the_document_and_its_chunks(con, vault, monkeypatch):
    pipeline.index(con, [vault])
    ids = con.execute(
        "SELECT d.id, group_concat(c.id) FROM documents d JOIN chunks c ON c.doc_id = d.id"
        " WHERE d.path = 'Garden.md'"
    ).fetchone()
    (vault / "archive").mkdir()
    shutil.move(vault / "Garden.md", vault / "archive" / "Garden.md")
    calls = counting(monkeypatch)
    r = pipeline.index(con, [vault])
    assert (r.renamed, r.new, r.removed, calls["parse"]) == (1, 0, 0, 0)
    after = con.execute(
        "SELECT d.id, group_concat(c.id) FROM documents d JOIN chunks c ON c.doc_id = d.id"
        " WHERE d.path = 'archive/Garden.md'"
    ).fetchone()
    assert after == ids
    assert_consistent(con)


def test_a_rename_keeps_the_document_and_takes_the_new_name_as_title(con, vault):
    """Obsidian shows the file name: 'Garden.md' opening with '# Garden', renamed 'Old
    garden.md', is 'Old garden' (the same document, its text not read again from disk)."""
    pipeline.index(con, [vault])
    doc_id = con.execute("SELECT id FROM documents WHERE path = 'Garden.md'").get
    (vault / "archive").mkdir()
    shutil.move(vault / "Garden.md", vault / "archive" / "Old garden.md")
    r = pipeline.index(con, [vault])
    assert (r.renamed, r.new, r.removed) == (1, 0, 0)
    assert con.execute(
        "SELECT id, title FROM documents WHERE path = 'archive/Old garden.md'"
    ).fetchone() == (
        doc_id,
        "Old garden",
    )
    assert [h.title for h in kbase.open(con.filename).search("old garden", mode="keyword")][:1] == [
        "Old garden"
    ]
    assert_consistent(con)


def test_incremental_equals_fresh(tmp_path, vault):
    con = db.connect(tmp_path / "inc.db", create=True)
    pipeline.index(con, [vault])
    (vault / "Welcome.md").write_text(
        "---\ntags: [changed]\n---\n# Welcome again\n\nDifferent words.\n"
    )
    bump_mtime(vault / "Welcome.md")
    os.rename(vault / "tech", vault / "technology")
    (vault / "Garden.md").unlink()
    write(vault, {"Added.md": "# Added\n\n#new-tag body\n"})
    pipeline.index(con, [vault])
    fresh = db.connect(tmp_path / "fresh.db", create=True)
    pipeline.index(fresh, [vault])
    assert snapshot(con) == snapshot(fresh)


def test_bad_files_are_skipped_with_a_reason_and_the_run_goes_on(con, tmp_path):
    v = write(
        tmp_path / "v",
        {
            "good.md": "# Good\n\ntext\n",
            "binary.md": b"\x00\x01\x02\x03" * 100,
            "empty.md": "",
            "bad-yaml.md": "---\ntitle: [oops\n---\n# Body survives\n\nsearchable words\n",
            "-leading dash.md": "# Dash\n",
            "new\nline.md": "# Newline\n",
            "ünïcödé name.md": "# Unicode\n",
        },
    )
    unreadable = v / "locked.md"
    unreadable.write_text("# Locked\n")
    unreadable.chmod(0)
    try:
        r = pipeline.index(con, [v])
    finally:
        unreadable.chmod(0o644)
    skipped = {os.path.basename(p): reason for p, reason in r.skipped}
    assert "binary" in skipped["binary.md"]
    if os.geteuid() != 0:  # root reads anything
        assert "cannot read" in skipped["locked.md"]
    assert r.new == len(list(v.iterdir())) - len(skipped)
    assert any("malformed front matter" in w for _, w in r.warnings)
    assert [h.path for h in kbase.open(con.filename).search("searchable", mode="keyword")] == [
        "bad-yaml.md"
    ]
    assert_consistent(con)


def test_unreadable_file_keeps_what_was_indexed(con, vault):
    if os.geteuid() == 0:
        pytest.skip("root can read files without permission")
    pipeline.index(con, [vault])
    p = vault / "Garden.md"
    p.write_text("# Garden\n\nchanged\n")
    bump_mtime(p)
    p.chmod(0)
    try:
        r = pipeline.index(con, [vault])
    finally:
        p.chmod(0o644)
    assert r.removed == 0 and any("cannot read" in reason for _, reason in r.skipped)
    assert con.execute("SELECT count(*) FROM documents WHERE path = 'Garden.md'").get == 1


def test_interrupt_leaves_a_consistent_index_that_the_next_run_completes(tmp_path):
    files = {f"n{i:03}.md": f"# Note {i}\n\nword{i} common text\n" for i in range(50)}
    v = write(tmp_path / "v", files)
    con = db.connect(tmp_path / "i.db", create=True)

    def stop_midway(done, total, path):
        if done == 20:
            raise KeyboardInterrupt

    r = pipeline.index(con, [v], progress=stop_midway)
    assert r.interrupted and r.new == 20
    assert_consistent(con)
    r = pipeline.index(con, [v])
    assert (r.new, r.unchanged) == (30, 20)
    fresh = db.connect(tmp_path / "f.db", create=True)
    pipeline.index(fresh, [v])
    assert snapshot(con) == snapshot(fresh)


@pytest.mark.parametrize("commit_every", [0.0, 60.0])
def test_interrupt_while_a_document_is_written_rolls_back_its_batch(
    tmp_path, monkeypatch, commit_every
):
    files = {f"n{i:03}.md": f"# Note {i}\n\nword{i} [[Note {i + 1}]] #tag{i}\n" for i in range(50)}
    v = write(tmp_path / "v", files)
    con = db.connect(tmp_path / "i.db", create=True)
    monkeypatch.setattr(pipeline, "COMMIT_EVERY_SECONDS", commit_every)
    real, calls = pipeline.writes.write_document, []

    def interrupted_write(*args, **kwargs):
        calls.append(real(*args, **kwargs))  # written, but Ctrl-C lands before it returns
        if len(calls) == 21:
            raise KeyboardInterrupt
        return calls[-1]

    monkeypatch.setattr(pipeline.writes, "write_document", interrupted_write)
    r = pipeline.index(con, [v])
    committed = con.execute("SELECT count(*) FROM documents").get
    # committing after every document, the 20 before it stay; in one batch, nothing does
    assert r.interrupted and r.new == committed == (20 if commit_every == 0 else 0)
    assert_consistent(con)
    monkeypatch.undo()
    r = pipeline.index(con, [v])
    assert (r.new, r.unchanged) == (50 - committed, committed)
    fresh = db.connect(tmp_path / "f.db", create=True)
    pipeline.index(fresh, [v])
    assert snapshot(con) == snapshot(fresh)


def test_subfolder_and_file_roots_join_the_enclosing_root(con, vault):
    pipeline.index(con, [vault / "tech"])
    pipeline.index(con, [vault / "Garden.md"])
    assert con.execute("SELECT count(*) FROM roots").get == 2
    pipeline.index(con, [vault])  # the outer root absorbs both, nothing is re-read
    assert con.execute("SELECT path FROM roots").fetchall() == [(str(vault),)]
    paths = [p for (p,) in con.execute("SELECT path FROM documents ORDER BY path")]
    assert paths == ["Garden.md", "Welcome.md", "tech/SQLite.md", "tech/notes.txt"]
    (vault / "tech" / "notes.txt").unlink()
    (vault / "Welcome.md").unlink()
    r = pipeline.index(con, [vault / "tech"])  # a subfolder run only removes what is under it
    assert r.removed == 1
    assert con.execute("SELECT count(*) FROM documents WHERE path = 'Welcome.md'").get == 1


def test_no_paths_updates_every_known_root(con, vault):
    pipeline.index(con, [vault])
    write(vault, {"Later.md": "# Later\n"})
    assert pipeline.index(con, []).new == 1


def test_missing_path_is_an_error_before_any_work(con, vault, tmp_path):
    with pytest.raises(kbase.InputError, match="no such file or folder"):
        pipeline.index(con, [vault, tmp_path / "nope"])
    assert con.execute("SELECT count(*) FROM documents").get == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["obsidian-tasks-docs", "foam-docs", "rust-book"])
def test_shared_vaults_index_every_file_or_say_why(con, name):
    folder = shared("vaults", name)
    r = pipeline.index(con, [folder])
    on_disk = [
        p
        for p in folder.rglob("*")
        if p.suffix in (".md", ".txt", ".markdown")
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    assert r.new + len(r.skipped) == len(on_disk)
    assert all(reason for _, reason in r.skipped)
    assert_consistent(con)


@pytest.mark.slow
def test_worker_processes_index_exactly_what_one_process_does(tmp_path, monkeypatch):
    folder = shared("vaults", "obsidian-tasks-docs")  # links, tags, callouts, code, tables
    links = (
        "SELECT s.path, l.start_char, l.target, l.target_id IS NULL FROM links l"
        " JOIN documents s ON s.id = l.doc_id"
    )
    from kbase.indexer import prepare

    result, real_pool = {}, pipeline.note_pool
    for workers in (True, False):
        monkeypatch.setattr(prepare, "POOL_MIN_FILES", 0 if workers else 10**9)
        monkeypatch.setattr(prepare, "POOL_MIN_BYTES", 0 if workers else 10**12)
        spawned = []
        monkeypatch.setattr(
            pipeline, "note_pool", lambda *a, seen=spawned: seen.append(real_pool(*a)) or seen[-1]
        )
        con = db.connect(tmp_path / f"{workers}.db", create=True)
        pipeline.index(con, [folder])
        # (The pool starts with the first files read: not at all for a run in one process.)
        assert bool(spawned and spawned[0] is not None) == workers or os.cpu_count() == 1
        result[workers] = snapshot(con), sorted(con.execute(links).fetchall())
    assert result[True] == result[False]


def test_shared_encodings_are_indexed_with_their_encoding(con):
    folder = shared("encodings", "charset-normalizer-samples")
    pipeline.index(con, [folder])
    got = dict(con.execute("SELECT path, encoding FROM documents"))
    import csv

    for row in csv.DictReader((folder / "EXPECTED.tsv").open(encoding="utf-8"), delimiter="\t"):
        assert got[row["file"]] == row["encoding"], row["file"]


def test_new_chunk_settings_rechunk_from_stored_text_and_stick(con, vault, monkeypatch):
    from kbase.ingest.chunk import ChunkSettings

    pipeline.index(con, [vault])
    before = con.execute("SELECT count(*) FROM chunks").get
    opened = []
    real_open = open
    monkeypatch.setattr(
        "builtins.open", lambda f, *a, **k: (opened.append(f), real_open(f, *a, **k))[1]
    )
    r = pipeline.index(con, [vault], settings=ChunkSettings(max_tokens=8, min_tokens=0))
    monkeypatch.undo()
    assert r.rechunked == 4 and r.updated == 0 and r.unchanged == 4
    assert not [f for f in opened if str(vault) in str(f)]  # from the stored bodies
    assert con.execute("SELECT count(*) FROM chunks").get > before
    assert_consistent(con)
    r = pipeline.index(con, [vault])  # no settings given: the index keeps its own
    assert r.rechunked == 0
    assert '"max_tokens": 8' in con.execute("SELECT value FROM meta WHERE key = 'chunker'").get


def test_diagnostics_are_rows(con, tmp_path):
    big = "```\n" + "\n".join(f"line {i} of a long listing" for i in range(300)) + "\n```\n"
    v = write(
        tmp_path / "v", {"big.md": f"# Big\n\n{big}", "open.md": "# Open\n\n```py\nnever closed\n"}
    )
    pipeline.index(con, [v])
    rows = con.execute(
        "SELECT d.path, g.kind, g.line FROM diagnostics g JOIN documents d ON d.id = g.doc_id"
        " ORDER BY 1"
    ).fetchall()
    assert rows == [("big.md", "oversized", 1), ("open.md", "unclosed_fence", 3)]
    assert con.execute("SELECT count(*) FROM chunks WHERE flags & 1").get == 1


def test_nul_padded_note_is_indexed_with_a_warning(con, tmp_path):
    """What an interrupted sync leaves: the text, then thousands of NUL bytes."""
    v = write(
        tmp_path / "v",
        {
            "synced.md": b"# Synced\n\nThe quokka survived the sync.\n" + b"\x00" * 3836,
            "image.md": b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,
        },
    )
    r = pipeline.index(con, [v])
    assert r.new == 1 and "binary" in dict(r.skipped)[str(v / "image.md")]
    assert r.warnings == [
        (
            str(v / "synced.md"),
            "3,836 NUL bytes after the text (an interrupted sync or copy?) left out",
        )
    ]
    assert (
        con.execute("SELECT body FROM documents").get
        == "# Synced\n\nThe quokka survived the sync.\n"
    )
    assert [h.path for h in kbase.open(con.filename).search("quokka", mode="keyword")] == [
        "synced.md"
    ]


def test_a_cjk_name_or_alias_on_an_english_note_is_found_by_its_words(tmp_path):
    """The pair index rows are written for a note whose text has no CJK run when its file name
    or an alias has one (the writer checks the text once, then the names)."""
    vault = write(
        tmp_path / "v",
        {
            "東京.md": "# Tokyo\n\nOnly English words in this note.\n",
            "b.md": "---\naliases: [北京市]\n---\nEnglish text as well.\n",
            "c.md": "Plain English, nothing else.\n",
        },
    )
    kb = kbase.open(tmp_path / "i.db")
    kb.index([vault], embed=False)
    assert [h.path for h in kb.search("東京", mode="keyword")] == ["東京.md"]
    assert [h.path for h in kb.search("北京", mode="keyword")] == ["b.md"]
    rows = kb.reader.execute("SELECT count(*) FROM chunks_cjk").fetchone()[0]
    assert rows == 2  # one chunk each for the two notes with a CJK name; none for c.md
    kb.close()


_name = st.sampled_from(
    [
        "Note",
        "note",
        "NOTE",
        "Éclair",
        "éclair",
        "ÉCLAIR",
        "a.b",
        ".hidden",
        "x.tar.gz",
        "東京",
        "Straße",
        "STRASSE",
        "",
        " ",
        "v1.2",
        "Ωmega",
        "ωMEGA",
    ]
)


@settings(max_examples=examples(150), deadline=None)
@example(
    title="Éclair", folder="", stem="éclair", ext=".md", aliases=[]
)  # SQLite's lower() is ASCII only
@example(title="Note", folder="a.b/c/", stem="note", ext=".txt", aliases=["x", "A"])
@given(
    title=_name,
    folder=st.sampled_from(["", "a/", "a.b/c/"]),
    stem=_name,
    ext=st.sampled_from([".md", ".txt", ""]),
    aliases=st.lists(_name, max_size=3),
)
def test_keyword_title_column_is_what_the_view_says(title, folder, stem, ext, aliases):
    """store.fts_names gives the chunks_fts title value that the chunks_fts_content view (which
    FTS5 reads to delete a row) gives: file name, extension, case, aliases."""
    from kbase.indexer import writes
    from kbase.ingest.derive import derive
    from kbase.ingest.parse import parse

    con = db.connect(":memory:", create=True)
    root = writes.ensure_root(con, "/vault")
    path = f"{folder}{stem}{ext}"
    fm = "---\n" + (f"title: '{title}'\n" if title.strip() else "") + f"aliases: {aliases!r}\n---\n"
    doc = parse(fm + "Some text.\n", path)
    doc_id = writes.write_document(
        con, derive(doc), writes.FileRow(root, path, size=1, mtime_ns=1, hash="h", encoding="utf_8")
    )
    (view,) = con.execute(
        "SELECT title FROM chunks_fts_content WHERE id IN"
        " (SELECT id FROM chunks WHERE doc_id = ?) LIMIT 1",
        (doc_id,),
    ).fetchone()
    assert writes.fts_names(con, doc_id, doc.title, path) == view
    # The row written matches its content (FTS5 reads the view to delete it again).
    con.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
    con.close()


@pytest.mark.slow
def test_one_slow_file_says_what_is_being_worked_on(tmp_path, monkeypatch):
    from kbase.cli import progress

    vault = write(tmp_path / "v", {"a.md": "# A\n\nsmall\n"})
    # Long enough to be slow after a loaded machine's worker start-up (which a.md may wait for
    # and be named by): 2,000 nested levels, seconds of parsing.
    (vault / "slow.md").write_text(
        "".join("> " * i + f"[!note] level {i}\n" for i in range(1, 2001)), encoding="utf-8"
    )
    monkeypatch.setattr(progress.Bars, "SLOW_FILE_S", 0.05)
    monkeypatch.setattr(progress.Bars, "POLL_S", 0.02)
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "i.db"), "index", str(vault), "--no-embed"])
    assert r.exit_code == 0, r.output
    assert "still working on slow.md (" in r.stderr, r.stderr
    assert r.stderr.count("still working on slow.md") == 1


def test_two_copies_of_a_moved_file_one_takes_the_move_the_other_is_new(tmp_path):
    """The copy that looks like a rename but whose twin took the move is parsed after all (a note
    and a PDF alike)."""
    from tests.pdfgen import make_pdf

    vault = write(tmp_path / "v", {"a.md": "# A\n\nTomatoes grow in the sun.\n"})
    (vault / "p.pdf").write_bytes(make_pdf(["Page one about cucumbers " * 5]))
    kb = kbase.open(tmp_path / "i.db")
    kb.index([vault], embed=False)
    (vault / "a.md").rename(vault / "b.md")
    shutil.copy(vault / "b.md", vault / "c.md")
    (vault / "p.pdf").rename(vault / "q.pdf")
    shutil.copy(vault / "q.pdf", vault / "r.pdf")
    report = kb.index([vault], embed=False)
    assert (report.renamed, report.new, report.removed, report.skipped) == (2, 2, 0, [])
    assert sorted(h.path for h in kb.search("tomatoes", mode="keyword")) == ["b.md", "c.md"]
    assert sorted(h.path for h in kb.search("cucumbers", mode="keyword")) == ["q.pdf", "r.pdf"]
    kb.close()


_RELEASE = None  # an Event the first task waits for until this process has taken one back


def _job_where(job):
    """(job, the pid that ran it); the worker's first job waits until a job runs here."""
    if job == 0:
        assert _RELEASE is not None and _RELEASE.wait(60)
    elif os.getpid() == _PARENT:
        assert _RELEASE is not None
        _RELEASE.set()
    return job, os.getpid()


_PARENT = os.getpid()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the note workers fork")
def test_the_writer_does_the_tasks_no_worker_has_begun_and_keeps_the_order():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from kbase.indexer import prepare

    global _RELEASE
    ctx = multiprocessing.get_context("fork")
    _RELEASE = ctx.Event()
    jobs = list(range(12))
    tasks = [jobs[i : i + 2] for i in range(0, len(jobs), 2)]
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        futures = [pool.submit(prepare._run_task, _job_where, t) for t in tasks]
        results = list(prepare._results(_job_where, tasks, futures))
    assert [job for job, _ in results] == jobs  # in order, each once
    where = dict(results)
    assert where[0] != os.getpid()  # the worker's, which waited for the writer to take one back
    assert where[11] == os.getpid()  # the last task, which no worker had begun


@pytest.mark.parametrize(
    "given",
    [
        ["vault", "vault"],  # the same folder twice
        ["vault", "vault/"],
        ["vault", "vault/tech"],  # a folder and one inside it
        ["vault/tech", "vault"],  # the inner one first: it becomes a root, then is absorbed
        ["vault", "vault/Garden.md"],
    ],
)
def test_a_file_named_twice_in_one_run_counts_once(con, vault, given):
    paths = [str(vault.parent / p) for p in given]
    r = pipeline.index(con, paths)
    assert (r.new, r.updated, r.unchanged, r.removed) == (4, 0, 0, 0)
    r = pipeline.index(con, paths)
    assert (r.new, r.updated, r.unchanged, r.removed) == (0, 0, 4, 0)
    assert_consistent(con)
