"""Worker processes that may hang or crash: each job runs under a time limit, and a worker that
overruns it is killed, one that dies (a crash inside a C library, the memory limit) is replaced;
either way that job's result is a reason string and the other jobs go on.

kbase.ingest runs PDF extraction here: PDFium is C++, and a hostile or broken PDF can loop for
minutes, eat memory or segfault. Jobs are functions and arguments that pickle; results come back
in the order the jobs were given. Work goes on in the workers while the caller does other things;
time limits and replacements are handled whenever the caller asks for a result.
"""

from __future__ import annotations

import collections
import faulthandler
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

# Jobs handed to a worker ahead of the one it works on: it never waits for the caller.
AHEAD = 2
ORPHAN_CHECK_SECONDS = 0.5
MEMORY_LIMIT = 2 * 1024**3  # bytes of address space a worker may add to what it inherited


class Deadline(Exception):
    pass


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    jobs: collections.deque = field(default_factory=collections.deque)  # ids sent, in order
    started: float | None = None  # when it began its first job (time.monotonic, any process)


def _serve(
    conn: Connection, memory_limit: int | None, siblings: tuple[int, ...] = (), parent: int = 0
) -> None:
    tie_to_parent(parent or os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # a crash here is reported as a skipped file, not a stack dump
    from kbase.store.db import release_inherited_locks

    # A forked worker must not hold what the parent holds: its writer lock (a killed parent's
    # lock would outlive it), nor the parent's ends of the other workers' pipes (a worker whose
    # parent died would block for ever sending to a pipe its sibling keeps open).
    release_inherited_locks()
    for fd in siblings:
        try:
            os.close(fd)
        except OSError:
            pass
    _limit_memory(memory_limit)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if job is None:
            os._exit(0)
        job_id, fn, args = job
        conn.send(("start", job_id, time.monotonic()))

        def progress(done: int, total: int, job_id=job_id) -> None:
            conn.send(("progress", job_id, (done, total)))

        try:
            result = fn(*args, progress=progress)
        except MemoryError:
            result = "too large to read within the memory limit"
        except Exception as e:  # a bug or an unexpected library error: one file, one line
            result = f"could not be read ({type(e).__name__}: {e})"
        conn.send(("done", job_id, result))


def tie_to_parent(parent: int) -> None:
    """The first thing a forked worker does: die with ``parent`` (its pid, taken in the parent
    before the fork). Busy with a long job, or blocked on a full pipe, a worker still leaves once
    its parent is gone (kill -9, the OOM killer): nobody wants the result. On Linux the kernel
    sends it SIGKILL when the parent dies (PR_SET_PDEATHSIG); a parent that died before that was
    set is seen at once (the worker's parent is no longer ``parent``); elsewhere a thread looks
    every ORPHAN_CHECK_SECONDS."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _load_libc():
    """libc, for prctl (Linux only), loaded in the parent: a worker must not spend its first
    moments importing."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl  # noqa: B018  (present in glibc and musl)
    except (OSError, AttributeError):
        return None
    return libc


PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = _load_libc()


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_SECONDS)
    os._exit(1)


def _limit_memory(limit: int | None) -> None:
    if not limit:
        return
    try:
        import resource

        with open("/proc/self/statm") as f:
            inherited = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (inherited + limit, resource.RLIM_INFINITY))
    except (ImportError, OSError, ValueError):
        pass  # no /proc (macOS) or no RLIMIT_AS: the time limit still applies


class Workers:
    """Up to ``size`` worker processes running ``fn(*args, progress=...)`` jobs.

    ``timeout(job)`` gives a job's time limit in seconds, once the worker has started it; a job
    past it, or whose worker died, gives ``reason_for(kind)`` with kind 'timeout' or 'crash'."""

    def __init__(
        self,
        size: int,
        timeout: Callable[[tuple, tuple[int, int] | None], float],
        memory_limit: int | None = MEMORY_LIMIT,
        context: multiprocessing.context.BaseContext | None = None,
    ) -> None:
        self.size = max(1, size)
        self.timeout = timeout
        self.memory_limit = memory_limit
        if context is None:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            context = multiprocessing.get_context(method)
        self.ctx: Any = context
        self.workers: list[_Worker] = []
        self.queue: collections.deque = collections.deque()  # (id, fn, args) not yet sent
        self.jobs: dict[int, tuple] = {}  # id -> (fn, args) until done
        self.results: dict[int, object] = {}
        self.progress: dict[int, tuple[int, int]] = {}
        self.next_id = 0

    # -- submitting --------------------------------------------------------------------------
    def submit(self, fn: Callable, *args) -> int:
        job_id = self.next_id
        self.next_id += 1
        self.jobs[job_id] = (fn, args)
        self.queue.append((job_id, fn, args))
        self._dispatch()
        return job_id

    def map(self, fn: Callable, argses: Iterable[tuple]) -> Iterator[object]:
        ids = [self.submit(fn, *args) for args in argses]
        return (self.result(i) for i in ids)

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        siblings: tuple[int, ...] = ()
        if self.ctx.get_start_method() == "fork":  # the child inherits these descriptors
            siblings = tuple(w.conn.fileno() for w in self.workers) + (parent.fileno(),)
        p = self.ctx.Process(
            target=_serve, args=(child, self.memory_limit, siblings, os.getpid()), daemon=True
        )
        p.start()
        child.close()
        w = _Worker(p, parent)
        self.workers.append(w)
        return w

    def _dispatch(self) -> None:
        while self.queue:
            idle = [w for w in self.workers if len(w.jobs) < AHEAD]
            if not idle and len(self.workers) < self.size:
                idle = [self._spawn()]
            if not idle:
                return
            w = min(idle, key=lambda w: len(w.jobs))
            job_id, fn, args = self.queue.popleft()
            try:
                w.conn.send((job_id, fn, args))
            except (BrokenPipeError, OSError):
                self.queue.appendleft((job_id, fn, args))
                self._lost(w, "crash")
                continue
            w.jobs.append(job_id)

    # -- collecting --------------------------------------------------------------------------
    def result(self, job_id: int, on_progress: Callable[[int, int], None] | None = None):
        """The job's result (waiting for it), or a reason string if it timed out or crashed."""
        while job_id not in self.results:
            self._pump(wait_for=job_id)
            if on_progress is not None and job_id in self.progress:
                on_progress(*self.progress[job_id])
        self.progress.pop(job_id, None)
        self.jobs.pop(job_id, None)
        return self.results.pop(job_id)

    def _pump(self, wait_for: int | None = None) -> None:
        now = time.monotonic()
        wait_s = 0.0 if wait_for is None else 0.5
        for w in list(self.workers):
            if w.started is not None and w.jobs:
                limit = self.timeout(self.jobs[w.jobs[0]][1], self.progress.get(w.jobs[0]))
                left = w.started + limit - now
                if left <= 0:
                    self._lost(w, "timeout")
                    continue
                wait_s = min(wait_s, left)
        self._dispatch()
        conns: dict[object, _Worker] = {w.conn: w for w in self.workers}
        sentinels: dict[object, _Worker] = {w.process.sentinel: w for w in self.workers}
        ready = wait([*conns, *sentinels], timeout=max(0.0, wait_s))  # type: ignore[list-item]
        for r in ready:
            reader = conns.get(r)
            if reader is not None:
                self._read(reader)
        for r in ready:
            w = sentinels.get(r)  # type: ignore[assignment]
            if w is not None and w in self.workers:
                while w.conn.poll():
                    if not self._read(w):
                        break
                if w in self.workers:
                    self._lost(w, "crash")
        self._dispatch()

    def _read(self, w: _Worker) -> bool:
        try:
            while w.conn.poll():
                kind, job_id, value = w.conn.recv()
                if kind == "start":
                    w.started = value
                elif kind == "progress":
                    self.progress[job_id] = value
                else:
                    self.results[job_id] = value
                    if w.jobs and w.jobs[0] == job_id:
                        w.jobs.popleft()
                    w.started = None
        except (EOFError, OSError):
            return False
        return True

    def _lost(self, w: _Worker, why: str) -> None:
        """The worker is killed (or found dead): its current job fails, the ones queued behind it
        go to the others."""
        if w.process.is_alive():
            w.process.kill()
        w.process.join()
        w.conn.close()
        self.workers.remove(w)
        if w.jobs:
            current = w.jobs.popleft()
            if why == "timeout":
                fn, args = self.jobs[current]
                limit = self.timeout(args, self.progress.get(current))
                self.results[current] = f"took longer than {limit:.0f} s to read; skipped"
            else:
                code = w.process.exitcode
                how = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
                self.results[current] = f"the PDF reader crashed on it ({how}); skipped"
            for job_id in reversed(w.jobs):
                fn, args = self.jobs[job_id]
                self.queue.appendleft((job_id, fn, args))

    def close(self, wait_for: bool = True) -> None:
        for w in self.workers:
            try:
                if wait_for:
                    w.conn.send(None)
            except OSError:
                pass
        for w in self.workers:
            if not wait_for and w.process.is_alive():
                w.process.kill()
            w.process.join(timeout=2)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
        self.workers.clear()
