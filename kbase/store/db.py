"""The only place that opens SQLite connections to an index.

``connect`` applies kbase's connection settings (WAL, busy timeout, foreign keys, no
double-quoted string literals), loads and checks sqlite-vec, creates a new index from
``schema.sql``, refuses files that are not kbase indexes, and runs pending migrations.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import apsw

from kbase.errors import DatabaseError, IndexBusyError
from kbase.store.migrations import MIGRATIONS, SCHEMA_VERSION

APPLICATION_ID = 0x6B626173  # "kbas": marks a SQLite file as a kbase index
BUSY_TIMEOUT_MS = 10_000  # a reader or writer waits this long for a lock before giving up
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_READONLY_DIRECTORY = 1544  # extended result code: the folder forbids creating -wal/-shm


def schema_sql() -> str:
    """The DDL of a new index: ``schema.sql`` from the installed package, else from the checkout."""
    # (beside this package's files, as a wheel installs it: importlib.resources cost 15 ms)
    packaged = Path(__file__).resolve().parents[1] / "schema.sql"
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Editable installs and source checkouts: the file lives at the repository root.
    return (Path(__file__).resolve().parents[2] / "schema.sql").read_text(encoding="utf-8")


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise DatabaseError(
            f"{path} is a directory, not an index file", "pass a file path with --db"
        )
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise DatabaseError(
            f"cannot read index {path}: {e.strerror}", "check its permissions"
        ) from e
    if head and head != SQLITE_HEADER:
        raise DatabaseError(
            f"{path} is not a SQLite database, so not a kbase index",
            "choose another file with --db or KBASE_DB; kbase never overwrites it",
        )


def _vec_extension_path() -> str:
    """The sqlite-vec loadable extension shipped in the sqlite_vec package, found without importing
    the package (its __init__ imports numpy: 0.1 s that keyword search must not pay)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.origin:
        raise DatabaseError("the sqlite-vec package is not installed", "pip install sqlite-vec")
    return os.path.join(os.path.dirname(spec.origin), "vec0")


def _load_sqlite_vec(con: apsw.Connection) -> None:
    try:
        con.enable_load_extension(True)
        con.load_extension(_vec_extension_path())
        con.enable_load_extension(False)
    except apsw.Error as e:
        raise DatabaseError(
            f"cannot load the sqlite-vec extension: {e}",
            "reinstall kbase: pip install --force-reinstall sqlite-vec",
        ) from e
    # The first statement opens the file: an error here is the database's (connect translates it).
    con.execute("SELECT vec_version()").fetchall()


def connect(
    path: str | os.PathLike[str], *, readonly: bool = False, create: bool = False
) -> apsw.Connection:
    """Open the index at ``path``.

    ``create`` makes a new index when the file does not exist; otherwise a missing file is a
    ``DatabaseError`` telling how to build one. ``readonly`` connections cannot write
    (queries and ``kbase sql`` use them).
    """
    path = Path(path).expanduser()
    if path.exists():
        _check_file(path)
    elif not create:
        raise DatabaseError(
            f"no index at {path}", "build one with: kbase index PATH (or pass --db)"
        )
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DatabaseError(
                f"cannot create folder {path.parent}: {e.strerror}", "pass another --db"
            ) from e

    flags = (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    try:
        return _open(str(path), path, flags, readonly)
    except apsw.Error as e:
        full = readonly and isinstance(e, apsw.IOError) and disk_full(path)
        if not (readonly and (full or _unshareable(path, e))):
            raise translate_error(e, path, opening=True) from e
        error = e
    # A read-only folder or mount, or a full disk: SQLite cannot create (or grow) the -shm file
    # that readers of a WAL index share. With no -wal file (a clean close leaves none) the file
    # alone is the whole index, and no writer can change it (none can create a -wal in a read-only
    # folder, or write one on a full disk): it is read as immutable, which needs no new space.
    if _wal_pending(path):
        if full:
            raise DatabaseError(
                f"the disk of index {path} is full and its {path.name}-wal file holds changes"
                " not yet in the index, which SQLite reads only with room for its -shm file",
                "free some space (a megabyte is plenty) and run again; the index is intact",
            ) from error
        raise DatabaseError(
            f"index {path} is in a read-only folder and its {path.name}-wal file holds changes"
            " not yet in the index",
            "open it once where its folder can be written (any kbase command), then copy it",
        ) from error
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?immutable=1"
    try:
        con = _open(uri, path, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI, True, True)
    except apsw.Error as e:
        raise translate_error(e, path, opening=True) from e
    IMMUTABLE[str(path.absolute())] = (
        "its disk is full" if full else "it is in a read-only folder or file system"
    )
    return con


# Indexes this process opened immutable, and why (a read-only folder or mount, a full disk): KB
# says so once.
IMMUTABLE: dict[str, str] = {}

# Less free space than this on an index's disk is a full disk: SQLite needs 32 KB for the -shm
# file, and a write a page or more for each frame of the -wal.
DISK_FULL_BELOW = 1024 * 1024


def disk_full(path: str | os.PathLike[str]) -> bool:
    """Has the file system holding ``path`` (almost) no space left?"""
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_BELOW


def connect_for_check(path: str | os.PathLike[str]) -> apsw.Connection:
    """A writable connection for kbase check, whose keyword-index check is an INSERT command that
    changes nothing. On a full disk, where the -shm file cannot be made, one in exclusive locking
    mode: SQLite keeps the WAL index in its own memory then, and reads a -wal's changes too (other
    connections wait until the check ends)."""
    try:
        return connect(path)
    except DatabaseError:
        if not disk_full(path):
            raise
    path = Path(path).expanduser()
    flags = apsw.SQLITE_OPEN_READWRITE
    try:
        return _open(str(path), path, flags, False, exclusive=True)
    except apsw.Error as e:
        raise translate_error(e, path) from e


def _open(
    name: str,
    path: Path,
    flags: int,
    readonly: bool,
    immutable: bool = False,
    exclusive: bool = False,
) -> apsw.Connection:
    con = apsw.Connection(name, flags=flags)
    try:
        con.set_busy_timeout(BUSY_TIMEOUT_MS)
        if exclusive:  # before the first read: no -shm file is ever used
            con.execute("PRAGMA locking_mode = EXCLUSIVE")
        con.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
        con.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
        if not readonly:
            # Before anything is written: creating a new index made SQLite wait for the disk
            # three times (FULL), a third of a small vault's fresh index (BENCHMARKS.md, issue 36)
            con.execute("PRAGMA synchronous = NORMAL")
        _load_sqlite_vec(con)
        con.create_scalar_function(
            "kbase_cjk_pairs", _cjk_pairs, 1, deterministic=True, flags=apsw.SQLITE_INNOCUOUS
        )
        _prepare(con, path, readonly, immutable)
    except BaseException:
        con.close()
        raise
    return con


def _cjk_pairs(text: object) -> str | None:
    """kbase_cjk_pairs(text), which chunks_cjk's triggers call to delete a row with the values it
    was written with (kbase.store.cjk_table: imported when a row is deleted, not at connect)."""
    from kbase.store.cjk_table import pairs_function

    return pairs_function(text)


def _unshareable(path: Path, e: apsw.Error) -> bool:
    """Did a read-only open fail because the index's folder (or file system) cannot be written,
    so that SQLite could not create the -shm file?"""
    if not isinstance(e, (apsw.CantOpenError, apsw.ReadOnlyError)):
        return False
    if os.path.exists(f"{path}-shm"):
        return False  # SQLite reads an existing -shm even when it cannot write it
    return _read_only_fs(path) or not os.access(path.absolute().parent, os.W_OK)


def _read_only_fs(path: str | os.PathLike[str]) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _wal_pending(path: Path) -> bool:
    try:
        return os.path.getsize(f"{path}-wal") > 0
    except OSError:
        return False


def scratch_connection(vectors: bool = False) -> apsw.Connection:
    """A private in-memory database, for work that must not touch an index (e.g. running text
    through the keyword index's tokenizer); ``vectors`` loads sqlite-vec into it."""
    con = apsw.Connection(":memory:")
    if vectors:
        _load_sqlite_vec(con)
    return con


def _prepare(con: apsw.Connection, path: Path, readonly: bool, immutable: bool = False) -> None:
    app_id = con.execute("PRAGMA application_id").get
    version = con.execute("PRAGMA user_version").get
    if app_id == 0 and version == 0:
        has_tables = con.execute("SELECT count(*) FROM sqlite_schema").get
        if has_tables:
            raise DatabaseError(
                f"{path} is a SQLite database but not a kbase index",
                "choose another file with --db or KBASE_DB; kbase never overwrites it",
            )
        if readonly:
            raise DatabaseError(
                f"no index at {path}", "build one with: kbase index PATH (or pass --db)"
            )
        _create(con)
        app_id = con.execute("PRAGMA application_id").get
        version = con.execute("PRAGMA user_version").get
    if app_id != APPLICATION_ID:
        raise DatabaseError(
            f"{path} is not a kbase index (application_id {app_id:#x})",
            "choose another file with --db or KBASE_DB; kbase never overwrites it",
        )
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"{path} was written by a newer kbase "
            f"(schema {version}, this one knows {SCHEMA_VERSION})",
            "upgrade kbase: pip install -U kbase",
        )
    if version < SCHEMA_VERSION:
        if immutable:
            raise DatabaseError(
                f"index {path} was made by an older kbase (schema {version}) and is in a"
                " read-only folder, where it cannot be upgraded",
                "open it once where its folder can be written (any kbase command), then copy it",
            )
        if readonly:
            # Migrate through a short-lived writable connection, then carry on read-only.
            connect(path).close()
        else:
            _migrate(con, version)
    con.execute("PRAGMA foreign_keys = ON")
    # Temporary data in memory, not in temporary files. Writers: savepoint journals (one per
    # document written), a tenth off a fresh index's time (BENCHMARKS.md). Readers: kbase sql's
    # sorts and temporary tables stay under its heap limit (kbase.sqlapi), and a full temp folder
    # cannot fail a read. Set before any temporary table exists (setting it drops them).
    con.execute("PRAGMA temp_store = MEMORY")
    if readonly:
        con.execute("PRAGMA query_only = ON")
    # (writers: synchronous = NORMAL, set in _open; safe in WAL mode: a crash loses no
    # committed data integrity)


@contextlib.contextmanager
def _immediate(con: apsw.Connection) -> Iterator[None]:
    """A transaction that takes the write lock first: two kbase processes creating or migrating
    the same index at once run one after the other, and the second sees the first one's work."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if con.in_transaction:  # (SQLite may have rolled back already)
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


# 16 KB pages: a note's text (a few KB) shares a page with others instead of leaving half of a
# 4 KB page empty; on the 10,000-note benchmark vault the file is 15 % smaller.
PAGE_SIZE = 16384


def _create(con: apsw.Connection) -> None:
    # The empty index is written without waiting for the disk: switching a new file to WAL is two
    # transactions of a rollback journal, three fsyncs each (4-10 ms of a small vault's fresh
    # index on a disk, BENCHMARKS.md 28). A crashed process loses nothing of them (the OS has
    # the pages); a power cut in those milliseconds can leave a damaged file that holds no
    # notes (kbase says to delete it). The schema is made durable with the first checkpoint,
    # like everything after it.
    con.execute("PRAGMA synchronous = OFF")
    try:
        _create_empty(con)
    finally:
        con.execute("PRAGMA synchronous = NORMAL")


def _create_empty(con: apsw.Connection) -> None:
    con.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before anything is written
    # Pages freed (a vector block given back, merged keyword segments) can be returned to the
    # file system a few at a time (PRAGMA incremental_vacuum, kbase.indexer.maintenance.settle);
    # like page_size, it must be set before the first table.
    con.execute("PRAGMA auto_vacuum = INCREMENTAL")
    # Switching a new file to WAL needs it alone; SQLite answers BUSY at once, without waiting, if
    # another process is creating the same index at that moment.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            con.execute("PRAGMA journal_mode = WAL")
            break
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    with _immediate(con):
        if con.execute("SELECT count(*) FROM sqlite_schema").get:
            return  # another process created it meanwhile; _prepare checks what it made
        con.execute(schema_sql())
        con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _migrate(con: apsw.Connection, version: int) -> None:
    for step in range(version + 1, SCHEMA_VERSION + 1):
        with _immediate(con):
            if con.execute("PRAGMA user_version").get >= step:
                continue  # another process took this step meanwhile
            migration = MIGRATIONS[step]
            if callable(migration):
                migration(con)
            else:
                con.execute(migration)
            con.execute(f"PRAGMA user_version = {step}")


def translate_error(e: apsw.Error, path: Path, opening: bool = False) -> DatabaseError:
    """Turn an apsw error into a one-line ``DatabaseError`` that names the file and the fix.
    ``opening``: the error came from opening the file, which kbase check cannot do either."""
    if isinstance(e, DatabaseError):
        return e
    # After some errors (a full disk) SQLite rolls the transaction back itself; the rollback that
    # apsw then tries fails as well, and would hide the error that says what happened.
    while isinstance(e.__context__, apsw.Error) and (
        "no transaction is active" in str(e) or "no such savepoint" in str(e)
    ):
        e = e.__context__
    if isinstance(e, apsw.BusyError):
        return DatabaseError(
            f"index {path} is locked by another process", "try again when it finishes"
        )
    if isinstance(e, (apsw.NotADBError, apsw.CorruptError)):
        if opening:  # (kbase check would answer this same line)
            return DatabaseError(
                f"index {path} is damaged: {e}",
                "it cannot be opened: delete it and index again (kbase index PATH...)",
            )
        return DatabaseError(
            f"index {path} is damaged: {e}", "run kbase check, or delete the file and index again"
        )
    unwritable = isinstance(e, apsw.CantOpenError) and os.path.exists(path)
    if isinstance(e, apsw.ReadOnlyError) or unwritable:
        searchable = "; searching it works as it is"
        if _read_only_fs(path):
            return DatabaseError(
                f"index {path} is on a read-only file system: it cannot be changed",
                f"copy it somewhere writable to change it{searchable}",
            )
        folder = os.path.dirname(os.path.abspath(path))
        if getattr(e, "extendedresult", None) == SQLITE_READONLY_DIRECTORY or (
            unwritable and not os.access(folder, os.W_OK)
        ):
            return DatabaseError(
                f"the folder of index {path} is read-only",
                f"SQLite must create {Path(path).name}-wal and -shm files beside it: "
                f"make the folder writable{searchable}",
            )
        if not unwritable or not os.access(path, os.W_OK):
            return DatabaseError(
                f"index {path} is read-only",
                f"check the file's and folder's permissions{searchable}",
            )
    if isinstance(e, apsw.FullError) or (isinstance(e, apsw.IOError) and disk_full(path)):
        # (a full disk shows as an I/O error when SQLite cannot grow the -shm file)
        return DatabaseError(
            f"disk full while writing {path}", "free some space and run again; the index is intact"
        )
    if "sqlite-vec" in str(e) and "Could not insert" in str(
        e
    ):  # vec0 hides SQLITE_FULL behind this
        return DatabaseError(
            f"cannot store vectors in index {path} ({e})",
            "the disk may be full: free some space and run kbase embed again; the index is intact",
        )
    if isinstance(e, apsw.IOError):
        return DatabaseError(
            f"disk I/O error on index {path}",
            "the disk may be full, over quota or failing: free some space and run again;"
            " the index is intact",
        )
    if isinstance(e, apsw.CantOpenError):
        return DatabaseError(f"cannot open index {path}", "check the path and its permissions")
    return DatabaseError(f"index {path}: {e}")


def remove_index(path: str | os.PathLike[str]) -> None:
    """Delete an index file with its WAL and shared-memory files (a new, empty index only)."""
    for name in (str(path), f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def lockable(path: str | os.PathLike[str], create: bool = False) -> bool:
    """Can a writer lock ``path`` before SQLite opens it? ``create`` makes a missing one (an empty
    file, in its folders) for a first run; False where it cannot be opened (``connect`` then says
    why)."""
    try:
        if create and not os.path.exists(path):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        os.close(os.open(path, os.O_RDONLY))
    except OSError:
        return False
    return True


# Descriptors holding writer locks in this process. A forked worker closes its copies, so that
# the lock goes when this process goes, even if it is killed while a worker still runs.
HELD_LOCKS: set[int] = set()


def release_inherited_locks() -> None:
    """In a forked child: drop the copies of the parent's lock descriptors
    (the parent keeps its lock)."""
    for fd in list(HELD_LOCKS):
        try:
            os.close(fd)
        except OSError:
            pass
    HELD_LOCKS.clear()


@contextlib.contextmanager
def writer_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive advisory lock for one writing run (index, watch).

    ``flock`` on the database file itself: it is independent of SQLite's own POSIX locks, so
    readers are never blocked, and no lock file is left behind.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: SQLite's own locking still keeps data safe
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    HELD_LOCKS.add(fd)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBusyError(
                f"another kbase process is already writing to {path}",
                "wait for that index or watch run to finish, then run again",
            ) from None
        yield
    finally:
        HELD_LOCKS.discard(fd)
        os.close(fd)


def located_root(path: str, relpath: str | None, db_path: str | os.PathLike[str]) -> str:
    """Where a root is now: ``path`` as recorded, or, once that is gone, the same place relative to
    the index file (``roots.relpath``) if something is there: the notes and the index were moved
    together. Readers use it without writing; the next ``kbase index`` records the new path."""
    if relpath is None or os.path.exists(path):
        return path
    moved = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(db_path)), relpath))
    return moved if os.path.exists(moved) else path


def meta_get(con: apsw.Connection, key: str, default: str | None = None) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else default


def meta_set(con: apsw.Connection, key: str, value: str) -> None:
    con.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


# Time limits. Two things stop a statement at its deadline: the connection's progress handler,
# which SQLite calls every PROGRESS_STEPS virtual-machine steps, and a watchdog thread that calls
# ``Connection.interrupt()`` at the deadline, for a statement stuck in a few long steps (a sort of
# 40 blobs of 50 MB ran 20 s past a 1,000-step handler). Limits nest (kbase_search inside
# ``kbase sql`` runs a search with its own limit on the same connection): the handler checks the
# nearest open deadline, and the limit that fired is the one that reports it.
PROGRESS_STEPS = 1000
_DEADLINES: dict[int, list[float]] = {}  # id(connection) -> open deadlines


class TimeLimitExceeded(Exception):
    """Raised by ``time_limit`` when its own deadline stopped the statement."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"stopped after {seconds:g} s")
        self.seconds = seconds


class _Limit:
    __slots__ = ("con", "deadline", "fired")

    def __init__(self, con: apsw.Connection, deadline: float) -> None:
        self.con, self.deadline, self.fired = con, deadline, False


class _Watchdog:
    """One daemon thread for the process: interrupts each connection whose deadline passed."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.open: set[_Limit] = set()
        self.thread: threading.Thread | None = None

    def add(self, limit: _Limit) -> None:
        with self.cv:
            self.open.add(limit)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="kbase-deadlines", daemon=True
                )
                self.thread.start()
            self.cv.notify()

    def remove(self, limit: _Limit) -> None:
        with self.cv:
            self.open.discard(limit)
            self.cv.notify()

    def _run(self) -> None:
        with self.cv:
            while True:
                if not self.open:
                    self.cv.wait()
                    continue
                nearest = min(self.open, key=lambda lim: lim.deadline)
                delay = nearest.deadline - time.monotonic()
                if delay > 0:
                    self.cv.wait(delay)
                    continue
                self.open.discard(nearest)
                nearest.fired = True
                nearest.con.interrupt()


_WATCHDOG = _Watchdog()


@contextlib.contextmanager
def time_limit(con: apsw.Connection, seconds: float) -> Iterator[None]:
    """Interrupt any statement on ``con`` still running ``seconds`` from now. A statement stopped
    by this limit raises ``TimeLimitExceeded``; one stopped by an enclosing limit, the
    ``apsw.InterruptError`` that the enclosing ``time_limit`` turns into its own."""
    stack = _DEADLINES.setdefault(id(con), [])
    limit = _Limit(con, time.monotonic() + seconds)
    stack.append(limit.deadline)
    if len(stack) == 1:
        con.set_progress_handler(lambda: time.monotonic() > min(stack), PROGRESS_STEPS)
    _WATCHDOG.add(limit)
    try:
        yield
    except Exception as e:
        # An interrupt may also show as another error: it rolls back the transaction, and the
        # savepoint around a read then fails to close ("transaction control ...").
        mine = isinstance(e, apsw.InterruptError) and limit.deadline == min(stack)
        if limit.fired or (mine and time.monotonic() > limit.deadline):
            raise TimeLimitExceeded(seconds) from e
        raise
    finally:
        _WATCHDOG.remove(limit)
        stack.remove(limit.deadline)
        if not stack:
            del _DEADLINES[id(con)]
            con.set_progress_handler(None)
