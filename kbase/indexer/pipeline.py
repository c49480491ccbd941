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
import functools
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, NamedTuple, cast

import apsw

from kbase.config import load_vault
from kbase.errors import InputError
from kbase.indexer import writes
from kbase.indexer.maintenance import follow_moved_roots, rechunk_all, rederive, stored_document
from kbase.indexer.prepare import (
    CHUNKSIZE,
    SMALL_TASKS,
    VANISHED,
    WINDOW,
    LazyPool,
    PdfJobs,
    hash_file,
    is_canvas,
    is_pdf,
    note_pool,
    open_nonblocking,
    opened_path,
    parse_decoded,
    prepare,
    prepare_item,
    prepare_pdf,
    wants_pool,
)
from kbase.ingest.chunk import Chunking, ChunkSettings, TokenCounter, chunk, default_counter
from kbase.ingest.decode import UndecodableError, decode
from kbase.ingest.discover import (
    DEFAULT_EXTENSIONS,
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
from kbase.records import IndexReport, ParsedDoc
from kbase.store.db import meta_get, meta_set
from kbase.text import printable

if TYPE_CHECKING:
    from kbase.ingest.derive import Derived


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
    root_id = writes.ensure_root(con, str(path))
    inner = [(rid, r) for rid, r in roots if Path(r).is_relative_to(path)]
    if inner:
        meta_set_tx(
            con, _links_pending(root_id), writes.now_iso()
        )  # the absorbed links resolve anew
        writes.absorb_roots(con, root_id, str(path), inner)
    return _Scope(root_id, path, None, "")


def index(
    con: apsw.Connection,
    paths: Sequence[str | os.PathLike[str]],
    *,
    extensions: Sequence[str] | None = None,
    max_size: int | None = None,
    counter: TokenCounter | None = None,
    settings: ChunkSettings | None = None,
    progress: Progress | None = None,
    follow_outside: bool = False,
    exclude: Sequence[str] = (),
    default_extensions: Sequence[str] = DEFAULT_EXTENSIONS,
) -> IndexReport:
    """Bring the index up to date with ``paths`` (folders or files). With no paths, every known
    root. ``max_size``: skip larger files (default: discover.size_cap's, by kind).

    A root's ``.kbase.toml`` (kbase.config) is read for it: its ``extensions`` unless
    ``extensions`` is given (else ``default_extensions``), its ``exclude`` patterns beside
    ``exclude`` (gitignore syntax, as a ``.kbaseignore``). A bad one stops the run before it
    starts: a ConfigError naming the file and the key.

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
    for path in roots:
        load_vault(path)  # a bad .kbase.toml: one line before anything is written
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
        handled: set[str] = set()  # each file once, when a folder is given twice or in another
        for path in roots:
            sc = _scope(con, path)
            if follow_outside:
                meta_set_tx(con, follow_outside_key(sc.root_id), "1")
            vault = load_vault(sc.root)
            _index_scope(
                con,
                sc,
                tuple(
                    extensions if extensions is not None else vault.extensions or default_extensions
                ),
                (*exclude, *vault.exclude),
                max_size,
                counter,
                settings,
                progress,
                report,
                None if meta_get(con, follow_outside_key(sc.root_id)) else bounds,
                handled,
            )
        meta_set_tx(con, "last_index_at", writes.now_iso())
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
    doc = parse_decoded(decoded, p.name)
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


class Known(NamedTuple):
    """The document the index holds for a path, as much as tells an unchanged file from a stat
    (size and mtime) or, once read, from its bytes (digest)."""

    id: int
    size: int
    mtime_ns: int
    digest: str


# What prepare() makes of a file's bytes: (the encoding it was decoded from, what derive made).
Parsed = tuple[str, "Derived"]


@dataclass(frozen=True)
class FileRead:
    """One file of an index run as read, and parsed, ahead of its write. ``status``:
    'unreadable' (it could not be read now: skipped, what was indexed stays; ``reason`` says why),
    'vanished' (gone between the listing and the read), 'failed' (read, but not indexable: binary,
    a giant line, a damaged PDF; ``reason``), 'parsed' (``parsed`` holds prepare()'s result) or
    'unparsed' (its content matched an unchanged or vanished document, so it was not parsed;
    ``data`` is kept should it need parsing after all)."""

    candidate: Candidate
    old: Known | None  # what the index holds for its path
    status: Literal["unreadable", "vanished", "failed", "parsed", "unparsed"]
    reason: str = ""
    stat: os.stat_result | None = None  # of what was read
    digest: str = ""  # sha256 of what was read (a PDF's worker hashes it again)
    data: bytes | None = None  # the bytes read (None for a PDF: its worker reads them)
    parsed: Parsed | None = None


def _outcome(
    c: Candidate, old: Known | None, st: os.stat_result, digest: str, data, prepared: object
) -> FileRead:
    """prepare()'s answer for a file (a reason to skip it, or what it parsed to) as a FileRead."""
    if isinstance(prepared, str):
        return FileRead(c, old, "failed", prepared, st, digest, data)
    return FileRead(c, old, "parsed", "", st, digest, data, cast(Parsed, prepared))


def _failed(
    report: IndexReport,
    unreadable: _Unreadable,
    vanished: dict[str, Known],
    f: FileRead,
    reason: str,
) -> None:
    """A file read but not indexable: its skip line, remembered until it changes. What was
    indexed of it goes, unless it is a PDF or a canvas (damaged, locked, half written by a sync?):
    those keep what was read before."""
    c = f.candidate
    assert f.stat is not None
    report.skipped.append((c.abspath, reason))
    unreadable.failed(c, f.stat, reason)
    if f.old is not None and not is_pdf(c.abspath) and not is_canvas(c.abspath):
        vanished[c.relpath] = f.old  # it was text once; now it is not: drop the stale copy


def _index_scope(
    con: apsw.Connection,
    scope: _Scope,
    extensions: tuple[str, ...],
    exclude: tuple[str, ...],
    max_size: int | None,
    counter: TokenCounter,
    settings: ChunkSettings,
    progress: Progress | None,
    report: IndexReport,
    bounds: tuple[str, ...] | None,
    handled: set[str],
) -> None:
    """Index what lies in ``scope``. ``handled``: the files earlier scopes of this run listed
    (a folder given twice, or inside another given one): kept, but neither read nor counted
    again; this scope's files are added to it."""
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
        exclude=exclude,
    ):
        if isinstance(item, Skipped):
            if item.abspath not in handled:
                report.skipped.append((item.abspath, item.reason))
                handled.add(item.abspath)
        elif isinstance(item, Attachment):
            attachments.append(item.relpath)
        else:
            found.append(item)
    # Until this run resolves the links, a mark says they may be stale: a run that is killed or
    # interrupted before then leaves it, and the next run resolves every link of the root.
    pending = _links_pending(scope.root_id)
    full_resolve = meta_get(con, pending) is not None
    if not full_resolve:
        meta_set_tx(con, pending, writes.now_iso())
    # Links must be re-resolved across the root when its set of files or names changes.
    full_resolve = (
        writes.set_attachments(con, scope.root_id, scope.prefix, attachments) or full_resolve
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
    known = {path: Known(*row) for path, *row in rows}

    unreadable = _Unreadable(con, scope)
    todo = []
    for c in found:
        if c.abspath in handled:
            continue
        handled.add(c.abspath)
        old = known.get(c.relpath)
        if old is not None and old.size == c.size and old.mtime_ns == c.mtime_ns:
            report.unchanged += 1
        elif (reason := unreadable.known(c)) is not None:
            report.skipped.append((c.abspath, reason))  # as last time: not read again
        else:
            todo.append(c)
    seen = {c.relpath for c in found}
    vanished = {path: known[path] for path in known.keys() - seen}
    by_hash: dict[str, list[str]] = {}
    for path, gone in vanished.items():
        by_hash.setdefault(gone.digest, []).append(path)

    total = len(todo)
    texts = [c for c in todo if not is_pdf(c.abspath)]
    files, size = len(texts), sum(c.size for c in texts)
    # The workers start once the first files are read (prepare.LazyPool says why).
    pool = (
        LazyPool(files, size, counter, lambda *a: note_pool(*a))
        if wants_pool(files, size, counter)
        else None
    )
    pdfs = PdfJobs(
        settings,
        max_size,
        sum(1 for c in todo if is_pdf(c.abspath)),
        bounds,
        None if counter is default_counter() else counter,  # a custom one goes to the workers
    )
    try:
        with _Batches(con, report) as batches:
            renamed_from = {h for h, paths in by_hash.items() if paths}
            for done, f in enumerate(
                _prepared(
                    todo, known, renamed_from, max_size, settings, pool, bounds, pdfs, progress
                ),
                1,
            ):
                c, old = f.candidate, f.old
                if progress:
                    progress(done - 1, total, c.relpath)
                if f.status == "unreadable":  # could not be read: skipped, keeping what was indexed
                    report.skipped.append((c.abspath, f.reason))
                    continue
                if f.status == "vanished":  # between the listing and the read
                    report.skipped.append((c.abspath, "vanished while indexing"))
                    if old is not None:
                        vanished[c.relpath] = old
                    continue
                st, digest = f.stat, f.digest
                assert st is not None  # read: its stat is known
                if f.status == "failed":  # not indexable (binary, a giant line, a damaged PDF)
                    _failed(report, unreadable, vanished, f, f.reason)
                    continue
                name = c.relpath or Path(c.abspath).name
                if old is not None and old.digest == digest:
                    writes.touch_document(con, old.id, st.st_size, st.st_mtime_ns)
                    batches.count("unchanged")
                    continue
                if old is None and by_hash.get(digest):
                    src = by_hash[digest].pop()
                    moved_id = vanished.pop(src).id
                    writes.move_document(
                        con, moved_id, scope.root_id, c.relpath, st.st_size, st.st_mtime_ns
                    )
                    _retitle_renamed(con, moved_id, src, counter, settings)
                    batches.count("renamed", name)
                    full_resolve = True
                    continue
                parsed = f.parsed
                if parsed is None:  # looked like a rename, but its twin was taken by another file
                    if is_pdf(c.abspath):
                        result = pdfs.now(c)
                        digest, again = result.digest or digest, result.prepared
                    else:
                        assert f.data is not None  # a text file's bytes are read here
                        again = prepare(
                            c.relpath or Path(c.abspath).name, f.data, settings, counter
                        )
                    if isinstance(again, str):
                        _failed(report, unreadable, vanished, f, again)
                        continue
                    parsed = cast("Parsed", again)
                encoding, derived = parsed
                doc = derived.doc
                for w in doc.warnings:
                    report.warnings.append((c.abspath, w))
                if old is not None and not full_resolve:
                    before = {
                        a
                        for (a,) in con.execute(
                            "SELECT alias FROM aliases WHERE doc_id = ?", (old.id,)
                        )
                    }
                    full_resolve = before != set(
                        doc.aliases
                    )  # other notes' links may now resolve elsewhere
                with batches.document():
                    doc_id = writes.write_document(
                        con,
                        derived,
                        writes.FileRow(
                            scope.root_id, c.relpath, st.st_size, st.st_mtime_ns, digest, encoding
                        ),
                        doc_id=old.id if old else None,
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
    for path, gone in vanished.items():
        writes.delete_document(con, gone.id)
        report.removed += 1
        report.changed.append(("removed", path or scope.root.name))
        full_resolve = True
    writes.resolve_links(con, scope.root_id, None if full_resolve else changed_ids)
    with con:
        con.execute("DELETE FROM meta WHERE key = ?", (pending,))
        writes.finish_root(con, scope.root_id)


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


def _read(c: Candidate, max_size: int | None, bounds: tuple[str, ...] | None = None):
    """(stat, sha256, bytes), or None if the file vanished, or a reason it cannot be read. With
    ``bounds``, a file that turns out to be outside them once opened (a symlink swapped in since
    the listing) is not read. A PDF is only hashed here (in blocks; its bytes are the worker's to
    read): bytes is None."""
    cap = size_cap(c.abspath, max_size)
    pdf = is_pdf(c.abspath)
    try:
        # Non-blocking: a file swapped for a FIFO since the listing must not hang the run.
        with open(c.abspath, "rb", opener=open_nonblocking) as f:
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
                digest, size = hash_file(f, cap + 1)
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
    return st, writes.sha256(data), data


def _prepared(
    todo, known, renamed_from, max_size, settings, pool, bounds=None, pdfs=None, progress=None
):
    """A FileRead for each file of ``todo``, in order. Files whose content hash shows no change,
    or a rename, are not parsed. With a pool, the next window is read and handed to the workers
    before this one is written, so that parsing and writing overlap; PDFs always go to their
    workers (``pdfs``)."""

    def submit(start: int):
        window = []
        for c in todo[start : start + WINDOW]:
            old = known.get(c.relpath)
            read = _read(c, max_size, bounds)
            parse_it = isinstance(read, tuple) and (
                read[1] != old.digest if old is not None else read[1] not in renamed_from
            )
            job = pdfs.submit(c) if parse_it and is_pdf(c.abspath) else None
            window.append((c, old, read, parse_it, job))
        jobs = [
            (c.relpath or Path(c.abspath).name, r[2], settings)
            for c, old, r, p, job in window
            if p and job is None
        ]
        # The bytes of a file being parsed are the job's alone from here: kept in the window too,
        # a 68 MB canvas's stayed in the writer until it was written.
        window = [
            (c, old, (r[0], r[1], None) if p and job is None else r, p, job)
            for c, old, r, p, job in window
        ]
        if pool is not None and jobs:
            results = pool.map(
                prepare_item,
                jobs,
                chunksize=CHUNKSIZE if len(todo) > WINDOW else SMALL_TASKS,
                # (a file the writer parses itself while it waits is the one being worked on)
                working=None if progress is None else lambda name: progress(done, len(todo), name),
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
                yield FileRead(c, old, "vanished")
            elif isinstance(read, str):
                yield FileRead(c, old, "unreadable", read)
            elif job is not None:
                on_pages = None
                if progress is not None:

                    def on_pages(pages_done, pages, c=c, done=done):
                        where = (
                            f"page {pages_done:,} of {pages:,}"
                            if pages_done < pages
                            else f"{pages:,} pages read, chunking"
                        )
                        progress(done, len(todo), f"{c.relpath or Path(c.abspath).name} ({where})")

                pdf = pdfs.result(job, on_pages)  # read by a worker, which hashed it too
                if pdf.prepared == VANISHED:
                    yield FileRead(c, old, "vanished")
                else:
                    yield _outcome(c, old, read[0], pdf.digest or read[1], read[2], pdf.prepared)
            elif parse_it:
                if progress is not None:
                    # The file about to be parsed is the one being worked on: said before its
                    # parse, which is what takes long on a hostile file.
                    progress(done, len(todo), c.relpath or Path(c.abspath).name)
                yield _outcome(c, old, read[0], read[1], read[2], next(results))
            else:
                yield FileRead(c, old, "unparsed", "", read[0], read[1], read[2])
            done += 1
        if pending is None and start + WINDOW < len(todo):
            pending = submit(start + WINDOW)


def _links_pending(root_id: int) -> str:
    """The meta key marking a root whose links must all be resolved again."""
    return f"links_pending:{root_id}"
