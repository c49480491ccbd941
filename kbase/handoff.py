"""Searches handed to a running kbase: a one-shot ``kbase search`` asks a process that already
holds the index's model and vectors (``kbase watch``, ``kbase mcp``, ``kbase browse``) instead of
loading them itself (about 0.3 s of imports and model load, BENCHMARKS.md section 21).

- **Where.** One Unix socket per index, named by a hash of the index file's real path, in a
  directory of the user's own: ``$KBASE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/kbase``, else
  ``kbase-<uid>`` in ``$TMPDIR`` or /tmp. The directory is made mode 0700; a directory or
  socket that is not the user's own, or that others may enter, is never used (``private``).
- **Who.** Both sides check the other end's user (``SO_PEERCRED``, where the system has it) as
  well: only the same user's processes talk.
- **What.** A request is one JSON line: the index (its real path, device and inode, so a file
  rebuilt under the same name is not taken for another) and ``KB.search``'s arguments. The
  server answers a line at once (it is alive and serves that index), then a line with the hits
  (every field of each ``Hit``), or the ``KbaseError`` the search raised, and the notices the
  search gave.
- **Never a hang.** The client connects and waits for the first line for at most
  ``CONNECT_TIMEOUT`` and ``ACK_TIMEOUT`` seconds, then for the search's own time limit (plus
  ``ANSWER_SLACK``). Anything else (no socket, a stale one left by a killed process, a process
  that stopped answering, a reply it cannot read, ``KBASE_HANDOFF=0``) and ``ask`` returns None:
  the caller searches in its own process, as if no server had been running.

``ask`` is the client (``KB.search`` calls it for a one-shot KB, see ``KB.hand_off``), ``Server``
the side that answers (``KB.serve_searches`` starts one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from kbase import errors
from kbase.records import Hit, Hits

VERSION = 1
CONNECT_TIMEOUT = 0.5  # seconds to connect
ACK_TIMEOUT = 1.0  # seconds until the server says it serves this index
ANSWER_SLACK = 5.0  # seconds past the search's own time limit before the client gives up
MAX_REQUEST = 1 << 20  # bytes: a request is a query (bounded to a few KB) and its filters
MAX_CLIENTS = 8  # connections served at once; more are closed (those clients search themselves)
ACCEPT_POLL = 0.5  # seconds between the accepting thread's looks at close()
REQUEST_TIMEOUT = 2.0  # seconds a connected client has to send its request
_ARGS: dict[str, tuple[type, ...]] = {  # KB.search's arguments, and the types each may be
    "query": (str,),
    "mode": (str, type(None)),
    "limit": (int,),
    "path": (str, type(None)),
    "tags": (list,),
    "since": (str, type(None)),
    "until": (str, type(None)),
    "exclude": (list,),
    "correct": (bool,),
}
_HIT_FIELDS = tuple(f.name for f in fields(Hit))

# (arguments) -> (hits, notices the search gave)
Search = Callable[[dict[str, Any]], tuple[Hits, list[str]]]


# Unix sockets and user ids: not on Windows (there every search runs in its own process).
SUPPORTED = hasattr(socket, "AF_UNIX") and hasattr(os, "geteuid")


def runtime_dir() -> Path:
    """The directory of the sockets (see the module docstring)."""
    explicit = os.environ.get("KBASE_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "kbase"
    # $TMPDIR or /tmp, not tempfile.gettempdir(): the same folder for every process of the
    # user, whatever each can write to (and tempfile's imports cost a one-shot search 6 ms)
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"kbase-{os.geteuid()}"


def socket_path(index: str | os.PathLike[str]) -> Path:
    """The socket of the index file ``index`` (any path to the same file names the same one)."""
    key = hashlib.sha256(os.path.realpath(index).encode("utf-8", "surrogateescape")).hexdigest()
    return runtime_dir() / f"{key[:24]}.sock"


def private(directory: Path, *, create: bool = False) -> bool:
    """Whether ``directory`` is a real directory (not a link) of this user that nobody else may
    enter; with ``create``, made (mode 0700) if missing, and its mode narrowed if it is ours."""
    if create:
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if st.st_mode & 0o077:
        if not create:
            return False
        try:
            os.chmod(directory, 0o700)
        except OSError:
            return False
    return True


def _peer_is_us(sock: socket.socket) -> bool:
    """The other end of a connected Unix socket runs as this user (where the system says)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # (macOS: the directory's and the socket's owner are checked instead)
        return True
    import struct

    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    except OSError:
        return False
    return uid == os.geteuid()


def _identity(index: str | os.PathLike[str]) -> tuple[str, int, int] | None:
    try:
        st = os.stat(index)
    except OSError:
        return None
    return os.path.realpath(index), st.st_dev, st.st_ino


# --- the client --------------------------------------------------------------------------------
def ask(
    index: str | os.PathLike[str], args: dict[str, Any], timeout: float
) -> tuple[Hits, list[str]] | None:
    """``KB.search(**args)`` on the index file ``index`` as a running kbase answers it, with the
    notices the search gave there, or None when none can (see the module docstring). The
    ``KbaseError`` the search raised there is raised here (a bad query is a bad query either
    way); ``timeout`` is the search's own time limit."""
    answer = _exchange(index, args, timeout)
    if answer is None:
        return None
    try:
        return _read_answer(answer)
    except (KeyError, TypeError, ValueError):
        return None


def ask_about(
    index: str | os.PathLike[str], args: dict[str, Any], timeout: float
) -> tuple[Hits, list[str], dict[str, Any]] | None:
    """``ask``, and what the server says of the index as it searched it (``Server``'s ``about``:
    its default mode and how much of it is embedded), for a client that has not opened the index
    itself (kbase.cli.quick). None also from a server that does not say it."""
    answer = _exchange(index, {**args, "about": True}, timeout)
    if answer is None:
        return None
    try:
        hits, notices = _read_answer(answer)
        about = answer["about"]
        if not isinstance(about, dict):
            return None
        return hits, notices, about
    except (KeyError, TypeError, ValueError):
        return None


def _exchange(index: str | os.PathLike[str], args: dict[str, Any], timeout: float) -> Any:
    """The server's answer to a request of ``args`` (JSON), or None."""
    if not SUPPORTED or os.environ.get("KBASE_HANDOFF", "1") == "0":
        return None
    identity = _identity(index)
    path = socket_path(index)
    if identity is None or not private(path.parent):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return None
    request = {"v": VERSION, "index": list(identity), **args}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(str(path))
            if not _peer_is_us(sock):
                return None
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.settimeout(ACK_TIMEOUT)
            reader = sock.makefile("rb")
            ack = json.loads(reader.readline() or b"null")
            if not isinstance(ack, dict) or ack.get("v") != VERSION or not ack.get("serving"):
                return None
            sock.settimeout(timeout + ANSWER_SLACK)
            return json.loads(reader.readline() or b"null")
    except (OSError, ValueError):  # gone, stale, stopped answering, or a reply not ours
        return None


def _read_answer(answer: Any) -> tuple[Hits, list[str]]:
    if not isinstance(answer, dict):
        raise ValueError("not an answer")
    if "error" in answer:
        e = answer["error"]
        kind = getattr(errors, e["kind"], None)
        if not (isinstance(kind, type) and issubclass(kind, errors.KbaseError)):
            raise ValueError(e["kind"])
        raise kind(e["message"], e.get("hint"))
    hits = Hits(_hit(h) for h in answer["hits"])
    hits.notice = answer["notice"]
    hits.corrected = answer["corrected"]
    hits.corrections = tuple((typed, searched) for typed, searched in answer["corrections"])
    return hits, [str(n) for n in answer["notices"]]


def _hit(record: dict[str, Any]) -> Hit:
    values = {name: record[name] for name in _HIT_FIELDS}
    values["highlights"] = tuple((a, b) for a, b in values["highlights"])
    values["tags"] = tuple(values["tags"])
    return Hit(**values)


def _answer(hits: Hits, notices: list[str]) -> dict[str, Any]:
    return {
        "hits": [{name: getattr(h, name) for name in _HIT_FIELDS} for h in hits],
        "notice": hits.notice,
        "corrected": hits.corrected,
        "corrections": [list(c) for c in hits.corrections],
        "notices": notices,
    }


def _sweep(directory: Path) -> None:
    """Remove the sockets of processes that ended without removing theirs (killed): a connect
    to one is refused at once; a live server's, or one of a stopped process, accepts."""
    for stale in directory.glob("*.sock"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(CONNECT_TIMEOUT)
            try:
                inode = os.lstat(stale).st_ino
                probe.connect(str(stale))
            except ConnectionRefusedError:
                with contextlib.suppress(OSError):
                    if os.lstat(stale).st_ino == inode:  # (not a new server's meanwhile)
                        os.unlink(stale)
            except OSError:
                pass


# --- the server --------------------------------------------------------------------------------
class Server:
    """Answers the searches other processes hand to this one for the index file ``index``:
    ``search(args)`` runs one (``KB.serve_searches`` gives it). ``start`` returns False (and
    ``reason`` says why) when it cannot serve: another live process serves the index already, or
    the socket's directory is not private. ``close`` stops it and removes its socket."""

    def __init__(
        self,
        index: str | os.PathLike[str],
        search: Search,
        *,
        cleanup: Callable[[], None] | None = None,
        about: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.index = Path(index)
        self.search = search
        self.about = about  # what a client that asks is told of the index (ask_about)
        self.cleanup = cleanup  # called by close (e.g. the KB the searches ran on)
        self.serving = False
        self.path = socket_path(index) if SUPPORTED else Path(os.devnull)
        self.reason: str | None = None
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)
        self._closed = threading.Event()

    def start(self) -> bool:
        if not SUPPORTED:
            self.reason = "this system has no Unix sockets"
            return False
        if not private(self.path.parent, create=True):
            self.reason = f"{self.path.parent} is not a private directory of this user"
            return False
        if self._live():
            self.reason = f"another kbase serves {self.index} already"
            return False
        _sweep(self.path.parent)
        temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            listener.bind(str(temp))
            os.chmod(temp, 0o600)
            listener.listen(16)
            os.replace(temp, self.path)  # (a stale socket of a killed process is replaced)
            self._inode = os.lstat(self.path).st_ino
        except OSError as e:
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(temp)
            self.reason = f"cannot listen at {self.path}: {e.strerror or e}"
            return False
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="kbase-handoff", daemon=True)
        self._thread.start()
        self.serving = True
        return True

    def _live(self) -> bool:
        """A process answers at the socket already (a stale socket refuses at once)."""
        if not self.path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(CONNECT_TIMEOUT)
            try:
                probe.connect(str(self.path))
            except OSError:
                return False
        return True

    def close(self) -> None:
        self._closed.set()
        self.serving = False
        listener, self._listener = self._listener, None
        if listener is not None:
            self._stop(listener)
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            cleanup()

    def _stop(self, listener: socket.socket) -> None:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:  # still ours, not a newer server's
                os.unlink(self.path)
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        listener = self._listener
        if listener is None:
            return
        listener.settimeout(ACCEPT_POLL)  # (close() is seen within this, wherever the system)
        while not self._closed.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            conn.settimeout(None)
            if not self._clients.acquire(blocking=False):
                conn.close()  # busy: that client searches in its own process
                continue
            threading.Thread(
                target=self._serve, args=(conn,), name="kbase-handoff-client", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                if not _peer_is_us(conn):
                    return
                conn.settimeout(REQUEST_TIMEOUT)
                line = conn.makefile("rb").readline(MAX_REQUEST + 1)
                args = self._request(line)
                if args is None:
                    return  # not ours to answer: the client searches itself
                about = args.pop("about") and self.about is not None
                conn.sendall(json.dumps({"v": VERSION, "serving": True}).encode() + b"\n")
                try:
                    hits, notices = self.search(args)
                    answer = _answer(hits, notices)
                    if about:
                        answer["about"] = self.about()  # type: ignore[misc]
                except errors.KbaseError as e:
                    kind = type(e).__name__
                    answer = {"error": {"kind": kind, "message": e.message, "hint": e.hint}}
                except Exception as e:  # a bug: the client searches itself (and meets it there)
                    print(f"kbase: a handed-off search failed: {e!r}", file=sys.stderr)
                    return
                conn.settimeout(None)
                conn.sendall(json.dumps(answer).encode() + b"\n")
        except (OSError, ValueError):
            pass  # the client went away
        finally:
            self._clients.release()

    def _request(self, line: bytes) -> dict[str, Any] | None:
        if len(line) > MAX_REQUEST or not line.endswith(b"\n"):
            return None
        try:
            request = json.loads(line)
        except ValueError:
            return None
        if not isinstance(request, dict) or request.get("v") != VERSION:
            return None
        mine = _identity(self.index)
        if mine is None or request.get("index") != list(mine):
            return None  # another file (or this one rebuilt under the same name)
        args = {k: request[k] for k in _ARGS if k in request}
        if set(args) != set(_ARGS) or any(
            not isinstance(v, _ARGS[k]) or (k == "limit" and isinstance(v, bool))
            for k, v in args.items()
        ):
            return None
        if not all(isinstance(t, str) for t in (*args["tags"], *args["exclude"])):
            return None
        return {**args, "about": request.get("about") is True}
