"""What the embedding model is shown for a chunk and the hash that names it: the text a vector is
made from (``embed_input``: the note's title and heading path as context, then the chunk),
``input_hash`` of it, and ``chunk_hashes`` for a derived document (chunks.embed_hash). A chunk
whose hash is unchanged keeps its vector, so this is computed where documents are derived and
read where vectors are made."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kbase.records import Chunk, ParsedDoc

# At most this many characters of "title > headings" context go before a chunk's text: about
# 32 tokens, the room the chunker leaves under the model's 256 (kbase.records.defaults.MAX_TOKENS).
CONTEXT_CHARS = 120
# Of a title and a heading path only their first characters can reach the context: read that
# many (room for empty parts' separators), not all. A heading of a MB, the path of each of the
# thousands of chunks under it, was split and lowercased whole for each: 44 s for one note.
_READ = 4 * CONTEXT_CHARS


def embed_input(title: str, heading_path: str, text: str) -> str:
    """The text the embedder sees for a chunk: its document's title and heading path as context,
    then the chunk itself. Stored offsets still point at the chunk text alone."""
    title, heading_path = title[:_READ], heading_path[:_READ]
    parts = heading_path.split(" > ") if heading_path else []
    if title and (not parts or parts[0].strip().lower() != title.strip().lower()):
        parts.insert(0, title)
    context = " > ".join(p for p in parts if p)[:CONTEXT_CHARS]
    return f"{context}\n\n{text}" if context else text


def input_hash(title: str, heading_path: str, text: str) -> bytes:
    """Identifies what the embedder sees: the first 64 bits of its sha256 (a collision among a
    million chunks has odds of about 1 in 3.7e7, and costs one chunk a near-duplicate's vector)."""
    return hashlib.sha256(
        embed_input(title, heading_path, text).encode("utf-8", "surrogatepass")
    ).digest()[:8]


def chunk_hashes(doc: ParsedDoc, chunks: Sequence[Chunk]) -> list[bytes]:
    """chunks.embed_hash of each chunk: what the embedder would see
    (``input_hash``)."""
    text = doc.text
    return [input_hash(doc.title, c.heading_path, text[c.start : c.end]) for c in chunks]
