"""The Datasette plugin: every kbase index Datasette serves gets sqlite-vec and kbase's SQL
functions, so that its tables, views, vectors and kbase's own search work from the SQL page and
the JSON API.

- ``prepare_connection``: loads sqlite-vec into each of Datasette's connections (its ``chunks_vec``
  table needs it; Datasette's check of the file fails without it), and on a kbase index registers
  ``kbase_embed(text)`` (a query's vector) and ``kbase_search(query [, mode [, lim]])``: kbase's
  ranked results (hybrid once the index has vectors) as a JSON array of objects with the columns
  of ``kbase sql``'s kbase_search, read with ``json_each`` (Python's sqlite3 has no table-valued
  functions). A bad argument gives ``[{"error": ..., "hint": ...}]``: Python's sqlite3 reports
  any exception in a function as "user-defined function raised exception".
- ``startup``: starts each kbase index's worker, which loads the embedding model, so that the
  first hybrid query does not spend Datasette's time limit (1 s by default) on it.
- ``canned_queries``: ``/DB/kbase_search?q=...&mode=&lim=`` as a form and a JSON API.

kbase's searches run in a worker process per index (kbase.datasette.worker: kbase's own SQLite
and sqlite-vec cannot share a process with Datasette's), one request at a time.
"""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import sys
import threading
from typing import Any

from datasette import hookimpl

_lock = threading.Lock()


# How long the plugin waits for a worker: to start (it loads the embedding model), and for an
# answer. A worker that gives none in time is stuck (or stopped): it is killed, the query gets an
# error, and the next query starts a new one; without a limit one stuck worker held every later
# query of its index, and Datasette's thread, forever (Datasette's own time limit interrupts
# SQLite's statements, not a function waiting on a pipe).
START_TIMEOUT = 120.0
ANSWER_TIMEOUT = 30.0


class _Worker:
    """kbase.datasette.worker for one index, started on first use and kept."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kbase.datasette.worker", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str] = queue.Queue()  # its output, read by a thread of its own
        threading.Thread(target=self._read, daemon=True).start()
        first = self._line(START_TIMEOUT)
        self.ready = bool(first) and json.loads(first or "{}").get("ready", False)
        if not self.ready:
            self._stop()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")  # its output closed

    def _line(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def _stop(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def ask(self, fn: str, *args: Any) -> dict:
        with self.lock:
            if self.proc.poll() is not None or not self.proc.stdin:
                return {"error": "kbase's search worker for this index has stopped", "hint": None}
            # (a blob goes as base64: the worker's own check then names it, as kbase sql's does)
            try:
                self.proc.stdin.write(
                    json.dumps({"fn": fn, "args": list(args)}, default=_blob) + "\n"
                )
                self.proc.stdin.flush()
            except OSError:  # it ended since (a broken pipe)
                return {"error": "kbase's search worker for this index has stopped", "hint": None}
            line = self._line(ANSWER_TIMEOUT)
            if line is None:
                self._stop()  # (its answer, if it ever came, would be taken for the next one's)
                return {
                    "error": f"kbase's search worker for {self.path} gave no answer in"
                    f" {ANSWER_TIMEOUT:g} s; it was stopped, the next query starts a new one",
                    "hint": None,
                }
            return json.loads(line or '{"error": "no answer"}')


def _blob(value: object) -> dict:
    if isinstance(value, bytes):
        return {"blob": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot send a {type(value).__name__}")


_workers: dict[str, _Worker | None] = {}  # index path -> its worker (None: no kbase index)


def _worker(path: str | None) -> _Worker | None:
    if not path:
        return None  # an in-memory database (Datasette's _internal, --memory)
    with _lock:
        w = _workers.get(path)
        if path not in _workers or (w is not None and w.proc.poll() is not None):
            # (a worker that died, killed or out of memory, is started again: kbase_search
            # answered 'has stopped' until Datasette was restarted)
            w = _Worker(path)
            _workers[path] = w if w.ready else None
        return _workers[path]


_vec: list[str] = []


def _load_sqlite_vec(conn: Any) -> None:
    if not hasattr(conn, "enable_load_extension"):
        raise RuntimeError(
            "kbase's Datasette plugin: this Python's sqlite3 cannot load extensions (built"
            " without --enable-loadable-sqlite-extensions), so sqlite-vec cannot be loaded;"
            " pip install pysqlite3-binary (Datasette uses it when it is installed)"
        )
    if not _vec:
        import sqlite_vec

        _vec.append(sqlite_vec.loadable_path())
    conn.enable_load_extension(True)
    try:
        conn.load_extension(_vec[0])
    finally:
        conn.enable_load_extension(False)


def _database_path(datasette: Any, database: str) -> str | None:
    db = datasette.databases.get(database)
    return getattr(db, "path", None) if db is not None else None


def _ask(path: str, fn: str, *args: Any) -> dict:
    worker = _worker(path)
    if worker is None:
        return {"error": "kbase's search worker for this index could not start", "hint": None}
    return worker.ask(fn, *args)


def _functions(path: str):
    def kbase_search(query=None, mode=None, lim=None) -> str:
        answer = _ask(path, "search", query, mode, lim)
        if "error" in answer:
            return json.dumps([answer], ensure_ascii=False)
        return json.dumps(answer["rows"], ensure_ascii=False)

    def kbase_embed(text=None) -> bytes:
        answer = _ask(path, "embed", text)
        if "error" in answer:  # Datasette logs it; the page says the function raised
            raise ValueError(answer["error"])
        return base64.b64decode(answer["vector"])

    return kbase_search, kbase_embed


@hookimpl
def prepare_connection(conn: Any, database: str, datasette: Any) -> None:
    _load_sqlite_vec(conn)
    path = _database_path(datasette, database)
    if path is None or _worker(path) is None:
        return
    search, embed = _functions(path)
    for n in (1, 2, 3):
        conn.create_function("kbase_search", n, search)
    conn.create_function("kbase_embed", 1, embed, deterministic=True)


@hookimpl
def startup(datasette: Any):
    async def inner() -> None:
        import asyncio

        def start() -> None:
            for name in list(datasette.databases):
                _worker(_database_path(datasette, name))

        await asyncio.get_running_loop().run_in_executor(None, start)

    return inner


SEARCH_SQL = """SELECT value ->> 'rank' AS rank, value ->> 'path' AS path,
       value ->> 'line' AS line, value ->> 'title' AS title,
       round(value ->> 'score', 4) AS score, value ->> 'heading_path' AS heading_path,
       value ->> 'snippet' AS snippet, value ->> 'error' AS error, value ->> 'hint' AS hint
FROM json_each(kbase_search(:q, nullif(:mode, ''), coalesce(nullif(:lim, ''), 10)))"""


@hookimpl
def canned_queries(datasette: Any, database: str) -> dict | None:
    if _worker(_database_path(datasette, database)) is None:
        return None
    return {
        "kbase_search": {
            "sql": SEARCH_SQL,
            "title": "kbase search",
            "description": "kbase's own ranking (hybrid once the index has embeddings):"
            ' q = the query (words, "phrases", -excluded, path:, tag:#x),'
            " mode = keyword, semantic or hybrid (empty: the default), lim = number of notes.",
        }
    }
