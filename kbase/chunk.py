"""Pure: ParsedDoc -> list[Chunk], with exact character offsets into the document text.

A first, simple chunker: sections start at headings and thematic breaks; whole blocks are
packed into chunks of up to ``MAX_CHARS``; a heading always travels with the content after it;
code blocks and tables are never split; an over-long prose block is cut at whitespace.
"""

from __future__ import annotations

import re
from typing import Protocol

from kbase.models import Block, Chunk, ParsedDoc
from kbase.text import line_of, line_starts

MAX_CHARS = 1500  # about 300-400 tokens of English prose: a passage a person reads at a glance
_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)\s*")
_WORD = re.compile(r"\w+|[^\w\s]")
PROTECTED = frozenset({"code", "table", "html", "math"})
OVERSIZED = 1  # chunk flag: a protected block larger than the budget, kept whole


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class WordCounter:
    """Counts words and punctuation marks: a cheap stand-in for a model tokenizer."""

    def count(self, text: str) -> int:
        return len(_WORD.findall(text))


def text_blocks(text: str) -> list[Block]:
    """Paragraphs of plain text, separated by blank lines."""
    blocks, pos = [], 0
    for m in _PARAGRAPH_BREAK.finditer(text):
        if text[pos:m.start()].strip():
            blocks.append(Block("paragraph", pos, m.start()))
        pos = m.end()
    end = len(text.rstrip())
    if pos < end and text[pos:end].strip():
        blocks.append(Block("paragraph", pos, end))
    return blocks


def chunk(doc: ParsedDoc, counter: TokenCounter | None = None, max_chars: int = MAX_CHARS) -> list[Chunk]:
    counter = counter or WordCounter()
    text = doc.text
    blocks = list(doc.blocks) if doc.kind == "markdown" else text_blocks(text)
    starts = line_starts(text)
    spans: list[tuple[int, int, str, str, int]] = []  # start, end, heading path, kind, flags
    path: list[tuple[int, str]] = []
    cur: list[Block] = []
    cur_path = ""

    def flush() -> None:
        nonlocal cur
        if cur:
            kinds = {b.kind for b in cur if b.kind != "heading"}
            kind = _chunk_kind(kinds)
            flags = OVERSIZED if cur[-1].end - cur[0].start > max_chars and kinds & PROTECTED else 0
            spans.append((cur[0].start, cur[-1].end, cur_path, kind, flags))
        cur = []

    for b in blocks:
        if b.kind == "hr":
            flush()
            continue
        if b.kind == "heading":
            if any(x.kind != "heading" for x in cur):
                flush()
            while path and path[-1][0] >= b.level:
                path.pop()
            path.append((b.level, _heading_text(text[b.start:b.end])))
            if not cur:
                cur_path = " > ".join(t for _, t in path)
            cur.append(b)
            continue
        if cur and b.end - cur[0].start > max_chars and any(x.kind != "heading" for x in cur):
            flush()
            cur_path = " > ".join(t for _, t in path)
        if not cur:
            cur_path = " > ".join(t for _, t in path)
        if b.kind not in PROTECTED and b.end - (cur[0].start if cur else b.start) > max_chars:
            # An over-long prose block: cut it at whitespace into pieces of at most max_chars.
            pos = cur[0].start if cur else b.start
            cur = []
            while b.end - pos > max_chars:
                cut = text.rfind(" ", pos + max_chars // 2, pos + max_chars)
                cut = cut if cut > pos else pos + max_chars
                spans.append((pos, cut, cur_path, _chunk_kind({b.kind}), 0))
                pos = cut
                while pos < b.end and text[pos].isspace():
                    pos += 1
            if pos < b.end:
                cur = [Block(b.kind, pos, b.end)]
            continue
        cur.append(b)
    flush()
    spans = [span for span in spans if text[span[0]:span[1]].strip()]
    return [
        Chunk(seq, s, e, line_of(starts, s), hp, kind, counter.count(text[s:e]), flags)
        for seq, (s, e, hp, kind, flags) in enumerate(spans)
    ]


def _chunk_kind(kinds: set[str]) -> str:
    names = {"paragraph": "prose", "list": "list", "quote": "quote", "code": "code", "table": "table", "html": "prose"}
    mapped = {names.get(k, "prose") for k in kinds}
    if not mapped:
        return "prose"
    return mapped.pop() if len(mapped) == 1 else "mixed"


def _heading_text(source: str) -> str:
    first = source.splitlines()[0] if source else ""
    if first.lstrip().startswith("#"):
        return first.strip().strip("#").strip()
    return first.strip()
