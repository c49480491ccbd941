"""Live updates: watch the indexed folders and keep the index in step with them.

``watch(kb, paths)`` waits for file system changes (watchfiles: inotify, FSEvents or
ReadDirectoryChangesW, or polling), groups them into debounced batches, and runs the same
incremental index as ``kb.index(paths)`` for each batch: one transaction per changed file, renames
and deletes handled by the same code, embeddings only for new or changed chunks. The unchanged
files of the folders cost one ``stat`` each per batch.

The writer lock: each batch takes it for its own index run and releases it, so a ``kbase index``
or ``kbase embed`` started by hand can run between two batches. A batch that finds another writer
at work waits and tries again (every ``RETRY_MS``) until it gets its turn; nothing is lost, since
every run compares the folders with the index as a whole.

Stopping: set ``stop_event`` (from another thread) or press Ctrl-C (KeyboardInterrupt in the
main thread). A batch being indexed at that moment stops after the file in hand, leaving a
consistent index, as an interrupted ``kbase index`` does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import IndexBusyError, InputError, KbaseError
from kbase.ingest.discover import IGNORE_FILE
from kbase.records import EmbedReport, IndexReport

if TYPE_CHECKING:
    from kbase.api import KB

DEBOUNCE_MS = 300  # changes arriving within this time are one batch
RETRY_MS = 1000  # how often a batch that found another writer at work tries again
STEP_MS = 50  # watchfiles' pause between looks for more changes (and at stop_event)
EMBED_STEP = 64  # chunks embedded per idle step: a second or two, the longest a new change waits


@dataclass
class WatchBatch:
    """One index run of ``watch``: what set it off and what it did."""

    seq: int  # 0: the catch-up run at start; then 1, 2, ... in order
    changes: int  # file system events in the batch (0 for catch-up runs)
    paths: tuple[str, ...] = ()  # the paths those events named, sorted
    report: IndexReport | None = None  # what the index run did (None if it failed)
    error: str | None = None  # why it failed, one line; the next change triggers a new run
    seconds: float = 0.0
    catch_up: bool = False  # a run that looks at everything, not set off by an event

    @property
    def changed(self) -> bool:
        """True if the run changed the index (new, updated, renamed or removed documents)."""
        r = self.report
        return bool(r and (r.new or r.updated or r.renamed or r.removed))


OnBatch = Callable[[WatchBatch], None]


def watch(
    kb: KB,
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    debounce_ms: int = DEBOUNCE_MS,
    stop_event: threading.Event | None = None,
    on_batch: OnBatch | None = None,
    embed: bool = True,
    initial: bool = True,
    force_polling: bool | None = None,
    on_embed: Callable[[EmbedReport], None] | None = None,
    **index_options,
) -> int:
    """Keep ``kb`` up to date with ``paths`` (folders or files; none: every root of the index)
    until ``stop_event`` is set or KeyboardInterrupt. Returns how many index runs were made.

    ``initial`` runs a catch-up index first (changes made while nothing watched). ``on_batch`` gets
    a ``WatchBatch`` after every run. ``embed``: embed new and changed chunks after each run and,
    while nothing changes, the chunks still without vectors, newest notes first, ``EMBED_STEP`` at
    a time (``on_embed`` gets each step's result: counts and ``remaining``).
    ``index_options`` go to ``kb.index`` (``extensions``, ``max_size``, ``settings``).
    Raises ``InputError`` when there is nothing to watch; errors of single runs (disk full, a root
    that vanished) are reported through ``on_batch`` and watching goes on.
    """
    import watchfiles

    from kbase.indexer import pipeline

    if paths:
        roots = pipeline.resolve_paths(paths)
    else:
        roots = [Path(p) for p in _known_roots(kb)]
        if not roots:
            raise InputError(
                "nothing to watch yet", "pass the folders of your notes: kbase watch PATH..."
            )
    stop = stop_event if stop_event is not None else threading.Event()
    flt = _Filter(roots, Path(kb.path))
    targets = sorted({str(r if r.is_dir() else r.parent) for r in roots if r.exists()})
    if not targets:
        raise InputError(
            "none of the indexed folders exists any more",
            "pass the folders to watch: kbase watch PATH...",
        )
    runs = 0
    backlog = embed  # chunks may be waiting for vectors (an earlier --no-embed, an interrupted run)
    wal_held = False  # a reader's old snapshot kept the last run from truncating the WAL

    def embed_step() -> EmbedReport | None:
        """Some of the chunks without vectors, newest notes first (None: another writer is busy)."""
        nonlocal backlog
        result = kb.embed_step(
            limit=EMBED_STEP,
            should_stop=stop.is_set,
            progress=_stopper(stop, index_options.get("embed_progress")),
        )
        if result is not None:
            backlog = result.remaining > 0
            if on_embed is not None:
                on_embed(result)
        return result

    def run(changes: int, changed: set[str], catch_up: bool) -> WatchBatch | None:
        """One index run; None when another writer holds the lock (try again later)."""
        nonlocal runs
        t0 = time.perf_counter()
        batch = WatchBatch(runs, changes, tuple(sorted(changed)), catch_up=catch_up)
        try:
            batch.report = kb.index(
                [str(r) for r in roots if r.exists()] or [str(r) for r in roots],
                embed=False,
                progress=_stopper(stop, index_options.get("progress")),
                **{
                    k: v
                    for k, v in index_options.items()
                    if k not in ("progress", "embed_progress")
                },
            )
            if (
                embed and not batch.report.interrupted
            ):  # the changed notes are the newest: first in line
                batch.report.embedding = embed_step()
        except IndexBusyError:
            return None
        except KbaseError as e:
            batch.error = e.message + (f" ({e.hint})" if e.hint else "")
        batch.seconds = time.perf_counter() - t0
        runs += 1
        if on_batch is not None:
            on_batch(batch)
        return batch

    try:
        if initial and not stop.is_set():
            while (first := run(0, set(), True)) is None:  # another writer first: wait for our turn
                if stop.wait(RETRY_MS / 1000):
                    return runs
            if first.report is not None and first.report.interrupted:
                return runs
        # Changes made between the catch-up run and the moment the watcher is listening are
        # caught by a second catch-up run on the first wake-up (an event or the first timeout).
        need_run, catch_up = True, True
        events, changed = 0, set()
        for batch in watchfiles.watch(
            *targets,
            watch_filter=flt,
            debounce=debounce_ms,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=RETRY_MS,
            yield_on_timeout=True,
            raise_interrupt=True,
            force_polling=force_polling,
        ):
            for _change, path in batch:
                events += 1
                changed.add(path)
            need_run = need_run or bool(batch)
            if stop.is_set():
                continue
            if not need_run:
                if wal_held and not batch:  # idle: truncate the WAL once the reader lets go
                    wal_held = not kb.checkpoint()
                if backlog and not batch:  # idle: embed a little (changes meanwhile wait one step)
                    try:
                        embed_step()
                    except KbaseError:
                        backlog = (
                            False  # e.g. vectors of another model: kbase embed --rebuild says so
                        )
                continue
            done = run(events, changed, catch_up and not batch)
            if done is None:
                continue  # busy: the same changes are retried at the next wake-up
            need_run, catch_up = False, False
            events, changed = 0, set()
            wal_held = not kb.checkpoint()  # (the run tried: a reader holds it, or nothing to do)
            if done.report is not None and done.report.interrupted:
                break  # Ctrl-C (or stop_event) while indexing
    except KeyboardInterrupt:
        pass
    return runs


def _known_roots(kb) -> list[str]:
    if not Path(kb.path).exists():
        return []
    return [p for (p,) in kb.reader.execute("SELECT path FROM roots ORDER BY path")]


def _stopper(stop: threading.Event, inner):
    """A progress callback that ends the run in hand (as Ctrl-C does) once ``stop`` is set."""

    def progress(*args):
        if stop.is_set():
            raise KeyboardInterrupt
        if inner is not None:
            inner(*args)

    return progress


@dataclass
class _Filter:
    """Which events matter: files and folders inside the roots, not hidden (as kbase index
    skips them; ``.kbaseignore`` files do count), and never the index file itself."""

    roots: list[Path]
    db: Path
    _dirs: tuple[str, ...] = field(init=False)
    _files: frozenset[str] = field(init=False)
    _db_files: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self._dirs = tuple(str(r) for r in self.roots if r.is_dir())
        self._files = frozenset(str(r) for r in self.roots if not r.is_dir())
        db = str(self.db.expanduser().resolve())
        self._db_files = frozenset(db + suffix for suffix in ("", "-wal", "-shm", "-journal"))

    def __call__(self, change, path: str) -> bool:
        if path in self._db_files:
            return False
        if path in self._files:
            return True
        for root in self._dirs:
            if path == root:
                return True
            if path.startswith(root + os.sep):
                parts = path[len(root) + 1 :].split(os.sep)
                return not any(p.startswith(".") and p != IGNORE_FILE for p in parts)
        return False
