"""The index as a SQL API: read-only queries with a time limit, plus kbase's SQL functions.

Functions available in ``kbase sql`` (and on ``KB.sql_connection()``):

- ``kbase_embed(text)``: the query's embedding (float32 blob) for sqlite-vec, e.g.
  ``SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH kbase_embed('...') AND k = 10``
- ``kbase_search(query [, mode [, lim]])``: a table-valued function giving kbase's own ranked
  results (hybrid by default once the index has embeddings), one row per document:
  ``SELECT rank, path, line, snippet FROM kbase_search('backup strategy', 'hybrid', 5)``
"""

from __future__ import annotations

import time

import apsw
import apsw.ext

from kbase.errors import InputError
from kbase.models import SqlResult

SQL_TIMEOUT = 10.0  # seconds; a runaway query is interrupted, never left to hang the process
_PROGRESS_STEPS = 1000  # SQLite VM steps between deadline checks

_WRITES = {
    apsw.SQLITE_INSERT,
    apsw.SQLITE_UPDATE,
    apsw.SQLITE_DELETE,
    apsw.SQLITE_CREATE_INDEX,
    apsw.SQLITE_CREATE_TABLE,
    apsw.SQLITE_CREATE_TEMP_INDEX,
    apsw.SQLITE_CREATE_TEMP_TABLE,
    apsw.SQLITE_CREATE_TEMP_TRIGGER,
    apsw.SQLITE_CREATE_TEMP_VIEW,
    apsw.SQLITE_CREATE_TRIGGER,
    apsw.SQLITE_CREATE_VIEW,
    apsw.SQLITE_CREATE_VTABLE,
    apsw.SQLITE_DROP_INDEX,
    apsw.SQLITE_DROP_TABLE,
    apsw.SQLITE_DROP_TEMP_INDEX,
    apsw.SQLITE_DROP_TEMP_TABLE,
    apsw.SQLITE_DROP_TEMP_TRIGGER,
    apsw.SQLITE_DROP_TEMP_VIEW,
    apsw.SQLITE_DROP_TRIGGER,
    apsw.SQLITE_DROP_VIEW,
    apsw.SQLITE_DROP_VTABLE,
    apsw.SQLITE_ALTER_TABLE,
    apsw.SQLITE_ATTACH,
    apsw.SQLITE_DETACH,
    apsw.SQLITE_REINDEX,
    apsw.SQLITE_ANALYZE,
}
# PRAGMAs that describe the schema: their argument names a table or an index (or bounds a
# check), so they only read whatever it is. Each also works as a table-valued function
# (``SELECT * FROM pragma_table_info('links')``), which the authorizer sees as the same PRAGMA.
_SCHEMA_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
}
# PRAGMAs that read a setting or a list when given no argument. Given one they would change the
# file (user_version = 3) or this connection (foreign_keys = OFF): refused. Any PRAGMA in
# neither set (optimize, wal_checkpoint, incremental_vacuum, ...) is refused too.
_SETTING_PRAGMAS = {
    "user_version",
    "application_id",
    "schema_version",
    "data_version",
    "page_count",
    "page_size",
    "freelist_count",
    "max_page_count",
    "encoding",
    "journal_mode",
    "journal_size_limit",
    "locking_mode",
    "auto_vacuum",
    "synchronous",
    "wal_autocheckpoint",
    "cache_size",
    "mmap_size",
    "temp_store",
    "busy_timeout",
    "query_only",
    "foreign_keys",
    "defer_foreign_keys",
    "recursive_triggers",
    "automatic_index",
    "secure_delete",
    "cell_size_check",
    "trusted_schema",
    "legacy_alter_table",
    "ignore_check_constraints",
    "reverse_unordered_selects",
    "analysis_limit",
    "threads",
    "soft_heap_limit",
    "hard_heap_limit",
    "compile_options",
    "function_list",
    "module_list",
    "pragma_list",
    "database_list",
    "collation_list",
}


class ReadOnlyViolation(InputError):
    pass


def _authorizer(
    action: int, a: str | None, b: str | None, db: str | None, trigger: str | None
) -> int:
    if action in _WRITES:
        return apsw.SQLITE_DENY
    if action == apsw.SQLITE_PRAGMA:  # a: the pragma's name, b: its argument or value
        name = (a or "").lower()
        if not (name in _SCHEMA_PRAGMAS or (name in _SETTING_PRAGMAS and b is None)):
            return apsw.SQLITE_DENY
    return apsw.SQLITE_OK


def register(con: apsw.Connection, kb) -> None:
    """Add kbase_embed() and kbase_search() to ``con`` (``kb`` supplies the model and searches)."""

    def kbase_embed(text):
        if not isinstance(text, str):
            raise apsw.SQLError("kbase_embed(text) takes one text argument")
        return kb.embedder.embed_query(text)

    con.create_scalar_function("kbase_embed", kbase_embed, 1, deterministic=True)

    def kbase_search(query, mode=None, lim=10):
        if not isinstance(query, str):
            return
        for h in kb.search(query, mode=mode or None, limit=int(lim or 10)):
            yield (
                h.rank,
                h.score,
                h.doc_id,
                h.chunk_id,
                h.path,
                h.title,
                h.line,
                h.heading_path,
                h.snippet,
                h.page,
                h.card,
            )

    # apsw.ext reads the table's columns and how rows give them from the function's attributes
    vars(kbase_search).update(
        columns=(
            "rank",
            "score",
            "doc_id",
            "chunk_id",
            "path",
            "title",
            "line",
            "heading_path",
            "snippet",
            "page",
            "card",
        ),
        column_access=apsw.ext.VTColumnAccess.By_Index,
    )
    apsw.ext.make_virtual_module(con, "kbase_search", kbase_search)


def run(
    con: apsw.Connection, sql: str, *, timeout: float = SQL_TIMEOUT, max_rows: int | None = None
) -> SqlResult:
    """Run ``sql`` on a read-only connection; writes are refused, and it stops after ``timeout``."""
    if not sql.strip():
        raise InputError(
            "no SQL given", 'pass a query: kbase sql "SELECT ..." (or on stdin, or with --file)'
        )
    deadline = time.monotonic() + timeout
    con.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
    con.authorizer = _authorizer
    try:
        cursor = con.cursor()
        rows: list[tuple] = []
        columns: list[str] = []
        for row in cursor.execute(sql):
            if not columns:
                columns = [d[0] for d in cursor.getdescription()]
            rows.append(row)
            if max_rows is not None and len(rows) >= max_rows:
                break
        if not columns:  # no rows: the prepared statement still knows its columns
            info = apsw.ext.query_info(con, sql)
            columns = [d[0] for d in info.description or ()] if not info.query_remaining else []
        return SqlResult(columns, rows)
    except apsw.AuthError as e:
        raise ReadOnlyViolation(
            f"kbase sql is read-only; refused: {_first_line(sql)}",
            "change the index with kbase commands (index, embed, check --fix);"
            " query it with SELECT",
        ) from e
    except apsw.ReadOnlyError as e:
        raise ReadOnlyViolation(
            f"kbase sql is read-only; refused: {_first_line(sql)}", "query the index with SELECT"
        ) from e
    except apsw.InterruptError as e:
        raise InputError(
            f"query stopped after the {timeout:g} s time limit", "narrow it, or raise --timeout"
        ) from e
    except apsw.SQLError as e:
        raise InputError(
            f"SQL error: {e}".replace("SQLError: ", ""),
            "see docs/SCHEMA.md for tables and examples",
        ) from e
    finally:
        con.set_progress_handler(None)
        con.authorizer = None


def _first_line(sql: str) -> str:
    line = sql.strip().splitlines()[0]
    return line if len(line) <= 60 else line[:57] + "..."
