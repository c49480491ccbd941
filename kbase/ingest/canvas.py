"""Obsidian canvases (``.canvas``, JSON Canvas 1.0) -> a text kbase can index, and its cards.

A canvas is JSON: ``nodes`` (cards: ``text`` with Markdown, ``file`` naming a file of the vault,
``link`` with a URL, ``group`` with a label) and ``edges`` between them (with an optional label).
Its stored text is one segment per card, in the file's order, then one per labelled edge, joined
by form feeds (``\\f``, as a PDF's pages): a text card's Markdown as written, a file card as the
embed ``![[file#subpath]]`` (so that it is a link of the canvas, resolved like any other), a link
card's URL, a group's or an edge's label. Each card keeps its ``[start, end)`` in that text, so a
search hit names the card it is in. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace

from kbase.ingest.columns import Floats, Records, Spans, Strings, field, ints
from kbase.ingest.discover import CANVAS_EXTENSIONS  # noqa: F401  (canvas.CANVAS_EXTENSIONS)
from kbase.records import Block, Heading, ParsedDoc
from kbase.text import one_line

FORM_FEED = "\f"
NODE_KINDS = ("text", "file", "link", "group")


class CanvasError(ValueError):
    """Not a canvas kbase can read; ``str(e)`` is the reason."""


@dataclass(frozen=True, slots=True)  # slots: a canvas may have a million
class Card:
    """A node (card) or a labelled edge of a canvas: ``text[start:end]`` is what it shows."""

    seq: int  # 0-based position in the stored text
    id: str  # the node's or edge's id in the canvas file
    kind: str  # text, file, link, group, or edge
    start: int
    end: int
    file: str | None = None  # a file card's vault path (without the subpath)
    subpath: str | None = None  # a file card's '#Heading' or '#page=3', without the '#'
    url: str | None = None  # a link card's URL
    x: float | None = None
    y: float | None = None
    width: float | None = None
    height: float | None = None
    color: str | None = None
    from_id: str | None = None  # an edge's ends (node ids)
    to_id: str | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge between two cards (``label`` is a Card of kind 'edge' when it has one)."""

    id: str
    from_id: str
    to_id: str
    label: str | None = None


@dataclass(frozen=True)
class Canvas:
    text: str
    cards: Sequence[Card]  # nodes in file order, then labelled edges (Records: columns)
    edges: Sequence[Edge]
    warnings: tuple[str, ...] = ()


class _Cards:
    """The cards of a canvas as they are read, column by column (a canvas may hold a million:
    as Card objects they took 240 bytes each, to make, to send from a worker, to read back)."""

    def __init__(self) -> None:
        self.starts, self.ends = array("q"), array("q")
        self.strings: dict[str, list[str | None]] = {f: [] for f in _CARD_STRINGS}
        self.floats = {f: array("d") for f in _CARD_FLOATS}

    def add(self, start: int, end: int, **fields) -> None:
        self.starts.append(start)
        self.ends.append(end)
        for f, col in self.strings.items():
            col.append(fields.get(f))
        for f, nums in self.floats.items():
            v = fields.get(f)
            nums.append(math.nan if v is None else v)

    def __len__(self) -> int:
        return len(self.starts)

    def records(self) -> Records[Card]:
        n = len(self)
        starts, ends = ints(self.starts), ints(self.ends)
        cols: dict[str, Sequence] = {"seq": range(n), "start": starts, "end": ends}
        for f in _CARD_STRINGS:
            cols[f] = Strings(self.strings.pop(f))
        for f in _CARD_FLOATS:
            cols[f] = Floats(self.floats.pop(f))
        return Records(Card, [cols[f.name] for f in fields(Card)])


_CARD_STRINGS = ("id", "kind", "file", "subpath", "url", "color", "from_id", "to_id")
_CARD_FLOATS = ("x", "y", "width", "height")


def stored_cards(rows: Iterable[tuple]) -> Records[Card]:
    """Cards from their rows in the index (canvas_cards: card_id, kind, start_char, end_char,
    file, subpath, url, x, y, width, height, color), in order."""
    cards = _Cards()
    names = ("id", "kind", "file", "subpath", "url", "x", "y", "width", "height", "color")
    for card_id, kind, start, end, *rest in rows:
        cards.add(start, end, **dict(zip(names, (card_id, kind, *rest))))
    return cards.records()


def card_spans(cards: Sequence[Card]) -> Spans:
    """The cards' ``(start, end)``: for Records, read from their own columns (none made)."""
    if isinstance(cards, Records):
        return Spans(cards.column("start"), cards.column("end"))
    return Spans.of((c.start, c.end) for c in cards)


def _str(value) -> str:
    return value if isinstance(value, str) else ""


def _num(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def clean(text: str) -> str:
    """A card's text as stored: no form feed (it separates the cards), and ending with a line
    break unless empty, so that the next card starts a line of its own (as a PDF's pages do)."""
    if FORM_FEED in text:
        text = text.replace(FORM_FEED, " ")
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def embed_source(file: str, subpath: str | None) -> str:
    """The embed that stands for a file card in the stored text."""
    return f"![[{file}{'#' + subpath if subpath else ''}]]"


def parse_canvas(source: str) -> Canvas:
    """The stored text and cards of a canvas file's (decoded) JSON text; ``CanvasError`` if it is
    not a JSON object. Nodes of unknown types are kept by their text or label, if any; nodes
    that are not objects are skipped with a warning."""
    if not source.strip():
        return Canvas("", (), ())
    try:
        data = json.loads(source)
    except json.JSONDecodeError as e:
        raise CanvasError(f"not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise CanvasError("JSON nested too deeply") from None
    except ValueError as e:
        if "integer string conversion" in str(e):  # Python reads numbers of up to 4,300 digits
            limit = sys.get_int_max_str_digits()
            raise CanvasError(
                f"not a canvas kbase can read: a number of more than {limit:,} digits"
            ) from None
        raise CanvasError(f"not JSON kbase can read ({one_line(str(e))})") from None
    if not isinstance(data, dict):
        raise CanvasError("not a canvas (the JSON is not an object)")
    nodes = data.get("nodes") or []
    edges = data.get("edges") or []
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise CanvasError("not a canvas ('nodes' and 'edges' must be lists)")
    parts: list[str] = []
    cards = _Cards()
    warnings: list[str] = []
    pos = 0
    bad = 0

    def add(text: str, **fields) -> None:
        nonlocal pos
        if len(cards):
            parts.append(FORM_FEED)
            pos += 1
        parts.append(text)
        cards.add(pos, pos + len(text), **fields)
        pos += len(text)

    # Each node's JSON is let go once its card is made: the JSON of a million cards and their
    # cards are not held at once.
    nodes.reverse()
    while nodes:
        node = nodes.pop()
        if not isinstance(node, dict):
            bad += 1
            continue
        kind = _str(node.get("type")) or "text"
        geometry = {
            "x": _num(node.get("x")),
            "y": _num(node.get("y")),
            "width": _num(node.get("width")),
            "height": _num(node.get("height")),
            "color": _str(node.get("color")) or None,
        }
        node_id = _str(node.get("id")) or str(node.get("id", ""))
        if kind == "file" and _str(node.get("file")).strip():
            file = _str(node.get("file")).strip()
            subpath = _str(node.get("subpath")).lstrip("#").strip() or None
            add(
                clean(embed_source(file, subpath)),
                id=node_id,
                kind="file",
                file=file,
                subpath=subpath,
                **geometry,
            )
        elif kind == "link":
            url = _str(node.get("url")).strip()
            add(clean(url), id=node_id, kind="link", url=url or None, **geometry)
        elif kind == "group":
            add(clean(_str(node.get("label"))), id=node_id, kind="group", **geometry)
        else:
            text = _str(node.get("text")) or _str(node.get("label"))
            add(clean(text), id=node_id, kind="text" if kind == "text" else kind, **geometry)
    out_edges: dict[str, list[str | None]] = {f.name: [] for f in fields(Edge)}
    edges.reverse()
    while edges:
        edge = edges.pop()
        if not isinstance(edge, dict):
            bad += 1
            continue
        a, b = _str(edge.get("fromNode")), _str(edge.get("toNode"))
        label = _str(edge.get("label")).strip() or None
        edge_id = _str(edge.get("id"))
        for col, v in zip(out_edges.values(), (edge_id, a, b, label)):
            col.append(v)
        if label:
            add(clean(label), id=edge_id, kind="edge", from_id=a or None, to_id=b or None)
    if bad:
        warnings.append(f"{bad} canvas entries that are not JSON objects left out")
    return Canvas(
        "".join(parts),
        cards.records(),
        Records(Edge, [Strings(col) for col in out_edges.values()]),
        tuple(warnings),
    )


_ONE_LINE_OF_TEXT = re.compile(r"[^\W\d_][^\r\n]*(?:\r\n|\r|\n)?\Z")


def document(canvas: Canvas, name: str, warnings: tuple[str, ...] = ()) -> ParsedDoc:
    """The ParsedDoc of a canvas: titled by its file name; each text card parsed as the Markdown
    note it is (its headings, tags and block structure, offsets moved to the stored text); the
    other cards one paragraph each."""
    from pathlib import PurePosixPath

    from kbase.ingest.parse import inline_tags, parse
    from kbase.text import line_of, line_starts

    text = canvas.text
    starts = line_starts(text)
    blocks: list[Block] = []
    headings: list[Heading] = []
    tags: dict[str, tuple[str, str]] = {}
    cards = canvas.cards
    for kind, a, b in zip(field(cards, "kind"), field(cards, "start"), field(cards, "end")):
        source = text[a:b]
        if not source.strip():
            continue
        if kind != "text" or _ONE_LINE_OF_TEXT.match(source):
            # A line that opens with a letter can only be a paragraph (every other block opens
            # with a mark, a digit or a space, or takes two lines): not parsed (1,000,000 cards
            # of a few words each took 1.2 GB and minutes, parsed as a note each).
            end = a + len(source.rstrip())
            blocks.append(Block("paragraph", a, end))
            if kind == "text" and "#" in source:
                for tag in inline_tags(text, [Block("paragraph", a, end)]):
                    tags.setdefault(tag.lower(), (tag, "inline"))
            continue
        sub = parse(source, "card.md")
        if sub.body_start:  # a card that opens with '---' has no front matter: it is text
            blocks.append(Block("paragraph", a, a + sub.body_start))
        for b in sub.blocks:
            blocks.append(
                replace(
                    b,
                    start=b.start + a,
                    end=b.end + a,
                    parts=tuple((x + a, y + a) for x, y in b.parts),
                )
            )
        for h in sub.headings:
            headings.append(
                Heading(
                    h.level, h.text, h.start + a, h.end + a, line_of(starts, h.start + a), h.anchor
                )
            )
        for tag, _source in sub.tags:
            tags.setdefault(tag.lower(), (tag, "inline"))
    return ParsedDoc(
        text=text,
        kind="canvas",
        title=PurePosixPath(name).stem or name,
        frontmatter=None,
        body_start=0,
        date=None,
        tags=tuple(tags.values()),
        aliases=(),
        headings=tuple(headings),
        blocks=tuple(blocks),
        warnings=canvas.warnings + warnings,
        segments=card_spans(canvas.cards),
        cards=canvas.cards,
        edges=canvas.edges,
    )


def links(doc: ParsedDoc):
    """The links of a canvas (kbase.ingest.links.Links): those in its text cards (Markdown links,
    as in a note) and its file cards (kind 'canvas', an embed of the file with the card's
    subpath as anchor)."""
    from bisect import bisect_right

    from kbase.ingest.links import parse_links

    found = parse_links(replace(doc, kind="markdown", frontmatter=None))
    # The cards' spans are in text order and do not overlap: the one a link may lie in is the
    # last that starts at or before it (a scan of every card for each link was quadratic).
    cards = doc.cards
    files = [
        (a, b)
        for kind, a, b in zip(field(cards, "kind"), field(cards, "start"), field(cards, "end"))
        if kind == "file"
    ]
    if not files:
        return found
    starts = [a for a, _ in files]
    for n, (start, end) in enumerate(zip(found.starts, found.ends)):
        i = bisect_right(starts, start) - 1
        if i >= 0 and end <= files[i][1]:
            found.set_kind(n, "canvas")
    return found
