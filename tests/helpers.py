"""Helpers the end-to-end tests share: a synthetic vault, what an index holds and its invariants,
running the real command."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from kbase.embed.embedder import pack
from kbase.errors import DatabaseError
from kbase.store import db
from tests.conftest import bump_mtime, write

KBASE = [sys.executable, "-m", "kbase"]


def report(msg: str) -> None:
    print(f"[reliability] {msg}")


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
    "html_ids": "SELECT d.path, h.html_id, h.start_char, h.end_char"
    " FROM html_ids h JOIN documents d ON d.id = h.doc_id",
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


def kbase_cmd(
    dbp: Path, *args: str, check: bool = True, timeout: float = 600, **kw
) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [*KBASE, "--db", str(dbp), *args], capture_output=True, text=True, timeout=timeout, **kw
    )
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def one_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert lines and lines[0].startswith("Error: "), stderr
    assert len(lines) <= 2 and all(not line.startswith("Traceback") for line in lines), stderr
    assert len(lines) == 1 or lines[1].startswith("  hint: "), stderr
    for needle in needles:
        assert needle in stderr, stderr


def as_unprivileged() -> list[str]:
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


REPO = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    keep = ("HOME", "XDG_DATA_HOME", "PATH", "PYTHONPATH")
    return {k: os.environ[k] for k in keep if k in os.environ}


@asynccontextmanager
async def stdio_session(db: Path, log: Path | None = None):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbase", "--db", str(db), "mcp"],
        env=child_env(),
        cwd=str(REPO),
    )
    with open(log or db.with_suffix(".log"), "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            yield client


@asynccontextmanager
async def http_session(db: Path):
    log = db.with_suffix(".http.log")
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbase", "--db", str(db), "mcp", "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=child_env(),
            cwd=str(REPO),
        )
    try:
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline and url is None:
            m = re.search(r"serving on (http://\S+)", log.read_text())
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.1)
        assert url, f"the server did not start: {log.read_text()}"
        async with httpx2.AsyncClient(timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                yield client
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def text(result) -> str:
    return "\n".join(c.text for c in result.content)


class WordsEmbedder:
    """Deterministic vectors from the words of a text (a bag of hashed words), no model: the
    fuzz test is about the query path, not about meaning."""

    model_id, dimension, max_tokens, batch_size = "fake-words", 64, 256, 16
    fingerprint = '{"model": "fake-words-for-hostile-tests"}'

    def embed_batch(self, texts):
        import zlib

        from kbase.embed.embedder import pack

        out = []
        for t in texts:
            v = [0.0] * self.dimension
            for w in re.findall(r"\w+", t.lower())[:256]:
                v[zlib.crc32(w.encode("utf-8", "surrogatepass")) % self.dimension] += 1.0
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            out.append(pack([x / norm for x in v]))
        return out

    def embed_query(self, text):
        return self.embed_batch([text])[0]


class CountingEmbedder:
    """Deterministic vectors; remembers how many texts it embedded."""

    model_id, dimension, max_tokens, batch_size = "fake", 384, 256, 8
    fingerprint = '{"model": "fake-for-watch-tests"}'

    def __init__(self) -> None:
        self.embedded = 0

    def embed_batch(self, texts):
        self.embedded += len(texts)
        return [
            pack([((hash(t) >> (i % 32)) & 7) / 7.0 for i in range(self.dimension)]) for t in texts
        ]

    def embed_query(self, text):
        return self.embed_batch([text])[0]
