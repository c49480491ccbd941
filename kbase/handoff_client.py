"""The client side of kbase.handoff: where a running kbase's socket is, and one exchange with it.

A ``kbase search`` handed to a running kbase waits for its answer after importing only this
module and what it imports: os, sys, socket, json and a SHA-256 (the 50 ms a hand-off may take
leave no room for kbase's records, pathlib or typing). kbase.handoff (the server, and the client
that reads hits) builds on it; see its docstring for the protocol.
"""

from __future__ import annotations

import json
import os
import socket
import stat

VERSION = 1
CONNECT_TIMEOUT = 0.5  # seconds to connect
ACK_TIMEOUT = 1.0  # seconds until the server says it serves this index
ANSWER_SLACK = 5.0  # seconds past the search's own time limit before the client gives up
# The search's own limit (kbase.search.SEARCH_TIMEOUT, 10 s: a test keeps them together) and the
# slack: how long a shell's search waits for its answer once the server took it.
ANSWER_TIMEOUT = 10.0 + ANSWER_SLACK

# Unix sockets and user ids: not on Windows (there every search runs in its own process).
SUPPORTED = hasattr(socket, "AF_UNIX") and hasattr(os, "geteuid")


def _sha256(data: bytes) -> str:
    """hashlib.sha256(data).hexdigest() without hashlib's OpenSSL (8 ms to load here)."""
    for name in ("_sha256", "_sha2", "hashlib"):  # (Python 3.11; 3.12 on; any)
        try:
            return __import__(name).sha256(data).hexdigest()
        except (ImportError, AttributeError):
            continue
    raise ImportError("no SHA-256 here")


def runtime_dir() -> str:
    """The directory of the sockets: ``$KBASE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/kbase``,
    else ``kbase-<uid>`` in ``$TMPDIR`` or /tmp."""
    explicit = os.environ.get("KBASE_RUNTIME_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "kbase")
    # $TMPDIR or /tmp, not tempfile.gettempdir(): the same folder for every process of the
    # user, whatever each can write to (and tempfile's imports cost a one-shot search 6 ms)
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"kbase-{os.geteuid()}")


def socket_path(index: str | os.PathLike[str]) -> str:
    """The socket of the index file ``index`` (any path to the same file names the same one)."""
    key = _sha256(os.path.realpath(index).encode("utf-8", "surrogateescape"))
    return os.path.join(runtime_dir(), f"{key[:24]}.sock")


def private(directory: str | os.PathLike[str], *, create: bool = False) -> bool:
    """Whether ``directory`` is a real directory (not a link) of this user that nobody else may
    enter; with ``create``, made (mode 0700) if missing, and its mode narrowed if it is ours."""
    if create:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
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


def peer_is_us(sock: socket.socket) -> bool:
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


def identity(index: str | os.PathLike[str]) -> tuple[str, int, int] | None:
    """(real path, device, inode) of the index file: a file rebuilt under the same name is
    another."""
    try:
        st = os.stat(index)
    except OSError:
        return None
    return os.path.realpath(index), st.st_dev, st.st_ino


def serving(index: str | os.PathLike[str]) -> str | None:
    """The socket of a kbase that may serve ``index`` (it exists, is a socket of this user's in
    a private directory), or None: then nothing else need be imported or tried."""
    if not SUPPORTED or os.environ.get("KBASE_HANDOFF", "1") == "0":
        return None
    path = socket_path(index)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return None
    return path if private(os.path.dirname(path)) else None


def exchange(index: str | os.PathLike[str], args: dict, timeout: float) -> object:
    """The server's answer (JSON) to a request of ``args`` about the index file ``index``, or
    None: no server, a stale socket, one that stopped answering (``CONNECT_TIMEOUT`` and
    ``ACK_TIMEOUT``, then the search's ``timeout`` plus ``ANSWER_SLACK``), a reply not ours."""
    path = serving(index)
    mine = identity(index)
    if path is None or mine is None:
        return None
    request = {"v": VERSION, "index": list(mine), **args}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(path)
            if not peer_is_us(sock):
                return None
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.settimeout(ACK_TIMEOUT)
            reader = sock.makefile("rb")
            ack = json.loads(reader.readline() or b"null")
            if not isinstance(ack, dict) or ack.get("v") != VERSION or not ack.get("serving"):
                return None
            sock.settimeout(timeout)
            return json.loads(reader.readline() or b"null")
    except (OSError, ValueError):  # gone, stale, stopped answering, or a reply not ours
        return None
