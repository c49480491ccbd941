"""kbase.watch: the index follows a folder as files are created, edited, renamed and deleted."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import kbase
from kbase.store import db
from kbase.watch import WatchBatch, watch
from tests.conftest import write
from tests.helpers import CountingEmbedder

WAIT = 30.0  # seconds a change may take to reach the index on a loaded machine (typically < 1)


class Watcher:
    """``watch`` in a thread, with its batches collected."""

    def __init__(self, kb, paths, **options) -> None:
        self.stop = threading.Event()
        self.batches: list[WatchBatch] = []
        self.result: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, args=(kb, paths), kwargs=options, daemon=True
        )

    def _run(self, kb, paths, **options) -> None:
        try:
            self.result = watch(
                kb,
                paths,
                stop_event=self.stop,
                on_batch=self.batches.append,
                debounce_ms=100,
                **options,
            )
        except BaseException as e:
            self.error = e

    def __enter__(self) -> Watcher:
        self.thread.start()
        until(lambda: self.batches, "the catch-up run")
        return self

    def __exit__(self, *exc) -> None:
        t0 = time.monotonic()
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "watch did not stop"
        assert time.monotonic() - t0 < 5, "watch took long to stop"
        assert self.error is None, self.error
        assert self.result == len(self.batches)


def until(condition, what: str, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(0.05)


def docs(dbp: Path) -> dict[str, str]:
    con = db.connect(dbp, readonly=True)
    try:
        return dict(con.execute("SELECT path, body FROM documents"))
    finally:
        con.close()


def search(dbp: Path, words: str) -> list[str]:
    with kbase.open(dbp) as kb:
        return sorted(h.path for h in kb.search(words, mode="keyword"))


def test_the_index_follows_creates_edits_renames_and_deletes(tmp_path, vault):
    dbp = tmp_path / "w.db"
    kb = kbase.open(dbp)
    with Watcher(kb, [vault], embed=False) as w:
        first = w.batches[0]
        assert first.catch_up and first.report.new == 4  # what changed while nothing watched
        garden_id = (
            db.connect(dbp, readonly=True)
            .execute("SELECT id FROM documents WHERE path = 'Garden.md'")
            .get
        )

        write(vault, {"ideas/New idea.md": "# New idea\n\nzeppelins everywhere\n"})
        until(lambda: search(dbp, "zeppelins") == ["ideas/New idea.md"], "a new file")

        (vault / "Welcome.md").write_text("# Welcome\n\nnow about hovercraft\n")
        until(lambda: search(dbp, "hovercraft") == ["Welcome.md"], "an edited file")
        assert search(dbp, "inbox") == []  # the old text is gone

        (vault / "archive").mkdir()
        os.rename(vault / "Garden.md", vault / "archive" / "Garden.md")
        until(
            lambda: "archive/Garden.md" in docs(dbp) and "Garden.md" not in docs(dbp),
            "a renamed file",
        )
        moved = (
            db.connect(dbp, readonly=True)
            .execute("SELECT id FROM documents WHERE path = 'archive/Garden.md'")
            .get
        )
        assert moved == garden_id  # a rename moves the row: same document, same chunks

        (vault / "tech" / "notes.txt").unlink()
        until(lambda: "tech/notes.txt" not in docs(dbp), "a deleted file")

        shutil.rmtree(vault / "tech")
        until(lambda: not any(p.startswith("tech/") for p in docs(dbp)), "a deleted folder")

        write(vault, {".obsidian/workspace.json": "{}", ".hidden.md": "# hidden\n"})
        time.sleep(1)
        assert ".hidden.md" not in docs(dbp)

    reports = [b.report for b in w.batches if b.report]
    assert sum(r.new for r in reports) >= 5 and sum(r.removed for r in reports) >= 2
    assert sum(r.renamed for r in reports) == 1
    assert all(b.error is None for b in w.batches)
    assert sorted(docs(dbp)) == ["Welcome.md", "archive/Garden.md", "ideas/New idea.md"]


def test_a_burst_of_changes_is_one_debounced_batch_and_the_index_equals_a_fresh_one(
    tmp_path, vault
):
    dbp = tmp_path / "w.db"
    with Watcher(kbase.open(dbp), [vault], embed=False) as w:
        until(lambda: len(w.batches) >= 2, "the second catch-up run")  # the watcher is listening
        before = len(w.batches)
        for i in range(50):
            write(vault, {f"burst/n{i:02}.md": f"# Burst {i}\n\nburstword number{i}\n"})
        until(lambda: len(search(dbp, "burstword")) == 10 and len(docs(dbp)) == 54, "50 new files")
        assert len(w.batches) - before <= 5  # debounced, not one run per file
    fresh = tmp_path / "fresh.db"
    kbase.open(fresh).index([vault], embed=False)
    assert docs(dbp) == docs(fresh)


@pytest.mark.slow
def test_the_index_file_inside_the_folder_does_not_set_off_runs(tmp_path, vault):
    dbp = vault / "kbase.store.db"  # each run writes the index: that must not count as a change
    with Watcher(kbase.open(dbp), [vault], embed=False) as w:
        until(lambda: len(w.batches) >= 2, "the second catch-up run")
        time.sleep(1.5)
        settled = len(w.batches)
        time.sleep(1.5)
        assert len(w.batches) == settled


def test_embeddings_follow_for_changed_chunks_only(tmp_path, vault):
    dbp = tmp_path / "w.db"
    embedder = CountingEmbedder()
    kb = kbase.KB(dbp, embedder=embedder)
    with Watcher(kb, [vault], embed=True) as w:
        first = w.batches[0].report.embedding.embedded
        assert first > 0 and embedder.embedded == first
        (vault / "Garden.md").write_text(
            "# Garden\n\nTomatoes need sun and water.\n\n## Beds\n\nNew bed text.\n"
        )
        until(lambda: "New bed text" in docs(dbp)["Garden.md"], "an edit")
        until(
            lambda: any(
                b.report and b.report.embedding and b.report.embedding.embedded
                for b in w.batches[1:]
            ),
            "the edit's embeddings",
        )
    con = db.connect(dbp, readonly=True)
    assert con.execute("SELECT count(*) = sum(embedded) FROM chunks").get == 1
    assert embedder.embedded - first <= 2  # the edited chunk(s), not the whole vault again


@pytest.mark.slow
def test_a_batch_waits_while_another_writer_holds_the_lock(tmp_path, vault):
    dbp = tmp_path / "w.db"
    with Watcher(kbase.open(dbp), [vault], embed=False) as w:
        until(lambda: len(w.batches) >= 2, "the second catch-up run")
        with db.writer_lock(dbp):  # a `kbase index` by hand, say
            write(vault, {"Later.md": "# Later\n\nlatecomer\n"})
            time.sleep(1.5)
            assert "Later.md" not in docs(dbp)
        until(lambda: "Later.md" in docs(dbp), "the change after the lock was released")
        assert all(b.error is None for b in w.batches)


def test_a_file_root_is_watched_too(tmp_path, vault):
    dbp = tmp_path / "w.db"
    note = vault / "Garden.md"
    with Watcher(kbase.open(dbp), [note], embed=False):
        note.write_text("# Garden\n\nartichokes\n")
        until(lambda: search(dbp, "artichokes") == ["Garden.md"], "the edited file root")
        tmp = vault / "Garden.md.tmp"  # editors save by writing a copy and renaming it over
        tmp.write_text("# Garden\n\nbroccoli\n")
        os.replace(tmp, note)
        until(lambda: search(dbp, "broccoli") == ["Garden.md"], "a file replaced by rename")


def test_nothing_to_watch_is_an_input_error(tmp_path):
    with pytest.raises(kbase.InputError, match="nothing to watch"):
        watch(kbase.open(tmp_path / "none.db"), [], stop_event=threading.Event())


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to oneself is POSIX")
def test_ctrl_c_stops_watching_cleanly(tmp_path, vault):
    dbp = tmp_path / "w.db"
    batches = []
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    # A shell that starts a job in the background (nohup, `cmd &`) starts it ignoring SIGINT,
    # and Python then keeps it ignored; a terminal's Ctrl-C is what this test is about.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        runs = watch(
            kbase.open(dbp), [vault], embed=False, on_batch=batches.append
        )  # in the main thread
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    assert runs == len(batches) >= 1
    assert len(docs(dbp)) == 4


def _watching(tmp_path, *options: str, **popen):
    """A vault of one note, its index up to date (watch must start without a line), and a
    ``kbase watch --no-embed OPTIONS`` process on them."""
    import subprocess
    import sys

    vault = tmp_path / "cli-vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nfirst\n")
    db = tmp_path / "w.db"
    kbase.open(db).index([vault], embed=False)
    command = [sys.executable, "-m", "kbase", "--db", str(db), "watch", "--no-embed", *options]
    proc = subprocess.Popen(
        [*command, str(vault)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )
    return vault, db, proc


def test_cli_watch_follows_edits_and_stops_cleanly_on_ctrl_c(tmp_path):
    import signal
    import time

    vault, db, proc = _watching(
        tmp_path,
        "--debounce",
        "50",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    try:
        deadline = time.monotonic() + 20
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        (vault / "b.md").write_text("# B\n\nsecond note with marmalade\n")
        until(lambda: search(db, "marmalade") == ["b.md"], "the new file")
        (vault / "a.md").write_text("# A\n\nfirst, now with quinces\n")
        until(lambda: search(db, "quinces") == ["a.md"], "the edited file")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err  # Ctrl-C, as the README says
    # One line per batch that changed something, naming the files; none for the start-up run.
    lines = [re.sub(r"^\d\d:\d\d:\d\d | \(\d+\.\d\d s\)$", "", line) for line in out.splitlines()]
    assert lines == ["1 new (b.md)", "1 updated (a.md)"]
    assert "stopped; the index is consistent" in err


def test_cli_watch_warns_of_a_file_as_kbase_index_does(tmp_path):
    """A note saved with malformed front matter: kbase index warns of it, kbase watch said
    nothing (the note indexed without its tags, and no word why)."""
    import json
    import signal
    import time

    vault, db, proc = _watching(tmp_path, "--debounce", "50", "--json")
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["event"] == "watching"
        time.sleep(1.0)  # (watching begins after the event)
        (vault / "bad.md").write_text("---\ntags: [a\n---\n# Bad\n\nmarmalade\n")
        events = [json.loads(proc.stdout.readline())]
        while events[-1]["event"] != "changed":
            events.append(json.loads(proc.stdout.readline()))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    warning = next(e for e in events if e["event"] == "warning")
    assert warning["path"] == str(vault / "bad.md")
    assert warning["message"].startswith("malformed front matter at line 3")
    assert search(db, "marmalade") == ["bad.md"]
    # and in words, on stderr, as kbase index says it
    (tmp_path / "words").mkdir()
    vault, db, proc = _watching(tmp_path / "words", "--debounce", "50")
    try:
        time.sleep(1.5)
        (vault / "bad.md").write_text("---\ntags: [a\n---\n# Bad\n\nmarmalade\n")
        until(lambda: search(db, "marmalade") == ["bad.md"], "the new file")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert re.search(
        rf"^\d\d:\d\d:\d\d warning {re.escape(str(vault))}/bad.md: malformed", err, re.M
    )


def test_cli_watch_stops_cleanly_on_sigterm_with_its_stopped_event(tmp_path):
    import json
    import signal
    import time

    _, _, proc = _watching(tmp_path, "--json")
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["event"] == "watching"
        time.sleep(1.0)  # (watching begins after the event)
    finally:
        proc.send_signal(signal.SIGTERM)  # docker stop, systemctl stop, kill
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert [json.loads(line)["event"] for line in out.splitlines()][-1:] == ["stopped"]


def test_a_watch_line_names_a_few_files_and_counts_the_rest():
    from kbase.cli.render import render_changes

    changed = [("new", f"burst/n{i:02}.md") for i in range(50)] + [
        ("updated", "Garden.md"),
        ("removed", "old.md"),
        ("renamed", "archive/Plan.md"),
    ]
    assert render_changes(changed) == (
        "50 new (burst/n00.md, burst/n01.md, burst/n02.md and 47 more), "
        "1 updated (Garden.md), 1 renamed (archive/Plan.md), 1 removed (old.md)"
    )


def test_the_report_names_each_changed_document(tmp_path, vault):
    dbp = tmp_path / "r.db"
    kb = kbase.open(dbp)
    assert sorted(kb.index([vault], embed=False).changed) == [
        ("new", "Garden.md"),
        ("new", "Welcome.md"),
        ("new", "tech/SQLite.md"),
        ("new", "tech/notes.txt"),
    ]
    (vault / "Welcome.md").write_text("# Welcome\n\nchanged\n")
    os.rename(vault / "Garden.md", vault / "Garden2.md")
    (vault / "tech" / "notes.txt").unlink()
    assert kb.index([vault], embed=False).changed == [
        ("renamed", "Garden2.md"),
        ("updated", "Welcome.md"),
        ("removed", "tech/notes.txt"),
    ]
    assert kb.index([vault], embed=False).changed == []


def test_a_backlog_is_embedded_while_idle_a_step_at_a_time(tmp_path, vault, monkeypatch):
    import kbase.watch as kw

    dbp = tmp_path / "w.db"
    for i in range(12):
        write(
            vault,
            {
                f"more/n{i}.md": f"# Note {i}\n\n"
                + f"Paragraph {i} about tomatoes and beds.\n\n" * 3
            },
        )
    kbase.open(dbp).index([vault], embed=False)  # keyword only: every chunk waits for a vector
    chunks = db.connect(dbp, readonly=True).execute("SELECT count(*) FROM chunks").get
    monkeypatch.setattr(kw, "EMBED_STEP", 8)  # so the backlog takes several idle steps
    steps = []
    embedder = CountingEmbedder()
    with Watcher(kbase.KB(dbp, embedder=embedder), [vault], embed=True, on_embed=steps.append):
        until(lambda: steps and steps[-1].remaining == 0, "the backlog embedded")
    assert len(steps) >= chunks // 8 and embedder.embedded == chunks
    assert all(s.embedded <= 8 for s in steps)
    assert (
        db.connect(dbp, readonly=True).execute("SELECT count(*) FROM chunks WHERE NOT embedded").get
        == 0
    )
