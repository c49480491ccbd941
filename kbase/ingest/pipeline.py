"""Orchestration: discover -> read -> decode -> parse -> chunk -> store.

Incremental: a file whose size and mtime match the index costs one stat; a changed stat with the
same content hash only updates the stat; a new path whose content matches a vanished document is
a rename (the row moves, chunks and what hangs off them stay); everything else is parsed and
replaced, all or nothing (inside transactions committed every half second, see _Batches).
Documents whose files are gone are removed at the end. Runs of 200 files or more parse and chunk
in one worker process per core while this process reads and writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import apsw

from kbase.errors import InputError
from kbase.ingest import canvas, pdf
from kbase.ingest.chunk import Chunking, ChunkSettings, TokenCounter, chunk, default_counter
from kbase.ingest.decode import Decoded, UndecodableError, decode
from kbase.ingest.derive import Derived, derive
from kbase.ingest.discover import (
    DEFAULT_EXTENSIONS,
    PDF_EXTENSIONS,
    Attachment,
    Candidate,
    Skipped,
    follow_outside_key,
    outside_reason,
    root_bounds,
    size_cap,
    walk,
    within,
)
from kbase.ingest.links import ATTACHMENT_EXTENSIONS
from kbase.ingest.parse import parse
from kbase.models import IndexReport, ParsedDoc
from kbase.store import writes as store
from kbase.store.db import meta_get, meta_set
from kbase.store.maintenance import follow_moved_roots, rechunk_all, rederive, stored_document
from kbase.text import LINE_BREAK, printable

if TYPE_CHECKING:
    from kbase.ingest.workers import Workers

# Longer lines are not notes but data (minified code, base64, logs): such files are skipped.
MAX_LINE_CHARS = 1_000_000

# progress(done, total, current path); total is known once discovery has finished.
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class _Scope:
    root_id: int
    root: Path
    start: Path | None  # a folder inside the root, or None for the whole root
    prefix: str  # start relative to the root, '' for the whole root


def resolve_paths(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Absolute paths of the roots to index; a missing one is an ``InputError`` before any work."""
    out = []
    for p in paths:
        path = Path(p).expanduser()
        if not path.exists():
            raise InputError(
                f"no such file or folder: {p}", "check the path you passed to kbase index"
            )
        path = path.resolve()
        try:
            str(path).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                f"{printable(str(path))} is not a valid UTF-8 path", "rename it to index it"
            ) from None
        out.append(path)
    return out


def _scope(con: apsw.Connection, path: Path) -> _Scope:
    roots = con.execute("SELECT id, path FROM roots").fetchall()
    for root_id, root in roots:
        if path == Path(root):
            return _Scope(root_id, path, None, "")
        if path.is_relative_to(root):
            prefix = path.relative_to(root).as_posix()
            return _Scope(root_id, Path(root), path, prefix)
    root_id = store.ensure_root(con, str(path))
    inner = [(rid, r) for rid, r in roots if Path(r).is_relative_to(path)]
    if inner:
        meta_set_tx(
            con, _links_pending(root_id), store.now_iso()
        )  # the absorbed links resolve anew
        store.absorb_roots(con, root_id, str(path), inner)
    return _Scope(root_id, path, None, "")


def index(
    con: apsw.Connection,
    paths: Sequence[str | os.PathLike[str]],
    *,
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    max_size: int | None = None,
    counter: TokenCounter | None = None,
    settings: ChunkSettings | None = None,
    progress: Progress | None = None,
    follow_outside: bool = False,
) -> IndexReport:
    """Bring the index up to date with ``paths`` (folders or files). With no paths, every known
    root. ``max_size``: skip larger files (default: discover.size_cap's, by kind).

    A symlink whose target is outside every indexed root is skipped with a reason, unless
    ``follow_outside`` (remembered for the roots it is given with: later runs follow them too).

    A KeyboardInterrupt leaves a consistent index (each document is written whole or not at all);
    the report says so, counts what was committed, and the next run completes the work.
    """
    t0 = time.perf_counter()
    report = IndexReport()
    counter = counter or default_counter()
    # The index keeps the settings it was built with until new ones are given.
    # A re-chunk that was interrupted ('chunker_pending') is finished with its settings first.
    pending_chunker = meta_get(con, "chunker_pending")
    settings = settings or ChunkSettings.from_fingerprint(
        pending_chunker or meta_get(con, "chunker")
    )
    report.moved_roots = follow_moved_roots(con, con.filename)
    if not paths:
        paths = [r for (r,) in con.execute("SELECT path FROM roots ORDER BY path")]
        if not paths:
            raise InputError(
                "nothing to index yet", "pass the folders of your notes: kbase index PATH..."
            )
        gone = [p for p in paths if not Path(p).exists()]
        report.skipped.extend(
            (
                str(p),
                "root is gone; its documents are kept (re-point it: kbase roots move OLD NEW,"
                " or forget it: kbase roots remove OLD)",
            )
            for p in gone
        )
        paths = [p for p in paths if p not in gone]
    roots = resolve_paths(paths)
    try:
        fingerprint = settings.fingerprint(counter)
        if meta_get(con, "chunker") != fingerprint or pending_chunker is not None:
            meta_set_tx(con, "chunker_pending", fingerprint)
            report.rechunked = rechunk_all(con, counter, settings, progress)
            with con:
                meta_set(con, "chunker", fingerprint)
                con.execute("DELETE FROM meta WHERE key = 'chunker_pending'")
        # Where a symlink may lead: under any root indexed before or now.
        bounds = tuple(dict.fromkeys(root_bounds(con) + tuple(os.path.realpath(p) for p in roots)))
        for path in roots:
            sc = _scope(con, path)
            if follow_outside:
                meta_set_tx(con, follow_outside_key(sc.root_id), "1")
            _index_scope(
                con,
                sc,
                tuple(extensions),
                max_size,
                counter,
                settings,
                progress,
                report,
                None if meta_get(con, follow_outside_key(sc.root_id)) else bounds,
            )
        meta_set_tx(con, "last_index_at", store.now_iso())
    except KeyboardInterrupt:
        report.interrupted = True
    report.seconds = time.perf_counter() - t0
    return report


def chunk_file(
    path: str | os.PathLike[str],
    settings: ChunkSettings | None = None,
    counter: TokenCounter | None = None,
) -> tuple[ParsedDoc, Chunking, str]:
    """Read, decode, parse and chunk one file the way ``index`` does, without an index.

    Returns the parsed document, its chunking and the encoding.
    """
    p = Path(path)
    if is_pdf(p.name):
        result = prepare_pdf(p.name, str(p), settings or ChunkSettings(), None, counter=counter)
        if isinstance(result, str):
            raise InputError(f"{path}: {result}", "pass a PDF that has a text layer")
        _digest, (encoding, derived) = result
        return derived.doc, derived.chunking, encoding
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(
            f"cannot read {path}: {e.strerror}", "check the path and its permissions"
        ) from e
    try:
        decoded = decode(data)
    except UndecodableError as e:
        raise InputError(
            f"{path} is not text kbase can index: {e}", "pass a Markdown or text file"
        ) from e
    doc = _parse(decoded, p.name)
    return doc, chunk(doc, counter, settings), decoded.encoding


def _retitle_renamed(
    con: apsw.Connection, doc_id: int, old_path: str, counter: TokenCounter, settings: ChunkSettings
) -> None:
    """A renamed note takes the title its new name gives it, as Obsidian shows it: the new file
    name, or (a slug) its opening heading. A move that keeps the file name changes nothing; else
    the stored text is parsed again (no file is read), and what derives from it is rewritten only
    when the title changed."""
    title, path, body = con.execute(
        "SELECT title, path, body FROM documents WHERE id = ?", (doc_id,)
    ).fetchone()
    if PurePosixPath(path).name == PurePosixPath(old_path).name:
        return
    doc = stored_document(con, doc_id, body, path)
    if doc.title != title:
        rederive(con, doc_id, counter, settings, doc)


def meta_set_tx(con: apsw.Connection, key: str, value: str) -> None:
    with con:
        meta_set(con, key, value)


def _index_scope(
    con: apsw.Connection,
    scope: _Scope,
    extensions: tuple[str, ...],
    max_size: int | None,
    counter: TokenCounter,
    settings: ChunkSettings,
    progress: Progress | None,
    report: IndexReport,
    bounds: tuple[str, ...] | None,
) -> None:
    found: list[Candidate] = []
    attachments: list[str] = []
    for item in walk(
        scope.root,
        extensions,
        max_size,
        start=scope.start,
        attachments=ATTACHMENT_EXTENSIONS,
        inside=bounds,
        follow_outside=bounds is None,
    ):
        if isinstance(item, Skipped):
            report.skipped.append((item.abspath, item.reason))
        elif isinstance(item, Attachment):
            attachments.append(item.relpath)
        else:
            found.append(item)
    # Until this run resolves the links, a mark says they may be stale: a run that is killed or
    # interrupted before then leaves it, and the next run resolves every link of the root.
    pending = _links_pending(scope.root_id)
    full_resolve = meta_get(con, pending) is not None
    if not full_resolve:
        meta_set_tx(con, pending, store.now_iso())
    # Links must be re-resolved across the root when its set of files or names changes.
    full_resolve = (
        store.set_attachments(con, scope.root_id, scope.prefix, attachments) or full_resolve
    )
    changed_ids: list[int] = []
    if scope.prefix:
        rows = con.execute(
            "SELECT path, id, size, mtime_ns, hash FROM documents WHERE root_id = ?1"
            " AND (path = ?2 OR substr(path, 1, length(?2) + 1) = ?2 || '/')",
            (scope.root_id, scope.prefix),
        )
    else:
        rows = con.execute(
            "SELECT path, id, size, mtime_ns, hash FROM documents WHERE root_id = ?",
            (scope.root_id,),
        )
    known = {path: (doc_id, size, mtime, h) for path, doc_id, size, mtime, h in rows}

    unreadable = _Unreadable(con, scope)
    todo = []
    for c in found:
        old = known.get(c.relpath)
        if old is not None and old[1] == c.size and old[2] == c.mtime_ns:
            report.unchanged += 1
        elif (reason := unreadable.known(c)) is not None:
            report.skipped.append((c.abspath, reason))  # as last time: not read again
        else:
            todo.append(c)
    seen = {c.relpath for c in found}
    vanished = {path: known[path] for path in known.keys() - seen}
    by_hash: dict[str, list[str]] = {}
    for path, (_doc_id, _, _, h) in vanished.items():
        by_hash.setdefault(h, []).append(path)

    total = len(todo)
    texts = [c for c in todo if not is_pdf(c.abspath)]
    pool = _pool(len(texts), sum(c.size for c in texts), counter)
    pdfs = _PdfJobs(
        settings,
        max_size,
        sum(1 for c in todo if is_pdf(c.abspath)),
        bounds,
        None if counter is default_counter() else counter,  # a custom one goes to the workers
    )
    try:
        with _Batches(con, report) as batches:
            renamed_from = {h for h, paths in by_hash.items() if paths}
            for done, (c, old, item) in enumerate(
                _prepared(
                    todo, known, renamed_from, max_size, settings, pool, bounds, pdfs, progress
                ),
                1,
            ):
                if progress:
                    progress(done - 1, total, c.relpath)
                if isinstance(item, str):  # could not be read: skipped, keeping what was indexed
                    report.skipped.append((c.abspath, item))
                    continue
                st, digest, prepared = item[:3]
                if isinstance(prepared, _PdfResult):  # read by a worker, which hashed it too
                    digest, prepared = prepared.digest or digest, prepared.prepared
                    if prepared == VANISHED:
                        prepared = None
                    elif isinstance(prepared, str):  # unreadable now: what was indexed stays
                        report.skipped.append((c.abspath, prepared))
                        unreadable.failed(c, st, prepared)
                        continue
                if prepared is None:  # vanished between the listing and the read
                    report.skipped.append((c.abspath, "vanished while indexing"))
                    if old is not None:
                        vanished[c.relpath] = old
                    continue
                name = c.relpath or Path(c.abspath).name
                if old is not None and old[3] == digest:
                    store.touch_document(con, old[0], st.st_size, st.st_mtime_ns)
                    batches.count("unchanged")
                    continue
                if old is None and by_hash.get(digest):
                    src = by_hash[digest].pop()
                    moved_id = vanished.pop(src)[0]
                    store.move_document(
                        con, moved_id, scope.root_id, c.relpath, st.st_size, st.st_mtime_ns
                    )
                    _retitle_renamed(con, moved_id, src, counter, settings)
                    batches.count("renamed", name)
                    full_resolve = True
                    continue
                if (
                    prepared is _UNPARSED
                ):  # looked like a rename, but its twin was taken by another file
                    if is_pdf(c.abspath):
                        result = pdfs.now(c)
                        digest, prepared = result.digest or digest, result.prepared
                        if isinstance(prepared, str):
                            report.skipped.append((c.abspath, prepared))
                            unreadable.failed(c, st, prepared)
                            continue
                    else:
                        prepared = prepare(
                            c.relpath or Path(c.abspath).name, item[3], settings, counter
                        )
                if isinstance(prepared, str):  # not indexable text (binary, a giant line, ...)
                    report.skipped.append((c.abspath, prepared))
                    unreadable.failed(c, st, prepared)
                    # A canvas that is no JSON now (half written by a sync?) keeps what was read.
                    if old is not None and not is_canvas(c.abspath):
                        vanished[c.relpath] = (
                            old  # it was text once; now it is not: drop the stale copy
                        )
                    continue
                encoding, derived = prepared
                doc = derived.doc
                for w in doc.warnings:
                    report.warnings.append((c.abspath, w))
                if old is not None and not full_resolve:
                    before = {
                        a
                        for (a,) in con.execute(
                            "SELECT alias FROM aliases WHERE doc_id = ?", (old[0],)
                        )
                    }
                    full_resolve = before != set(
                        doc.aliases
                    )  # other notes' links may now resolve elsewhere
                with batches.document():
                    doc_id = store.write_document(
                        con,
                        derived,
                        store.FileRow(
                            scope.root_id, c.relpath, st.st_size, st.st_mtime_ns, digest, encoding
                        ),
                        doc_id=old[0] if old else None,
                        savepoint=False,
                    )
                changed_ids.append(doc_id)
                batches.count("updated" if old else "new", name)
                full_resolve = full_resolve or old is None
    finally:
        interrupted = isinstance(sys.exc_info()[1], KeyboardInterrupt)
        pdfs.close(interrupted)
        if pool is not None:
            # Wait for the tasks in flight (a few files), except on Ctrl-C: a pool left behind
            # races its own exit hook, which then prints a traceback after kbase's error line.
            pool.shutdown(wait=not interrupted, cancel_futures=True)
    if progress:
        progress(total, total, "")
    unreadable.save(seen)
    for path, (doc_id, *_rest) in vanished.items():
        store.delete_document(con, doc_id)
        report.removed += 1
        report.changed.append(("removed", path or scope.root.name))
        full_resolve = True
    store.resolve_links(con, scope.root_id, None if full_resolve else changed_ids)
    with con:
        con.execute("DELETE FROM meta WHERE key = ?", (pending,))
        store.finish_root(con, scope.root_id)


class _Unreadable:
    """Files that could not be indexed for what they hold (a damaged or locked PDF, one that hung
    the reader, binary data, a canvas that is no JSON), by their stat: until the file changes, or
    the reader does, the next run skips it at once with the same line instead of reading it again
    (a hostile PDF would cost its time limit on every run, and on every pass of kbase watch)."""

    def __init__(self, con: apsw.Connection, scope: _Scope) -> None:
        self.con, self.scope = con, scope
        where = "root_id = ?"
        args: list[object] = [scope.root_id]
        if scope.prefix:
            where += " AND (path = ? OR substr(path, 1, length(?) + 1) = ? || '/')"
            args += [scope.prefix] * 3
        self.rows = {
            path: (size, mtime, reader, reason)
            for path, size, mtime, reader, reason in con.execute(
                f"SELECT path, size, mtime_ns, reader, reason FROM unreadable WHERE {where}", args
            )
        }
        self.new: dict[str, tuple[int, int, str, str]] = {}

    def known(self, c: Candidate) -> str | None:
        row = self.rows.get(c.relpath)
        if row is None or (row[0], row[1], row[2]) != (c.size, c.mtime_ns, reader(c.abspath)):
            return None
        self.new[c.relpath] = row
        return row[3]

    def failed(self, c: Candidate, st: os.stat_result, reason: str) -> None:
        if reason.startswith(TRANSIENT):
            return  # the file system's doing, not the file's: try again next time
        self.new[c.relpath] = (st.st_size, st.st_mtime_ns, reader(c.abspath), reason)

    def save(self, seen: set[str]) -> None:
        """Forget the files now indexed, changed or gone; remember this run's failures."""
        if not self.rows and not self.new:
            return
        with self.con:
            self.con.executemany(
                "DELETE FROM unreadable WHERE root_id = ? AND path = ?",
                [(self.scope.root_id, p) for p in self.rows if p not in self.new],
            )
            self.con.executemany(
                "INSERT OR REPLACE INTO unreadable (root_id, path, size, mtime_ns, reader, reason)"
                " VALUES (?,?,?,?,?,?)",
                [(self.scope.root_id, p, *row) for p, row in self.new.items() if p in seen],
            )


# Reasons that say nothing about the file's content: it is read again next time.
TRANSIENT = ("cannot read", "vanished", "grew past", "not a regular file", "symlink")


def reader(path: str) -> str:
    """What read a file, in a version: a file unreadable to one is tried again by the next."""
    return _reader("pypdfium2" if is_pdf(path) else "kbase")


@functools.cache
def _reader(package: str) -> str:
    from importlib import metadata

    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return package


# Documents are written in transactions that commit every COMMIT_EVERY_SECONDS: a commit per file
# cost a third of a fresh index's time, and a savepoint per document another tenth (SQLite copies
# every page a savepoint touches first). A crash loses at most the last fraction of a second;
# Ctrl-C between two documents commits the ones complete, Ctrl-C while one is being written rolls
# back the batch it is in. Either way every document is all or nothing.
COMMIT_EVERY_SECONDS = 0.5
# Parsing and chunking run in worker processes (one per core) when this many files, or this much
# text, need them. Starting the workers costs about 50 ms: on rust-book (114 files, 1.2 MB) they
# take a fresh index from 0.73 to 0.48 s, on foam-docs (87 files, 0.3 MB) from 0.33 to 0.24 s;
# below about 250 KB they cost more than they save.
POOL_MIN_FILES = 200
POOL_MIN_BYTES = 256 * 1024
# Files read ahead and handed to the workers at a time (bounds memory), in tasks of CHUNKSIZE
# files: fewer, larger messages between the processes (10k notes in-process, four runs each:
# 9.9 s against 11.2 s for 64 files in tasks of 4; through the CLI the gap was within the noise).
WINDOW = 128
CHUNKSIZE = 16


class _Batches:
    """The transactions of an index run; the report counts what they committed."""

    def __init__(self, con: apsw.Connection, report: IndexReport) -> None:
        self.con, self.report = con, report
        self.since = time.monotonic()
        self.counts: dict[str, int] = {}  # report fields -> done in the open transaction
        self.changed: list[tuple[str, str]] = []  # report.changed entries of the open transaction
        self.writing = False  # a document is half written

    def __enter__(self) -> _Batches:
        self.con.execute("BEGIN")
        return self

    @contextlib.contextmanager
    def document(self) -> Iterator[None]:
        self.writing = True
        yield  # an exception leaves `writing` set: the transaction must not commit
        self.writing = False

    def count(self, field: str, path: str = "") -> None:
        """One more file done (report field 'new', 'updated', ...; ``path`` for report.changed);
        commits now and then."""
        self.counts[field] = self.counts.get(field, 0) + 1
        if path:
            self.changed.append((field, path))
        if time.monotonic() - self.since >= COMMIT_EVERY_SECONDS:
            self._commit()
            self.con.execute("BEGIN")
            self.since = time.monotonic()

    def _commit(self) -> None:
        self.con.execute("COMMIT")
        for field, n in self.counts.items():
            setattr(self.report, field, getattr(self.report, field) + n)
        self.counts.clear()
        self.report.changed += self.changed
        self.changed = []

    def __exit__(self, kind, exc, tb) -> None:
        if not self.con.in_transaction:
            return  # SQLite rolled back by itself (a full disk)
        if kind is None or (issubclass(kind, KeyboardInterrupt) and not self.writing):
            self._commit()  # only whole documents are in it
        else:
            self.con.execute("ROLLBACK")


def _pool(files: int, size: int, counter: TokenCounter):
    """Worker processes for parsing and chunking, or None to do it here (little to parse, one
    core, a custom token counter, or no fork on this platform)."""
    import multiprocessing

    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    if (
        (files < POOL_MIN_FILES and size < POOL_MIN_BYTES)
        or cores < 2
        or counter is not default_counter()
    ):
        return None
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    from concurrent.futures import ProcessPoolExecutor

    # Load the parsers and the tokenizer once, here, for every worker (each loaded its own: 40 ms).
    chunk(parse("---\na: 1\n---\n# Warm up\n", "warm-up.md"), counter)
    return ProcessPoolExecutor(
        cores, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init
    )


def _worker_init() -> None:
    import signal
    import threading

    from kbase.store.db import release_inherited_locks

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    release_inherited_locks()
    # A worker waits for work on a pipe whose other end it inherited itself, so it would outlive
    # a parent that was killed (kill -9, the OOM killer): it leaves once it has a new parent.
    parent = os.getppid()
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_SECONDS)
    os._exit(1)


ORPHAN_CHECK_SECONDS = 0.5


def _read(c: Candidate, max_size: int | None, bounds: tuple[str, ...] | None = None):
    """(stat, sha256, bytes), or None if the file vanished, or a reason it cannot be read. With
    ``bounds``, a file that turns out to be outside them once opened (a symlink swapped in since
    the listing) is not read. A PDF is only hashed here (in blocks; its bytes are the worker's to
    read): bytes is None."""
    cap = size_cap(c.abspath, max_size)
    pdf = is_pdf(c.abspath)
    try:
        # Non-blocking: a file swapped for a FIFO since the listing must not hang the run.
        with open(c.abspath, "rb", opener=_nonblocking) as f:
            # The stat of what is about to be read: a change during or after the read then
            # differs from the stored stat, and the next run reads the file again.
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return "not a regular file"
            if bounds is not None:
                real = opened_path(f.fileno(), c.abspath)
                if not within(real, bounds):
                    return outside_reason(real)
            if pdf:
                digest, size = _hash_file(f, cap + 1)
            else:
                data = f.read(cap + 1)
                size = len(data)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot read: {e.strerror}"
    if size > cap:
        return f"grew past the size cap ({cap:,} bytes) while indexing"
    if pdf:
        return st, digest, None
    return st, store.sha256(data), data


def opened_path(fd: int, path: str) -> str:
    """Where the open file ``fd`` really is: what the kernel says (Linux: /proc/self/fd), so that
    no symlink swapped in after the open can mislead; else the resolved ``path``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _hash_file(f, limit: int) -> tuple[str, int]:
    """sha256 (hex) of up to ``limit`` bytes of an open file, and how many there were."""
    import hashlib

    h = hashlib.sha256()
    size = 0
    while size < limit:
        block = f.read(min(HASH_BLOCK, limit - size))
        if not block:
            break
        h.update(block)
        size += len(block)
    return h.hexdigest(), size


HASH_BLOCK = 1024 * 1024


def prepare(name: str, data: bytes, settings: ChunkSettings, counter: TokenCounter | None = None):
    """bytes -> (encoding, Derived), or the reason to skip the file. Pure, so that it can run in a
    worker process."""
    try:
        decoded = decode(data)
    except UndecodableError as e:
        return str(e)
    longest = _longest_line(decoded.text)
    if longest > MAX_LINE_CHARS:
        # The chunker cuts such a line word by word, at some 40 bytes of memory per character.
        return (
            f"a line of {longest:,} characters: not a note (minified or generated data?);"
            f" kbase indexes lines up to {MAX_LINE_CHARS:,}"
        )
    try:
        if is_canvas(name):
            try:
                parsed = canvas.parse_canvas(decoded.text)
            except canvas.CanvasError as e:
                return str(e)
            doc = canvas.document(parsed, name, decoded.warnings)
        else:
            doc = _parse(decoded, name)
        return decoded.encoding, derive(doc, settings, counter)
    except (RecursionError, MemoryError) as e:
        return f"too deeply nested or too large to parse ({type(e).__name__})"


def is_pdf(name: str) -> bool:
    return name.lower().endswith(PDF_EXTENSIONS)


def is_canvas(name: str) -> bool:
    return name.lower().endswith(canvas.CANVAS_EXTENSIONS)


def prepare_pdf(
    name: str,
    abspath: str,
    settings: ChunkSettings,
    max_size: int | None,
    counter: TokenCounter | None = None,
    progress: pdf.PageProgress | None = None,
    bounds: tuple[str, ...] | None = None,
):
    """Read, extract, and chunk one PDF: (sha256 of the bytes read, prepare()'s tuple), or the
    reason to skip it. Runs in a worker process (kbase.ingest.workers), under a time limit. With
    ``bounds``, a file found outside them once opened (a symlink swapped in) is not read."""
    cap = size_cap(abspath, max_size)
    try:
        with open(abspath, "rb", opener=_nonblocking) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return "not a regular file"
            if bounds is not None:
                real = opened_path(f.fileno(), abspath)
                if not within(real, bounds):
                    return outside_reason(real)
            data = f.read(cap + 1)
    except FileNotFoundError:
        return VANISHED
    except OSError as e:
        return f"cannot read: {e.strerror}"
    if len(data) > cap:
        return f"grew past the size cap ({cap:,} bytes) while indexing"
    digest = store.sha256(data)
    try:
        text = pdf.extract(data, progress)
    except pdf.PdfError as e:
        return str(e)
    del data
    doc = pdf.document(
        text.text,
        text.pages,
        name,
        pdf.info_record(text),
        pdf.read_warnings(text),
        pdf.outline_headings(text.text, text.pages, text.outline),
    )
    return digest, ("pdf", derive(doc, settings, counter))


VANISHED = "vanished while indexing"


@dataclass(frozen=True)
class _PdfResult:
    digest: str | None  # of the bytes the worker read (None: it could not read them)
    prepared: object  # prepare()'s tuple, or the reason the PDF was skipped


# A PDF's time limit, once a worker has started it: this much, plus a little per page (a
# 2,000-page PDF reads in about 5 s here; a hostile page can take PDFium minutes).
PDF_SECONDS = 60.0
PDF_SECONDS_PER_PAGE = 0.1


def _pdf_timeout(args: tuple, progress: tuple[int, int] | None) -> float:
    pages = progress[1] if progress else 0
    return PDF_SECONDS + PDF_SECONDS_PER_PAGE * pages


def _pdf_job(name, abspath, settings, max_size, bounds, counter=None, progress=None):
    result = prepare_pdf(
        name, abspath, settings, max_size, counter=counter, progress=progress, bounds=bounds
    )
    if isinstance(result, tuple):
        digest, prepared = result
        return digest, _without_blocks(prepared)
    return result


class _PdfJobs:
    """The PDFs of an index run, read in worker processes (kbase.ingest.workers): each under a time
    limit, each in a process of its own, so that one that hangs or crashes PDFium is skipped and
    the run goes on. The workers start with the first PDF."""

    def __init__(
        self,
        settings: ChunkSettings,
        max_size: int | None,
        count: int,
        bounds: tuple[str, ...] | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.settings, self.max_size, self.count, self.bounds = settings, max_size, count, bounds
        self.counter = counter
        self._workers: Workers | None = None

    def _pool(self) -> Workers:
        if self._workers is None:
            import pypdfium2  # noqa: F401  (here, before the fork: see below)

            from kbase.ingest.workers import Workers  # multiprocessing: 12 ms, for PDFs only

            # The workers are forked, maybe from a thread (kbase watch in the TUI or the MCP
            # server): what they import after the fork could wait for a lock another thread
            # held at that moment. PDFium and the chunker (tokenizer) are loaded here first.
            chunk(parse("# Warm up\n\nwords\n", "warm-up.md"))

            cores = (
                len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else (os.cpu_count() or 1)
            )
            self._workers = Workers(min(cores, max(1, self.count)), _pdf_timeout)
        return self._workers

    def submit(self, c: Candidate) -> int:
        name = c.relpath or Path(c.abspath).name
        return self._pool().submit(
            _pdf_job, name, c.abspath, self.settings, self.max_size, self.bounds, self.counter
        )

    def result(self, job: int, on_progress=None) -> _PdfResult:
        out = self._pool().result(job, on_progress)
        if isinstance(out, str):
            return _PdfResult(None, out)
        return _PdfResult(*out)

    def now(self, c: Candidate) -> _PdfResult:
        return self.result(self.submit(c))

    def close(self, interrupted: bool = False) -> None:
        if self._workers is not None:
            self._workers.close(wait_for=not interrupted)
            self._workers = None


def _parse(decoded: Decoded, name: str) -> ParsedDoc:
    """Parse decoded text; what decoding repaired comes first among the document's warnings."""
    doc = parse(decoded.text, name)
    return (
        dataclasses.replace(doc, warnings=decoded.warnings + doc.warnings)
        if decoded.warnings
        else doc
    )


def _prepare_item(args):
    name, data, settings = args
    result = prepare(name, data, settings)
    return _without_blocks(result) if isinstance(result, tuple) else result


def _without_blocks(prepared: tuple[str, Derived]) -> tuple[str, Derived]:
    """prepare()'s result as a worker sends it: the writer has no use for the block structure
    (chunks and links are made from it in the worker); without it the result unpickles in half
    the time, and the writer waits on that."""
    encoding, derived = prepared
    return encoding, dataclasses.replace(derived, doc=dataclasses.replace(derived.doc, blocks=()))


_UNPARSED = object()  # content that matched an unchanged or vanished document: not parsed


def _prepared(
    todo, known, renamed_from, max_size, settings, pool, bounds=None, pdfs=None, progress=None
):
    """(candidate, old row, item) in order, where item is a reason to skip, or (stat, digest,
    prepared, data) with prepared None (vanished), a reason, _UNPARSED, prepare()'s result, or,
    for a PDF, a _PdfResult. Files whose content hash shows no change, or a rename, are not
    parsed. With a pool, the next window is read and handed to the workers before this one is
    written, so that parsing and writing overlap; PDFs always go to their workers (``pdfs``)."""

    def submit(start: int):
        window = []
        for c in todo[start : start + WINDOW]:
            old = known.get(c.relpath)
            read = _read(c, max_size, bounds)
            parse_it = isinstance(read, tuple) and (
                read[1] != old[3] if old is not None else read[1] not in renamed_from
            )
            job = pdfs.submit(c) if parse_it and is_pdf(c.abspath) else None
            window.append((c, old, read, parse_it, job))
        jobs = [
            (c.relpath or Path(c.abspath).name, r[2], settings)
            for c, old, r, p, job in window
            if p and job is None
        ]
        if pool is not None and jobs:
            results = pool.map(
                _prepare_item, jobs, chunksize=CHUNKSIZE
            )  # submitted now, collected later
        else:
            results = (prepare(*job) for job in jobs)
        return window, iter(results)

    done = 0
    pending = submit(0) if todo else None
    for start in range(0, len(todo), WINDOW):
        assert pending is not None  # submitted for every window the loop reaches
        window, results = pending
        pending = (
            submit(start + WINDOW) if pool is not None and start + WINDOW < len(todo) else None
        )
        for c, old, read, parse_it, job in window:
            if read is None:
                yield c, old, (None, None, None, None)
            elif isinstance(read, str):
                yield c, old, read
            elif job is not None:
                on_pages = None
                if progress is not None:

                    def on_pages(pages_done, pages, c=c, done=done):
                        where = (
                            f"page {pages_done:,} of {pages:,}"
                            if pages_done < pages
                            else f"{pages:,} pages read, chunking"
                        )
                        progress(done, len(todo), f"{c.relpath} ({where})")

                yield c, old, (read[0], read[1], pdfs.result(job, on_pages), read[2])
            else:
                if parse_it and progress is not None:
                    # The file about to be parsed is the one being worked on: said before its
                    # parse, which is what takes long on a hostile file.
                    progress(done, len(todo), c.relpath or Path(c.abspath).name)
                yield c, old, (read[0], read[1], next(results) if parse_it else _UNPARSED, read[2])
            done += 1
        if pending is None and start + WINDOW < len(todo):
            pending = submit(start + WINDOW)


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _longest_line(text: str) -> int:
    """Length of the longest line of ``text`` (cheap for texts shorter than the limit)."""
    if len(text) <= MAX_LINE_CHARS:
        return len(text)
    longest = pos = 0
    for m in LINE_BREAK.finditer(text):
        longest = max(longest, m.start() - pos)
        pos = m.end()
    return max(longest, len(text) - pos)


def _links_pending(root_id: int) -> str:
    """The meta key marking a root whose links must all be resolved again."""
    return f"links_pending:{root_id}"
