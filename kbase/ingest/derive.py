"""One document's derived rows: its chunks, links and block ids, made the same way for a file that
ingest reads and for stored text derived again (``check --fix``, new chunk settings, a rename)."""

from __future__ import annotations

import dataclasses
import math
from array import array
from dataclasses import dataclass

from kbase.ingest import canvas
from kbase.ingest.chunk import Chunking, ChunkSettings, TokenCounter, chunk
from kbase.ingest.embed_text import chunk_hashes
from kbase.ingest.links import Links, block_ids, pack_strings, parse_links, unpack_strings
from kbase.records import Chunk, ParsedDoc


@dataclass(frozen=True)
class Derived:
    """What ``store.writes.write_document`` stores of a parsed document."""

    doc: ParsedDoc
    chunking: Chunking
    links: Links
    block_ids: list[tuple[str, int, int]]  # (id, start, end)
    hashes: list[bytes]  # each chunk's embedder input hash (chunks.embed_hash)

    def __reduce__(self):
        # As a worker sends it: the chunks, a canvas's cards and the segments column by column.
        # Pickled one by one, each object's state stayed alive in pickle's memo until the end
        # (a canvas of 1,000,000 cards: a GB), and took seconds either way.
        doc = self.doc
        packed_doc = dataclasses.replace(doc, cards=(), segments=(), blocks=())
        return (
            _derived,
            (
                packed_doc,
                doc.blocks,
                _pack_segments(doc.segments),
                _pack_cards(doc.cards),
                _pack_chunks(self.chunking.chunks),
                self.chunking.diagnostics,
                self.links,
                self.block_ids,
                b"".join(self.hashes),
                len(self.hashes[0]) if self.hashes else 0,
            ),
        )


def _derived(doc, blocks, segments, cards, chunks, diagnostics, links, ids, hashes, width):
    cards = _unpack_cards(cards)
    if cards and len(segments[0]) == len(cards):  # a canvas's: its cards' spans (their numbers)
        kept = tuple((c.start, c.end) for c in cards)
        segments = (
            kept if all(map(tuple.__eq__, kept, zip(*segments))) else _unpack_segments(segments)
        )
    else:
        segments = _unpack_segments(segments)
    doc = dataclasses.replace(doc, blocks=blocks, segments=segments, cards=cards)
    found = [hashes[i : i + width] for i in range(0, len(hashes), width)] if width else []
    return Derived(doc, Chunking(_unpack_chunks(chunks), diagnostics), links, ids, found)


_CHUNK_INTS = ("seq", "start", "end", "line", "tokens", "flags", "end_line")


def _pack_chunks(chunks: list[Chunk]) -> tuple:
    ints = tuple(array("q", [getattr(c, f) for c in chunks]) for f in _CHUNK_INTS)
    return ints, [c.heading_path for c in chunks], [c.kind for c in chunks]


def _unpack_chunks(packed: tuple) -> list[Chunk]:
    (seq, start, end, line, tokens, flags, end_line), paths, kinds = packed
    return list(map(Chunk, seq, start, end, line, paths, kinds, tokens, flags, end_line))


def _pack_segments(segments: tuple) -> tuple[array, array]:
    return array("q", [a for a, _ in segments]), array("q", [b for _, b in segments])


def _unpack_segments(packed: tuple[array, array]) -> tuple:
    return tuple(zip(*packed))


_CARD_INTS = ("seq", "start", "end")
_CARD_STRINGS = ("id", "kind", "file", "subpath", "url", "color", "from_id", "to_id")
_CARD_FLOATS = ("x", "y", "width", "height")  # None as NaN (a card's are finite or None)


def _pack_cards(cards: tuple) -> tuple:
    if not cards:
        return ()
    ints = tuple(array("q", [getattr(c, f) for c in cards]) for f in _CARD_INTS)
    strings = tuple(pack_strings([getattr(c, f) for c in cards]) for f in _CARD_STRINGS)
    floats = tuple(
        array("d", [math.nan if (v := getattr(c, f)) is None else v for c in cards])
        for f in _CARD_FLOATS
    )
    return ints, strings, floats


def _shared(strings: list) -> list:
    seen: dict = {}
    return [seen.setdefault(t, t) for t in strings]


def _unpack_cards(packed: tuple) -> tuple:
    if not packed:
        return ()
    ints, strings, floats = packed
    columns = {
        **dict(zip(_CARD_INTS, ints)),
        # each kind, colour or file once, not a string a card (the id is the card's own)
        **{
            f: unpack_strings(p) if f == "id" else _shared(unpack_strings(p))
            for f, p in zip(_CARD_STRINGS, strings)
        },
        **{f: [None if math.isnan(v) else v for v in col] for f, col in zip(_CARD_FLOATS, floats)},
    }
    names = [f.name for f in dataclasses.fields(canvas.Card)]
    return tuple(map(canvas.Card, *(columns[n] for n in names)))


def derive(
    doc: ParsedDoc, settings: ChunkSettings | None = None, counter: TokenCounter | None = None
) -> Derived:
    """Chunk ``doc`` and find its links and block ids. Pure: it runs in ingest's workers."""
    chunking = chunk(doc, counter, settings)
    links = canvas.links(doc) if doc.kind == "canvas" else parse_links(doc)
    return Derived(doc, chunking, links, block_ids(doc), chunk_hashes(doc, chunking.chunks))
