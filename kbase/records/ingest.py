"""What the ingest steps make of a file: headings, blocks, the parsed document, chunks and
diagnostics (see kbase.records)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    """A Markdown heading: ``body[start:end]`` is the heading's source line(s); a heading in a
    quote (``> ## Heading``, at any depth) starts after the quote's markers. Only top-level
    headings are blocks (and sections of the chunker's)."""

    level: int
    text: str  # as it reads: without the '#' markers and without a trailing attribute list
    start: int
    end: int
    line: int
    # The id an attribute list gives it (``## Props {#props}``: 'props'; Pandoc, MkDocs'
    # attr_list, Hugo, VitePress): its anchor on the site. None: the site makes one from the text.
    anchor: str | None = None


@dataclass(frozen=True, slots=True)  # slots: a canvas or a long note may have a million
class Block:
    """A top-level block of a document, as the chunker sees it: ``body[start:end]``."""

    kind: str  # heading, paragraph, list, quote, callout, code, table, html, math, hr
    start: int
    end: int
    level: int = 0  # heading level for kind == 'heading'
    parts: tuple[
        tuple[int, int], ...
    ] = ()  # list items or the blocks inside a quote, as (start, end)
    unclosed: bool = False  # a code fence that never closes (it runs to the end of the document)

    def __reduce__(self):
        return (Block, (self.kind, self.start, self.end, self.level, self.parts, self.unclosed))


@dataclass(frozen=True)
class ParsedDoc:
    """A decoded document with its metadata and block structure. Offsets index ``text``."""

    text: str
    kind: str  # 'markdown', 'text', 'pdf' or 'canvas'
    title: str
    frontmatter: dict | None
    body_start: int
    date: str | None
    tags: tuple[tuple[str, str], ...]  # (tag, source)
    aliases: tuple[str, ...]
    headings: tuple[Heading, ...]
    blocks: tuple[Block, ...]
    warnings: tuple[str, ...] = ()  # about the front matter (shown by kbase index and check)
    diagnostics: tuple[Diagnostic, ...] = ()  # structures too large to parse whole (cut)
    # PDFs: each page's [start, end) in ``text`` (page n is segments[n - 1]); canvases: each
    # card's (see ``cards``). Segments are separated by a form feed; a chunk prefers to end at one.
    # A million of them, or of cards, are columns (kbase.ingest.columns): read them as sequences.
    segments: Sequence[tuple[int, int]] = ()
    pdf: dict | None = None  # a PDF's document information (kbase.ingest.pdf.info_record)
    cards: Sequence = ()  # a canvas's cards (kbase.ingest.canvas.Card), one per segment
    edges: Sequence = ()  # a canvas's edges (kbase.ingest.canvas.Edge)


@dataclass(frozen=True, slots=True)  # slots: a canvas or a long note may have a million
class Chunk:
    """A passage of a document: ``text[start:end]`` exactly."""

    seq: int
    start: int
    end: int
    line: int  # 1-based line of ``start``
    heading_path: str  # enclosing headings joined by ' > '
    kind: str  # prose, code, table, list, quote, config, cli, mixed
    tokens: int  # size in the token counter's tokens
    flags: int = 0  # OVERSIZED (1): a protected block above the budget, kept whole
    end_line: int = 0  # 1-based line of the last character

    def __reduce__(self):  # as a worker sends them: a million, so not field by field
        return (
            Chunk,
            (
                self.seq,
                self.start,
                self.end,
                self.line,
                self.heading_path,
                self.kind,
                self.tokens,
                self.flags,
                self.end_line,
            ),
        )


@dataclass(frozen=True)
class Diagnostic:
    """Something a person may want to know about how a document was read or chunked."""

    kind: (
        str  # frontmatter (unreadable, ignored), oversized, unclosed_fence, cut_sentence, cut_word,
        # too_large (a structure too large to parse whole: a table's cells, a list cut at an item)
    )
    start: int
    end: int
    detail: str = ""
