"""A hybrid ``kbase search`` from the shell handed to a running ``kbase watch`` or ``kbase mcp``
(issue 36 part 2, kbase.handoff): the same answers as in the process, only the owner's
processes talk, and a clean fallback when the server is gone, stale or stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import kbase
from kbase import handoff, handoff_client
from kbase.errors import InputError
from tests.conftest import write

REPO = Path(__file__).parents[1]
QUERIES = ("database logging", "tomatos")  # (the second is corrected: "tomatoes")


@pytest.fixture
def runtime(monkeypatch):
    """A socket directory of the test's own (short: a Unix socket's path has ~100 bytes)."""
    base = Path(tempfile.mkdtemp(prefix="kbh"))
    monkeypatch.setenv("KBASE_RUNTIME_DIR", str(base / "run"))
    monkeypatch.delenv("KBASE_HANDOFF", raising=False)
    yield base / "run"
    for p in sorted(base.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() else p.rmdir()
    base.rmdir()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Path:
    """A small vault indexed with the real model."""
    root = tmp_path_factory.mktemp("handoff")
    vault = write(
        root / "vault",
        {
            "Garden.md": "# Garden\n\nTomatoes need sun and water.\n\n## Beds\n\nRaised beds"
            " drain well; lettuce and kale grow in spring.\n",
            "SQLite.md": "# SQLite\n\nWrite-ahead logging lets readers and writers work at"
            " once. A checkpoint copies the log back into the database.\n",
            "Baking.md": "# Baking\n\nBread needs flour, water, salt and time. #kitchen\n",
            "Travel.md": "# Travel\n\nTrains across the Alps; a garden of glaciers.\n",
        },
    )
    db = root / "index.db"
    with kbase.open(db) as kb:
        kb.index([vault])
        assert kb.default_mode() == "hybrid"
    return db


def _cli(db: Path, *args: str, env: dict | None = None, timeout: float = 120):
    """``python -X importtime -m kbase --db DB ARGS``: (its output, the modules it imported)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kbase", "--db", str(db), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return r.stdout, names


def _served(db: Path, proc: subprocess.Popen, log: Path) -> Path:
    """Wait until ``proc`` serves ``db`` (its socket answers), return the socket."""
    path = handoff.socket_path(db)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if path.exists():
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(str(path))
                    return path
                except OSError:
                    pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server never listened: {log.read_text()[-3000:]}")


def _start(db: Path, *command: str) -> tuple[subprocess.Popen, Path]:
    log = db.with_name(f"{command[0]}.log")
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbase", "--db", str(db), *command],
            stdin=subprocess.PIPE,  # (kbase mcp serves until its stdin closes)
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=REPO,
            # as from a terminal: a process started with SIGINT ignored (an xdist worker after
            # some tests) passes that on, and kbase watch then keeps Ctrl-C ignored, as a job
            # started in the background does (tests/test_watch.py)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    _served(db, proc, log)
    return proc, log


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        assert proc.stdin is not None
        if "mcp" in proc.args:
            proc.stdin.close()  # kbase mcp ends (a Ctrl-C as well could cut its clean-up short)
        else:
            proc.send_signal(signal.SIGINT)  # kbase watch ends
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _hits(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def _same(a: list[dict], b: list[dict]) -> None:
    """The same hits, fields and order; the score to 1e-5: a server holds the vectors in memory
    and scores them with one matrix product, a one-shot process asks sqlite-vec (as kbase mcp and
    kbase browse always have)."""
    assert [{**h, "score": None} for h in a] == [{**h, "score": None} for h in b]
    assert [h["score"] for h in a] == pytest.approx([h["score"] for h in b], abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("command", [("watch",), ("mcp",)])
def test_a_running_kbase_answers_the_shells_hybrid_search(embedded, runtime, command):
    proc, log = _start(embedded, *command)
    try:
        _cli(embedded, "search", "warm up")  # (while the server loads its model: 1 s to answer)
        for q in QUERIES:
            for mode in ((), ("-m", "semantic"), ("--explain",)):
                handed, names = _cli(embedded, "search", "--jsonl", *mode, q)
                assert not _model_loaded(names) and "numpy" not in names, "not handed over"
                # (kbase.cli.quick asks before it imports the search engine or click)
                engine = names & {"kbase.search.run", "kbase.search.keyword", "click"}
                assert not engine, (q, mode, engine)
                here, names = _cli(
                    embedded, "search", "--jsonl", *mode, q, env={"KBASE_HANDOFF": "0"}
                )
                assert _model_loaded(names)
                assert _hits(handed), q
                _same(_hits(handed), _hits(here))
        # exactly what the API answers in a long-lived process (vectors in memory)
        with kbase.open(embedded) as kb:
            for q in QUERIES:
                out, _ = _cli(embedded, "search", "--jsonl", "--explain", q)
                assert _hits(out) == [h.record(explain=True) for h in kb.search(q)]
        # a keyword search is answered by the shell's own process (it is as fast there)
        _, names = _cli(embedded, "search", "-m", "keyword", "garden")
        assert "kbase.handoff" not in names
        # a query kbase cannot search is the same error either way
        r = subprocess.run(
            [sys.executable, "-m", "kbase", "--db", str(embedded), "search", "--", "!!!"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert r.returncode != 0 and "no words to search for" in r.stderr
    finally:
        _stop(proc)
    assert not handoff.socket_path(embedded).exists(), "the socket is removed at exit"
    assert "Traceback" not in log.read_text()


@pytest.mark.slow
def test_a_killed_server_leaves_a_stale_socket_that_costs_nothing(embedded, runtime):
    proc, _ = _start(embedded, "watch")
    path = handoff.socket_path(embedded)
    proc.kill()  # no clean-up: the socket file stays
    proc.wait()
    assert path.exists()
    t0 = time.monotonic()
    out, names = _cli(embedded, "search", "--jsonl", "garden")
    assert _model_loaded(names) and _hits(out)  # searched in its own process
    with kbase.open(embedded) as kb:
        kb.hand_off = True
        assert handoff.ask(embedded, _args("garden"), 10.0) is None
        assert kb.search("garden")  # (refused at once: a connect to nobody)
    assert time.monotonic() - t0 < 60  # (no hang: the run above would time out instead)
    # the next server takes the stale socket's place
    proc, _ = _start(embedded, "watch")
    try:
        _, names = _cli(embedded, "search", "--jsonl", "garden")
        assert not _model_loaded(names)
    finally:
        _stop(proc)


@pytest.mark.slow
def test_a_stopped_server_is_given_up_on_at_once(embedded, runtime):
    """A server that stopped answering (SIGSTOP: the socket accepts, nobody reads) costs the
    client ``ACK_TIMEOUT``, not the search's time limit."""
    proc, _ = _start(embedded, "watch")
    try:
        proc.send_signal(signal.SIGSTOP)
        t0 = time.perf_counter()
        assert handoff.ask(embedded, _args("garden"), 10.0) is None
        waited = time.perf_counter() - t0
        assert waited < handoff.ACK_TIMEOUT + handoff.CONNECT_TIMEOUT + 2
        out, names = _cli(embedded, "search", "--jsonl", "garden")
        assert _model_loaded(names) and _hits(out)
    finally:
        proc.send_signal(signal.SIGCONT)
        _stop(proc)


# What a shell's process imports while it waits for a running kbase's answer (kbase.cli.quick,
# kbase.handoff_client): none of kbase's engine, records or API, nor typing, pathlib, hashlib.
NOT_WHILE_HANDED = {
    "typing",
    "pathlib",
    "dataclasses",
    "hashlib",
    "threading",
    "apsw",
    "kbase.api",
    "kbase.records",
    "kbase.handoff",
    "kbase.text",
    "kbase.errors",
}

CASES = (
    ("database logging",),
    ("--explain", "tomatos"),  # corrected: a line on stderr
    ("--csv", "garden"),
    ("--json", "-n", "2", "-m", "semantic", "bread flour"),
    ("--path", "nosuch/", "garden"),  # no hit: why, on stderr
    ("--tag", "kitchen", "bread"),
    ("--since", "not a date", "garden"),  # an error: its lines and exit status
    ("-n", "0", "garden"),
    ("--", "!!!"),
)


def _printed(db: Path, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    r = subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "search", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    return r.returncode, r.stdout, r.stderr


@pytest.mark.slow
def test_the_shell_prints_what_the_running_kbase_printed(embedded, runtime):
    """Handed over, the shell's process imports almost nothing (NOT_WHILE_HANDED) and prints the
    bytes the server's kbase.cli.quick.printed gave: those a search in the shell's own process
    prints, stdout, stderr and exit status, whatever the format, notice or error."""
    proc, log = _start(embedded, "watch")
    try:
        _cli(embedded, "search", "warm up")
        _, names = _cli(embedded, "search", "database logging")
        assert not _model_loaded(names) and "kbase.handoff_client" in names
        assert not names & NOT_WHILE_HANDED, names & NOT_WHILE_HANDED
        for case in CASES:
            handed = _printed(embedded, *case)
            here = _printed(embedded, *case, env={"KBASE_HANDOFF": "0"})
            assert handed == here, case
        assert handed[0] != 0 and "no words to search for" in handed[2]  # (the last case)
    finally:
        _stop(proc)
    assert "Traceback" not in log.read_text()


@pytest.mark.slow
def test_a_server_that_does_not_print_answers_hits(embedded, runtime, monkeypatch):
    """A server started by a script (KB.serve_searches, no command line to say how to print)
    answers the hits, and the shell prints them itself: the same output."""
    import kbase.api

    monkeypatch.setattr(kbase.api, "_printer", None)
    with kbase.open(embedded) as kb, kb.serve_searches() as server:
        assert server.printer is None
        for case in CASES[:3]:
            out, names = _cli(embedded, "search", *case)
            assert not _model_loaded(names) and "kbase.records" in names
            here = _printed(embedded, *case, env={"KBASE_HANDOFF": "0"})
            assert (0, out) == here[:2], case


def test_the_shell_waits_as_long_as_a_search_may_take():
    from kbase.search import SEARCH_TIMEOUT

    assert handoff_client.ANSWER_TIMEOUT == SEARCH_TIMEOUT + handoff_client.ANSWER_SLACK


def _model_loaded(names: set[str]) -> bool:
    """Whether a process loaded the model (searched itself): onnxruntime's Python binding, or its
    C library for one query (kbase.embed.capi)."""
    return bool(names & {"onnxruntime", "kbase.embed.capi"})


def _args(query: str, **kw) -> dict:
    return {
        "query": query,
        "mode": None,
        "limit": 10,
        "path": None,
        "tags": [],
        "since": None,
        "until": None,
        "exclude": [],
        "correct": True,
        **kw,
    }


@pytest.fixture
def small(tmp_path) -> Path:
    """A keyword-only index (the server's search is the real one; no model needed)."""
    vault = write(tmp_path / "v", {"Garden.md": "# Garden\n\nTomatoes need sun.\n"})
    db = tmp_path / "k.db"
    with kbase.open(db) as kb:
        kb.index([vault], embed=False)
    return db


def test_the_quick_search_hands_over_and_prints_what_click_prints(small, runtime, capsys):
    """kbase.cli.quick asks a running kbase before it opens the index (``ask_about``: the hits,
    and the index's default mode and coverage, which it prints from), and prints the same bytes
    as the click command searching in its own process; a server that does not say ``about`` (an
    older kbase) is searched beside, not trusted."""
    from kbase.cli import quick
    from kbase.cli.app import cli

    asked = []
    with kbase.open(small) as kb, kb.serve_searches() as server:
        search = server.search
        server.search = lambda args: asked.append(args) or search(args)
        cases = (["tomatoes"], ["tomatos", "--json"], ["nothing-here"], ["sun", "--path", "x"])
        for words in cases:
            argv = ["--db", str(small), "search", *words]
            assert quick.main(argv) in (0, 1)
            mine = capsys.readouterr()
            with pytest.raises(SystemExit):
                cli.main(args=argv, prog_name="kbase")  # keyword-only: searched in-process
            assert mine == capsys.readouterr()
        assert len(asked) == len(cases)
        hits, notices, about = handoff.ask_about(small, _args("tomatoes"), 10.0)
        assert about == {"default_mode": "keyword", "coverage": [0, 1]} and hits
        server.about = None  # (an older server)
        assert handoff.ask_about(small, _args("tomatoes"), 10.0) is None
        assert handoff.ask(small, _args("tomatoes"), 10.0) is not None
        assert quick.main(["--db", str(small), "search", "-m", "keyword", "sun"]) == 0
        assert len(asked) == len(cases) + 3  # (three asked above; -m keyword: searched here)


def test_only_the_owner_is_talked_to(small, runtime):
    """A socket or directory of another user, or a directory others may enter, is never used;
    the server narrows its own directory to 0700."""
    if os.geteuid() != 0:
        pytest.skip("making files of another user needs root")
    with kbase.open(small) as kb:
        server = kb.serve_searches()
        try:
            assert server.serving
            path = server.path
            assert os.stat(path.parent).st_mode & 0o777 == 0o700
            assert os.stat(path).st_mode & 0o777 == 0o600
            assert handoff.ask(small, _args("tomatoes"), 10.0) is not None
            os.chown(path, 65534, 65534)  # a socket of someone else
            assert handoff.ask(small, _args("tomatoes"), 10.0) is None
            os.chown(path, 0, 0)
            os.chmod(path.parent, 0o755)  # a directory others may enter
            assert handoff.ask(small, _args("tomatoes"), 10.0) is None
            os.chmod(path.parent, 0o700)
            os.chown(path.parent, 65534, 65534)  # a directory of someone else
            assert handoff.ask(small, _args("tomatoes"), 10.0) is None
        finally:
            server.close()
        # another user's process that reaches the socket anyway is not answered
        os.chown(path.parent, 0, 0)
        with kb.serve_searches() as server:  # (the one above was closed)
            os.chmod(path.parent.parent, 0o711)  # (the test's own folder)
            os.chmod(path.parent, 0o711)
            os.chmod(path, 0o666)
            request = json.dumps(
                {"v": 1, "index": list(handoff_client.identity(small)), **_args("x")}
            )
            assert _as_nobody(path, request) == b""  # connected, and closed without a word
            os.chmod(path.parent, 0o700)
        os.chown(path.parent, 65534, 65534)
        # a server does not listen in a directory of someone else, and says so
        notices: list[str] = []
        kb.on_notice = notices.append
        assert not kb.serve_searches().serving
        assert notices and "not a private directory" in notices[0]
        os.chown(path.parent, 0, 0)
        os.chmod(path.parent, 0o755)  # ours but open: narrowed, then used
        with kb.serve_searches() as server:
            assert server.serving
            assert os.stat(path.parent).st_mode & 0o777 == 0o700


def _as_nobody(path: Path, request: str) -> bytes:
    """What the server at ``path`` answers ``request`` from a process of user 65534 (forked:
    a fresh interpreter of the venv is not that user's to run)."""
    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: another user, who reaches the socket
        code = 1
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(10)
                s.connect(str(path))
                try:
                    s.sendall(request.encode() + b"\n")
                    answer = s.recv(100)
                except (BrokenPipeError, ConnectionResetError):  # closed before it was read
                    answer = b""
                os.write(write_end, b"<" + answer)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read, "rb") as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user could not connect"
    return got[1:]


def test_the_server_answers_only_for_its_own_index(small, runtime, tmp_path):
    with kbase.open(small) as kb, kb.serve_searches() as server:
        answered = handoff.ask(small, _args("tomatoes"), 10.0)
        assert answered is not None
        hits, notices = answered
        assert [h.path for h in hits] == ["Garden.md"] and notices == []
        assert hits == kb.search("tomatoes", mode="keyword")
        # another file at the same socket (a request naming another index) is not answered
        other = tmp_path / "other.db"
        other.write_bytes(small.read_bytes())
        os.replace(handoff.socket_path(small), handoff.socket_path(other))
        assert handoff.ask(other, _args("tomatoes"), 10.0) is None
        os.replace(handoff.socket_path(other), server.path)
        # a second server for the same index leaves the first in place
        assert not kb.serve_searches().serving
        assert handoff.ask(small, _args("tomatoes"), 10.0) is not None
        # errors come back as they are raised here
        with pytest.raises(InputError, match="no words to search for"):
            handoff.ask(small, _args("!!!"), 10.0)
        # bad requests get no answer (and the server goes on)
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(server.path))
            s.sendall(b'{"v": 1, "query": 5}\n')
            assert s.recv(100) == b""
        assert handoff.ask(small, _args("tomatoes"), 10.0) is not None
        # KBASE_HANDOFF=0: never handed over
        os.environ["KBASE_HANDOFF"] = "0"
        try:
            assert handoff.ask(small, _args("tomatoes"), 10.0) is None
        finally:
            del os.environ["KBASE_HANDOFF"]
    assert not server.path.exists()


def test_a_client_that_never_asks_does_not_hold_the_server(small, runtime, monkeypatch):
    monkeypatch.setattr(handoff, "REQUEST_TIMEOUT", 0.3)
    with kbase.open(small) as kb, kb.serve_searches() as server:
        idle = [socket.socket(socket.AF_UNIX) for _ in range(handoff.MAX_CLIENTS + 2)]
        try:
            for s in idle:
                s.connect(str(server.path))
            time.sleep(handoff.REQUEST_TIMEOUT + 0.5)  # the server drops them
            assert handoff.ask(small, _args("tomatoes"), 10.0) is not None
        finally:
            for s in idle:
                s.close()


def test_a_client_that_trickles_its_request_is_cut_off_at_the_deadline(small, runtime, monkeypatch):
    """The request has REQUEST_TIMEOUT in all, not for each read: a byte every 0.2 s (each read
    well within the limit) does not hold one of the server's MAX_CLIENTS places."""
    monkeypatch.setattr(handoff, "REQUEST_TIMEOUT", 0.6)
    with kbase.open(small) as kb, kb.serve_searches() as server:
        slow = [socket.socket(socket.AF_UNIX) for _ in range(handoff.MAX_CLIENTS)]
        try:
            for s in slow:
                s.connect(str(server.path))
            t0 = time.monotonic()
            cut = set()
            while time.monotonic() - t0 < 3 and len(cut) < len(slow):
                for i, s in enumerate(slow):
                    if i in cut:
                        continue
                    try:
                        s.sendall(b"{")  # never a whole line
                    except OSError:  # closed by the server
                        cut.add(i)
                time.sleep(0.2)
            waited = time.monotonic() - t0
            assert len(cut) == len(slow), "a trickling client kept its place"
            assert waited < handoff.REQUEST_TIMEOUT + 1.5
            assert handoff.ask(small, _args("tomatoes"), 10.0) is not None  # places free again
        finally:
            for s in slow:
                s.close()


def test_a_server_that_accepts_and_never_answers_is_given_up_on(small, runtime):
    path = handoff.socket_path(small)
    assert handoff.private(path.parent, create=True)
    with socket.socket(socket.AF_UNIX) as mute:
        mute.bind(str(path))
        mute.listen(4)
        accepted: list[socket.socket] = []
        t = threading.Thread(target=lambda: accepted.append(mute.accept()[0]), daemon=True)
        t.start()
        t0 = time.perf_counter()
        assert handoff.ask(small, _args("tomatoes"), 10.0) is None
        assert time.perf_counter() - t0 < handoff.ACK_TIMEOUT + 2
        for s in accepted:
            s.close()


def test_a_server_removes_the_sockets_killed_servers_left(small, runtime, tmp_path):
    assert handoff.private(runtime, create=True)
    stale = runtime / "0123456789abcdef01234567.sock"
    with socket.socket(socket.AF_UNIX) as dead:  # bound, then closed: what SIGKILL leaves
        dead.bind(str(stale))
    other = tmp_path / "other.db"
    other.write_bytes(small.read_bytes())
    with kbase.open(other) as kb2, kb2.serve_searches() as live:
        with kbase.open(small) as kb, kb.serve_searches() as server:
            assert server.serving and not stale.exists()
            assert live.path.exists()  # another index's live server keeps its socket
            assert handoff.ask(other, _args("tomatoes"), 10.0) is not None


@pytest.mark.slow
@pytest.mark.asyncio
async def test_kbase_browse_answers_the_shells_hybrid_search_once_its_model_is_loaded(
    embedded, runtime
):
    import asyncio

    from kbase.tui.app import KbaseApp

    app = KbaseApp(embedded, debounce=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(1200):  # the model loads in the background, then the app serves
            if app.handoff is not None and app.handoff.serving:
                break
            await pilot.pause(0.05)
        assert app.handoff is not None and app.handoff.serving
        q = "database logging"
        handed, names = await asyncio.to_thread(_cli, embedded, "search", "--jsonl", q)
        assert not _model_loaded(names), "not handed over"
        here, _ = await asyncio.to_thread(
            _cli, embedded, "search", "--jsonl", q, env={"KBASE_HANDOFF": "0"}
        )
        _same(_hits(handed), _hits(here))
    assert not handoff.socket_path(embedded).exists()  # closed with the app


def test_without_unix_sockets_nothing_is_handed_over(small, runtime, monkeypatch):
    """(Windows: no AF_UNIX in Python's socket, no os.geteuid.)"""
    monkeypatch.setattr(handoff, "SUPPORTED", False)
    with kbase.open(small) as kb, kb.serve_searches() as server:
        assert not server.serving and "no Unix sockets" in (server.reason or "")
        assert kb.notices == []
        assert handoff.ask(small, _args("tomatoes"), 10.0) is None
        kb.hand_off = True
        assert [h.path for h in kb.search("tomatoes")] == ["Garden.md"]


def test_closing_a_server_waits_for_the_warm_up_that_reads_the_index(small, runtime, monkeypatch):
    """The server's own KB is closed once the warm-up (or a search) using it is done: closed at
    once, under load, its reader was still in a statement of the warm-up thread
    (apsw.ThreadingViolationError, seen in the fast loop)."""
    import threading

    started = threading.Event()

    def slow_mode(kb):  # a statement of some 0.3 s in the warm-up thread
        started.set()
        kb.reader.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000)"
            " SELECT count(*) FROM n"
        ).fetchone()
        return "keyword"

    monkeypatch.setattr(kbase.KB, "default_mode", slow_mode)
    with kbase.open(small) as kb:
        server = kb.serve_searches()
        assert server.serving and started.wait(5)
        server.close()  # (raised ThreadingViolationError)
