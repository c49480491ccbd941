"""The index as a SQL API: read-only queries with a time limit, plus kbase's SQL functions.

Functions available in ``kbase sql`` (and on ``KB.sql_connection()``):

- ``kbase_embed(text)``: the query's embedding (float32 blob) for sqlite-vec, e.g.
  ``SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH kbase_embed('...') AND k = 10``
- ``kbase_search(query [, mode [, lim]])``: a table-valued function giving kbase's own ranked
  results (hybrid by default once the index has embeddings), one row per document:
  ``SELECT rank, path, line, snippet FROM kbase_search('backup strategy', 'hybrid', 5)``
"""

from __future__ import annotations

import re

import apsw
import apsw.ext

from kbase.errors import InputError, KbaseError
from kbase.records import SqlResult

SQL_TIMEOUT = 10.0  # seconds; a runaway query is interrupted, never left to hang the process

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
    con.create_scalar_function("kbase_embed", embed_function(kb), 1, deterministic=True)
    con.create_module(
        "kbase_search",
        _SearchModule(kb),
        use_bestindex_object=True,
        eponymous=True,
        eponymous_only=True,
        read_only=True,
    )


def embed_function(kb):
    """kbase_embed(text): the query's embedding as sqlite-vec reads it (a float32 blob), for any
    SQLite connection (``register``; the Datasette plugin, kbase.datasette)."""
    from kbase.search.query import MAX_QUERY_CHARS

    def kbase_embed(text):
        if not isinstance(text, str):
            raise InputError(
                "kbase_embed(text) takes one text argument", "e.g. kbase_embed('backup strategy')"
            )
        if len(text) > MAX_QUERY_CHARS:
            raise InputError(
                f"kbase_embed: a text of {len(text):,} characters is too long",
                f"pass at most {MAX_QUERY_CHARS:,} (the model reads about 1,500 of them)",
            )
        return kb.embedder.embed_query(text)

    return kbase_embed


SEARCH_COLUMNS = (
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
)
_SEARCH_ARGS = ("query", "mode", "lim")  # hidden columns: kbase_search(query, mode, lim)
# (the hint of a mode or lim of the wrong type too: it said 'kbase_search needs a query')
_SEARCH_USAGE = "call it as kbase_search('words' [, 'hybrid' [, 10]])"


def search_rows(kb, query, mode=None, lim=None, *, literal: bool = False) -> list[tuple]:
    """kbase_search(query [, mode [, lim]]) as rows of SEARCH_COLUMNS (no query: none), its
    arguments checked as SQL passes them (any type); the table-valued function here and the
    Datasette plugin's (kbase.datasette) give these rows. A query without words gives no rows
    (a title of punctuation, an empty body, an empty form), unless it is ``literal``, written in
    the statement (``kbase_search('')``): then it is an error, as kbase search's."""
    if query is None:
        return []
    if not isinstance(query, str):
        query = str(query) if isinstance(query, (int, float)) else None
        if query is None:
            raise InputError("kbase_search(query): the query must be text", _SEARCH_USAGE)
    if mode is not None and not isinstance(mode, str):
        raise InputError("kbase_search(query, mode): the mode must be text", _SEARCH_USAGE)
    try:
        limit = int(lim) if lim is not None else 10
    except (TypeError, ValueError):
        raise InputError(
            f"kbase_search(query, mode, lim): lim must be a number, not {lim!r}",
            _SEARCH_USAGE,
        ) from None
    from kbase.search.query import bound_query, parse_query

    parsed = parse_query(bound_query(query)[0])
    if parsed.empty and not parsed.operators:  # nothing to search for
        if literal:
            raise InputError(
                f"kbase_search(query): no words to search for in {query!r}", _SEARCH_USAGE
            )
        return []  # (from a column: a title of punctuation, say): no rows, no error
    return [
        (
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
        for h in _trusted(kb, query, mode or None, limit)
    ]


class _SearchModule:
    """The table-valued function kbase_search(query [, mode [, lim]]): kbase's ranked results.

    Its arguments are hidden columns; a plan that does not give it the query (SQLite tries one
    when the query comes from a joined table's column) is refused in BestIndex, so SQLite picks
    the one that does, or says that no plan works."""

    def __init__(self, kb) -> None:
        self.kb = kb
        cols = ", ".join([*SEARCH_COLUMNS, *(f"{a} HIDDEN" for a in _SEARCH_ARGS)])
        self.schema = f"CREATE TABLE kbase_search({cols})"

    def Connect(self, db, modulename, dbname, tablename, *args):
        return self.schema, _SearchTable(self.kb)

    Create = Connect


LITERAL_QUERY = 1  # (the plan's idxNum)


class _SearchTable:
    def __init__(self, kb) -> None:
        self.kb = kb

    def BestIndexObject(self, o: apsw.IndexInfo) -> bool:
        first = len(SEARCH_COLUMNS)
        given: dict[int, int] = {}  # argument -> constraint
        for c in range(o.nConstraint):
            col = o.get_aConstraint_iColumn(c) - first
            if col < 0 or not o.get_aConstraint_usable(c):
                continue
            if o.get_aConstraint_op(c) != apsw.SQLITE_INDEX_CONSTRAINT_EQ or col in given:
                return False
            given[col] = c
        if 0 not in given:
            return False  # no query: this plan cannot work (SQLITE_CONSTRAINT)
        for n, (_col, c) in enumerate(sorted(given.items()), 1):
            o.set_aConstraintUsage_argvIndex(c, n)
            o.set_aConstraintUsage_omit(c, True)
        o.idxStr = ",".join(str(col) for col in sorted(given))
        # The query written in the statement (a literal, known now), not read from a column
        o.idxNum = LITERAL_QUERY if o.get_aConstraint_rhs(given[0]) is not None else 0
        o.estimatedRows = 10
        o.estimatedCost = 1000.0
        return True

    def Open(self):
        return _SearchCursor(self.kb)

    def Disconnect(self) -> None:
        pass

    Destroy = Disconnect


def _trusted(kb, query: str, mode: str | None, limit: int):
    """``kb.search`` from inside the user's statement, as kbase's own code: the read-only guard
    (the authorizer) is lifted while it runs, because the spelling correction reads the keyword
    vocabulary through a temporary fts5vocab table, which the guard refuses to create. The user's
    SQL was authorized when it was prepared, and is again if SQLite prepares it anew; the time
    limit and the heap limit go on applying. The guard is back before any row is returned."""
    con = kb.reader
    guard = con.authorizer
    con.authorizer = None
    try:
        return kb.search(query, mode=mode, limit=limit)
    finally:
        con.authorizer = guard


class _SearchCursor:
    def __init__(self, kb) -> None:
        self.kb = kb
        self.rows: list[tuple] = []
        self.pos = 0
        self.args: list = [None, None, None]

    def Filter(self, indexnum, indexname, constraintargs) -> None:
        self.args = [None, None, None]
        for col, value in zip(indexname.split(","), constraintargs):
            self.args[int(col)] = value
        self.pos = 0
        self.rows = []
        self.rows = search_rows(self.kb, *self.args, literal=indexnum == LITERAL_QUERY)

    def Eof(self) -> bool:
        return self.pos >= len(self.rows)

    def Next(self) -> None:
        self.pos += 1

    def Rowid(self) -> int:
        return self.pos

    def Column(self, col: int):
        if col == -1:
            return self.pos
        if col < len(SEARCH_COLUMNS):
            return self.rows[self.pos][col]
        return self.args[col - len(SEARCH_COLUMNS)]

    def Close(self) -> None:
        self.rows = []


# Bounds on one ``kbase sql`` call besides its time: a value (text or blob) is at most
# SQL_MAX_VALUE bytes, or the largest note in the index if that is larger (so that every body can
# be read), the statement at most SQL_MAX_STATEMENT characters, SQLite's memory at most
# SQL_HEAP_LIMIT bytes (for the whole process while the call runs), and the rows it returns at
# most SQL_MAX_RESULT bytes. Temporary data (sorts, DISTINCT, GROUP BY, temporary tables) is held
# in memory (read connections are opened with PRAGMA temp_store = MEMORY), so the heap limit
# bounds it too and no temporary file is written: a 1.8 GB ORDER BY was written to the temp folder
# before, which no limit bounded, and a full temp folder failed as "database or disk is full".
# ``randomblob(1000000000)`` took 31 s and 1 GB before, in a single step that no time limit can
# stop; now it is refused at once.
SQL_MAX_VALUE = 64 * 2**20
SQL_MAX_STATEMENT = 1_000_000
SQL_HEAP_LIMIT = 1024 * 2**20
SQL_MAX_RESULT = 256 * 2**20


_COMMENTS = re.compile(r"--[^\n]*|/\*.*?(\*/|$)|[\s;]+", re.S)


def _one_statement(con: apsw.Connection, sql: str) -> None:
    """``sql`` is one statement (comments and semicolons after it are fine): several would run
    one after the other, their rows under the first one's columns. Each is prepared first, so a
    write among them is refused as a write."""
    rest: str | None = sql
    second = None
    while rest and _COMMENTS.sub("", rest):
        if second is None and rest is not sql:
            second = rest.strip()
        rest = apsw.ext.query_info(con, rest).query_remaining
    if second is not None:
        raise InputError(
            f"kbase sql runs one statement; this holds more: {_first_line(second)}",
            "run each statement on its own",
        )


def run(
    con: apsw.Connection, sql: str, *, timeout: float = SQL_TIMEOUT, max_rows: int | None = None
) -> SqlResult:
    """Run ``sql`` on a read-only connection; writes are refused, it stops after ``timeout``
    seconds, and its values, memory and result are bounded (see SQL_MAX_VALUE). Every failure is
    an ``InputError`` of one line."""
    if not _COMMENTS.sub("", sql):
        shown = sql.strip()[:60]
        what = f" in {shown!r}: only semicolons, comments or spaces" if shown else ""
        raise InputError(
            f"no SQL given{what}", "pass a query, e.g. SELECT path, title FROM notes LIMIT 5"
        )
    if len(sql) > SQL_MAX_STATEMENT:
        raise InputError(
            f"the SQL is {len(sql):,} characters long", f"keep it under {SQL_MAX_STATEMENT:,}"
        )
    from kbase.store import db

    largest = con.execute("SELECT coalesce(max(size), 0) FROM documents").fetchone()[0]
    max_value = max(SQL_MAX_VALUE, 4 * largest)  # a UTF-16 file's text is larger in UTF-8
    old_length = con.limit(apsw.SQLITE_LIMIT_LENGTH, max_value)
    old_heap = apsw.hard_heap_limit(SQL_HEAP_LIMIT)
    if old_heap and old_heap < SQL_HEAP_LIMIT:
        apsw.hard_heap_limit(old_heap)  # someone set a tighter one: keep it
    con.authorizer = _authorizer
    try:
        with db.time_limit(con, timeout):
            _one_statement(con, sql)
            cursor = con.cursor()
            rows: list[tuple] = []
            columns: list[str] = []
            size = 0
            for row in cursor.execute(sql):
                if not columns:
                    columns = [d[0] for d in cursor.getdescription()]
                rows.append(row)
                size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row) + 16
                if size > SQL_MAX_RESULT:
                    raise InputError(
                        f"the result passed {SQL_MAX_RESULT // 2**20} MB after {len(rows):,} rows",
                        "add a LIMIT, or select fewer or shorter columns",
                    )
                if max_rows is not None and len(rows) >= max_rows:
                    break
            if not columns:  # no rows: the prepared statement still knows its columns
                info = apsw.ext.query_info(con, sql)
                columns = [d[0] for d in info.description or ()] if not info.query_remaining else []
            return SqlResult(columns, rows)
    except db.TimeLimitExceeded as e:
        raise InputError(
            f"query stopped after the {timeout:g} s time limit", "narrow it, or raise --timeout"
        ) from e
    except KbaseError:
        raise  # from kbase_search() or kbase_embed(): already one line with a hint
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
    except apsw.TooBigError as e:
        raise InputError(
            f"SQL error: a value would pass {max_value // 2**20} MB",
            "kbase sql keeps every text or blob under that: ask for less",
        ) from e
    except apsw.FullError as e:  # temporary data is in memory: only an odd VFS gets here
        raise InputError(
            "SQL error: no space left for the query's temporary data (not the index's disk)",
            "ask for less at once: fewer rows, a LIMIT, no large sort",
        ) from e
    except apsw.NoMemError as e:
        raise InputError(
            f"SQL error: the query needs more than the {SQL_HEAP_LIMIT // 2**20} MB"
            " of memory kbase sql allows",
            "ask for less at once: fewer rows, a LIMIT, no large sort",
        ) from e
    except apsw.SQLError as e:
        message = _one_line(str(e)).replace("SQLError: ", "")
        if _WRITE_ON_VIEW.search(message):  # SQLite says so before asking the authorizer
            raise ReadOnlyViolation(
                f"kbase sql is read-only; refused: {_first_line(sql)}",
                "change the index with kbase commands (index, embed, check --fix);"
                " query it with SELECT",
            ) from e
        hint = "see docs/SCHEMA.md for tables and examples"
        if "no query solution" in message:
            message, hint = "kbase_search got no query", _SEARCH_USAGE
        raise InputError(f"SQL error: {message}", hint) from e
    except apsw.Error as e:
        raise InputError(
            f"SQL error: {_one_line(str(e))}", "see docs/SCHEMA.md for tables and examples"
        ) from e
    except (TypeError, ValueError, OverflowError) as e:  # a value a function cannot take
        raise InputError(
            f"SQL error: {type(e).__name__}: {_one_line(str(e))}",
            "see docs/SCHEMA.md for kbase's functions and their arguments",
        ) from e
    finally:
        con.authorizer = None
        con.limit(apsw.SQLITE_LIMIT_LENGTH, old_length)
        apsw.hard_heap_limit(old_heap)


# What SQLite says, before any authorizer call, of an INSERT, UPDATE or DELETE on a view or on a
# table-valued function (kbase_search, pragma_table_info, json_each).
_WRITE_ON_VIEW = re.compile(
    r"^cannot modify \S.* because it is a view$|^table \S.* may not be modified$"
)


def _one_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 300 else line[:297] + "..."


def _first_line(sql: str) -> str:
    line = sql.strip().splitlines()[0]
    return line if len(line) <= 60 else line[:57] + "..."
