"""Restrictions on which documents a search may return, as SQL over ``documents AS d``."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import apsw

from kbase.errors import InputError
from kbase.search import cjk
from kbase.search.query import Operator, Term, glob_error


@dataclass(frozen=True)
class Filters:
    """Restrictions on which documents a search may return."""

    path: str | None = (
        None  # glob on the root-relative path, or a folder/path prefix if no wildcard
    )
    tags: tuple[str, ...] = ()  # each must be present (nested tags match: 'a' matches 'a/b')
    since: str | None = None  # ISO date: the document's date (front matter, else mtime) >= since
    until: str | None = None  # ISO date: <= until (inclusive)
    exclude: tuple[str, ...] = ()  # paths to leave out: globs or folder/path prefixes, as ``path``
    # Obsidian operators from the query (kbase.search.query.Operator): every group must hold, a
    # group when one of its operators does.
    operators: tuple[tuple[Operator, ...], ...] = ()
    # The query's -excluded terms: a note that holds one anywhere (any chunk, its title or
    # aliases, a heading) is left out, in every mode, as Obsidian leaves out the whole note.
    without: tuple[Term, ...] = ()

    def sql(self) -> tuple[str, list]:
        """A WHERE fragment over ``documents AS d`` and its bindings. Paths match without regard
        to case (ASCII letters, as SQLite's lower())."""
        where: list[str] = []
        args: list = []
        if self.path:
            where.append(_path_match(self.path, args, "path"))
        for pattern in self.exclude:
            if pattern.strip().strip("/"):
                where.append(f"NOT {_path_match(pattern, args, 'excluded path')}")
        for tag in self.tags:
            where.append(_tag_match(tag, args))
        for group in self.operators:
            where.append("(" + " OR ".join(_operator_match(op, args) for op in group) + ")")
        if self.without:
            where.append(_without_match(self.without, args))
        date_expr = "date(coalesce(d.date, datetime(d.mtime_ns / 1000000000, 'unixepoch')))"
        if self.since:
            where.append(f"{date_expr} >= date(?)")
            args.append(_check_date(self.since, "--since"))
        if self.until:
            where.append(f"{date_expr} <= date(?)")
            args.append(_check_date(self.until, "--until"))
        return (" AND ".join(where) or "1"), [_bindable(a) for a in args]


def keeping_nothing(con: apsw.Connection, path: str | None, tags: tuple[str, ...]) -> list[str]:
    """Of ``path`` and ``tags`` (a search's filters), each that alone keeps no document, in a
    user's words (KB.filters_that_keep_nothing)."""

    def none_kept(filters: Filters) -> bool:
        where, args = filters.sql()
        found = con.execute(f"SELECT 1 FROM documents AS d WHERE {where} LIMIT 1", args)
        return found.fetchone() is None

    said = [f"no note's path matches {path!r}"] if path and none_kept(Filters(path=path)) else []
    for tag in tags:
        if none_kept(Filters(tags=(tag,))):
            said.append(f"no note has the tag {tag!r} (or one under it)")
    return said


def _bindable(value: object) -> object:
    """A filter value SQLite can take: a lone surrogate (from a file name or argument Python
    decoded with surrogateescape) cannot be encoded to UTF-8, so it becomes U+FFFD, which no stored
    path or tag holds, instead of failing the search."""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _path_match(pattern: str, args: list, what: str) -> str:
    """SQL true when ``d.path`` matches ``pattern``: a glob if it has a wildcard, else the path
    itself or a folder above it. A glob that can match nothing (``what`` names it) is an error."""
    p = pattern.strip().strip("/").lower()
    if error := glob_error(p, f"{what} {pattern!r}"):
        raise InputError(*error)
    if any(ch in p for ch in "*?["):
        args.append(p)
        return "(lower(d.path) GLOB ?)"
    if not p:
        return "1"
    args += [p, len(p) + 1, p + "/"]
    return "(lower(d.path) = ? OR lower(substr(d.path, 1, ?)) = ?)"


def _tag_match(tag: str, args: list) -> str:
    """SQL true when the note has ``tag`` or a tag nested under it ('a' matches 'a/b'), any
    case."""
    t = tag.lstrip("#")
    args += [t, _like_escape(t) + "/%"]
    return (
        "EXISTS (SELECT 1 FROM tags t WHERE t.doc_id = d.id"
        " AND (t.tag = ? OR t.tag LIKE ? ESCAPE '\\'))"
    )


# The file name of ``d.path`` (what follows its last '/'), in SQL.
_FILE_NAME = "substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1)"


def _operator_match(op: Operator, args: list) -> str:
    """SQL for one Obsidian operator: ``path:`` and ``file:`` match where the path (the file name)
    contains the value, any case (a glob if it has a wildcard); ``tag:`` as ``--tag``."""
    if op.name == "tag":
        sql = _tag_match(op.value, args)
    else:
        column = "lower(d.path)" if op.name == "path" else f"lower({_FILE_NAME})"
        value = op.value.lower()
        args.append(value)
        sql = (
            f"({column} GLOB ?)"
            if any(ch in value for ch in "*?[")
            else f"(instr({column}, ?) > 0)"
        )
    return f"NOT {sql}" if op.negated else sql


def _without_match(terms: tuple[Term, ...], args: list) -> str:
    """SQL true when no chunk of the note holds one of ``terms``: words in scripts without spaces
    are looked for in chunks_cjk (chunks_fts holds their runs whole), the others in chunks_fts,
    which holds every chunk."""
    held = []
    for table, expr in (
        ("chunks_fts", cjk.excluded_words(terms)),
        (cjk.TABLE, cjk.excluded_runs(terms)),
    ):
        if expr:
            held.append(f"SELECT rowid FROM {table} WHERE {table} MATCH ?")
            args.append(expr)
    return (
        "d.id NOT IN (SELECT c.doc_id FROM chunks AS c WHERE c.id IN ("
        + " UNION ALL ".join(held)
        + "))"
    )


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_RELATIVE = re.compile(r"^(\d+)([dwmy])$")


def _check_date(value: str, option: str) -> str:
    """ISO date or datetime, or a relative age like 7d, 2w, 3m, 1y
    (days, weeks, months, years ago)."""
    m = _RELATIVE.match(value.strip())
    if m:
        days = int(m.group(1)) * {"d": 1, "w": 7, "m": 30, "y": 365}[m.group(2)]
        return (dt.date.today() - dt.timedelta(days=days)).isoformat()
    try:
        return dt.datetime.fromisoformat(value.strip()).date().isoformat()
    except ValueError:
        raise InputError(
            f"{option} {value!r} is not a date", "use YYYY-MM-DD or an age like 7d, 2w, 3m, 1y"
        ) from None
