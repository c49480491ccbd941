"""Reliability under abuse (issue 7).

1. SIGKILL at random moments of ``kbase index`` (keyword phase on 1,000 notes: fresh, update,
   re-chunk; and the embedding phase on a small vault): the index always passes its invariants
   and the next run converges to exactly what a clean run builds.
2. A full disk and a read-only index: one clear error naming the file and the fix, the index intact.
3. Readers during a full re-index (no error, never a half-indexed document); two writers at once.
4. Hostile files: every one indexed or skipped with a one-line reason, the run finishes, memory
   stays bounded.
5. Arbitrary query strings (library and CLI): no exception.
6. (tests/test_watch.py) 7. Hits whose file changed on disk are marked stale.

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbase
from kbase.cli.app import cli
from kbase.embed.embedder import pack
from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.indexer import pipeline, prepare
from kbase.search.query import parse_query
from kbase.store import db
from tests.conftest import bump_mtime, examples, write

SEED = int(os.environ.get("KBASE_RELIABILITY_SEED", "7"))
KBASE = [sys.executable, "-m", "kbase"]


def report(msg: str) -> None:
    print(f"[reliability] {msg}")


# --- a synthetic vault ----------------------------------------------------------------------------
WORDS = (
    "the of and to in is that for it as with on by this are or from at which but have an they you "
    "note notes index search query file work project design model process value table result page "
    "link idea read write change version user method code server memory question source text "
    "number list example problem order point level form group part test review plan team meeting "
    "draft summary topic research paper book chapter theory language network function class object "
    "state event message error build release feature issue history structure pattern schema store "
    "cache storage key record field column row database engine layer service client request "
    "response graph node edge tree path folder garden tomato cucumber window checkpoint journal "
    "habit weekly goal task priority status decision"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def make_vault(root: Path, n: int, seed: int, size: int = 1800) -> Path:
    """``n`` Obsidian-like notes in nested folders: front matter (title, tags, date, some aliases),
    headings, prose, lists, code, inline #tags, [[links]] (resolved, to headings, to aliases, and
    unresolved), attachments. Deterministic for (n, seed, size)."""
    rng = random.Random(seed)
    folders = [
        "",
        "inbox",
        "projects",
        "projects/alpha",
        "projects/beta",
        "areas/home",
        "areas/work/deep",
    ]
    names = [f"{folders[i % len(folders)]}/n{i:04}.md".lstrip("/") for i in range(n)]
    for i, rel in enumerate(names):
        title = f"Note {i} {rng.choice(WORDS)} {rng.choice(WORDS)}"
        fm = [
            "---",
            f"title: {title}",
            f"tags: [{rng.choice(WORDS)}, area/{rng.choice(WORDS)}]",
            f"date: 2025-{1 + i % 12:02}-{1 + i % 28:02}",
        ]
        if i % 5 == 0:
            fm.append(f"aliases: [alias{i}]")
        lines = fm + ["---", f"# {title}", ""]
        section = 0
        while sum(len(x) + 1 for x in lines) < size:
            r = rng.random()
            if r < 0.15:
                section += 1
                lines += [f"## Section {section} {rng.choice(WORDS)}", ""]
            elif r < 0.22:
                lines += [
                    "```python",
                    f"def f{i}():",
                    f"    return {rng.randint(0, 999)}",
                    "```",
                    "",
                ]
            elif r < 0.35:
                lines += [f"- {_sentence(rng, 6)} [[n{rng.randrange(n):04}]]" for _ in range(3)] + [
                    ""
                ]
            else:
                target = rng.randrange(n)
                link = rng.choice(
                    [
                        f"[[n{target:04}]]",
                        f"[[n{target:04}#Section 1]]",
                        f"[[alias{target - target % 5}]]",
                        f"[[missing{target}]]",
                        f"![[img{target % 7}.png]]",
                        f"[[n{target:04}|shown]]",
                    ]
                )
                lines += [
                    f"{_sentence(rng, 25)} {link} #{rng.choice(WORDS)} {_sentence(rng, 15)}",
                    "",
                ]
        write(root, {rel: "\n".join(lines)})
    for k in range(4):  # attachments: some ![[img]] links resolve
        write(root, {f"assets/img{k}.png": b"\x89PNG\r\n\x1a\n" + bytes(32)})
    return root


def mutate_vault(root: Path, seed: int) -> dict[str, int]:
    """Edit a vault the way a week of work does: edits, touches, renames, moves, deletions,
    new notes and attachments."""
    rng = random.Random(seed)
    files = sorted(p for p in root.rglob("*.md"))
    rng.shuffle(files)
    n = len(files)
    edited, touched, renamed, deleted = (
        files[: n // 4],
        files[n // 4 : n // 4 + n // 20],
        files[n // 4 + n // 20 : n // 4 + n // 10],
        files[n // 4 + n // 10 : n // 4 + n // 10 + n // 20],
    )
    for i, p in enumerate(edited):
        text = p.read_text(encoding="utf-8")
        p.write_text(
            text.replace("Note", "Edited note", 1)
            + f"\n\nAdded {_sentence(rng, 12)} [[new{i:03}]] #edited\n",
            encoding="utf-8",
        )
        bump_mtime(p)
    for p in touched:
        bump_mtime(p)
    (root / "archive").mkdir(exist_ok=True)
    for i, p in enumerate(renamed):
        target = root / "archive" / p.name if i % 2 else p.with_name(f"renamed {p.name}")
        p.rename(target)
    for p in deleted:
        p.unlink()
    for i in range(n // 20):
        write(
            root,
            {
                f"inbox/new{i:03}.md": f"# New {i}\n\n"
                f"{_sentence(rng, 30)} [[n{rng.randrange(n):04}]]\n"
            },
        )
    write(root, {"assets/img5.png": b"\x89PNG\r\n\x1a\n" + bytes(16)})
    (root / "assets" / "img0.png").unlink()
    return {
        "edited": len(edited),
        "touched": len(touched),
        "renamed": len(renamed),
        "deleted": len(deleted),
        "added": n // 20,
    }


# --- what an index holds, and its invariants ------------------------------------------------------
SNAPSHOT_SQL = {
    "roots": "SELECT path FROM roots",
    "documents": "SELECT r.path, d.path, d.kind, d.title, d.size, d.mtime_ns, d.hash, d.encoding,"
    " d.frontmatter, d.body_start, d.date, d.body"
    " FROM documents d JOIN roots r ON r.id = d.root_id",
    "chunks": "SELECT d.path, c.seq, c.start_char, c.end_char, c.line, c.end_line, c.heading_path,"
    " c.kind, c.tokens, c.flags, c.embed_hash FROM chunks c JOIN documents d ON d.id = c.doc_id",
    "links": "SELECT s.path, l.start_char, l.end_char, l.line, l.kind, l.embed, l.target, l.anchor,"
    " l.alias, t.path, l.target_path, l.anchor_ok"
    " FROM links l JOIN documents s ON s.id = l.doc_id"
    " LEFT JOIN documents t ON t.id = l.target_id",
    "tags": "SELECT d.path, t.tag, t.source FROM tags t JOIN documents d ON d.id = t.doc_id",
    "aliases": "SELECT d.path, a.alias FROM aliases a JOIN documents d ON d.id = a.doc_id",
    "headings": "SELECT d.path, h.seq, h.level, h.text, h.start_char, h.end_char, h.line"
    " FROM headings h JOIN documents d ON d.id = h.doc_id",
    "block_ids": "SELECT d.path, b.block_id, b.start_char, b.end_char"
    " FROM block_ids b JOIN documents d ON d.id = b.doc_id",
    "diagnostics": "SELECT d.path, g.kind, g.start_char, g.end_char, g.line, g.detail"
    " FROM diagnostics g JOIN documents d ON d.id = g.doc_id",
    "attachments": "SELECT r.path, a.path FROM attachments a JOIN roots r ON r.id = a.root_id",
}


def snapshot(path: Path) -> dict[str, list[tuple]]:
    """Everything an index run derives from the files, without row ids (sorted row sets)."""
    con = db.connect(path, readonly=True)
    try:
        return {
            name: sorted(con.execute(sql).fetchall(), key=repr)
            for name, sql in SNAPSHOT_SQL.items()
        }
    finally:
        con.close()


def assert_same_index(got: dict, want: dict, label: str) -> None:
    """Compare two snapshots table by table; on a difference show a few rows, not megabytes."""
    for table in want:
        if got[table] != want[table]:
            g, w = set(got[table]), set(want[table])
            extra = sorted(g - w, key=repr)[:3]
            missing = sorted(w - g, key=repr)[:3]
            short = lambda rows: [tuple(str(x)[:60] for x in r) for r in rows]  # noqa: E731
            pytest.fail(
                f"{label}: table {table} differs from a clean run"
                f" ({len(got[table])} rows vs {len(want[table])});"
                f" extra {short(extra)}; missing {short(missing)}"
            )


def index_state(path: Path) -> dict | None:
    """Counts of what a (possibly killed) run left; None if no index was created yet."""
    if not path.exists():
        return None
    try:
        con = db.connect(path, readonly=True)
    except DatabaseError:
        return None  # killed before the schema was committed: there is no index yet
    try:
        one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        vec = one("SELECT count(*) FROM sqlite_schema WHERE name = 'chunks_vec'")
        return {
            "documents": one("SELECT count(*) FROM documents"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "embedded": one("SELECT count(*) FROM chunks WHERE embedded") if vec else 0,
        }
    finally:
        con.close()


def assert_invariants(path: Path) -> dict | None:
    """What must hold after any crash: SQLite and FTS5 integrity, the keyword index in step with
    the chunks, chunk offsets inside their bodies, ``embedded`` exactly for the rows of
    chunks_vec."""
    state = index_state(path)
    if state is None:
        return None
    con = db.connect(path)  # FTS5's integrity-check is an INSERT: a writable connection
    try:
        one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        assert [r[0] for r in con.execute("PRAGMA integrity_check")] == ["ok"]
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        con.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        n = one("SELECT count(*) FROM chunks")
        assert one("SELECT count(*) FROM chunks_fts") == n
        assert one("SELECT count(*) FROM chunks_fts_docsize") == n  # rows FTS5 itself holds
        assert (
            one(
                "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " WHERE c.start_char < 0"
                " OR c.end_char < c.start_char OR c.end_char > length(d.body)"
            )
            == 0
        )
        if one("SELECT count(*) FROM sqlite_schema WHERE name = 'chunks_vec'"):
            vec = {r for (r,) in con.execute("SELECT rowid FROM chunks_vec")}
            flagged = {r for (r,) in con.execute("SELECT id FROM chunks WHERE embedded = 1")}
            assert vec == flagged
            assert one("SELECT count(*) FROM chunks WHERE embedded NOT IN (0, 1)") == 0
    finally:
        con.close()
    return state


# --- running the real command ---------------------------------------------------------------------
def kbase_cmd(
    dbp: Path, *args: str, check: bool = True, timeout: float = 600, **kw
) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [*KBASE, "--db", str(dbp), *args], capture_output=True, text=True, timeout=timeout, **kw
    )
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


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
    vault = make_vault(tmp_path / "vault", 60, seed=SEED + 100, size=500)
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


# --- 2. full disk, read-only index ----------------------------------------------------------------
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


def _one_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert lines and lines[0].startswith("Error: "), stderr
    assert len(lines) <= 2 and all(not line.startswith("Traceback") for line in lines), stderr
    assert len(lines) == 1 or lines[1].startswith("  hint: "), stderr
    for needle in needles:
        assert needle in stderr, stderr


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
    _one_error(r.stderr, "disk full while writing", str(dbp), "hint: free some space")
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
    _one_error(r.stderr, str(dbp), "hint: ", "full")
    assert_invariants(dbp)
    assert set(before["documents"]) <= set(snapshot(dbp)["documents"])
    kbase_cmd(dbp, "index", str(vault), "--no-embed", "-q")
    clean = tmp_path / "clean.db"
    kbase_cmd(clean, "index", str(vault), "--no-embed", "-q")
    assert_same_index(snapshot(dbp), snapshot(clean), "after a failing write")


def _as_unprivileged() -> list[str]:
    """A command prefix that makes permission bits apply: nothing for a normal user; for root,
    setpriv dropping the capabilities that bypass them (else the test is skipped)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip(
            "running as root, where chmod does not stop writes, and setpriv is not available"
        )
    caps = "-dac_override,-dac_read_search,-fowner"
    probe = subprocess.run(
        [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "true"], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(
            f"running as root and setpriv cannot drop capabilities: {probe.stderr.decode()[:200]}"
        )
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


@pytest.mark.parametrize("what", ["file", "folder", "both"])
def test_read_only_index_is_one_clear_error_and_stays_intact(tmp_path, what):
    prefix = _as_unprivileged()
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
        _one_error(r.stderr, str(dbp), "read-only", "hint: ")
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
    reader that saw a half-replaced document would find another count of matching chunks."""
    n = 400
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
        _one_error(r.stderr, "another kbase process is already writing to", str(dbp), "hint: wait")
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
                _one_error(err, "another kbase process is already writing")
        assert_invariants(dbp)
        assert index_state(dbp)["documents"] == 5


# --- 4. hostile input -----------------------------------------------------------------------------
def hostile_corpus(root: Path) -> dict[str, str]:
    """Bad files of every kind; returns name -> what must happen ('indexed', or a reason fragment
    for a skip; 'either' where it depends on the platform or privileges)."""
    rng = random.Random(7)
    expect: dict[str, str] = {}

    def put(name: str, data: bytes | str, outcome: str = "indexed") -> None:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        expect[name] = outcome

    put("empty.md", b"")
    put("empty.txt", b"")
    put("only-newlines.md", b"\n\n\n")
    put("nul-byte.md", b"# Title\n\nsome text\x00more text\n", "binary")
    put("random-bytes.md", rng.randbytes(20_000), "binary")
    put("random-bytes-no-nul.md", bytes(b for b in rng.randbytes(20_000) if b), "either")
    put(
        "invalid-utf8.md",
        b"# Caf\xc3\xa9\n\nbroken \xff\xfe here \xc3\x28 and \xed\xa0\x80 surrogate\n",
    )
    put(
        "mixed-encodings.md",
        "# Mixed\n\nutf8: café\n".encode()
        + "latin1: café\n".encode("latin-1")
        + "sjis: 日本語\n".encode("shift_jis"),
    )
    put(
        "utf16-no-bom.md",
        "# UTF-16 without BOM\n\nplain words in utf sixteen\n".encode("utf-16-le"),
    )
    put("utf16be-no-bom.txt", "UTF-16 big endian without BOM, plain words\n".encode("utf-16-be"))
    put("utf32-no-bom.md", "# thirty two\n\nwords\n".encode("utf-32-le"))
    put("lone-cr.md", b"# Old mac\r\rline one\rline two\r")
    put("tiny-lines.md", b"a\n" * 100_000)
    put("nested-quotes.md", "> " * 5000 + "deep\n")
    put("nested-lists.md", "- " * 5000 + "deep\n")
    put("nested-quotes-stair.md", "\n".join("> " * i + "q" for i in range(1, 501)))
    put("nested-lists-stair.md", "\n".join("  " * i + "- item" for i in range(1000)))
    put(
        "headings.md",
        "".join(f"{'#' * (1 + i % 6)} Heading {i}\n\ntext {i}\n\n" for i in range(10_000)),
    )
    put("headings-only.md", "".join(f"# H{i}\n" for i in range(3_000)))  # quadratic in the chunker
    put("unclosed-fence.md", "# Code\n\n```python\nprint(1)\n" + "x = 1\n" * 2000)
    put("unclosed-tilde.md", "~~~\n" + "code\n" * 10)
    put("fm-malformed.md", "---\ntitle: [unclosed\ntags: {a: \n---\n# Body\n\ntext\n")
    put("fm-tab.md", "---\n\ttitle: x\n---\nbody\n")
    put("fm-not-mapping.md", "---\n- a\n- b\n---\nbody\n")
    put("fm-unclosed.md", "---\ntitle: x\nno close\n")
    put("fm-only.md", "---\ntitle: only front matter\n---\n")
    put(
        "fm-huge.md",
        "---\n" + "".join(f"key{i}: value {i}\n" for i in range(40_000)) + "---\n# After\n\nbody\n",
    )
    put("fm-huge-value.md", "---\nx: " + "y" * 400_000 + "\n---\nbody\n")
    laughs = "---\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [{', '.join(['*' + chr(97 + k)] * 9)}]\n" for k in range(8)
    )
    put("yaml-bomb.md", laughs + "tags: *i\ntitle: *i\naliases: *i\n---\nbomb body\n")
    put("yaml-recursive.md", "---\na: &a [*a]\n---\nbody\n")
    put("yaml-deep.md", "---\na: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n")
    put("yaml-python-tag.md", "---\na: !!python/object/apply:os.system ['echo pwned']\n---\nbody\n")
    put(
        "yaml-bad-date.md",
        "---\ncreated: 2024-02-30\ndate: 99999-99-99\ntitle: 12\ntags: 5\n---\nbody\n",
    )
    put("yaml-bad-float.md", "---\nx: !!float abc\n---\nbody\n")
    put("yaml-huge-int.md", "---\nn: " + "1" * 5000 + "\n---\nbody\n")
    put("long-line-words.md", "word " * 60_000)
    put("long-line-blob.md", "A" * 300_000)
    put("html.md", "<div>\n" * 5000)
    put("table.md", "| a | b |\n|---|---|\n" + "| x | y |\n" * 20_000)
    put("links.md", " ".join(f"[[n{i}]]" for i in range(20_000)))
    put("tags.md", " ".join(f"#t{i}" for i in range(20_000)))
    put("math.md", "$$\n" + "x\n" * 1000)
    put("zero-width.md", "\u200b\u200d\ufeff" * 1000)
    put("bidi.md", "\u202e reversed \u202c text")
    for name in (
        "name with spaces.md",
        "new\nline.md",
        "ünïcödé 日本.md",
        "-leading-dash.md",
        "--help.md",
        "emoji 🎉.md",
        "tab\tname.md",
        "back\\slash.md",
        "quote'\"name.md",
        "control\x01char.md",
        "nested/dir with space/deep.md",
        "NFD-café.md",
        "x" * 200 + ".md",
    ):
        put(name, f"# {name!r}\n\nfilename body\n")
    undecodable = os.fsdecode(
        b"bad-name-\xff.md"
    )  # a name that is not UTF-8 (lone surrogate in Python)
    (root / undecodable).write_bytes(b"# bad name\n")
    expect[undecodable] = "not valid UTF-8"
    os.symlink(".", root / "loop")
    expect["loop"] = "already visited"
    (root / "sub").mkdir()
    os.symlink("..", root / "sub" / "up")
    expect["sub/up"] = "already visited"
    os.symlink("missing-target.md", root / "broken-link.md")
    expect["broken-link.md"] = "broken symlink"
    os.symlink("self-link.md", root / "self-link.md")
    expect["self-link.md"] = "broken symlink"
    os.symlink("/dev/zero", root / "devzero.md")
    expect["devzero.md"] = "outside the indexed roots"  # a device: never read
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "fifo.md")
        expect["fifo.md"] = "not a regular file"
    (root / "folder.md").mkdir()
    put("folder.md/inside.md", "# inside a folder named .md\n")
    put("locked.md", "# locked\n", "either")  # made unreadable by the test
    return expect


# Linux keeps a process's peak RSS across exec, so a command forked straight from this (large)
# test process would report at least the test process's own size. A small Python process starts
# the command instead and hands its peak back through a file.
_MEASURE = (
    "import os, resource, subprocess, sys; rc = subprocess.call(sys.argv[2:]);"
    " open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss));"
    " sys.exit(rc)"
)


def run_measured(cmd: list[str], timeout: float = 600) -> tuple[int, str, str, int]:
    """Run ``cmd``; (exit code, stdout, stderr, peak RSS in MB of that process alone)."""
    import tempfile

    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        p = subprocess.Popen(
            [sys.executable, "-c", _MEASURE, peak.name, *cmd], stdout=out, stderr=err
        )
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pytest.fail(f"{cmd} did not finish in {timeout} s")
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        maxrss = int(peak.read() or usage.ru_maxrss)
        rss_mb = maxrss // 1024 if sys.platform != "darwin" else maxrss // 2**20
        return (
            p.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            rss_mb,
        )


@pytest.mark.slow
def test_hostile_files_are_indexed_or_skipped_with_a_reason(tmp_path):
    corpus = tmp_path / "corpus"
    expect = hostile_corpus(corpus)
    try:
        prefix = _as_unprivileged()
    except pytest.skip.Exception:
        prefix = []  # root without setpriv: the locked file is simply readable
    (corpus / "locked.md").chmod(0)
    dbp = tmp_path / "h.db"
    try:
        rc, out, err, rss = run_measured(
            [*prefix, *KBASE, "--db", str(dbp), "index", str(corpus), "--no-embed", "--json"]
        )
        rc2, out2, err2, _ = run_measured(
            [*prefix, *KBASE, "--db", str(dbp), "index", str(corpus), "--no-embed", "-q"]
        )
    finally:
        (corpus / "locked.md").chmod(0o644)
    assert rc == 0, err[-3000:]
    assert rc2 == 0 and "0 new, 0 updated" in out2, err2[-3000:]  # a second run finds nothing to do
    result = json.loads(out)
    skipped = {os.path.relpath(p, corpus): reason for p, reason in result["skipped"]}
    con = db.connect(dbp, readonly=True)
    indexed = {p for (p,) in con.execute("SELECT path FROM documents")}
    for name, outcome in expect.items():
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        if outcome == "indexed":
            assert name in indexed, (name, skipped.get(name))
        elif outcome == "either":
            assert name in indexed or skipped.get(name), name
        else:
            assert outcome in skipped.get(shown, ""), (name, skipped.get(shown))
    assert all(reason and "\n" not in reason for reason in skipped.values())
    if prefix or os.geteuid() != 0:
        assert "cannot read" in skipped.get("locked.md", ""), skipped.get("locked.md")
    encodings = dict(con.execute("SELECT path, encoding FROM documents"))
    assert (
        encodings["utf16-no-bom.md"] == "utf_16_le"
        and encodings["utf16be-no-bom.txt"] == "utf_16_be"
    )
    assert encodings["utf32-no-bom.md"] == "utf_32_le"
    con.close()
    assert_invariants(dbp)
    hits = kbase.open(dbp).search("filename body", mode="keyword", limit=100)
    assert {h.path for h in hits} >= {"name with spaces.md", "new\nline.md", "-leading-dash.md"}
    assert rss < 600, f"peak RSS {rss} MB"
    report(
        f"hostile corpus: {len(expect)} bad files, {len(indexed)} indexed,"
        f" {len(skipped)} skipped with a reason,"
        f" {len(result['warnings'])} warnings; peak RSS {rss} MB"
    )


@pytest.mark.slow
def test_a_50_mb_single_line_is_skipped_by_default_and_handled_with_a_higher_cap(tmp_path):
    corpus = tmp_path / "big"
    corpus.mkdir()
    big = corpus / "one-line.md"
    chunk = ("lorem ipsum dolor sit amet " * 40).encode()
    with big.open("wb") as f:
        for _ in range(50 * 2**20 // len(chunk) + 1):
            f.write(chunk)
    write(corpus, {"small.md": "# Small\n\nstill indexed\n"})
    dbp = tmp_path / "b.db"
    rc, out, err, rss_default = run_measured(
        [*KBASE, "--db", str(dbp), "index", str(corpus), "--no-embed", "--json"]
    )
    assert rc == 0, err[-2000:]
    r = json.loads(out)
    assert r["new"] == 1 and [(Path(p).name, "size cap" in why) for p, why in r["skipped"]] == [
        ("one-line.md", True)
    ]
    rc, out, err, rss_60m = run_measured(
        [
            *KBASE,
            "--db",
            str(dbp),
            "index",
            str(corpus),
            "--no-embed",
            "--json",
            "--max-size",
            "60M",
        ],
        timeout=900,
    )
    assert rc == 0, err[-2000:]
    r = json.loads(out)
    con = db.connect(dbp, readonly=True)
    indexed = con.execute("SELECT count(*) FROM documents WHERE path = 'one-line.md'").fetchone()[0]
    reasons = [why for p, why in r["skipped"] if Path(p).name == "one-line.md"]
    assert indexed or (reasons and reasons[0]), r
    assert rss_60m < 1024, f"peak RSS {rss_60m} MB for a {big.stat().st_size // 2**20} MB file"
    assert_invariants(dbp)
    report(
        f"50 MB single line: default cap -> skipped (peak RSS {rss_default} MB); --max-size 60M -> "
        + ("indexed" if indexed else f"skipped: {reasons[0]}")
        + f" (peak RSS {rss_60m} MB)"
    )


def test_files_that_change_between_listing_and_reading(tmp_path, monkeypatch):
    """Deleted, grown past the cap, turned binary or into a FIFO after the listing; and changed
    right after being read: each is skipped with a reason or caught up by the next run."""
    vault = write(
        tmp_path / "v",
        {
            "gone.md": "# Gone\n",
            "grows.md": "# Grows\n",
            "binary.md": "# Text for now\n",
            "fifo.md": "# Fifo\n",
            "racy.md": "# Racy\n\nfirst version\n",
            "stays.md": "# Stays\n",
        },
    )
    real_walk = pipeline.walk

    def walk(*a, **k):  # acts on each file right after it is listed, before it is read
        for item in real_walk(*a, **k):
            yield item
            name = os.path.basename(getattr(item, "abspath", ""))
            p = vault / name
            if name == "gone.md":
                p.unlink()
            elif name == "grows.md":
                p.write_bytes(b"x" * 5000)
            elif name == "binary.md":
                p.write_bytes(b"\x00\x01\x02" * 100)
            elif name == "fifo.md" and hasattr(os, "mkfifo"):
                p.unlink()
                os.mkfifo(p)

    real_open = open

    class Racy:  # the file changes on disk right after kbase read it
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, *a):
            data = self.f.read(*a)
            (vault / "racy.md").write_text("# Racy\n\nsecond version, same size?\n")
            return data

        def __getattr__(self, name):
            return getattr(self.f, name)

    def racing_open(file, *a, **k):
        f = real_open(file, *a, **k)
        return Racy(f) if str(file).endswith("racy.md") else f

    def unblock_fifo():  # should kbase ever block opening the FIFO, end the wait instead of hanging
        if not finished.wait(20) and (vault / "fifo.md").exists():
            os.close(os.open(vault / "fifo.md", os.O_WRONLY | os.O_NONBLOCK))

    monkeypatch.setattr(pipeline, "walk", walk)
    monkeypatch.setattr(pipeline, "open", racing_open, raising=False)
    con = db.connect(tmp_path / "i.db", create=True)
    finished = threading.Event()
    threading.Thread(target=unblock_fifo, daemon=True).start()
    t0 = time.monotonic()
    r = pipeline.index(con, [vault], max_size=1000)
    finished.set()
    monkeypatch.undo()
    assert time.monotonic() - t0 < 20, "indexing blocked on a FIFO"
    reasons = {os.path.basename(p): why for p, why in r.skipped}
    assert "vanished" in reasons["gone.md"]
    assert "grew past the size cap" in reasons["grows.md"]
    assert "binary" in reasons["binary.md"]
    if hasattr(os, "mkfifo"):
        assert "not a regular file" in reasons["fifo.md"]
    r = pipeline.index(con, [vault], max_size=1000)  # the next run catches up with racy.md
    body = con.execute("SELECT body FROM documents WHERE path = 'racy.md'").fetchone()[0]
    assert body == (vault / "racy.md").read_text()
    assert_invariants(Path(con.filename))


# --- 5. arbitrary queries -------------------------------------------------------------------------
# Any text a user can type, including lone surrogates (what Python makes of argv bytes that are
# not UTF-8).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=80)
QUERY_TEXT = st.one_of(
    ANY_TEXT,
    st.lists(
        st.sampled_from(
            [
                '"',
                "*",
                "-",
                "OR",
                "AND",
                "NOT",
                "NEAR(",
                ")",
                "(",
                "^",
                ":",
                "c++",
                "e.g.",
                "tomato",
                "garden",
                "sqlite",
                "'",
                "\\",
                "\x00",
                "🎉",
                "ß",
                "İ",
                "﷽",
                "\u0301",
                "a" * 300,
            ]
        ),
        max_size=8,
    ).map(" ".join),
)
PROPERTY = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.fixture(scope="module")
def query_index(tmp_path_factory):
    """A small index with embeddings from the real model (loaded once for the module)."""
    from kbase.embed.embedder import default_embedder

    tmp = tmp_path_factory.mktemp("queries")
    vault = write(
        tmp / "vault",
        {
            "Garden.md": "---\ntags: [garden, home/outside]\ndate: 2024-05-01\n---\n"
            "# Garden\n\nTomatoes need sun.\n\n"
            "## Beds\n\nRaised beds drain well. [[SQLite]]\n",
            "SQLite.md": "# SQLite\n\n"
            "Write-ahead logging lets readers and writers work at once. #db/sqlite\n\n"
            "```sql\nPRAGMA journal_mode = WAL;\n```\n",
            "notes.txt": "Plain text about checkpoints, C++ and e.g. abbreviations. ß İ 🎉\n",
            "Unicode.md": "# Ünïcödé\n\nCafé naïve 日本語 текст ﷽\n",
        },
    )
    dbp = tmp / "q.db"
    kb = kbase.KB(dbp, embedder=default_embedder())
    kb.index([vault])
    assert kb.status().chunks > 0
    return dbp, kb


@pytest.mark.slow
@given(q=QUERY_TEXT)
@settings(**PROPERTY, max_examples=examples(2000))
def test_any_text_is_a_keyword_query(query_index, q):
    _, kb = query_index
    if parse_query(q).empty:  # no word to search for: one error, in every mode
        with pytest.raises(InputError, match="no words to search for"):
            kb.search(q, mode="keyword", limit=5)
        return
    for h in kb.search(q, mode="keyword", limit=5):
        assert h.path and h.line >= 1


@given(
    q=QUERY_TEXT,
    path=st.one_of(st.none(), ANY_TEXT),
    tags=st.lists(ANY_TEXT, max_size=2),
    since=st.one_of(st.none(), ANY_TEXT, st.dates().map(str)),
    limit=st.integers(-3, 50),
)
@settings(**PROPERTY, max_examples=examples(500))
def test_any_filters_are_fine_or_an_input_error(query_index, q, path, tags, since, limit):
    _, kb = query_index
    try:
        kb.search(q, mode="keyword", limit=limit, path=path, tags=tags, since=since)
    except (
        KbaseError
    ) as e:  # only an unreadable --since, a limit under 1 or a query without words is an error
        assert (
            (since is not None and "is not a date" in e.message)
            or (limit < 1 and "limit must be at least 1" in e.message)
            or parse_query(q).empty
        )


@pytest.mark.slow
@given(q=QUERY_TEXT, mode=st.sampled_from(["semantic", "hybrid"]))
@settings(**PROPERTY, max_examples=examples(600))
def test_any_text_is_a_semantic_and_hybrid_query(query_index, q, mode):
    _, kb = query_index
    if parse_query(q).empty:
        with pytest.raises(InputError, match="no words to search for"):
            kb.search(q, mode=mode, limit=5)
        return
    hits = kb.search(q, mode=mode, limit=5)
    assert all(h.path for h in hits)


@given(
    words=st.lists(ANY_TEXT, min_size=1, max_size=4),
    dashdash=st.booleans(),
    extra=st.lists(
        st.sampled_from(
            [
                ["-m", "keyword"],
                ["-m", "semantic"],
                ["-m", "hybrid"],
                ["--json"],
                ["--csv"],
                ["--jsonl"],
                ["-n", "3"],
                ["--tag", "garden"],
                ["--path", "*.md"],
                ["--since", "2w"],
                ["--until", "2024-01-01"],
                ["--explain"],
            ]
        ),
        max_size=3,
    ),
)
@pytest.mark.slow
@settings(**PROPERTY, max_examples=examples(300))
def test_any_argv_to_kbase_search_is_an_answer_or_one_error_line(
    query_index, words, dashdash, extra
):
    dbp, _ = query_index
    args = [
        "--db",
        str(dbp),
        "search",
        *[a for pair in extra for a in pair],
        *(["--"] if dashdash else []),
        *words,
    ]
    r = CliRunner().invoke(cli, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
    assert r.exit_code in (0, 1, 2), (
        args,
        r.output,
    )  # 2: click's usage error (e.g. an unknown -option)
    if r.exit_code == 1:
        assert r.stderr.startswith("Error: "), (args, r.stderr)
    if r.exit_code == 0 and ("--json" in args) and not dashdash:
        json.loads(r.stdout)


# --- 7. stale hits --------------------------------------------------------------------------------
def test_a_file_changed_after_indexing_gives_a_stale_hit(tmp_path, vault):
    dbp = tmp_path / "s.db"
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["--db", str(dbp), "index", str(vault), "--no-embed", "-q"]).exit_code
        == 0
    )
    garden = vault / "Garden.md"
    garden.write_text(garden.read_text() + "\nA line added after indexing.\n")
    bump_mtime(garden)
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes", "--json"])
    hits = {h["path"]: h for h in json.loads(r.stdout)}
    assert hits["Garden.md"]["stale"] is True and hits["tech/notes.txt"]["stale"] is False
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes"])
    lines = {
        line.split(". ", 1)[1].split("  ")[0]: line
        for line in r.stdout.splitlines()
        if line[:1].isdigit()
    }
    assert "[changed on disk]" in lines["Garden"] and "[changed on disk]" not in lines["notes"]
    (vault / "tech" / "notes.txt").unlink()  # a vanished file is stale too
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes", "--json"])
    assert all(h["stale"] for h in json.loads(r.stdout))
