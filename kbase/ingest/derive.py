"""One document's derived rows: its chunks, links and block ids, made the same way for a file that
ingest reads and for stored text derived again (``check --fix``, new chunk settings, a rename)."""

from __future__ import annotations

from dataclasses import dataclass

from kbase.ingest import canvas
from kbase.ingest.chunk import Chunking, ChunkSettings, TokenCounter, chunk
from kbase.ingest.embed_text import chunk_hashes
from kbase.ingest.links import Links, block_ids, parse_links
from kbase.records import ParsedDoc


@dataclass(frozen=True)
class Derived:
    """What ``store.writes.write_document`` stores of a parsed document."""

    doc: ParsedDoc
    chunking: Chunking
    links: Links
    block_ids: list[tuple[str, int, int]]  # (id, start, end)
    hashes: list[bytes]  # each chunk's embedder input hash (chunks.embed_hash)


def derive(
    doc: ParsedDoc, settings: ChunkSettings | None = None, counter: TokenCounter | None = None
) -> Derived:
    """Chunk ``doc`` and find its links and block ids. Pure: it runs in ingest's workers."""
    chunking = chunk(doc, counter, settings)
    links = canvas.links(doc) if doc.kind == "canvas" else parse_links(doc)
    return Derived(doc, chunking, links, block_ids(doc), chunk_hashes(doc, chunking.chunks))
