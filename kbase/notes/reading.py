"""A note as an agent or a script reads it: a region of its stored text, with line numbers, and
its metadata. Everything comes from the index (never from the file on disk)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import apsw

from kbase.errors import InputError
from kbase.notes.resolve import load, page_region
from kbase.records import DocRef, NoteEntry
from kbase.search.hits import is_stale
from kbase.text import LINE_BREAK

# A read without a line range returns at most this many lines (a huge note would flood an agent's
# context); ``truncated`` says so and the caller asks for the next range.
MAX_LINES = 400


@dataclass(frozen=True)
class NoteText:
    """Lines ``first_line``..``last_line`` (1-based, inclusive) of a note, and its metadata."""

    doc_id: int
    path: str
    abspath: str
    title: str
    kind: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    date: str | None  # front matter date
    modified: str  # the file's modification time when indexed (UTC, ISO-8601)
    indexed_at: str
    stale: bool  # the file changed on disk since it was indexed
    total_lines: int
    first_line: int
    last_line: int
    lines: tuple[str, ...]  # the region's lines, without line breaks
    truncated: bool  # the region was cut at ``MAX_LINES`` (no range asked for)
    page: int | None = None  # the PDF page read (``page=``), else None
    pages: int = 0  # a PDF's page count (0: not a PDF)
    # The name as given, when it named no note and this note's name is a typo away from it.
    corrected_from: str | None = None
    missing: bool = False  # the file is gone from disk (stale too): moved or deleted

    def numbered(self) -> str:
        """The region with right-aligned line numbers, as ``kbase show PATH:START-END``
        prints it."""
        width = len(str(self.last_line))
        return "\n".join(
            f"{n:>{width}} | {line}" for n, line in enumerate(self.lines, self.first_line)
        )


def split_lines(body: str) -> list[str]:
    """The lines of a stored body (LF, CRLF or CR), without an empty line after a final break."""
    lines = LINE_BREAK.split(body)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def read_note(
    con: apsw.Connection,
    doc: DocRef,
    start_line: int | None = None,
    end_line: int | None = None,
    max_lines: int = MAX_LINES,
    page: int | None = None,
) -> NoteText:
    """Lines ``start_line``..``end_line`` of ``doc`` (default: the whole note,
    up to ``max_lines``), or a PDF's ``page`` (1-based; with a line range, the range is within
    the whole text and must not be given: one or the other)."""
    if page is not None:
        if start_line is not None or end_line is not None:
            raise InputError(
                "give a page or a line range, not both", "read page=N, or start_line/end_line"
            )
        region = page_region(doc, page)
        start_line, end_line = region.first, region.last
    lines = split_lines(doc.body)
    if doc.kind in ("pdf", "canvas"):
        lines = [ln.replace("\f", "") if "\f" in ln else ln for ln in lines]
    total = len(lines)
    first = start_line or 1
    if first < 1 or (end_line is not None and end_line < first):
        raise InputError(
            f"no lines {first}-{end_line} in {doc.path}",
            f"give 1 <= start_line <= end_line (the note has {total} lines)",
        )
    if first > max(total, 1):
        raise InputError(
            f"{doc.path} has {total} lines, not {first}", "give a start_line within the note"
        )
    last = min(end_line if end_line is not None else first + max_lines - 1, total)
    truncated = end_line is None and last < total
    size, mtime_ns, date, indexed_at = con.execute(
        "SELECT size, mtime_ns, date, indexed_at FROM documents WHERE id = ?", (doc.id,)
    ).fetchone()
    tags = tuple(
        t
        for (t,) in con.execute(
            "SELECT DISTINCT tag FROM tags WHERE doc_id = ? ORDER BY tag", (doc.id,)
        )
    )
    aliases = tuple(
        a
        for (a,) in con.execute(
            "SELECT alias FROM aliases WHERE doc_id = ? ORDER BY alias", (doc.id,)
        )
    )
    modified = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC).isoformat(timespec="seconds")
    return NoteText(
        doc.id,
        doc.path,
        doc.abspath,
        doc.title,
        doc.kind,
        tags,
        aliases,
        date,
        modified,
        indexed_at,
        is_stale(doc.abspath, size, mtime_ns),
        total,
        first,
        last,
        tuple(lines[first - 1 : last]),
        truncated,
        page,
        len(doc.pages),
        doc.corrected_from,
        doc.missing,
    )


def note_at(con: apsw.Connection, path: str) -> DocRef:
    """The document at exactly ``path`` inside its root (what ``kbase://note/{path}`` names)."""
    rows = con.execute(
        "SELECT d.id, r.path FROM documents AS d"
        " JOIN roots AS r ON r.id = d.root_id WHERE d.path = ? ORDER BY r.path",
        (path,),
    ).fetchall()
    if not rows:
        raise InputError(
            f"no indexed note at {path!r}", "list the notes (resources/list) or search for it"
        )
    if len(rows) > 1:
        raise InputError(
            f"{path!r} is in {len(rows)} roots: {', '.join(r[1] for r in rows)}",
            "read it with the read tool and its absolute path",
        )
    return load(con, rows[0][0])


def note_list(con: apsw.Connection, offset: int, limit: int) -> list[NoteEntry]:
    """Notes in path order, ``limit`` of them from ``offset``."""
    rows = con.execute(
        "SELECT path, title, kind FROM documents ORDER BY path, id LIMIT ? OFFSET ?",
        (limit, offset),
    )
    return [NoteEntry(path=p, title=t, kind=k) for p, t, k in rows]


def complete_notes(con: apsw.Connection, typed: str, limit: int) -> tuple[list[str], int]:
    """Paths of the notes ``typed`` begins to name, as someone types: the path, the file name or
    the title starts with it (case-insensitive for ASCII), paths first; ``limit`` of them and
    how many there are in all."""
    like = typed.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = con.execute(
        "SELECT path, CASE WHEN path LIKE ?1 ESCAPE '\\' THEN 0 ELSE 1 END AS rank"
        " FROM documents WHERE path LIKE ?1 ESCAPE '\\' OR title LIKE ?1 ESCAPE '\\'"
        " OR path LIKE '%/' || ?1 ESCAPE '\\'"
        " ORDER BY rank, path",
        (like,),
    ).fetchall()
    paths = list(dict.fromkeys(p for p, _ in rows))
    return paths[:limit], len(paths)
