"""What the other calls of the API return: the reports of index, embed, check and compact runs,
status, models, roots, notes and SQL results (see kbase.records)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbase.text import jsonable

if TYPE_CHECKING:
    from kbase.records.runs import RootInfo
    from kbase.records.search import Hit


@dataclass(frozen=True)
class ModelInfo:
    """The index's embedding model (``KB.model()``, ``kbase status``)."""

    name: str  # as --model takes it: all-MiniLM-L6-v2, multilingual-e5-small, fastembed:NAME
    fingerprint: str | None  # meta 'embedder' (JSON), None before the first vector
    switching_to: str | None = None  # the model the index is switching to, if any
    switch_done: int = 0  # chunks that have the new model's vector
    switch_total: int = 0  # all chunks


@dataclass(frozen=True)
class ModelHint:
    """Most of the index's notes are in languages its embedding model does not read
    (``KB.model_hint``): which, the model, and the one that would read them."""

    languages: tuple[str, ...]  # most frequent first: 'Chinese', 'Japanese', 'Korean', 'Thai', ...
    share: float  # of the index's chunks (a sample) written in them
    model: str  # the index's model, e.g. all-MiniLM-L6-v2
    suggested: str  # e.g. multilingual-e5-small (kbase index --model NAME)


@dataclass(frozen=True)
class RootRemoval:
    """A root forgotten with its documents (``kbase roots remove``)."""

    path: str
    documents: int


@dataclass(frozen=True)
class Problem:
    """A broken invariant: what, how many rows, and whether ``check --fix`` can repair it."""

    kind: str
    count: int
    detail: str
    fixable: bool = True


@dataclass(frozen=True)
class FrontmatterWarning:
    """A note indexed without its front matter, which could not be read (malformed YAML...)."""

    path: str
    line: int
    detail: str


@dataclass(frozen=True)
class CheckReport:
    """``kbase check``: the index's problems (none: healthy), what ``--fix`` repaired, and
    warnings about the notes themselves (not problems of the index)."""

    problems: tuple[Problem, ...]
    fixed: tuple[str, ...] = ()
    warnings: tuple[FrontmatterWarning, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class CompactReport:
    """``kbase compact``: the file's size (with its WAL) before and after, in bytes."""

    bytes_before: int
    bytes_after: int

    @property
    def bytes_saved(self) -> int:
        return self.bytes_before - self.bytes_after


@dataclass(frozen=True)
class Status:
    """``kbase status``: what the index holds, counts and sizes."""

    db: str
    roots: tuple[RootInfo, ...]
    documents: int
    chunks: int
    embedded_chunks: int
    links: int
    unresolved_links: int
    tags: int  # distinct tags
    oversized_chunks: int
    diagnostics: dict[str, int]  # chunking diagnostics by kind
    frontmatter_warnings: int  # notes indexed without their front matter
    chunker: dict | None  # the chunker's settings (meta 'chunker'), None before the first run
    encodings: dict[str, int]  # documents by text encoding, most used first
    text_bytes: int
    db_bytes: int
    db_to_text: float | None
    last_index_at: str | None
    # kbase index embeds new and changed chunks; False: keyword-only (kbase index --no-embed)
    # until kbase embed or kbase index --embed
    auto_embed: bool = True
    model: ModelInfo | None = None  # the embedding model (None: no index yet)
    pdfs: int = 0  # PDF documents
    pdf_pages: int = 0  # their pages
    pdf_text_pages: int = 0  # of which with text (the others are images: scans)
    canvases: int = 0  # Obsidian canvases
    unreadable: int = 0  # files skipped for what they hold (table unreadable)
    wal_bytes: int = 0  # the -wal file's size (0 once copied into the index and truncated)
    # of which readers' old snapshots keep out of the index (None: cannot tell, a read-only index)
    wal_waiting_bytes: int | None = None

    @property
    def embedding_coverage(self) -> float | None:
        """The share of chunks semantic search sees (None: no chunks)."""
        return self.embedded_chunks / self.chunks if self.chunks else None


@dataclass
class RelatedResult:
    """``kbase related``: the notes nearest a note, and how they were found."""

    doc_id: int  # the note asked about
    path: str
    title: str
    method: (
        str  # 'semantic' (chunk vectors) or 'keyword' (no vectors for this note: distinctive terms)
    )
    terms: tuple[str, ...]  # the keyword method's query terms
    hits: list[
        Hit
    ]  # best first; ``score``: cosine similarity (semantic) or bm25, negated (keyword)
    links_to: frozenset[int] = (
        frozenset()
    )  # documents the note links to (left out unless asked for)
    linked_from: frozenset[int] = frozenset()  # documents that link to the note


@dataclass(frozen=True)
class NoteEntry:
    """One note in a listing of every note (``KB.note_list``), e.g. an MCP resource."""

    path: str  # inside its root
    title: str
    kind: str  # 'markdown', 'text', ...


@dataclass(frozen=True)
class DocRef:
    """A document as stored: its text and where it came from."""

    id: int
    path: str
    abspath: str
    title: str
    body: str
    body_start: int
    kind: str = "markdown"  # or 'text', 'pdf', 'canvas'
    stale: bool = False  # the file changed (or vanished) on disk since it was indexed
    missing: bool = False  # the file is gone from disk (a moved vault, a deleted note)
    pages: tuple[tuple[int, int], ...] = ()  # a PDF's pages: page n is body[a:b] of pages[n - 1]
    # The name as given, when it named no note and this note's name is a typo away from it
    # ('quick serch' found 'Quick Search'); None when the name matched as it is.
    corrected_from: str | None = None

    def page_at(self, offset: int) -> int | None:
        """The 1-based page of a PDF that ``offset`` of the body falls on (None: not a PDF)."""
        if not self.pages:
            return None
        return max(1, bisect_right([a for a, _ in self.pages], offset))


@dataclass(frozen=True)
class SqlResult:
    """The rows of a read-only SQL query (``KB.sql``)."""

    columns: list[str]
    rows: list[tuple]

    def keys(self) -> list[str]:
        """The column names made unique as SQLite names a CREATE TABLE AS's columns ('a', 'a:1'),
        so that no column of ``SELECT 1 AS a, 2 AS a`` hides another in a record."""
        keys: list[str] = []
        for c in self.columns:
            key, n = c, 0
            while key in keys:
                n += 1
                key = f"{c}:{n}"
            keys.append(key)
        return keys

    def dicts(self) -> Iterator[dict]:
        """Each row as {column: value} (the columns as ``keys`` names them), blobs as base64
        text (for JSON)."""
        keys = self.keys()
        for row in self.rows:
            yield {k: jsonable(v) for k, v in zip(keys, row)}
