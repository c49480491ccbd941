"""A file's bytes to the rows the writer stores (a Derived), in this process or in a worker:
notes and canvases through a process pool, PDFs through supervised workers with time and memory
limits (kbase.indexer.workers)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.indexer import writes
from kbase.ingest.chunk import ChunkSettings, TokenCounter, chunk, default_counter
from kbase.ingest.decode import Decoded, UndecodableError, decode
from kbase.ingest.derive import Derived, derive
from kbase.ingest.discover import (
    CANVAS_EXTENSIONS,
    PDF_EXTENSIONS,
    Candidate,
    outside_reason,
    size_cap,
    within,
)
from kbase.ingest.parse import parse
from kbase.records import ParsedDoc
from kbase.text import LINE_BREAK, one_line

if TYPE_CHECKING:
    from kbase.indexer.workers import Workers
    from kbase.ingest import pdf


# Longer lines are not notes but data (minified code, base64, logs): such files are skipped.
MAX_LINE_CHARS = 1_000_000


# Parsing and chunking run in worker processes (one per core) when this many files, or this much
# text, need them. Starting the workers costs about 50 ms: on rust-book (114 files, 1.2 MB) they
# take a fresh index from 0.73 to 0.48 s, on foam-docs (87 files, 0.3 MB) from 0.33 to 0.24 s;
# below about 250 KB they cost more than they save.
POOL_MIN_FILES = 200


POOL_MIN_BYTES = 256 * 1024


# Files read ahead and handed to the workers at a time (bounds memory; kbase.indexer.pipeline),
# in tasks of CHUNKSIZE files: fewer, larger messages between the processes (10k notes
# in-process, four runs each: 9.9 s against 11.2 s for 64 files in tasks of 4; through the CLI
# the gap was within the noise).
WINDOW = 128
CHUNKSIZE = 16
# A run of one window has one worker fewer, and its tasks are smaller: this process takes back
# the tasks no worker has begun while it waits (LazyPool); with 16 files a task (110 ms of
# rust-book-ja) it could still be parsing its last one after the worker had finished. A longer run
# keeps a worker a core and this process to writing: on the 10k vault, taking tasks back made its
# writes the bottleneck (median wall 5.50 -> 6.27 s, CPU 9.71 -> 10.14 s, 3 rounds), and with a
# worker fewer a loaded machine gave it a smaller share (17.0 / 20.1 against 16.7 / 16.9 s).
SMALL_TASKS = 4


def _cores() -> int:
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def wants_pool(files: int, size: int, counter: TokenCounter) -> bool:
    """Whether note_pool would start workers for this much work (it may still find no fork)."""
    return (
        (files >= POOL_MIN_FILES or size >= POOL_MIN_BYTES)
        and _cores() >= 2
        and counter is default_counter()
    )


def note_pool(files: int, size: int, counter: TokenCounter, front_matter: bool = True):
    """Worker processes for parsing and chunking, or None to do it here (little to parse, one
    core, a custom token counter, or no fork on this platform). ``front_matter``: some of the
    notes have front matter (PyYAML is then loaded here, once for every worker; else a worker
    that meets some loads it itself)."""
    if not wants_pool(files, size, counter):
        return None
    import multiprocessing  # (30 ms, with what it imports: for a pool only)

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    from concurrent.futures import ProcessPoolExecutor

    # Load the parsers and the tokenizer once, here, for every worker (each loaded its own: 40 ms).
    warm_up = f"{WARM_UP_FRONT_MATTER if front_matter else ''}# Warm up\n"
    chunk(parse(warm_up, "warm-up.md"), counter)
    # What each worker runs first is loaded here, before the fork, not in each worker.
    import kbase.indexer.workers
    import kbase.store.db  # noqa: F401

    # A run of one window leaves one core to this process: it writes, and parses what the worker
    # has not begun while it waits for it (LazyPool).
    return ProcessPoolExecutor(
        max(1, _cores() - 1) if files <= WINDOW else _cores(),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )


WARM_UP_FRONT_MATTER = "---\na: 1\n---\n"


def has_front_matter(data: bytes) -> bool:
    """Whether a note's bytes (UTF-8, maybe with a BOM) open with a front matter line."""
    return data.startswith((b"---", b"\xef\xbb\xbf---"))


class LazyPool:
    """note_pool's workers, started by the first map() once the first files are read: PyYAML is
    loaded before the fork only if one of them has front matter (none of the books' notes does:
    14 ms of a 100-note index's start-up). In a run of one window (SMALL_TASKS) the writer also
    does the tasks no worker has begun while it waits (_results)."""

    def __init__(self, files: int, size: int, counter: TokenCounter, start=None) -> None:
        self.args = (files, size, counter)
        self.start = start or note_pool
        self.executor = None
        self.started = self.forked = False

    def map(self, fn, jobs, chunksize: int = 1, working: Callable[[str], None] | None = None):
        """``fn`` over ``jobs`` (name, bytes, ...) in the workers, results in order. ``working``:
        told the first name of each task this process takes back, before it parses it."""
        if not self.started:
            self.started = True
            self.executor = self.start(*self.args, any(has_front_matter(job[1]) for job in jobs))
        if self.executor is None:  # no fork here after all: in this process
            return map(fn, jobs)
        tasks = _tasks(jobs, chunksize)
        if self.forked:
            futures = [self.executor.submit(_run_task, fn, task) for task in tasks]
        else:
            # The workers fork with the first task submitted. Objects frozen out of the collector
            # meanwhile are not written to by a collection in a worker, so their pages stay
            # shared (2-7 % fewer page faults in the workers, 2 % less CPU on the 10,000-note
            # vault); this process collects them again once the workers are made.
            self.forked = True
            gc.freeze()
            try:
                futures = [self.executor.submit(_run_task, fn, task) for task in tasks]
            finally:
                gc.unfreeze()
        if self.args[0] > WINDOW:  # (the writer has plenty to do: see SMALL_TASKS)
            return (result for future in futures for result in future.result())
        return _results(fn, tasks, futures, working)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)


# A file this large goes to the workers in a task of its own: the writer takes a task's results
# together, so a slow file's wait was said to be for the first file of its task ('still working
# on a.md' while a worker parsed slow.md); alone, the file being waited for is the one named.
ALONE_FROM = POOL_MIN_BYTES


def _tasks(jobs: list, size: int) -> list[list]:
    """``jobs`` in tasks of ``size``, in order, each of a file of ALONE_FROM bytes or more alone."""
    tasks: list[list] = []
    task: list = []
    for job in jobs:
        if len(job[1]) >= ALONE_FROM:
            tasks.extend([task, [job]] if task else [[job]])
            task = []
        else:
            task.append(job)
            if len(task) == size:
                tasks.append(task)
                task = []
    return [*tasks, task] if task else tasks


def _run_task(fn, jobs) -> list:
    """A task of the note workers: its files' results, in order."""
    return [fn(job) for job in jobs]


def _results(fn, tasks, futures, working=None) -> Iterator:
    """The results of ``tasks`` (submitted as ``futures``), in order. While the one needed next
    is not ready, this process takes back the last task no worker has begun and does it itself:
    the writer would only wait, and a worker fewer (note_pool) is a fork, its copied pages and
    its pickling fewer. A task is taken back by cancelling its future, which only succeeds before
    the pool hands it to a worker; it hands them over in order, so once one cannot be, none
    before it can."""
    stolen: dict[int, list] = {}
    back = len(futures) - 1  # the last task that may still be taken back
    for i, future in enumerate(futures):
        if i in stolen:
            yield from stolen.pop(i)
            continue
        while back > i and not future.done():
            if futures[back].cancel():
                if working is not None:  # (the wait is this task's now)
                    working(tasks[back][0][0])
                stolen[back] = _run_task(fn, tasks[back])
                back -= 1
            else:
                back = i
        yield from future.result()


def _worker_init(parent: int) -> None:
    # A worker waits for work on a pipe whose other end it inherited itself, so it would outlive
    # a parent that was killed (kill -9, the OOM killer): first of all, it is tied to the parent.
    from kbase.indexer.workers import tie_to_parent

    tie_to_parent(parent)
    import signal

    from kbase.store.db import release_inherited_locks

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    release_inherited_locks()


def opened_path(fd: int, path: str) -> str:
    """Where the open file ``fd`` really is: what the kernel says (Linux: /proc/self/fd), so that
    no symlink swapped in after the open can mislead; else the resolved ``path``."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def hash_file(f, limit: int) -> tuple[str, int]:
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
    worker process. Never raises for what a file holds: any error of decoding, parsing or
    chunking (a bug, a library's surprise) is this file's skip line, not the end of the run."""
    try:
        return _prepare(name, data, settings, counter)
    except (RecursionError, MemoryError) as e:
        return f"too deeply nested or too large to parse ({type(e).__name__})"
    except Exception as e:
        return f"could not be parsed ({type(e).__name__}: {one_line(str(e))})"


def _prepare(name: str, data: bytes, settings: ChunkSettings, counter: TokenCounter | None):
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
    if is_canvas(name):
        from kbase.ingest import canvas  # (for canvases only)

        encoding, warnings = decoded.encoding, decoded.warnings
        try:
            parsed = canvas.parse_canvas(decoded.text)
        except canvas.CanvasError as e:
            return str(e)
        del decoded  # the JSON (68 MB for a million cards) is not needed once it is read
        return encoding, derive(canvas.document(parsed, name, warnings), settings, counter)
    return decoded.encoding, derive(parse_decoded(decoded, name), settings, counter)


def is_pdf(name: str) -> bool:
    return name.lower().endswith(PDF_EXTENSIONS)


def is_canvas(name: str) -> bool:
    return name.lower().endswith(CANVAS_EXTENSIONS)


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
    reason to skip it. Runs in a worker process (kbase.indexer.workers), under a time limit. With
    ``bounds``, a file found outside them once opened (a symlink swapped in) is not read."""
    from kbase.ingest import pdf  # (for PDFs only; PdfJobs loads it before its workers fork)

    cap = size_cap(abspath, max_size)
    try:
        with open(abspath, "rb", opener=open_nonblocking) as f:
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
    digest = writes.sha256(data)
    size = len(data)
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
        pdf.read_warnings(text, size),
        pdf.outline_headings(text.text, text.pages, text.outline),
    )
    return digest, ("pdf", derive(doc, settings, counter))


VANISHED = "vanished while indexing"


@dataclass(frozen=True)
class PdfResult:
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
    with captured_stderr() as said:
        result = prepare_pdf(
            name, abspath, settings, max_size, counter=counter, progress=progress, bounds=bounds
        )
    if isinstance(result, tuple):
        digest, (encoding, derived) = result
        if said:  # what PDFium wrote: the file's warning, not raw lines on the terminal
            line = "PDFium: " + "; ".join(said[:3])
            doc = derived.doc
            derived = dataclasses.replace(
                derived, doc=dataclasses.replace(doc, warnings=(*doc.warnings, line[:300]))
            )
        return digest, _without_blocks((encoding, derived))
    return result


@contextlib.contextmanager
def captured_stderr() -> Iterator[list[str]]:
    """What C code (PDFium) writes to file descriptor 2 meanwhile, as a list of its distinct
    lines (control characters dropped), filled in when the block ends. For a worker process:
    the descriptor is the process's, not the thread's."""
    import re
    import sys
    import tempfile

    said: list[str] = []
    sys.stderr.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read(STDERR_KEPT).decode("utf-8", "replace")
            lines = (
                " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", ln).split()) for ln in text.splitlines()
            )
            said.extend(dict.fromkeys(ln for ln in lines if ln))


STDERR_KEPT = 64 * 1024  # bytes of a worker's stderr read back per PDF


class PdfJobs:
    """The PDFs of an index run, read in worker processes (kbase.indexer.workers): each under a time
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

            import kbase.ingest.pdf  # noqa: F401
            from kbase.indexer.workers import Workers  # multiprocessing: 12 ms, for PDFs only

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

    def result(self, job: int, on_progress=None) -> PdfResult:
        out = self._pool().result(job, on_progress)
        if isinstance(out, str):
            return PdfResult(None, out)
        return PdfResult(*out)

    def now(self, c: Candidate) -> PdfResult:
        return self.result(self.submit(c))

    def close(self, interrupted: bool = False) -> None:
        if self._workers is not None:
            self._workers.close(wait_for=not interrupted)
            self._workers = None


def parse_decoded(decoded: Decoded, name: str) -> ParsedDoc:
    """Parse decoded text; what decoding repaired comes first among the document's warnings."""
    doc = parse(decoded.text, name)
    return (
        dataclasses.replace(doc, warnings=decoded.warnings + doc.warnings)
        if decoded.warnings
        else doc
    )


def prepare_item(args):
    name, data, settings = args
    result = prepare(name, data, settings)
    return _without_blocks(result) if isinstance(result, tuple) else result


def _without_blocks(prepared: tuple[str, Derived]) -> tuple[str, Derived]:
    """prepare()'s result as a worker sends it: the writer has no use for the block structure
    (chunks and links are made from it in the worker); without it the result unpickles in half
    the time, and the writer waits on that."""
    encoding, derived = prepared
    return encoding, dataclasses.replace(derived, doc=dataclasses.replace(derived.doc, blocks=()))


def open_nonblocking(path: str, flags: int) -> int:
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
