"""What the tools take and give: argument types and limits, the structured results (each tool's
output schema), and the descriptions an agent reads in tools/list."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from kbase.mcp.budget import MAX_BUDGET, MIN_BUDGET

SEARCH_LIMIT_MAX = 100
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
        description="Tokens of text this result may take (about 4 characters of English each). "
        "A result cut to fit says what was left out and the call that gets the rest.",
    ),
]


NAME_CHARS = 4096  # a note argument longer than any path (PATH_MAX) names no note

NoteArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=NAME_CHARS,
        description="The note: its path inside its root as search returns it ('folder/Note.md'), "
        "with or without '.md', any unique end of the path ('Note'), its title or an alias, "
        "as a [[wikilink]] names it.",
    ),
]
Offset = Annotated[
    int,
    Field(
        ge=0,
        le=OFFSET_MAX,
        description="Skip this many items: to continue a cut result, pass the next_offset it gave.",
    ),
]


# --- results -----------------------------------------------------------------------------------
class Page(BaseModel):
    """Fields every list result shares."""

    offset: int = Field(description="how many items were skipped (the offset argument)")
    next_offset: int | None = Field(
        description="more items follow: call again with offset=next_offset (None: this is all)"
    )
    left_out: str | None = Field(description="what was left out and how to get it, if anything")


class SearchHit(BaseModel):
    rank: int
    title: str
    path: str = Field(description="path inside its root; pass it to read, links or related")
    line: int = Field(description="1-based line of the best match")
    page: int | None = Field(
        default=None, description="the PDF page of the match, if any (read it with page)"
    )
    card: str | None = Field(default=None, description="the canvas card (id) of the match, if any")
    heading_path: str = Field(description="enclosing headings, e.g. 'Guide > Install'")
    snippet: str
    score: float = Field(
        description="higher is better; bm25 (keyword), cosine (semantic) or a fusion sum (hybrid)"
    )
    stale: bool = Field(description="the file changed on disk since it was indexed")
    tags: list[str]
    matched_chunks: int


class SearchResult(Page):
    query: str
    mode: str
    hits: list[SearchHit]
    notice: str | None = Field(
        default=None, description="what of the query was left out (repeated terms, a cut)"
    )
    corrected_query: str | None = Field(
        None,
        description="the query as searched when a word no note holds was corrected to the "
        "nearest word of the index ('publsh' -> 'publish'), else None",
    )


class ReadResult(BaseModel):
    path: str
    abspath: str
    title: str
    kind: str
    tags: list[str]
    aliases: list[str]
    date: str | None = Field(description="the front matter date, if any")
    modified: str = Field(description="the file's modification time when indexed (UTC)")
    indexed_at: str
    stale: bool = Field(description="the file changed on disk since it was indexed")
    total_lines: int
    first_line: int
    last_line: int = Field(description="the last line shown (whole or, see next_start_char, cut)")
    truncated: bool = Field(description="more lines follow: read again with next_start_line")
    next_start_line: int | None = Field(description="where to continue (start_line)")
    next_start_char: int | None = Field(
        description="the last line was cut: continue with start_line=next_start_line and "
        "start_char=next_start_char"
    )
    left_out: str | None = Field(description="what was left out and how to get it, if anything")
    page: int | None = Field(default=None, description="the PDF page read (page=N), if any")
    pages: int | None = Field(default=None, description="a PDF's page count")
    text: str = Field(description="the lines shown, joined with newlines")
    corrected_from: str | None = Field(
        None,
        description="the note name given, when it named no note and this note's name is a "
        "typo away from it (did you mean), else None",
    )


class LinkItem(BaseModel):
    line: int = Field(description="line of the link in the note that holds it")
    context: str = Field(description="that line (cut around the link when long)")
    target: str = Field(description="the link target as written")
    anchor: str | None
    path: str | None = Field(description="the other note's path (None: unresolved)")
    title: str | None
    resolved: bool


class LinksResult(Page):
    path: str
    title: str
    outgoing_total: int = Field(description="outgoing links in all (listed or not)")
    backlinks_total: int = Field(description="backlinks in all (listed or not)")
    outgoing: list[LinkItem]
    backlinks: list[LinkItem]


class RelatedNote(BaseModel):
    rank: int
    title: str
    path: str
    line: int = Field(description="line of the passage that matched best")
    page: int | None = Field(default=None, description="the PDF page of that passage, if any")
    heading_path: str
    snippet: str
    score: float = Field(description="cosine similarity (semantic) or bm25 (keyword)")
    linked: bool = Field(description="the note links to it (listed only with include_linked)")
    links_here: bool = Field(description="it links to the note")


class RelatedResult(Page):
    path: str
    title: str
    method: Literal["semantic", "keyword"] = Field(
        description="semantic: from chunk vectors; keyword: the note has no embeddings, so its "
        "most distinctive terms were searched instead"
    )
    terms: list[str] = Field(description="the terms searched (keyword method)")
    notes: list[RelatedNote]


class SqlResult(Page):
    columns: list[str]
    rows: list[list[Any]] = Field(
        description="values as the text shows them: a long text cut (…), a blob as "
        "'<blob N bytes>' (select hex(x) or length(x) to see it)"
    )
    truncated: bool = Field(description="more rows exist than were shown")


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
Search the notes; one hit per note, best first, each with its title, path, the line of the best
passage, its heading path and a snippet. Use it first to find notes about something; then read a
hit (path and line) for the full text. Prefer mode semantic or hybrid for questions in plain
language, keyword for exact names, identifiers and phrases.
Example: {"query": "how do recurring tasks work", "limit": 5, "path": "Getting Started/"}"""

READ = """\
Read a note from the index: its text with line numbers, and its title, tags, aliases, dates and
whether the file changed since it was indexed. Give start_line/end_line to read a part (e.g.
around a search hit's line), or page for a PDF's page (a hit's page); without them up to 400
lines come back. A long result is cut to the
budget and says where to continue (next_start_line). A name that matches several notes is an
error listing them.
Example: {"note": "Getting Started/Dates.md", "start_line": 40, "end_line": 80}"""

LINKS = """\
A note's outgoing links (with their targets, resolved the way Obsidian resolves them) and its
backlinks (the notes linking to it), each with its line and the text of that line; up to `limit`
of each, from `offset`. Use it to follow the author's own connections from a note.
Example: {"note": "Settings", "direction": "backlinks", "limit": 20}"""

RELATED = """\
Notes closest in meaning to a note (from its passages' embeddings), leaving out those it already
links to: notes worth reading next or linking. Without embeddings, the note's most distinctive
words are searched instead (method 'keyword').
Example: {"note": "Recurring Tasks", "limit": 5}"""

SQL = """\
Run one read-only SQL statement (SQLite) on the index, for what the other tools do not answer:
counts, lists by tag or date, link statistics. Writes are refused; a slow query is stopped at
`timeout`. Long values are cut as the text shows them (read a note's text with read); blobs show
their size. kbase_search(query, mode, limit) is a table-valued function. The tables and views
are described in docs/SCHEMA.md; the main ones: documents, chunks, links, tags, aliases,
headings, roots; views notes, note_tags, document_stats, backlinks, resolved_links,
unresolved_links, chunk_texts.
Example: {"query": "SELECT tag, count(*) AS n FROM note_tags GROUP BY tag ORDER BY n DESC"}"""


def sql_description(tables: dict[str, list[str]], views: dict[str, list[str]]) -> str:
    """The sql tool's description with the tables and views (and their columns) of the index it
    serves."""
    head = SQL.split("The tables and views")[0]

    def listing(found: dict[str, list[str]]) -> str:
        return "; ".join(f"{name}({', '.join(cols)})" for name, cols in found.items())

    return (
        f"{head}Tables: {listing(tables)}.\nViews: {listing(views)}.\n"
        "docs/SCHEMA.md describes every column.\n" + SQL.rsplit("\n", 1)[1]
    )


STATUS = """\
What the index holds: its roots, counts of notes, chunks and links, how many chunks have
embeddings (semantic search covers only those), and when it was last indexed.
Example: {}"""
