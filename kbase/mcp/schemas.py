"""What the tools take and give: argument types and limits, the structured results (each tool's
output schema), and the descriptions an agent reads in tools/list."""

from __future__ import annotations

import types
import typing
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_serializer

from kbase.api import MAX_SEARCH_LIMIT
from kbase.mcp.budget import MAX_BUDGET, MIN_BUDGET
from kbase.text import MAX_NAME_CHARS

SEARCH_LIMIT_MAX = 100
SEARCH_RANKED_MAX = MAX_SEARCH_LIMIT  # the most hits KB.search ranks
LINKS_LIMIT_DEFAULT, LINKS_LIMIT_MAX = 50, 1000
RELATED_LIMIT_MAX = 100
OFFSET_MAX = 10_000
SQL_ROWS_DEFAULT, SQL_ROWS_MAX = 200, 5000
SQL_TIMEOUT_DEFAULT, SQL_TIMEOUT_MAX = 10.0, 60.0
READ_LINES = 400  # lines read without a range


Budget = Annotated[
    int,
    Field(
        ge=MIN_BUDGET,
        le=MAX_BUDGET,
        description="Most tokens of the result.",
    ),
]


NAME_CHARS = MAX_NAME_CHARS  # a note argument longer than any path names no note (the engine's)

NoteArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=NAME_CHARS,
        description="A path as search gives it, a unique end of one, a title or an alias.",
    ),
]
Offset = Annotated[
    int,
    Field(ge=0, le=OFFSET_MAX, description="A cut result's next_offset."),
]


# --- results -----------------------------------------------------------------------------------
# The structured form of each result: what its text shows, no more (a field at its default is
# left out, and what only the text needs, a rank, a score, a heading path, is excluded), so that
# it is never larger than the text (a client that forwards both pays less than twice).
class Page(BaseModel):
    """Fields every list result shares."""

    offset: int = 0  # items skipped (the offset argument)
    next_offset: int | None = None  # more follow: call again with offset=next_offset
    left_out: str | None = None  # what was left out and how to get it
    # (links, related: a page cut by its limit alone is said by next_offset; left_out is then the
    # text's only, and the structured form keeps it for what the budget left out)
    limit_cut: bool = Field(default=False, exclude=True)


class SearchHit(BaseModel):
    rank: int = Field(exclude=True)  # (the text's; in the structured form, offset + position)
    title: str = ""  # left out when it is the file's name
    path: str
    line: int  # of the best match
    page: int | None = None  # a PDF's
    card: str | None = None  # a canvas's
    heading_path: str = Field("", exclude=True)  # (the text's)
    snippet: str = ""  # when there is no passage
    passage: str | None = None  # the lines that matched: lines[0] to lines[1] of the note
    lines: list[int] | None = None
    score: float = Field(exclude=True)  # (the text's; the order says the rest)
    stale: bool = False  # the file changed on disk since it was indexed
    missing: bool = False  # the file is gone from disk (moved or deleted; stale too)
    tags: list[str] = []

    @model_serializer(mode="wrap")
    def _short(self, handler: Any) -> dict:
        """A title that is the file's own name (an Obsidian note's) left out."""
        out = handler(self)
        if isinstance(out, dict) and PurePosixPath(self.path).stem == self.title:
            del out["title"]
        return out


class SearchResult(Page):
    query: str = Field(exclude=True)  # the request's
    mode: str  # the mode searched (left out when the request gave it)
    mode_given: bool = Field(False, exclude=True)
    hits: list[SearchHit]
    notice: str | None = None  # what of the query was left out (repeated terms, a cut)
    corrected_query: str | None = None  # the query as searched, when a word was corrected

    @model_serializer(mode="wrap")
    def _short(self, handler: Any) -> dict:
        out = handler(self)
        if isinstance(out, dict) and self.mode_given:
            out.pop("mode", None)
        return out


class ReadResult(BaseModel):
    path: str
    abspath: str
    title: str
    kind: str = Field(exclude=True)  # (pages says a PDF)
    tags: list[str] = []
    aliases: list[str] = []
    date: str | None = None  # the front matter date
    modified: str  # the file's modification time when indexed (UTC)
    indexed_at: str = Field(exclude=True)
    stale: bool = False  # the file changed on disk since it was indexed
    missing: bool = False  # the file is gone from disk (moved or deleted; stale too)
    total_lines: int
    first_line: int
    last_line: int  # the last line shown (whole or, see next_start_char, cut)
    truncated: bool = False  # more lines follow: read again with next_start_line
    next_start_line: int | None = None
    next_start_char: int | None = None  # the last line was cut: continue with it too
    left_out: str | None = None
    page: int | None = None  # the PDF page read (page=N)
    pages: int | None = None  # a PDF's page count
    text: str  # the lines shown, joined with newlines
    corrected_from: str | None = None  # the name given, when this note is a typo away from it


# Links and related notes are rows, not objects: most are short (a path, a line number, a line of
# text), and an object's keys made their JSON 1.25 (links) and 1.06 (related) times their text.
# A row holds the fields every item has, in a fixed order (docs/mcp.md), then, only when the item
# has any, an object of the others.
def _row(fixed: list, **extra: Any) -> list:
    rest = {k: v for k, v in extra.items() if v}
    return [*fixed, rest] if rest else fixed


def _name(title: str | None, path: str | None) -> str:
    """A title in a row: "" when it is the file's own name (an Obsidian note's)."""
    return "" if not title or (path and PurePosixPath(path).stem == title) else title


class LinkItem(BaseModel):
    line: int  # of the link in the note that holds it
    context: str  # that line (cut around the link when long)
    target: str | None = None  # the link as written, when it resolves to no note
    anchor: str | None = None
    path: str | None = None  # the other note's path
    title: str | None = None  # the linking note's (backlinks; the text's only)
    incoming: bool = Field(False, exclude=True)  # a backlink

    @model_serializer(mode="plain")
    def _short(self) -> list:
        """A backlink: [line, path, context] (its note's title is the text's); an outgoing link:
        [line, path, context], and its anchor when it has one; one that resolves to no note:
        [line, null, context, anchor or null, the link as written]."""
        if self.incoming:
            return [self.line, self.path, self.context]
        if self.path is None:
            return [self.line, None, self.context, self.anchor, self.target]
        return [self.line, self.path, self.context, *([self.anchor] if self.anchor else [])]


class LinksResult(Page):
    path: str
    title: str = Field(exclude=True)  # (the text's: the path names the note)
    # The totals are left out when the lists are whole (offset 0, nothing follows: their
    # lengths), and when 0.
    outgoing_total: int = 0  # outgoing links in all (listed or not)
    backlinks_total: int = 0
    outgoing: list[LinkItem] = []  # (an empty list left out)
    backlinks: list[LinkItem] = []

    @model_serializer(mode="wrap")
    def _short(self, handler: Any) -> dict:
        out = handler(self)
        if isinstance(out, dict):
            if self.limit_cut:
                out.pop("left_out", None)
            if not self.offset and self.next_offset is None:
                out.pop("outgoing_total", None)
                out.pop("backlinks_total", None)
        return out


class RelatedNote(BaseModel):
    rank: int = Field(exclude=True)
    title: str
    path: str
    line: int  # of the passage that matched best
    page: int | None = None
    heading_path: str = Field("", exclude=True)
    snippet: str
    score: float = Field(exclude=True)
    linked: bool = False  # the note links to it (listed only with include_linked)
    links_here: bool = False  # it links to the note

    @model_serializer(mode="plain")
    def _short(self) -> list:
        """[path, line, title, snippet], then {page, linked, links_here} when it has them."""
        return _row(
            [self.path, self.line, _name(self.title, self.path), self.snippet],
            page=self.page,
            linked=self.linked,
            links_here=self.links_here,
        )


class RelatedResult(Page):
    path: str
    title: str = Field(exclude=True)  # (the text's: the path names the note)
    method: Literal["semantic", "keyword"]  # keyword: no embeddings, its terms searched
    terms: list[str] = []  # the terms searched (keyword method)
    notes: list[RelatedNote]

    @model_serializer(mode="wrap")
    def _short(self, handler: Any) -> dict:
        out = handler(self)
        if isinstance(out, dict) and self.limit_cut:
            out.pop("left_out", None)
        return out


class SqlResult(Page):
    columns: list[str]
    rows: list[list[Any]]  # as the text shows them: a long text cut (…), a blob by its size
    truncated: bool = False  # more rows exist than were shown


# --- descriptions ------------------------------------------------------------------------------
INSTRUCTIONS = """\
kbase indexes a person's notes (Markdown with [[wikilinks]], #tags and front matter, plain text,
PDFs) in one SQLite file. Start with `search` (keyword, semantic or hybrid; filters by folder, tag
and date), then `read` a hit at its line, follow `links` (outgoing and backlinks), and ask
`related` for notes close in meaning. `sql` runs read-only SQL on the documented tables and views.
Everything is read-only. Every result fits a budget (about 8,000 tokens unless you pass `budget`);
a cut result ends with a line saying what was left out and the call that continues it. The
prompt `answer-from-notes` shows the way to answer a question from the notes with citations."""

SEARCH = """\
Search the notes: one hit per note, best first, with path and line; the first hits with their
passage (numbered lines to quote and cite), the others a snippet. Mode keyword for exact words.
Example: {"query": "how do recurring tasks work", "limit": 5}"""

READ = """\
A note's text with line numbers, and its title, tags and dates. start_line/end_line read a part
(around a hit's line), page a PDF's page; else up to 400 lines.
Example: {"note": "Getting Started/Dates.md", "start_line": 40, "end_line": 80}"""

LINKS = """\
A note's outgoing links and its backlinks (notes linking to it), each with its line and text.
Example: {"note": "Settings"}"""

RELATED = """\
Notes closest in meaning to a note (by embeddings; else by its distinctive words), leaving out
those it links to already.
Example: {"note": "Recurring Tasks"}"""

SQL = """\
One read-only SQLite statement (counts, lists by tag or date, link statistics).
kbase_search(query, mode, limit) is a table-valued function. The tables and views are in
docs/SCHEMA.md.
Example: {"query": "SELECT tag, count(*) AS n FROM note_tags GROUP BY tag ORDER BY n DESC"}"""


def sql_description(tables: dict[str, list[str]], views: dict[str, list[str]]) -> str:
    """The sql tool's description with the views (and their columns) and the tables of the
    index it serves."""
    head = SQL.split("The tables and views")[0]
    listing = "; ".join(
        f"{name}({', '.join(cols)})" for name, cols in views.items() if name in MAIN_VIEWS
    )
    others = [name for name in views if name not in MAIN_VIEWS] + list(tables)
    return (
        f"{head}Views: {listing}. Also: {', '.join(others)} (docs/SCHEMA.md).\n"
        + SQL.rsplit("\n", 1)[1]
    )


MAIN_VIEWS = ("notes", "note_tags", "document_stats")


STATUS = """\
What the index holds: roots, counts of notes, chunks and links, embedding coverage, last run.
Example: {}"""


# --- what tools/list shows ----------------------------------------------------------------------
# tools/list is read before the first call, so it is kept short (at most 2,000 tokens in all:
# tests/test_mcp_tools_list.py): no titles, optional arguments without their null, and output
# schemas that give each field of a result its type (the text of a result explains itself).
def compact_input(schema: dict) -> dict:
    """A tool's input schema without pydantic's titles and ``anyOf [X, null]`` spelt out."""
    out: dict = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key == "properties":
            value = {name: compact_input(p) for name, p in value.items()}
        elif key == "anyOf" and any(v == {"type": "null"} for v in value):
            kept = [v for v in value if v != {"type": "null"}]
            if len(kept) == 1:
                out.update(compact_input(kept[0]))
                continue
        elif key == "items" and isinstance(value, dict):
            value = compact_input(value)
        elif key == "default" and value is None:
            continue
        out[key] = value
    return out


_JSON_TYPES = {int: "integer", str: "string", float: "number", bool: "boolean"}


def _json_type(annotation: Any) -> dict:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_json_type(a) for a in typing.get_args(annotation)]
        names = [p["type"] for p in parts if "type" in p]
        return {"type": names if len(names) > 1 else names[0]} if names else {}
    if annotation is type(None):
        return {"type": "null"}
    if origin is Literal:
        return {"type": "string"}
    if origin is list or annotation is list:
        return {"type": "array"}
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    return {}


def output_schema(model: type[BaseModel]) -> dict:
    """The structured result's fields (as ``Reply.data`` gives them) and their types (or null);
    a field at its default is left out of a result."""
    props = {}
    for name, f in model.model_fields.items():
        if f.exclude:
            continue
        kind = _json_type(f.annotation)
        if f.default is None and isinstance(kind.get("type"), list):  # absent rather than null
            kind = {"type": next(t for t in kind["type"] if t != "null")}
        props[name] = kind
    return {"type": "object", "properties": props}


OUTPUTS: dict[str, type[BaseModel]] = {
    "search": SearchResult,
    "read": ReadResult,
    "links": LinksResult,
    "related": RelatedResult,
    "sql": SqlResult,
}
