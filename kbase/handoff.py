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

- **What is printed.** A shell's ``kbase search`` (kbase.cli.quick) asks the server to print:
  the request says how (``print``: the format, colour, ``--explain``), and a server whose command
  line gave it a printer (kbase.api.print_handed_searches: kbase watch, mcp, browse) answers the
  lines the search command prints and its exit status, from the command's own code; the shell
  writes them out having imported only kbase.handoff_client (os, socket, json). A server without
  a printer answers the hits.

``ask`` is the client (``KB.search`` calls it for a one-shot KB, see ``KB.hand_off``; the socket
and the exchange are kbase.handoff_client's), ``Server`` the side that answers
(``KB.serve_searches`` starts one). A request must arrive whole within ``REQUEST_TIMEOUT`` (a
deadline, however slowly its bytes come).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from kbase import errors, handoff_client
from kbase.handoff_client import (
    ACK_TIMEOUT,
    ANSWER_SLACK,
    CONNECT_TIMEOUT,
    SUPPORTED,
    VERSION,
    identity,
    peer_is_us,
    private,
)
from kbase.records import Hit, Hits

__all__ = ["ACK_TIMEOUT", "ANSWER_SLACK", "CONNECT_TIMEOUT", "SUPPORTED", "VERSION", "private"]

MAX_REQUEST = 1 << 20  # bytes: a request is a query (bounded to a few KB) and its filters
MAX_CLIENTS = 8  # connections served at once; more are closed (those clients search themselves)
ACCEPT_POLL = 0.5  # seconds between the accepting thread's looks at close()
REQUEST_TIMEOUT = 2.0  # seconds a connected client has, in all, to send its request
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
_PRINT: dict[str, tuple[type, ...]] = {"fmt": (str,), "color": (bool,), "explain": (bool,)}
_HIT_FIELDS = tuple(f.name for f in fields(Hit))

# (arguments) -> (hits, notices the search gave)
Search = Callable[[dict[str, Any]], tuple[Hits, list[str]]]
# (arguments, how to print them) -> (what the shell prints: (on stderr?, line) each; exit status)
Printer = Callable[[dict[str, Any], dict[str, Any]], tuple[list[tuple[bool, str]], int]]


def socket_path(index: str | os.PathLike[str]) -> Path:
    """The socket of the index file ``index`` (any path to the same file names the same one)."""
    return Path(handoff_client.socket_path(index))


# --- the client --------------------------------------------------------------------------------
def ask(
    index: str | os.PathLike[str], args: dict[str, Any], timeout: float
) -> tuple[Hits, list[str]] | None:
    """``KB.search(**args)`` on the index file ``index`` as a running kbase answers it, with the
    notices the search gave there, or None when none can (see the module docstring). The
    ``KbaseError`` the search raised there is raised here (a bad query is a bad query either
    way); ``timeout`` is the search's own time limit."""
    answer = handoff_client.exchange(index, args, timeout + ANSWER_SLACK)
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
    answer = handoff_client.exchange(index, {**args, "about": True}, timeout + ANSWER_SLACK)
    if answer is None:
        return None
    return read_about(answer)


def read_about(answer: Any) -> tuple[Hits, list[str], dict[str, Any]] | None:
    """``ask_about``'s result from the server's answer, or None."""
    try:
        hits, notices = _read_answer(answer)
        about = answer["about"]
        if not isinstance(about, dict):
            return None
        return hits, notices, about
    except (KeyError, TypeError, ValueError):
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
        printer: Printer | None = None,
    ) -> None:
        self.index = Path(index)
        self.search = search
        self.about = about  # what a client that asks is told of the index (ask_about)
        self.printer = printer  # what the shell prints, for a client that asks (kbase.cli.quick)
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
                if not peer_is_us(conn):
                    return
                args = self._request(_read_line(conn, REQUEST_TIMEOUT, MAX_REQUEST))
                if args is None:
                    return  # not ours to answer: the client searches itself
                about = args.pop("about") and self.about is not None
                printing = args.pop("print")
                conn.sendall(json.dumps({"v": VERSION, "serving": True}).encode() + b"\n")
                try:
                    if printing is not None and self.printer is not None:
                        printed, status = self.printer(args, printing)
                        answer = {"printed": [[e, t] for e, t in printed], "status": status}
                    else:
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

    def _request(self, line: bytes | None) -> dict[str, Any] | None:
        if line is None:
            return None
        try:
            request = json.loads(line)
        except ValueError:
            return None
        if not isinstance(request, dict) or request.get("v") != VERSION:
            return None
        mine = identity(self.index)
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
        printing = request.get("print")
        if printing is not None and not (
            isinstance(printing, dict)
            and set(printing) == set(_PRINT)
            and all(isinstance(printing[k], _PRINT[k]) for k in _PRINT)
        ):
            return None
        return {**args, "about": request.get("about") is True, "print": printing}


def _read_line(conn: socket.socket, seconds: float, limit: int) -> bytes | None:
    """One line (with its newline) of at most ``limit`` bytes, all of it within ``seconds``
    (however slowly the client sends it: a deadline for the request, not for each read), or
    None."""
    deadline = time.monotonic() + seconds
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        conn.settimeout(left)
        try:
            part = conn.recv(65536)
        except TimeoutError:
            return None
        if not part:
            return None  # closed before the line ended
        end = part.find(b"\n")
        if end >= 0:
            data += part[: end + 1]
            return bytes(data) if len(data) <= limit + 1 else None
        data += part
        if len(data) > limit:
            return None
