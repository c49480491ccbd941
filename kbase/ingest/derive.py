"""One document's derived rows: its chunks, links and block ids, made the same way for a file that
ingest reads and for stored text derived again (``check --fix``, new chunk settings, a rename)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from kbase.ingest.chunk import Chunking, ChunkSettings, TokenCounter, chunk
from kbase.ingest.columns import Bytes, Spans, chunk_columns
from kbase.ingest.embed_text import chunk_hashes
from kbase.ingest.links import Links, block_ids, html_ids, parse_links
from kbase.records import ParsedDoc


@dataclass(frozen=True)
class Derived:
    """What ``store.writes.write_document`` stores of a parsed document. What a document may
    have a million of (chunks, links, a canvas's cards, a PDF's pages, the hashes) is kept in
    columns (kbase.ingest.columns, Links): a worker sends them as a few arrays and strings, and
    the writer reads its rows from them without making an object a row."""

    doc: ParsedDoc
    chunking: Chunking  # its chunks: Records of Chunk
    links: Links
    block_ids: list[tuple[str, int, int]]  # (id, start, end)
    html_ids: list[tuple[str, int, int]]  # (id, start, end): its elements' ids (links.html_ids)
    hashes: Sequence[bytes]  # each chunk's embedder input hash (chunks.embed_hash): Bytes


def derive(
    doc: ParsedDoc, settings: ChunkSettings | None = None, counter: TokenCounter | None = None
) -> Derived:
    """Chunk ``doc`` and find its links, block ids and elements' ids. Pure: it runs in ingest's
    workers."""
    chunking = chunk(doc, counter, settings)
    if doc.kind == "canvas":
        from kbase.ingest import canvas  # (canvases only)

        links = canvas.links(doc)
    else:
        links = parse_links(doc)
    hashes = Bytes(chunk_hashes(doc, chunking.chunks), width=8)
    chunking = Chunking(chunk_columns(chunking.chunks), chunking.diagnostics)
    if doc.segments and not isinstance(doc.segments, Spans):  # a PDF's pages
        doc = dataclasses.replace(doc, segments=Spans.of(doc.segments))
    return Derived(doc, chunking, links, block_ids(doc), html_ids(doc), hashes)
