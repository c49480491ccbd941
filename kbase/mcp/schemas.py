"""What the tools take and give: argument types and limits, the structured results (each tool's
output schema), and the server's instructions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

SEARCH_LIMIT_MAX = 100
SQL_ROWS_DEFAULT, SQL_ROWS_MAX = 200, 5000
SQL_TIMEOUT_MAX = 60.0

INSTRUCTIONS = """\
kbase indexes a person's notes (Markdown with [[wikilinks]], #tags and front matter, or plain text)
in one SQLite file. Start with `search` (keyword, semantic or hybrid; filters by folder, tag and
date), then `read` a hit at its line, follow `links` (outgoing and backlinks), and ask `related`
for notes close in meaning. `sql` runs read-only SQL on the documented tables (documents, chunks,
links, tags, views notes, backlinks, ...). Everything is read-only; notes are read from the index,
never from disk."""


# --- results -----------------------------------------------------------------------------------
class SearchHit(BaseModel):
    rank: int
    title: str
    path: str = Field(description="path inside its root; pass it to read, links or related")
    abspath: str
    line: int = Field(description="1-based line of the best match")
    heading_path: str = Field(description="enclosing headings, e.g. 'Guide > Install'")
    snippet: str
    score: float = Field(
        description="higher is better; bm25 (keyword), cosine (semantic) or a fusion sum (hybrid)"
    )
    stale: bool = Field(description="the file changed on disk since it was indexed")
    tags: list[str]
    matched_chunks: int


class SearchResult(BaseModel):
    query: str
    mode: str
    hits: list[SearchHit]


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
    last_line: int
    truncated: bool = Field(description="more lines follow: read again with start_line")
    text: str = Field(description="lines first_line..last_line, joined with newlines")


class LinkItem(BaseModel):
    line: int = Field(description="line of the link in the note that holds it")
    context: str = Field(description="that line")
    target: str = Field(description="the link target as written")
    anchor: str | None
    path: str | None = Field(description="the other note's path (None: unresolved)")
    title: str | None
    resolved: bool


class LinksResult(BaseModel):
    path: str
    title: str
    outgoing: list[LinkItem]
    backlinks: list[LinkItem]


class RelatedNote(BaseModel):
    rank: int
    title: str
    path: str
    line: int = Field(description="line of the passage that matched best")
    heading_path: str
    snippet: str
    score: float = Field(description="cosine similarity (semantic) or bm25 (keyword)")
    linked: bool = Field(description="the note links to it (listed only with include_linked)")
    links_here: bool = Field(description="it links to the note")


class RelatedResult(BaseModel):
    path: str
    title: str
    method: Literal["semantic", "keyword"] = Field(
        description="semantic: from chunk vectors; keyword: the note has no embeddings, so its "
        "most distinctive terms were searched instead"
    )
    terms: list[str] = Field(description="the terms searched (keyword method)")
    notes: list[RelatedNote]


class SqlResult(BaseModel):
    columns: list[str]
    rows: list[list[Any]] = Field(description="blobs as base64 text")
    truncated: bool = Field(description="more rows exist than max_rows")


NoteArg = Annotated[
    str,
    Field(
        min_length=1,
        description=(
            "The note: its path inside its root as search returns it ('folder/Note.md'), "
            "with or without '.md' and any unique end of the path ('Note'), "
            "or an absolute file path."
        ),
    ),
]
