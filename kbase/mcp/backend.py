"""The index behind the server, shared by every call: one ``KB`` (one read connection, the
vectors in memory) for the life of the server, and the work it does between calls.

- Calls run one at a time on the read connection (``use``); the connection and the vectors are
  opened again when the index file was replaced (deleted and rebuilt), and the vectors reload
  when another process changes the file (the engine watches ``PRAGMA data_version``).
- ``sql`` calls run beside them, each on a read connection of its own (``use_sql``: up to
  ``SQL_CONNECTIONS`` at once, ``SQL_PER_CLIENT`` of them for one client), so a slow query
  holds neither the other tools nor other clients' queries.
- With ``watch``, the index follows the notes (``KB.watch``, without embedding), and chunks
  without vectors are embedded while no call is running, newest notes first, one batch at a
  time: a call that needs the model waits for at most the batch in hand.
- What happens in the background (a watch run, embedding progress, an error) is said through
  ``say(level, message)``: stderr, and the clients that asked for log messages at that level.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from kbase.api import KB
from kbase.errors import DatabaseError, KbaseError

IDLE_AFTER = 2.0  # seconds without a call before idle embedding starts (or resumes)
IDLE_POLL = 0.5  # how often the idle embedder looks
IDLE_RECHECK = 5.0  # nothing to embed: look again this often (watch adds chunks)
PROGRESS_EVERY = 10.0  # seconds between progress messages while embedding
SQL_CONNECTIONS = 4  # sql calls running at once (each on its own read connection)
SQL_PER_CLIENT = 2  # of them, for one client (a connection or HTTP session)

Say = Callable[[str, str], None]  # (level, message): 'debug', 'info', 'warning', 'error', ...


def to_stderr(level: str, message: str) -> None:
    if level != "debug":
        print(f"kbase mcp: {message}", file=sys.stderr, flush=True)


class Backend:
    """One KB for the life of the server (see the module docstring)."""

    def __init__(self, db_path: Path, kb: KB | None = None, say: Say = to_stderr) -> None:
        self.db_path = Path(db_path)
        self.kb = kb or KB(self.db_path)
        self.say = say
        self.kb.on_notice = lambda message: self.say("warning", message)  # (a read-only index)
        self.read_lock = threading.Lock()  # one read connection: one call at a time
        self.model_lock = threading.Lock()  # the embedding model: a query, or one idle batch
        self._identity = self._file_identity()
        self._calls = threading.Lock()  # guards the two below (calls run in worker threads)
        self._active = 0
        self._last_call = time.monotonic()
        # idle sql connections (KBs without a vector cache), with the file each last read
        self._sql_pool: list[tuple[KB, tuple[int, int] | None]] = []
        self._sql_lock = threading.Lock()
        self.stop = threading.Event()
        self.watching = False
        self.idle_embedded = 0

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @contextmanager
    def use(self, model: bool = False) -> Iterator[KB]:
        """The KB for one call (``model``: it may embed a query, so wait for an idle batch)."""
        with self._calls:
            self._active += 1
        try:
            with self.read_lock, self.model_lock if model else nullcontext():
                identity = self._file_identity()
                if identity is None:
                    raise DatabaseError(
                        f"no index at {self.db_path}", "build it with: kbase index PATH"
                    )
                if identity != self._identity:  # the file was replaced: open it again
                    self.kb.refresh()
                    self._identity = identity
                    self.say("notice", f"the index file {self.db_path} was replaced: reopened")
                yield self.kb
        finally:
            with self._calls:
                self._active -= 1
                self._last_call = time.monotonic()

    @contextmanager
    def use_sql(self) -> Iterator[KB]:
        """A KB of its own for one sql call (see the module docstring; the server keeps to
        ``SQL_CONNECTIONS`` calls at once, so the pool never holds more)."""
        with self._sql_lock:
            kb, seen = self._sql_pool.pop() if self._sql_pool else (None, None)
        if kb is None:
            kb = KB(self.db_path, cache_vectors=False)
            kb.on_notice = self.kb.on_notice
        identity = self._file_identity()
        try:
            if identity is None:
                raise DatabaseError(
                    f"no index at {self.db_path}", "build it with: kbase index PATH"
                )
            if seen is not None and identity != seen:
                kb.refresh()  # the file was replaced: open it again
            yield kb
        finally:
            with self._sql_lock:
                self._sql_pool.append((kb, identity))

    def close(self) -> None:
        self.kb.close()
        with self._sql_lock:
            for kb, _ in self._sql_pool:
                kb.close()
            self._sql_pool.clear()

    def idle(self) -> bool:
        with self._calls:
            return self._active == 0 and time.monotonic() - self._last_call >= IDLE_AFTER

    def embed_while_idle(self) -> None:
        """Thread body: embed chunks that lack vectors whenever no call has run for IDLE_AFTER,
        one batch of the model at a time."""
        wait = IDLE_POLL
        reported = time.monotonic()
        finished = 0  # idle_embedded when the last "all embedded" was said
        while not self.stop.wait(wait):
            wait = IDLE_POLL
            if not self.idle():
                continue
            try:
                with self.model_lock:
                    step = self.kb.embed_step(limit=self.kb.embedder.batch_size)
            except KbaseError as e:
                self.say("error", f"idle embedding stopped: {e}")
                return
            if step is None:
                continue  # a watch batch or a hand-run kbase index holds the writer: later
            done = step.embedded + step.reused
            if done:
                self.idle_embedded += done
                self.say("debug", f"embedded {done} chunks while idle")
                if time.monotonic() - reported >= PROGRESS_EVERY:
                    reported = time.monotonic()
                    self._progress()
            else:
                if self.idle_embedded != finished:  # it just finished: say so once
                    self._progress()
                finished = self.idle_embedded
                wait = IDLE_RECHECK

    def _progress(self) -> None:
        """Say how far idle embedding has come (info: a client that asks sees it)."""
        try:
            with self.read_lock:
                embedded, total = self.kb.coverage()
        except KbaseError:
            return
        if embedded >= total:
            self.say("info", f"idle embedding: done, all {total:,} chunks have vectors")
        else:
            self.say(
                "info",
                f"idle embedding: {embedded:,} of {total:,} chunks have vectors"
                f" ({self.idle_embedded:,} embedded while idle)",
            )

    def watch(self, poll: bool) -> None:
        """Thread body: keep the index in step with the notes (without embedding: the idle
        embedder does that between calls)."""

        def on_batch(b) -> None:
            if b.error:
                self.say("warning", f"watch: {b.error}")
            elif b.changed:
                r = b.report
                self.say(
                    "info",
                    f"watch: {r.new} new, {r.updated} updated, {r.renamed} renamed,"
                    f" {r.removed} removed",
                )

        self.watching = True
        try:
            with KB(self.db_path, cache_vectors=False) as kb:
                kb.watch(
                    stop_event=self.stop,
                    on_batch=on_batch,
                    embed=False,
                    force_polling=True if poll else None,
                )
        except KbaseError as e:
            self.say("error", f"watch stopped: {e}")
        finally:
            self.watching = False
