"""Faults the index file survives, end to end through the real command (first written for issue 7).

1. SIGKILL at random moments of ``kbase index`` (keyword phase on 1,000 notes: fresh, update,
   re-chunk; and the embedding phase on a small vault): the index always passes its invariants
   and the next run converges to exactly what a clean run builds; no worker outlives the run.
2. A full disk and a read-only index: one clear error naming the file and the fix, the index intact.
3. Readers during a full re-index (no error, never a half-indexed document); two writers at once.
4. (first written for issue 27) A read-only folder or mount: searched from the CLI, MCP and the
   TUI, writers say why not; a first index that fails on a full disk leaves no index.

Hostile files are tests/e2e/test_hostile_files.py's, arbitrary queries test_hostile_queries.py's.
The measured numbers are printed with a ``[reliability]`` prefix (``pytest -s`` shows them).
``KBASE_RELIABILITY_SEED`` changes the random kill moments.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.embed.embedder import pack
from kbase.errors import DatabaseError
from kbase.indexer import pipeline, prepare
from kbase.store import db
from tests.conftest import write
from tests.helpers import (
    KBASE,
    REPO,
    WORDS,
    as_unprivileged,
    assert_invariants,
    assert_same_index,
    child_env,
    index_state,
    kbase_cmd,
    make_vault,
    mutate_vault,
    one_error,
    report,
    snapshot,
    stdio_session,
    text,
)

SEED = int(os.environ.get("KBASE_RELIABILITY_SEED", "7"))


# --- 1. SIGKILL -----------------------------------------------------------------------------------
def timed(dbp: Path, *args: str) -> float:
    t0 = time.perf_counter()
    kbase_cmd(dbp, *args)
    return time.perf_counter() - t0


def kill_after(dbp: Path, args: list[str], delay: float, log: Path) -> bool:
    """Start ``kbase --db dbp ARGS`` and SIGKILL it after ``delay`` s; False if it finished
    first."""
    with log.open("wb") as err:
        p = subprocess.Popen(
            [*KBASE, "--db", str(dbp), *args], stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            rc = p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            return True
    assert rc == 0, log.read_text(errors="replace")[-3000:]
    return False


def kill_when(dbp: Path, args: list[str], ready, extra: float, log: Path) -> bool:
    """Start ``kbase --db dbp ARGS``; once ``ready(index_state)`` holds, wait ``extra`` s and
    SIGKILL it. False if it finished first."""
    with log.open("wb") as err:
        p = subprocess.Popen(
            [*KBASE, "--db", str(dbp), *args], stdout=subprocess.DEVNULL, stderr=err
        )
        while p.poll() is None:
            state = index_state(dbp)
            if state and ready(state):
                time.sleep(extra)
                break
            time.sleep(0.02)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
            return True
    assert p.returncode == 0, log.read_text(errors="replace")[-3000:]
    return False


def copy_index(src: Path, dst: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


class Crashes:
    """Kill points: each one is a SIGKILL at a random moment, then the invariants."""

    def __init__(self, tmp: Path, rng: random.Random) -> None:
        self.tmp, self.rng, self.points, self.tried = tmp, rng, [], 0

    def chain(
        self,
        label: str,
        dbp: Path,
        args: list[str],
        t_ref: float,
        kills: int,
        finish: list[str],
        want: dict,
    ) -> None:
        """Up to ``kills`` killed runs in a row on ``dbp``, then a run that completes and must
        give exactly ``want``."""
        for _ in range(kills):
            delay = self.rng.uniform(0.05, 1.0) * t_ref
            self.tried += 1
            if not kill_after(dbp, args, delay, self.tmp / "kill.log"):
                break  # the run finished before the kill: that is no kill point
            state = assert_invariants(dbp)
            self.points.append((label, round(delay, 2), state))
        kbase_cmd(dbp, *finish)
        assert_invariants(dbp)
        assert_same_index(snapshot(dbp), want, f"{label} after {len(self.points)} kill points")

    def summary(self) -> str:
        rows = [
            f"{label}"
            + (f" {delay:.2f}s" if delay else "")
            + ":"
            + (
                "no index yet"
                if s is None
                else f"{s['documents']}d/{s['chunks']}c/{s['embedded']}e"
            )
            for label, delay, s in self.points
        ]
        return f"{len(self.points)} kill points survived ({self.tried} tried): " + ", ".join(rows)


@pytest.mark.slow
def test_sigkill_while_indexing_1000_notes_never_corrupts_and_the_next_run_converges(tmp_path):
    rng = random.Random(SEED)
    vault = make_vault(tmp_path / "vault", 1000, seed=SEED)
    crashes = Crashes(tmp_path, rng)
    args = ["index", str(vault), "--no-embed", "-q"]

    # Fresh index: killed (twice in a row at most), then completed.
    ref1 = tmp_path / "ref1.db"
    t_fresh = timed(ref1, *args)
    want1 = snapshot(ref1)
    assert len(want1["documents"]) == 1000 and any(
        r[9] for r in want1["links"]
    )  # some links resolve
    for c in range(2):
        crashes.chain("fresh", tmp_path / f"fresh{c}.db", args, t_fresh, 2, args, want1)

    # Update: a week of edits, touches, renames, moves, deletions, new notes and attachments.
    changes = mutate_vault(vault, seed=SEED + 1)
    ref2 = tmp_path / "ref2.db"
    kbase_cmd(ref2, *args)
    want2 = snapshot(ref2)
    t_update = timed(copy_index(ref1, tmp_path / "timing.db"), *args)
    for c in range(2):
        crashes.chain(
            "update", copy_index(ref1, tmp_path / f"update{c}.db"), args, t_update, 2, args, want2
        )

    # New chunk settings re-chunk every document from its stored text; a plain `kbase index`
    # after a kill must finish that re-chunk, not leave two chunkings side by side.
    rechunk = [*args, "--max-tokens", "120"]
    ref3 = tmp_path / "ref3.db"
    kbase_cmd(ref3, *rechunk)
    want3 = snapshot(ref3)
    assert want3["chunks"] != want2["chunks"]
    t_rechunk = timed(copy_index(ref2, tmp_path / "timing2.db"), *rechunk)
    for c in range(2):
        crashes.chain(
            "rechunk",
            copy_index(ref2, tmp_path / f"rechunk{c}.db"),
            rechunk,
            t_rechunk,
            2,
            args,
            want3,
        )

    report(
        f"SIGKILL during `kbase index` of 1,000 notes (fresh {t_fresh:.1f}s,"
        f" update {t_update:.1f}s of {changes},"
        f" re-chunk {t_rechunk:.1f}s): {crashes.summary()}"
    )
    assert len(crashes.points) >= 10


# An index run that stops, for ever, at its first file: by then its worker processes are forked
# (the pool starts them all when the first window is handed to it), so the kill below always
# finds them, however fast the machine.
HELD_RUN = """
import sys, time
import kbase

def hold(done, total, path):
    print("parsing", flush=True)
    time.sleep(3600)

kbase.open(sys.argv[1]).index([sys.argv[2]], embed=False, progress=hold)
"""


@pytest.mark.skipif(
    not Path("/proc/self/task").exists(), reason="finds child processes through Linux's /proc"
)
@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="one core: kbase parses in-process, with no workers"
)
def test_sigkill_leaves_no_worker_processes_behind(tmp_path):
    vault = make_vault(tmp_path / "v", prepare.POOL_MIN_FILES, seed=5)

    def children(pid: int) -> set[int]:
        try:
            return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
        except OSError:
            return set()

    p = subprocess.Popen(
        [sys.executable, "-c", HELD_RUN, str(tmp_path / "i.db"), str(vault)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == "parsing\n"
        workers = children(p.pid)
        assert len(workers) >= 2, f"the run parses in {len(workers)} worker processes"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()

    def running(pid: int) -> bool:  # exists and is not a zombie waiting to be reaped
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while (alive := {w for w in workers if running(w)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"worker processes {sorted(alive)} outlived their killed parent"


@pytest.mark.slow
def test_sigkill_while_embedding_never_corrupts_and_the_next_run_embeds_everything(tmp_path):
    np = pytest.importorskip("numpy")
    rng = random.Random(SEED + 100)
    # Enough chunks (about 250) that a run embeds them over several commits: with 69, a fast
    # machine embedded what a kill had left within the last one, and later kills found no work.
    vault = make_vault(tmp_path / "vault", 60, seed=SEED + 100, size=2000)
    args = ["index", str(vault), "-q"]
    ref = tmp_path / "ref.db"
    t0 = time.perf_counter()
    out = json.loads(kbase_cmd(ref, "index", str(vault), "--json").stdout)
    t_ref = time.perf_counter() - t0
    want = snapshot(ref)
    n_chunks = len(want["chunks"])
    embed_s = out["embedding"]["seconds"]
    before_embedding = max(0.3, t_ref - embed_s)  # start-up, keyword index and model load
    crashes = Crashes(tmp_path, rng)
    dbp = tmp_path / "crash.db"
    # The first kill lands at a random moment before embedding (start-up, keyword index, model
    # load); the others once a random number of chunks is embedded, plus up to one batch's time.
    delay = rng.uniform(0.2, before_embedding)
    crashes.tried += 1
    assert kill_after(dbp, args, delay, tmp_path / "kill.log")
    crashes.points.append(("embed", round(delay, 2), assert_invariants(dbp)))
    batch_s = embed_s / max(1, n_chunks / 8)
    for target in sorted(rng.sample(range(1, n_chunks - 8), 5)):
        extra = rng.uniform(0, batch_s)
        crashes.tried += 1
        if kill_when(
            dbp, args, lambda st, t=target: st["embedded"] >= t, extra, tmp_path / "kill.log"
        ):
            crashes.points.append((f"embed@{target}+{extra:.2f}s", 0.0, assert_invariants(dbp)))
    kbase_cmd(dbp, *args)
    assert_invariants(dbp)
    assert_same_index(snapshot(dbp), want, "embedding")
    con = db.connect(dbp, readonly=True)
    assert con.execute("SELECT count(*), sum(embedded) FROM chunks").fetchone() == (
        n_chunks,
        n_chunks,
    )
    assert con.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == n_chunks

    # Every vector sits on the right chunk: it matches the clean run's vector for the same input.
    def vectors(path):
        c = db.connect(path, readonly=True)
        return dict(
            c.execute(
                "SELECT c.embed_hash, v.embedding FROM chunks c JOIN chunks_vec v ON v.rowid = c.id"
            )
        )

    got, ref_vectors = vectors(dbp), vectors(ref)
    assert got.keys() == ref_vectors.keys()
    worst = min(
        float(np.dot(np.frombuffer(got[k], "<f4"), np.frombuffer(ref_vectors[k], "<f4")))
        for k in got
    )
    assert worst > 0.999
    report(
        f"SIGKILL while embedding {n_chunks} chunks of 60 notes ({t_ref:.1f}s clean):"
        f" {crashes.summary()};"
        f" afterwards every chunk embedded, lowest cosine to the clean run's vector {worst:.5f}"
    )
    assert len(crashes.points) >= 4


def test_a_run_stopped_before_it_resolved_links_leaves_that_to_the_next_run(tmp_path):
    """The one moment random kills rarely hit: every file written, links not yet resolved."""
    vault = make_vault(tmp_path / "v", 40, seed=11)
    dbp = tmp_path / "i.db"
    con = db.connect(dbp, create=True)

    def stop_at_the_end(done, total, path):
        if done == total:
            raise KeyboardInterrupt

    assert pipeline.index(con, [vault], progress=stop_at_the_end).interrupted
    r = pipeline.index(con, [vault])
    assert (r.new, r.updated, r.removed) == (
        0,
        0,
        0,
    )  # nothing left to read; the links still need resolving
    clean = tmp_path / "clean.db"
    pipeline.index(db.connect(clean, create=True), [vault])
    assert_same_index(snapshot(dbp), snapshot(clean), "links after an interrupted run")


def test_roots_absorbed_by_an_enclosing_root_have_their_links_resolved_again(tmp_path):
    vault = write(
        tmp_path / "v", {"Garden.md": "# Garden\n", "tech/Links.md": "# Links\n\nTo [[Garden]].\n"}
    )
    con = db.connect(tmp_path / "i.db", create=True)
    pipeline.index(con, [vault / "tech"])  # alone, tech/ cannot see Garden.md
    pipeline.index(con, [vault / "Garden.md"])
    pipeline.index(con, [vault])  # nothing new to read, but the names every link can reach changed
    clean = tmp_path / "clean.db"
    pipeline.index(db.connect(clean, create=True), [vault])
    assert_same_index(snapshot(con.filename), snapshot(clean), "links after absorbing roots")


# --- 2. a full disk, a read-only index ------------------------------------------------------------
def _tight_connect(monkeypatch, spare_pages: int) -> None:
    """Writers get a database that may grow by only ``spare_pages`` pages: SQLite's own way of
    saying the disk is full (SQLITE_FULL), at any write that needs room."""
    real = db.connect

    def connect(path, *, readonly=False, create=False):
        con = real(path, readonly=readonly, create=create)
        if not readonly:
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            con.execute(f"PRAGMA max_page_count = {pages + spare_pages}")
        return con

    monkeypatch.setattr(db, "connect", connect)


class FakeEmbedder:
    """Deterministic vectors without the model, for tests about storage rather than meaning."""

    model_id, dimension, max_tokens, batch_size = "fake", 384, 256, 8
    fingerprint = '{"model": "fake-for-tests"}'

    def embed_batch(self, texts):
        return [
            pack([((hash(t) >> (i % 32)) & 7) / 7.0 for i in range(self.dimension)]) for t in texts
        ]

    def embed_query(self, text):
        return self.embed_batch([text])[0]


def test_full_disk_is_one_clear_error_and_the_index_stays_intact(tmp_path, monkeypatch):
    vault = make_vault(tmp_path / "v", 30, seed=1)
    dbp = tmp_path / "i.db"
    kbase.open(dbp).index([vault], embed=False)
    before = snapshot(dbp)
    make_vault(tmp_path / "v" / "more", 60, seed=2)  # much more to index: it will not fit

    _tight_connect(monkeypatch, spare_pages=4)
    with pytest.raises(DatabaseError) as e:
        kbase.open(dbp).index([vault], embed=False)
    assert (
        "disk full" in e.value.message
        and str(dbp) in e.value.message
        and "free some space" in e.value.hint
    )
    r = CliRunner().invoke(cli, ["--db", str(dbp), "index", str(vault), "--no-embed", "-q"])
    assert r.exit_code == 1 and (r.exception is None or isinstance(r.exception, SystemExit)), (
        r.output
    )
    one_error(r.stderr, "disk full while writing", str(dbp), "hint: free some space")
    monkeypatch.undo()

    assert_invariants(dbp)
    after = snapshot(dbp)  # the documents indexed before are all there, unchanged
    assert set(before["documents"]) <= set(after["documents"])
    assert [h.path for h in kbase.open(dbp).search("Note 3", mode="keyword", limit=100)]

    kbase.open(dbp).index([vault], embed=False)  # space again: the next run completes
    clean = tmp_path / "clean.db"
    kbase.open(clean).index([vault], embed=False)
    assert_same_index(snapshot(dbp), snapshot(clean), "after a full disk")


def test_full_disk_while_embedding_is_one_clear_error_and_embed_resumes(tmp_path, monkeypatch):
    vault = make_vault(tmp_path / "v", 40, seed=3)
    dbp = tmp_path / "i.db"
    kb = kbase.KB(dbp, embedder=FakeEmbedder())
    kb.index([vault], embed=False)
    _tight_connect(monkeypatch, spare_pages=6)
    with pytest.raises(DatabaseError) as e:
        kbase.KB(dbp, embedder=FakeEmbedder()).embed()
    assert str(dbp) in e.value.message and "disk" in str(e.value) and "full" in str(e.value)
    monkeypatch.undo()
    state = assert_invariants(dbp)
    assert state["embedded"] < state["chunks"]  # (vec0 allocates room for 1,024 vectors at once)
    kbase.KB(dbp, embedder=FakeEmbedder()).embed()
    state = assert_invariants(dbp)
    assert state["embedded"] == state["chunks"]


@pytest.mark.slow
def test_write_error_from_the_os_is_one_clear_error_and_the_index_stays_intact(tmp_path):
    """A real failing write (the file size limit, as a full disk or an exceeded quota does):
    SQLite reports an I/O error, kbase one line naming the file and the fix."""
    resource = pytest.importorskip("resource")
    vault = make_vault(tmp_path / "v", 20, seed=4)
    dbp = tmp_path / "i.db"
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    before = snapshot(dbp)
    make_vault(tmp_path / "v" / "more", 200, seed=5)
    limit = dbp.stat().st_size + 64 * 1024

    def small_files():  # Python ignores SIGXFSZ, so writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q", check=False, preexec_fn=small_files)
    assert r.returncode == 1
    one_error(r.stderr, str(dbp), "hint: ", "full")
    assert_invariants(dbp)
    assert set(before["documents"]) <= set(snapshot(dbp)["documents"])
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    clean = tmp_path / "clean.db"
    kbase_cmd(clean, "index", str(vault), "--no-embed", "-q")
    assert_same_index(snapshot(dbp), snapshot(clean), "after a failing write")


@pytest.mark.parametrize("what", ["file", "folder", "both"])
def test_read_only_index_is_one_clear_error_and_stays_intact(tmp_path, what):
    prefix = as_unprivileged()
    vault = make_vault(tmp_path / "v", 10, seed=6)
    folder = tmp_path / "idx"
    folder.mkdir()
    dbp = folder / "i.db"
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    before = snapshot(dbp)
    db.connect(dbp).close()  # the last writer to close removes -wal and -shm (in a read-only folder
    assert not Path(f"{dbp}-wal").exists()  # they could not be created; existing ones would do)
    write(vault, {"later.md": "# Later\n\nnew words\n"})
    if what in ("file", "both"):
        dbp.chmod(0o444)
    if what in ("folder", "both"):
        folder.chmod(0o555)
    try:
        r = subprocess.run(
            [*prefix, *KBASE, "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        one_error(r.stderr, str(dbp), "read-only", "hint: ")
        if what == "folder":
            assert "folder" in r.stderr
        if what == "file":  # reading still works
            s = subprocess.run(
                [*prefix, *KBASE, "--db", str(dbp), "search", "Note", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert s.returncode == 0 and json.loads(s.stdout), s.stderr
    finally:
        folder.chmod(0o755)
        dbp.chmod(0o644)
    assert_invariants(dbp)
    assert_same_index(snapshot(dbp), before, "read-only index")


# --- 3. concurrency -------------------------------------------------------------------------------
def _marker(i: int) -> str:
    """A word unique to note ``i`` that the porter stemmer leaves alone (consonants only)."""
    letters = "bcdfghjklmnpqrtvwxz"
    return "mk" + "".join(letters[(i // len(letters) ** k) % len(letters)] for k in range(3))


def _versioned_note(i: int, version: str, sections: int, rng: random.Random) -> str:
    parts = [f"# Note {i}\n"]
    for s in range(sections):
        filler = " ".join(rng.choice(WORDS) for _ in range(110))
        parts.append(f"## Part {s + 1}\n\n{_marker(i)} {version} {filler}.\n")
    return "\n".join(parts)


def _write_versions(vault: Path, n: int, version: str, sections: int) -> None:
    rng = random.Random(f"{version}{sections}")
    for i in range(n):
        p = vault / f"d{i % 5}" / f"note{i:03}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(_versioned_note(i, version, sections, rng), encoding="utf-8")


@pytest.mark.slow
def test_readers_during_a_full_reindex_see_no_error_and_no_half_indexed_document(tmp_path):
    """Every note holds its marker word in 2 sections (version alpha) or 3 (version bravo); a
    reader that saw a half-replaced document would find another count of matching chunks.
    (600 notes: with 400, a loaded 2-core machine ran 17 searches during the re-index.)"""
    n = 600
    vault = tmp_path / "v"
    dbp = tmp_path / "i.db"
    _write_versions(vault, n, "alpha", 2)
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    kb = kbase.open(dbp)
    for i in (0, n // 2, n - 1):  # the precondition: each section is its own chunk
        (hit,) = kb.search(_marker(i), mode="keyword")
        assert hit.matched_chunks == 2 and "alpha" in hit.snippet
    assert kb.reader.execute("SELECT DISTINCT count(*) FROM chunks GROUP BY doc_id").fetchall() == [
        (2,)
    ]
    kb.close()
    _write_versions(vault, n, "bravo", 3)

    stop = threading.Event()
    errors: Counter = Counter()
    bad: list[str] = []
    counts = Counter()
    rng = random.Random(SEED)

    def searcher():
        kb = kbase.open(dbp)
        while not stop.is_set():
            i = rng.randrange(n)
            # One note by its marker, or 50 notes at once (more hits, more chances to see a
            # document in the middle of its rewrite).
            query, limit = (_marker(i), 10) if counts["search"] % 2 else ("alpha OR bravo", 50)
            try:
                if (
                    counts["search"] % 10 == 0
                ):  # a fresh connection now and then, as one-shot commands open one
                    with kbase.open(dbp) as fresh:
                        hits = fresh.search(query, mode="keyword", limit=limit)
                else:
                    hits = kb.search(query, mode="keyword", limit=limit)
            except Exception as e:
                errors[f"{type(e).__name__}: {str(e)[:120]}"] += 1
                continue
            counts["search"] += 1
            if len(hits) != (1 if limit == 10 else limit):
                bad.append(f"{query}: {len(hits)} hits")
            for h in hits:
                if not (
                    ("alpha" in h.snippet and h.matched_chunks == 2)
                    or ("bravo" in h.snippet and h.matched_chunks == 3)
                ):
                    bad.append(f"{query}: {h.path} {h.matched_chunks} chunks, {h.snippet[:40]!r}")
                counts["bravo" if "bravo" in h.snippet else "alpha"] += 1
        kb.close()

    def checker():
        """In one read transaction: every document's chunks are those of its body's version."""
        con = db.connect(dbp, readonly=True)
        while not stop.is_set():
            try:
                with con:
                    rows = con.execute(
                        "SELECT d.path, instr(d.body, 'bravo') > 0, count(c.id),"
                        " (SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'bravo'"
                        " AND rowid IN"
                        "  (SELECT id FROM chunks WHERE doc_id = d.id))"
                        " FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id GROUP BY d.id"
                    ).fetchall()
            except Exception as e:
                errors[f"{type(e).__name__}: {str(e)[:120]}"] += 1
                continue
            counts["check"] += 1
            if len(rows) != n:
                bad.append(f"{len(rows)} documents instead of {n}")
            for path, is_bravo, chunks, fts_bravo in rows:
                want = 3 if is_bravo else 2
                if chunks != want or fts_bravo != (3 if is_bravo else 0):
                    bad.append(f"{path}: bravo={is_bravo} chunks={chunks} fts={fts_bravo}")
        con.close()

    threads = [threading.Thread(target=searcher), threading.Thread(target=checker)]
    writer = subprocess.Popen(
        [*KBASE, "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for t in threads:
        t.start()
    out, err = writer.communicate(timeout=600)
    stop.set()
    for t in threads:
        t.join()
    assert writer.returncode == 0, err
    assert f"{n} updated" in out
    report(
        f"readers during a full re-index of {n} notes: {counts['search']} searches"
        f" ({counts['alpha']} hits showed the old version, {counts['bravo']} the new),"
        f" {counts['check']} whole-index checks; errors {sum(errors.values())}"
        f" {dict(errors)}; inconsistent answers {len(bad)}"
    )
    assert not errors
    assert not bad, bad[:5]
    assert counts["search"] >= 20 and counts["check"] >= 2


@pytest.mark.slow
def test_a_second_writer_is_refused_with_one_line(tmp_path):
    """While a writer holds the index (here this process, through kbase's own writer lock, so
    the second writer always meets it, however fast the machine), `kbase index` and `kbase
    embed` from another process are refused with one line, and the index is untouched."""
    from kbase.store import db

    vault = make_vault(tmp_path / "v", 20, seed=8)
    dbp = tmp_path / "i.db"
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    before = snapshot(dbp)
    with db.writer_lock(dbp):
        results = [
            kbase_cmd(dbp, *args, check=False)
            for args in (["index", str(vault), "--no-embed"], ["embed"])
        ]
    for r in results:
        assert r.returncode == 1
        one_error(r.stderr, "another kbase process is already writing to", str(dbp), "hint: wait")
    assert snapshot(dbp) == before
    assert_invariants(dbp)


def test_two_writers_creating_the_same_new_index_at_once(tmp_path):
    """Both may start before the file exists: one builds the index, the other is refused or
    finds it built; never 'table meta already exists'."""
    vault = make_vault(tmp_path / "v", 5, seed=9)
    for attempt in range(4):
        dbp = tmp_path / f"race{attempt}.db"
        procs = [
            subprocess.Popen(
                [*KBASE, "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
        assert any(rc == 0 for _, _, rc in outs), outs
        for _, err, rc in outs:
            if rc:
                one_error(err, "another kbase process is already writing")
        assert_invariants(dbp)
        assert index_state(dbp)["documents"] == 5


def test_a_first_run_waiting_on_the_lock_never_opens_the_new_index(tmp_path):
    """The lock comes before SQLite: a first run refused because another first run holds the new
    file writes nothing to it (no schema, no -wal), so it cannot make the other's writes BUSY
    (both runs failed under load when the loser wrote the schema before asking for the lock)."""
    import fcntl

    vault = make_vault(tmp_path / "v", 3, seed=4)
    dbp = tmp_path / "new.db"
    fd = os.open(dbp, os.O_RDONLY | os.O_CREAT, 0o644)  # the other first run: file made, locked
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = subprocess.run(
            [*KBASE, "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1
        one_error(r.stderr, "another kbase process is already writing")
        assert dbp.stat().st_size == 0 and not Path(f"{dbp}-wal").exists()
    finally:
        os.close(fd)
    r = subprocess.run(
        [*KBASE, "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert index_state(dbp)["documents"] == 3


# --- 4. a read-only index and a first run on a full disk, through every face (CLI, MCP, TUI) ---
def _run(prefix: list[str], dbp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "kbase", "--db", str(dbp), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(REPO),
        env={**child_env(), "PYTHONPATH": str(REPO)},
    )


def _assert_reads_and_refuses_writes(prefix: list[str], dbp: Path, why: str) -> None:
    s = _run(prefix, dbp, "search", "tomatoes", "--json")
    assert s.returncode == 0, s.stderr
    import json

    assert [h["path"] for h in json.loads(s.stdout)][:1] == ["Home.md"]
    notes = [ln for ln in s.stderr.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and "read-only" in notes[0], s.stderr  # said once
    q = _run(prefix, dbp, "sql", "SELECT count(*) AS n FROM documents", "--json")
    assert q.returncode == 0 and json.loads(q.stdout) == [{"n": 2}], q.stderr
    shown = _run(prefix, dbp, "show", "Home.md")
    assert shown.returncode == 0 and "tomatoes" in shown.stdout, shown.stderr
    for cmd in (["index"], ["check", "--fix"], ["embed"], ["compact"]):
        w = _run(prefix, dbp, *cmd)
        lines = w.stderr.strip().splitlines()
        assert w.returncode == 1 and lines[0].startswith("Error: ") and why in lines[0], (
            cmd,
            w.stderr,
        )
        assert len(lines) == 2 and "searching it works as it is" in lines[1], w.stderr
        assert "Traceback" not in w.stderr


def _small_index(tmp_path: Path) -> Path:
    vault = write(
        tmp_path / "v",
        {"Home.md": "# Home\n\nA note about tomatoes.\n", "Other.md": "# Other\n\nbeans\n"},
    )
    folder = tmp_path / "idx"
    folder.mkdir()
    dbp = folder / "i.db"
    kbase.open(dbp).index([vault], embed=False)
    assert not Path(f"{dbp}-wal").exists() and not Path(f"{dbp}-shm").exists()
    return dbp


def test_an_index_in_a_read_only_folder_is_searched_and_writers_say_why_not(tmp_path):
    prefix = as_unprivileged()
    dbp = _small_index(tmp_path)
    before = dbp.read_bytes()
    dbp.parent.chmod(0o555)
    try:
        _assert_reads_and_refuses_writes(prefix, dbp, "read-only")
    finally:
        dbp.parent.chmod(0o755)
    assert dbp.read_bytes() == before
    assert not Path(f"{dbp}-wal").exists() and not Path(f"{dbp}-shm").exists()


@pytest.mark.slow
def test_an_index_on_a_read_only_mount_is_searched_and_writers_say_why_not(tmp_path):
    dbp = _small_index(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only bind mount needs root")
    bind = subprocess.run(["mount", "--bind", str(dbp.parent), str(mnt)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode()[:200]}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True)
        assert ro.returncode == 0, ro.stderr
        _assert_reads_and_refuses_writes([], mnt / "i.db", "read-only file system")
        import asyncio

        async def over_mcp():
            log = tmp_path / "mcp.log"
            async with stdio_session(mnt / "i.db", log) as c:
                for _ in range(2):
                    r = await c.call_tool("search", {"query": "tomatoes", "mode": "keyword"})
                    assert not r.is_error and "Home.md" in text(r), text(r)
            said = [ln for ln in log.read_text().splitlines() if "read-only" in ln]
            assert len(said) == 1, log.read_text()  # said once

        asyncio.run(over_mcp())
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_read_only_folder_with_changes_still_in_the_wal_is_one_clear_error(tmp_path):
    prefix = as_unprivileged()
    dbp = _small_index(tmp_path)
    from kbase.store import db

    con = db.connect(dbp)  # a writer that stays open keeps the -wal file
    con.execute("PRAGMA wal_autocheckpoint = 0")
    with con:
        con.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")
    wal = Path(f"{dbp}-wal").read_bytes()
    con.close()
    Path(f"{dbp}-wal").write_bytes(wal)  # as a copy taken while a writer was running leaves it
    Path(f"{dbp}-shm").unlink(missing_ok=True)
    dbp.parent.chmod(0o555)
    try:
        s = _run(prefix, dbp, "search", "tomatoes")
    finally:
        dbp.parent.chmod(0o755)
    lines = s.stderr.strip().splitlines()
    assert s.returncode == 1 and len(lines) == 2 and "-wal file holds changes" in lines[0], s.stderr


@pytest.mark.slow
def test_a_first_index_that_fails_on_a_full_disk_leaves_no_index(tmp_path):
    resource = pytest.importorskip("resource")
    vault = make_vault(tmp_path / "v", 400, seed=7)
    dbp = tmp_path / "new" / "deeper" / "i.db"
    limit = 1_500_000  # bytes: the first few hundred notes fit, the rest does not

    def small_files():  # Python ignores SIGXFSZ, so writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=small_files,
        cwd=str(REPO),
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and lines[0].startswith("Error: ") and str(dbp) in lines[0], r.stderr
    assert len(lines) == 2 and "first run left no index behind" in lines[1], r.stderr
    assert "intact" not in r.stderr
    assert not (tmp_path / "new").exists()  # no file, no -wal, no folder made for it
    r = subprocess.run(  # with room, the same run builds the index
        [sys.executable, "-m", "kbase", "--db", str(dbp), "index", str(vault), "--no-embed", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(REPO),
    )
    assert r.returncode == 0, r.stderr
    with kbase.open(dbp) as kb:
        assert kb.status().documents == 400


def test_a_first_index_that_fails_after_committing_leaves_no_index(tmp_path, monkeypatch):
    """The same in process, with a commit after every note: the failure comes after hundreds
    of committed documents (1,409 of 6,571 were left behind before)."""
    from kbase.indexer import pipeline
    from kbase.store import db

    vault = make_vault(tmp_path / "v", 120, seed=8)
    dbp = tmp_path / "i.db"
    monkeypatch.setattr(pipeline, "COMMIT_EVERY_SECONDS", 0.0)
    real = db.connect

    def connect(path, *, readonly=False, create=False):
        con = real(path, readonly=readonly, create=create)
        if not readonly:  # room for some notes, not all
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            con.execute(f"PRAGMA max_page_count = {pages + 25}")
        return con

    commits = []
    real_commit = pipeline._Batches._commit

    def commit(self):
        commits.append(sum(self.counts.values()))
        real_commit(self)

    monkeypatch.setattr(db, "connect", connect)
    monkeypatch.setattr(pipeline._Batches, "_commit", commit)
    from kbase.errors import DatabaseError

    with pytest.raises(DatabaseError) as e:
        kbase.open(dbp).index([vault], embed=False)
    assert "disk full" in e.value.message and "left no index behind" in e.value.hint
    assert sum(commits) > 20  # it failed after committing many documents ...
    assert not dbp.exists() and not Path(f"{dbp}-wal").exists()  # ... and left none of them


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_tui_searches_a_read_only_index_and_says_so(tmp_path):
    from tests.test_tui import make_app, screen_text, type_query

    dbp = _small_index(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only bind mount needs root")
    if subprocess.run(["mount", "--bind", str(dbp.parent), str(mnt)]).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], check=True)
        app = make_app(mnt / "i.db")
        async with app.run_test(size=(100, 30)) as pilot:
            await type_query(pilot, "tomatoes")
            text = screen_text(app)
            assert "Home" in text and "read-only index" in text, text
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
