"""text -> ParsedDoc: front matter, title, tags, aliases, date, headings and block structure.

Markdown block structure comes from markdown-it (CommonMark + tables, block level only): its Rust
port, markdown-it-pyrs, for most notes (6x faster), and markdown-it-py, whose dollarmath plugin
keeps ``$$`` math blocks whole, for notes that have one. Each block's first and last line are
turned into character offsets into the original text, whose line breaks (LF, CRLF or a lone CR)
are kept as they are; both parsers give the same lines (tests/test_parse.py compares them).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from bisect import bisect_right
from itertools import accumulate
from pathlib import PurePosixPath
from typing import Any, cast

from kbase.ingest.markup import plain, render
from kbase.records import Block, Diagnostic, Heading, ParsedDoc
from kbase.text import LINE_BREAK, line_of, line_starts

MARKDOWN_EXTENSIONS = (".md", ".markdown")
MAX_FRONTMATTER_CHARS = (
    256 * 1024
)  # larger "front matter" is not metadata; it is skipped with a warning
MAX_FRONTMATTER_NODES = 10_000  # guards against YAML alias bombs expanding when turned into JSON
DATE_KEYS = ("date", "created", "updated", "modified")

_FM_OPEN = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_FM_CLOSE = re.compile(r"(?<=[\r\n])(?:---|\.\.\.)[ \t]*(?=[\r\n]|\Z)")
_BACKTICKS = re.compile(r"`+")
# Obsidian tags: '#' after whitespace or at line start, then letters, digits, '_', '-', '/'.
_TAG = re.compile(r"(?:(?<=\s)|^)#([\w/-]+)", re.M)


# markdown-it and PyYAML load on first use: an index run with nothing to parse (the common case)
# starts 35 ms sooner without them.
@functools.cache
def _markdown():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True)  # $$ math blocks stay whole
    md.disable(
        ["inline", "text_join"]
    )  # block structure is all we need; inline parsing is 3x the cost
    return md


# The block rules of markdown-it's CommonMark preset, plus tables (markdown-it-pyrs, see above).
_FAST_RULES = (
    "blockquote",
    "code",
    "fence",
    "heading",
    "hr",
    "lheading",
    "list",
    "paragraph",
    "reference",
    "html_block",
    "table",
)


@functools.cache
def _fast_markdown():
    from markdown_it_pyrs import MarkdownIt

    md = MarkdownIt("zero")
    md.enable_many(cast(Any, list(_FAST_RULES)))  # its stubs type rule names as Literals
    return md


@functools.cache
def _yaml():
    """PyYAML and its fastest safe loader (libyaml's, when PyYAML was built with it)."""
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_CALLOUT = re.compile(r"[ \t]*>[ \t]*\[![^\]]+\]")

_BLOCK_KINDS = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "fence": "code",
    "code_block": "code",
    "table_open": "table",
    "html_block": "html",
    "math_block": "math",
    "math_block_label": "math",
    "hr": "hr",
    "heading_open": "heading",
}


# A heading's trailing attribute list, as Pandoc, MkDocs' attr_list, Hugo, kramdown and VitePress
# write it: '{#id}', '{#id .class key=value}', '{: #id }', '{ data-search-exclude }'. Each item is
# an id, a class, a key with or without a value, or Pandoc's '-' (unnumbered).
_ATTR_ITEM = (
    r"""(?:\#[^\s{}#"'=]+|\.[^\s{}#."'=]+"""
    r"""|[A-Za-z_][\w.:-]*(?:=(?:"[^"]*"|'[^']*'|[^\s{}"']+))?|-)"""
)
_HEADING_ATTRS = re.compile(  # (from its '{': spaces before it made a search quadratic)
    rf"\{{(?P<colon>:)?(?P<pad>[ \t]*)"
    rf"(?P<items>{_ATTR_ITEM}(?:[ \t]+{_ATTR_ITEM})*)[ \t]*\}}[ \t]*$"
)
# The id: '#id', or attr_list's 'id=x' / 'id="x"' ('### 9.7.0 { id="9.7.0" }').
_ATTR_ID = re.compile(
    r"""(?:^|[ \t])(?:\#([^\s{}#"'=]+)|id=(?:"([^"]*)"|'([^']*)'|([^\s{}"']+)))"""
)


def heading_attributes(content: str) -> tuple[str, str | None]:
    """A heading's text split from a trailing attribute list: ``'Props {#props}'`` gives
    ('Props', 'props'), ``'Setup { .new }'`` ('Setup', None), and a heading without one comes
    back as it is. Not a list: one at the very start (``'{#if}'`` has no text left), and a bare
    word in braces with nothing else to say it is one (``'Using {name}'``): an id, a class, a
    value, a colon (``{: ...}``) or a space inside the braces (``{ data-search-exclude }``)."""
    if not content.endswith("}"):
        return content, None
    m = _HEADING_ATTRS.search(content)
    if m is None or not content[: m.start()].strip():
        return content, None
    items = m.group("items")
    if not (m.group("colon") or m.group("pad") or any(c in items for c in "#.=") or items == "-"):
        return content, None
    ids = attribute_ids(items)
    return content[: m.start()].rstrip(), (ids[-1][0] if ids and ids[-1][0] else None)


def attribute_ids(items: str) -> list[tuple[str, int, int]]:
    """The ids that the items of an attribute list (inside its braces, after its ':') name,
    ``#id``, ``id=x`` or ``id="x"``, as (id, start, end) in ``items``."""
    out = []
    for m in _ATTR_ID.finditer(items):
        g = next(i for i in range(1, 5) if m.group(i) is not None)
        out.append((m.group(g), m.start(g), m.end(g)))
    return out


def _heading(level: int, content: str, start: int, end: int, line: int) -> Heading:
    text, anchor = heading_attributes(content.strip())
    return Heading(level, text, start, end, line, anchor)


def is_markdown(path: str) -> bool:
    return path.lower().endswith(MARKDOWN_EXTENSIONS)


def _text_blocks(text: str) -> tuple[Block, ...]:
    """A plain text file: one paragraph, unless it is empty."""
    return (Block("paragraph", 0, len(text.rstrip())),) if text.strip() else ()


def parse(text: str, path: str) -> ParsedDoc:
    """Parse a document; ``path`` gives the kind (by extension) and the fallback title."""
    stem = PurePosixPath(path).stem or PurePosixPath(path).name or path
    if not is_markdown(path):
        return ParsedDoc(text, "text", stem, None, 0, None, (), (), (), _text_blocks(text))

    warnings: list[str] = []
    fm, body_start = _front_matter(text, warnings)
    starts = line_starts(text)
    first_line = line_of(starts, body_start) - 1
    diagnostics: list[Diagnostic] = []
    blocks, headings = _blocks(text[body_start:], text, starts, first_line, diagnostics)
    if ":::" in text or "!!!" in text or "???" in text:
        blocks = _containers(text, blocks, starts)

    meta = fm or {}
    title = _title(text, meta, blocks, headings, stem)
    tags = [
        (t, "frontmatter") for t in _str_list(meta.get("tags", meta.get("tag")), split_space=True)
    ]
    seen = {t.lower() for t, _ in tags}
    for tag in inline_tags(text, blocks):
        if tag.lower() not in seen:
            seen.add(tag.lower())
            tags.append((tag, "inline"))
    aliases = tuple(dict.fromkeys(_str_list(meta.get("aliases", meta.get("alias")))))
    return ParsedDoc(
        text=text,
        kind="markdown",
        title=title,
        frontmatter=fm,
        body_start=body_start,
        date=_date(meta, warnings),
        tags=tuple(tags),
        aliases=aliases,
        headings=tuple(headings),
        blocks=tuple(blocks),
        warnings=tuple(warnings),
        diagnostics=tuple(diagnostics),
    )


# Template placeholders ({{title}}, Templater's <% tp.file.title %>) and a line that looks like a
# YAML key ("aliases:", left by front matter that did not parse) are never a note's title.
_NOT_A_TITLE = re.compile(r"\{\{|\}\}|<%|%>|^[\w .-]*:$")


# A file name a tool made rather than a person typed: lowercase ASCII letters and digits in parts
# joined by '-', '_' or '.' (ch04-01-what-is-ownership, getting-started, index, 202301011200). A
# date is not one: a daily note's name (2026-03-14) is what its owner reads and Obsidian shows.
_SLUG = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
_DATE_NAME = re.compile(r"\d{4}-\d{2}-\d{2}")


def is_slug(stem: str) -> bool:
    """Is this file name (without extension) a slug, which nobody reads as a title?"""
    return _SLUG.fullmatch(stem) is not None and _DATE_NAME.fullmatch(stem) is None


# A title, or a heading in a chunk's heading path, longer than this is cut, at a space, with '…'.
# A chunk's path is stored with each chunk and its words indexed with each (as the title's are):
# a heading of 189 KB over a 700 KB note made a 219 MB index in 17 s. (The longest titles of the
# evaluation's collections are SciFact's, 300 characters: none is cut.)
LABEL_CHARS = 500


def short_label(text: str) -> str:
    """``text`` as a title or a heading path shows it: at most LABEL_CHARS characters and '…'."""
    if len(text) <= LABEL_CHARS:
        return text
    space = text.rfind(" ", LABEL_CHARS // 2, LABEL_CHARS)
    return text[: space if space > 0 else LABEL_CHARS].rstrip() + "…"


def _title(text: str, meta: dict, blocks: list[Block], headings: list[Heading], stem: str) -> str:
    """The title as Obsidian shows it: the file name. Where the file name is a slug
    (``ch04-01-what-is-ownership``), the front matter title, else the heading that opens the note
    (its first block, at any level, HTML that shows nothing before it aside: comments,
    anchors, script and style elements, component tags), else the file name; as plain
    text, never a template placeholder. A note named by a person keeps its name even when it opens
    with a heading: in a personal vault those are section names ('Hairstyle.md' opening with
    '# Adjectives' is 'Hairstyle', as Obsidian shows it everywhere)."""
    if not is_slug(stem):
        return stem
    candidates = [_first_str(meta.get("title"))]
    first = next((b for b in blocks if not _shows_nothing(text, b)), None)
    if first is not None and first.kind == "heading":
        candidates.append(next(h.text for h in headings if h.start == first.start))
    for candidate in candidates:
        title = plain(candidate)
        if title and not _NOT_A_TITLE.search(title):
            return short_label(title)
    return stem


# Elements whose content a page never shows as text: a docs site's <script setup> (VitePress,
# Vue), its <style>, a <template> holding markup for later.
_HIDDEN_ELEMENT = re.compile(r"<(script|style|template)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.S | re.I)


def _shows_nothing(text: str, block: Block) -> bool:
    """HTML that shows nothing: a comment, an anchor (``<a id="old-heading"></a>``), a script
    or style element (``<script setup>`` ... ``</script>``), component tags without text
    (``<ApiIndex />``)."""
    if block.kind not in ("html", "paragraph"):
        return False
    source = text[block.start : block.end]
    if block.kind == "html" and "<" in source:
        source = _HIDDEN_ELEMENT.sub("", source)
    return not render(source, offsets=False)[0].strip()  # (as plain's, without its words)


# Containers docs sites write, taken as callouts are (a titled block, kept whole when it fits):
# '::: tip Title' ... ':::' (VitePress, Docusaurus, markdown-it-container; more colons nest), and
# MkDocs' admonitions '!!! note "Title"' ('??? note', '???+ note' fold) with a body indented by
# four spaces, which CommonMark reads as a paragraph and an indented code block.
_COLON_FENCE = re.compile(r"^ {0,3}(:{3,})[ \t]*([^\s:][^\r\n]*)?$", re.M)
_ADMONITION = re.compile(r"^ {0,3}(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t][^\r\n]*)?$", re.M)
_INDENTED = re.compile(r"(?: {4}|\t)")
_WORD_CHAR = re.compile(r"[^\W_]")


def _containers(text: str, blocks: list[Block], starts: list[int]) -> list[Block]:
    """``blocks`` with each container (outermost only) made one callout block whose parts are
    the blocks inside it; a paragraph running into or out of one is cut at its line."""
    hidden = [(b.start, b.end) for b in blocks if b.kind in ("code", "html", "math")]

    def in_hidden(offset: int) -> bool:
        k = bisect_right(hidden, (offset, len(text) + 1)) - 1
        return k >= 0 and hidden[k][0] <= offset < hidden[k][1]

    regions: list[tuple[int, int, str]] = []
    if ":::" in text:
        stack: list[tuple[int, int]] = []  # (colons, offset of the opening line)
        for m in _COLON_FENCE.finditer(text):
            if in_hidden(m.start()) and not stack:
                continue
            colons = len(m.group(1))
            if m.group(2):
                stack.append((colons, m.start()))
            elif stack and colons >= stack[-1][0]:
                _, opened = stack.pop()
                if not stack:
                    regions.append((opened, m.end(), "colon"))
    if "!!!" in text or "???" in text:
        for m in _ADMONITION.finditer(text):
            if in_hidden(m.start()) and _line_indent(text, m.start()):
                continue  # an indented code block, not an admonition
            end = m.end()
            line = bisect_right(starts, m.start())  # the next line's index
            while line < len(starts):
                a = starts[line]
                b = _line_end(text, starts, line)
                if text[a:b].strip():
                    if not _INDENTED.match(text, a):
                        break
                    end = b
                line += 1
            regions.append((m.start(), end, "admonition"))
    if not regions:
        return blocks
    regions.sort()
    kept: list[tuple[int, int, str]] = []
    for r in regions:
        if not kept or r[0] >= kept[-1][1]:
            kept.append(r)
    out: list[Block] = []
    k = 0
    for rs, re_, family in kept:
        inner: list[Block] = []
        while k < len(blocks) and blocks[k].end <= rs:
            out.append(blocks[k])
            k += 1
        while k < len(blocks) and blocks[k].start < re_:
            blk = blocks[k]
            if blk.start < rs:  # a paragraph that runs into the container: its lines before it
                head = _trimmed(text, blk.start, rs)
                if head:
                    out.append(Block(blk.kind, *head))
            inner.append(blk)
            k += 1
        tail = None
        if inner and inner[-1].end > re_:  # ... or out of it: its lines after it
            tail = _trimmed(text, re_, inner[-1].end)
        if family == "admonition":
            parts = _admonition_parts(text, starts, rs, re_)
        else:
            parts = [(max(b.start, rs), min(b.end, re_)) for b in inner]
            parts = [p for p in parts if p[1] > p[0]] or [(rs, re_)]
            parts[0] = (rs, parts[0][1])
            parts[-1] = (parts[-1][0], re_)
            if len(parts) > 1 and not _WORD_CHAR.search(text, *parts[-1]):
                parts[-2:] = [(parts[-2][0], re_)]  # the closing ':::' goes with the last block
        out.append(Block("callout", rs, re_, parts=tuple(parts)))
        if tail:
            out.append(
                Block(inner[-1].kind if inner[-1].kind == "paragraph" else "paragraph", *tail)
            )
    out.extend(blocks[k:])
    return out


def _line_indent(text: str, offset: int) -> int:
    line = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return offset - line


def _trimmed(text: str, a: int, b: int) -> tuple[int, int] | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if b > a else None


def _admonition_parts(text: str, starts: list[int], rs: int, re_: int) -> list[tuple[int, int]]:
    """The blocks of an admonition's body (its lines less four spaces of indent, parsed), as
    offsets into ``text``; the first holds the title line."""
    first = bisect_right(starts, rs)  # the body's first line
    last = bisect_right(starts, re_) - 1
    if first > last:
        return [(rs, re_)]
    lines = [text[starts[i] : _line_end(text, starts, i)] for i in range(first, last + 1)]
    dedented = "\n".join(
        _INDENTED.sub("", ln, count=1) if _INDENTED.match(ln) else ln for ln in lines
    )
    parts: list[tuple[int, int]] = []
    for top, stop in _top_level_lines(dedented):
        a, b = _span(text, starts, first + top, first + stop - 1)
        if b > a:
            parts.append((a, b))
    if not parts:
        return [(rs, re_)]
    parts[0] = (rs, parts[0][1])
    parts[-1] = (parts[-1][0], max(parts[-1][1], re_))
    return parts


def _span(text: str, starts: list[int], first: int, last: int) -> tuple[int, int]:
    """Offsets of lines ``first`` to ``last`` (0-based, inclusive), without trailing whitespace
    (a block's lines may include blank lines after it)."""
    start, end = starts[first], _line_end(text, starts, last)
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# Where markdown-it-pyrs (0.4) parts from markdown-it-py, such notes go to markdown-it-py: a line
# opening an ordered list that does not start at 1 under the lines of a table or a quote
# ("> a\n2) b": markdown-it-py starts a list there, markdown-it-pyrs takes the line in as the
# quote's lazy continuation; under a paragraph both take it as text), and a table or a number
# among the lazy continuation lines of a quote (a table: a line with '|' over a line of dashes,
# colons and pipes; a wikilink's '[[note|alias]]' alone starts none, and sent a quarter of
# obsidian-tasks-docs' callouts to the slow parser). Both patterns err on the safe side.
# (Patterns start at a line break: Python's re finds those fast, a "^" under re.M slowly.)
_ORDERED_NOT_ONE = re.compile(r"[\r\n][ \t]*(?!1[.)])\d{1,9}[.)](?=[ \t\r\n]|\Z)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d+[.)])(?:[ \t]|$)")
# A quote's first line, after a line break, or at the start of the body (a pattern of its own:
# one that could also start at \A is tried at every character, three times as slow).
_QUOTE_LINE = re.compile(r"[\r\n][ \t]*(?:(?:[-+*]|\d+[.)])[ \t]+)*>")
_QUOTE_AT_START = re.compile(r"[ \t]*(?:(?:[-+*]|\d+[.)])[ \t]+)*>")
_BLANK_LINE = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r|\n|\Z)")
# A line over a line of dashes, colons and pipes with a pipe in it: markdown-it-pyrs makes the
# two a table where markdown-it-py needs the upper line to have a pipe of its own and not be a list
# item ('plain words' or '- item' over '|-|': a paragraph, a list); a line with a pipe over '---'
# is a table to markdown-it-py, a heading to markdown-it-pyrs. (_table_trouble)
_DASHES_LINE = re.compile(r"[\r\n][ \t:|]*-[ \t|:-]*(?=[\r\n]|\Z)")
_LAZY_TROUBLE = re.compile(
    r"[\r\n][ \t]*(?:\d|[^\s>][^\r\n]*\|[^\r\n]*(?:\r\n?|\n)[ \t|:]*-[ \t|:-]*(?=[\r\n]|\Z))"
)
# markdown-it-pyrs recurses once a container level and overflows the stack (the process dies) past
# some 100,000 levels ('> > > ...'). Each level takes a character, a '>' or a list marker with its
# space or tab: a note shorter than this, or with fewer of those, goes nowhere near that.
# (markdown-it-py stops nesting at its limit, or raises RecursionError: the file is skipped.)
MAX_FAST_DEPTH = 20_000
_MARKERS = (">", "- ", "* ", "+ ", ". ", ") ", "\t")


def _needs_py(body: str) -> bool:
    """True when markdown-it-pyrs might give other blocks than markdown-it-py (or no math)."""
    return "$$" in body or _parsers_differ(body)


def _parsers_differ(body: str) -> bool:
    """_needs_py but for math (a body with its math made fences by _math_fenced)."""
    if len(body) > MAX_FAST_DEPTH and sum(map(body.count, _MARKERS)) > MAX_FAST_DEPTH:
        return True
    for m in _ORDERED_NOT_ONE.finditer(body):
        if not _number_follows_text(body, m.start()):
            return True
    if "|" in body and _table_trouble(body):
        return True
    return ">" in body and _quote_trouble(body)


def _table_trouble(body: str) -> bool:
    """Is there a line of dashes with a pipe (a table's delimiter row) under a line without one,
    or under a list item's line, or a line of dashes without one under a line with one?"""
    for m in _DASHES_LINE.finditer(body):
        end = m.start() - (body[m.start() - 1 : m.start() + 1] == "\r\n")
        start = max(body.rfind("\n", 0, end), body.rfind("\r", 0, end)) + 1
        upper = body[start:end]
        if "|" in m.group():
            if upper.strip() and ("|" not in upper or _LIST_ITEM.match(upper)):
                return True
        elif "|" in upper:
            return True
    return False


def _quote_trouble(body: str) -> bool:
    """Is there a table or a number among the lazy continuation lines of a quote?"""
    quote = _QUOTE_AT_START.match(body) or _QUOTE_LINE.search(body)
    while quote:
        blank = _BLANK_LINE.search(body, quote.end())
        end = blank.start() if blank else len(body)  # the quote's paragraph ends there
        if _LAZY_TROUBLE.search(body, quote.end(), end):
            return True
        quote = _QUOTE_LINE.search(body, max(end, quote.end()))
    return False


def _number_follows_text(body: str, end: int) -> bool:
    """Is the line break at ``end`` under a blank line, or under lines without '|' or '>' back to
    a blank line, the start or a list item's own line (a lazy continuation: 'inputs and return
    values...' wrapped under '2. Identify...', then '3. Update...')? There a number is text to
    both parsers; under a quote's or a table's line markdown-it-py may start a list with it."""
    while True:
        if body[end] == "\n" and body[end - 1 : end] == "\r":
            end -= 1  # a CRLF is one line break
        start = max(body.rfind("\n", 0, end), body.rfind("\r", 0, end)) + 1
        line = body[start:end]
        if not line.strip() or _LIST_ITEM.match(line):
            return True
        if "|" in line or ">" in line:
            return False
        if start == 0:
            return True
        end = start - 1


# Bounds on what one note costs to parse. A parser builds a tree of the whole text, at some 1 KB
# of memory per node (a table cell, a list item, a paragraph): 100 MB per MB of dense Markdown,
# 1.8 GB for a 2 MB table of 20,000 columns. So the body is parsed a window of PARSE_WINDOW
# characters at a time (the blocks before the window's last one are final: parsing goes on from
# that one); a run of table lines with more than MAX_TABLE_CELLS cells is kept as one table
# block whose cells are not parsed; and a list or quote larger than the window is cut at an item
# into several blocks. Each cut is a diagnostic ('too_large') kept with the note.
PARSE_WINDOW = 256 * 1024
MAX_TABLE_CELLS = 10_000
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")


def _blocks(
    body: str,
    text: str,
    starts: list[int],
    first_line: int,
    diagnostics: list[Diagnostic] | None = None,
) -> tuple[list[Block], list[Heading]]:
    """Top-level blocks and headings of ``body`` (``text`` from line ``first_line`` on)."""
    diagnostics = [] if diagnostics is None else diagnostics
    base = starts[first_line]
    masked, tables = _mask_tables(body)
    blocks: list[Block] | None = None
    fenced = _math_fenced(masked)
    # (a lone surrogate cannot go to Rust as UTF-8)
    if fenced is not None and not _parsers_differ(fenced[0]) and _encodable(masked):
        cut: list[Diagnostic] = []
        fast = functools.partial(_fast_blocks, rewritten=bool(fenced[1]))
        found, headings = _windowed(fast, fenced[0], text, starts, first_line, cut)
        blocks = _math_blocks(found, fenced[1], text, starts, first_line)
        diagnostics.extend(cut if blocks is not None else ())
    if blocks is None:
        blocks, headings = _windowed(_py_blocks, masked, text, starts, first_line, diagnostics)
    for start, end, cells in tables:
        a, b = base + start, base + end
        for i, blk in enumerate(blocks):
            if blk.kind == "paragraph" and a <= blk.start and blk.end <= b:
                blocks[i] = Block("table", blk.start, blk.end)
        diagnostics.append(
            Diagnostic(
                "too_large",
                a,
                b,
                f"table of {cells:,} cells (over {MAX_TABLE_CELLS:,}): kept as one block,"
                " its cells not parsed",
            )
        )
    return blocks, headings


# markdown-it-pyrs has no $$ math blocks (mdit_py_plugins' dollarmath, which markdown-it-py
# runs). A note with them still goes the fast way: each block is written as a fence of tildes on
# the same lines ('***' for one of a line: _math_fenced) and made a math block again after
# (_math_blocks), when it is sure to be one to markdown-it-py: an opening line of '$$' (up to 3
# spaces in) at the start of the body, after a blank line or after another math block (the rule
# interrupts nothing), closed by the first line after it that ends in '$$' (or by itself,
# '$$a$$'), and each such fence a block of its own to markdown-it-pyrs; '$$' inside a line of text
# is nothing to either. Anything else (a label '$$ (eq1)', math in a list or a quote or after a
# line of text, a tab, '$$a$$ b', a table's header) goes to markdown-it-py as before.
_LINE_BREAKS = re.compile(r"(\r\n|\r|\n)")
_TILDES = re.compile("~+")
_MATH_IN_CONTAINER = re.compile(r"[ \t]*(?:(?:>|[-+*]|\d{1,9}[.)])[ \t]*)+\$\$")
_DELIMITER_CHARS = frozenset(" \t|:-")


def _math_label(line: str) -> bool:
    """Might dollarmath read a label ('$$ (eq1)') at the end of ``line``? (It ends in ')' with a
    '$$' before its last '(': more than dollarmath's labels. Not a pattern: one took 35 s on a
    line of 3,000 '$$(', trying every split.)"""
    s = line.rstrip()
    return s.endswith(")") and "$$" in s[: s.rfind("(")]


def _math_fenced(body: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``body`` with its $$ math blocks as fences of tildes (one of a line as a rule), and their
    (first, last) lines, 0-based; None when some '$$' may be read otherwise by markdown-it-py."""
    if "$$" not in body:
        return body, []
    if len(body) > PARSE_WINDOW:
        return None
    parts = _LINE_BREAKS.split(body)
    lines = parts[0::2]
    fence = "~" * max(3, max(map(len, _TILDES.findall(body)), default=0) + 1)
    maths: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "$$" not in line:
            i += 1
            continue
        opening = line.lstrip(" \t")
        if not opening.startswith("$$"):
            if _MATH_IN_CONTAINER.match(line):
                return None
            i += 1  # text with '$$' in it: not a block to either parser
            continue
        indent = line[: len(line) - len(opening)]
        at_start = i == 0 or not lines[i - 1].strip(" \t") or bool(maths and maths[-1][1] == i - 1)
        if len(indent) > 3 or "\t" in indent or not at_start or _math_label(opening):
            return None
        below = lines[i + 1] if i + 1 < len(lines) else ""
        if "|" in opening and "-" in below and _DELIMITER_CHARS.issuperset(below):
            return None  # a table's header (tables come before math)
        stripped = opening.strip()
        last = None
        if len(stripped) > 3:
            if not stripped.endswith("$$"):
                return None  # '$$a$$ b', or math that goes on: not sure
            last = i
        else:
            for j in range(i + 1, len(lines)):
                if lines[j].strip().endswith("$$"):
                    last = j
                    break
                if _math_label(lines[j]):
                    return None
            if last is None:
                return None  # never closed
        for k in {i, last}:
            pad = len(lines[k]) - len(lines[k].lstrip(" "))
            if pad > 3 or "\t" in lines[k][: pad + 1]:
                return None
            parts[2 * k] = lines[k][:pad] + (fence if last > i else "***")  # '$$a$$': a rule
        maths.append((i, last))
        i = last + 1
    return "".join(parts), maths


def _math_blocks(
    blocks: list[Block], maths: list[tuple[int, int]], text: str, starts: list[int], first: int
) -> list[Block] | None:
    """``blocks`` with the fence of each of _math_fenced's ``maths`` made a math block; None if
    one of them is not a top-level block of exactly its lines."""
    if not maths:
        return blocks
    where = {
        _span(text, starts, first + a, first + b): "hr" if a == b else "code" for a, b in maths
    }
    out = []
    for b in blocks:
        if where.get((b.start, b.end)) == b.kind:
            out.append(Block("math", b.start, b.end))
            del where[(b.start, b.end)]
        else:
            out.append(b)
    return None if where else out


def _mask_tables(body: str) -> tuple[str, list[tuple[int, int, int]]]:
    """``body`` with the '|' of every run of table lines over MAX_TABLE_CELLS cells replaced by
    'x' (same length, same lines: a paragraph to the parser, cheap), and those runs as
    (start, end, cells)."""
    if body.count("|") <= MAX_TABLE_CELLS:
        return body, []
    runs, start, cells, end = [], None, 0, 0
    for m in _LINE.finditer(body):
        line = m.group()
        if "|" in line and line.strip():
            if start is None:
                start, cells = m.start(), 0
            cells += line.count("|")
            end = m.start() + len(line.rstrip("\r\n"))
        elif start is not None:
            if cells > MAX_TABLE_CELLS:
                runs.append((start, end, cells))
            start = None
        if m.end() == len(body):
            break
    if start is not None and cells > MAX_TABLE_CELLS:
        runs.append((start, end, cells))
    if not runs:
        return body, []
    parts, pos = [], 0
    for a, b, _ in runs:
        parts += [body[pos:a], body[a:b].replace("|", "x")]
        pos = b
    parts.append(body[pos:])
    return "".join(parts), runs


def _windowed(parse, body, text, starts, first_line, diagnostics):
    """``parse(piece, text, starts, piece_first_line)`` over ``body`` a window at a time: the
    blocks of a window but its last are final; the next window starts at that last block. One
    block larger than the window doubles it, except a list or quote of two items or more, which
    is cut before its last item (parsing goes on from there)."""
    if len(body) <= PARSE_WINDOW:
        return parse(body, text, starts, first_line)
    base = starts[first_line]
    blocks: list[Block] = []
    headings: list[Heading] = []
    pos, window = 0, PARSE_WINDOW
    while True:
        stop = pos + window
        if stop < len(body):
            m = _LINE.match(body, stop)
            stop = m.end() if m else len(body)
        last_window = stop >= len(body)
        line = bisect_right(starts, base + pos) - 1
        got, heads = parse(body[pos:stop], text, starts, line)
        if last_window:
            blocks += got
            headings += heads
            return blocks, headings
        if not got:  # blank lines or link reference definitions only
            pos, window = stop, PARSE_WINDOW
            continue
        last = got[-1]
        if len(got) > 1:
            blocks += got[:-1]
            headings += [h for h in heads if h.start < last.start]
            pos, window = last.start - base, PARSE_WINDOW
            continue
        if last.kind in ("list", "quote", "callout") and len(last.parts) >= 2:
            kept = last.parts[:-1]
            blocks.append(Block(last.kind, last.start, kept[-1][1], parts=kept))
            headings += [h for h in heads if h.start < last.parts[-1][0]]  # (a quote's)
            diagnostics.append(
                Diagnostic(
                    "too_large",
                    last.start,
                    kept[-1][1],
                    f"{last.kind} larger than {PARSE_WINDOW // 1024} KB: cut into blocks"
                    " at an item",
                )
            )
            pos, window = last.parts[-1][0] - base, PARSE_WINDOW
            continue
        window *= 2


def _py_blocks(
    body: str, text: str, starts: list[int], first_line: int
) -> tuple[list[Block], list[Heading]]:
    """``_blocks`` by markdown-it-py: its tokens carry [first line, last line + 1) maps."""
    tokens = _markdown().parse(body)
    blocks: list[Block] = []
    headings: list[Heading] = []
    quotes = 0  # how many of the containers open around a token are quotes
    containers: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.nesting == 1 and tok.type != "heading_open":
            containers.append(tok.type)
            quotes += tok.type == "blockquote_open"
        elif tok.nesting == -1 and tok.type != "heading_close":
            quotes -= containers.pop() == "blockquote_open"
        if tok.level and tok.type == "heading_open" and quotes == len(containers):
            if tok.map is not None:  # in quotes only (at any depth): a heading too
                first = first_line + tok.map[0]
                found = _quoted_heading(
                    int(tok.tag[1]),
                    tokens[i + 1].content,
                    text,
                    starts,
                    first,
                    first_line + tok.map[1] - 1,
                )
                if found is not None:
                    headings.append(found)
            continue
        if tok.level != 0 or tok.map is None or tok.type not in _BLOCK_KINDS:
            continue
        kind = _BLOCK_KINDS[tok.type]
        first = first_line + tok.map[0]
        start, end = _span(text, starts, first, first_line + tok.map[1] - 1)
        if end <= start:
            continue  # only what Python counts as blanks (' \x1f'): nothing to hold
        if kind == "heading":
            level = int(tok.tag[1])
            blocks.append(Block(kind, start, end, level))
            headings.append(_heading(level, tokens[i + 1].content, start, end, first + 1))
        elif kind in ("list", "quote"):
            if kind == "quote" and _CALLOUT.match(text, start):
                kind = "callout"
            parts = _children(tokens, i, text, starts, first_line)
            blocks.append(Block(kind, start, end, parts=parts))
        elif tok.type == "fence":
            blocks.append(
                Block(kind, start, end, unclosed=not _fence_closed(text[start:end], tok.markup))
            )
        else:
            blocks.append(Block(kind, start, end))
    return blocks, headings


_FAST_KINDS = {
    "paragraph": "paragraph",
    "bullet_list": "list",
    "ordered_list": "list",
    "blockquote": "quote",
    "fence": "code",
    "code_block": "code",
    "table": "table",
    "html_block": "html",
    "hr": "hr",
    "heading": "heading",
    "lheading": "heading",
}


def _byte_line_starts(data: bytes) -> list[int]:
    """Offsets where each line of ``data`` starts (line breaks LF, CRLF or a lone CR: those
    bytes.splitlines splits at), from the lengths of its lines: four times as fast as a pattern's
    matches."""
    lines = data.splitlines(True)
    starts = [0, *accumulate(map(len, lines))]
    if lines and not lines[-1].endswith((b"\n", b"\r")):
        starts.pop()  # the end of the last line, which has no line break
    return starts


_CR = re.compile(r"\r\n?")
# A quote's markers before its text, at a line's start ('> ', '> > ', '  >').
_QUOTE_MARKERS = re.compile(r"(?:[ \t]*>)+[ \t]*")
# The markers of a quote's continuation lines in a setext heading's text ('Setext\n> keys').
_QUOTED_LINE = re.compile(r"\n(?:[ \t]*>)*[ \t]*")


def _quote_headings(node) -> list:
    """The headings of a quote node (markdown-it-pyrs), in its quotes at any depth, in order;
    not those in its lists."""
    out = []
    todo = list(reversed(node.children))
    while todo:
        n = todo.pop()
        if n.name in ("heading", "lheading"):
            if n.srcmap is not None:
                out.append(n)
        elif n.name == "blockquote":
            todo.extend(reversed(n.children))
    return out


def _quoted_heading(
    level: int, content: str, text: str, starts: list[int], first: int, last: int
) -> Heading | None:
    """The heading on lines ``first`` to ``last`` (0-based) inside a quote: its offsets start
    after the quote's markers ('> > ### Deep': '### Deep'); its text without the markers of a
    setext heading's later lines."""
    start, end = _span(text, starts, first, last)
    m = _QUOTE_MARKERS.match(text, start, end)
    if m is not None:
        start = m.end()
    if end <= start:
        return None
    if "\n" in content:
        content = _QUOTED_LINE.sub("\n", content)
    return _heading(level, content, start, end, first + 1)


def _fast_blocks(
    body: str, text: str, starts: list[int], first_line: int, rewritten: bool = False
) -> tuple[list[Block], list[Heading]]:
    """What ``_py_blocks`` gives, from markdown-it-pyrs, whose nodes carry UTF-8 byte ranges:
    each range becomes the lines it covers. ``rewritten``: ``body`` has the lines of the text
    from ``first_line`` on, but not their lengths (_math_fenced)."""
    data = body.encode("utf-8")
    if len(data) == len(body) and not rewritten:  # ASCII: bytes are characters
        base = starts[first_line]
        stop = bisect_right(starts, base + len(body), first_line)
        bstarts = [s - base for s in starts[first_line:stop]]
    else:
        bstarts = _byte_line_starts(data)

    def lines(node) -> tuple[int, int]:
        a, b = node.srcmap
        return first_line + bisect_right(bstarts, a) - 1, first_line + bisect_right(
            bstarts, max(a, b - 1)
        ) - 1

    def content(node) -> str:
        """A heading's text, as markdown-it-py gives it (\r\n -> \n, NUL -> U+FFFD)."""
        if not node.children:
            return ""
        a, b = node.children[0].srcmap[0], node.children[-1].srcmap[1]
        return _CR.sub("\n", data[a:b].decode("utf-8")).replace("\0", "\ufffd")

    blocks: list[Block] = []
    headings: list[Heading] = []
    for node in _fast_markdown().tree(body).children:
        kind = _FAST_KINDS.get(node.name)
        if kind is None or node.srcmap is None:
            continue  # link reference definitions
        first, last = lines(node)
        start, end = _span(text, starts, first, last)
        if end <= start:
            continue  # as in _py_blocks
        if kind == "heading":
            level = node.meta["level"]
            blocks.append(Block(kind, start, end, level))
            headings.append(_heading(level, content(node), start, end, first + 1))
        elif kind in ("list", "quote"):
            if kind == "quote":
                if _CALLOUT.match(text, start):
                    kind = "callout"
                for h in _quote_headings(node):  # in quotes only (at any depth): headings too
                    a, b = lines(h)
                    found = _quoted_heading(h.meta["level"], content(h), text, starts, a, b)
                    if found is not None:
                        headings.append(found)
            parts = []
            for child in node.children:
                if child.srcmap is None or child.name == "definition":
                    continue
                a, b = _span(text, starts, *lines(child))
                if b > a:
                    parts.append((a, b))
            blocks.append(Block(kind, start, end, parts=tuple(parts)))
        elif kind == "code" and node.name == "fence":
            markup = node.meta.get("marker", "`") * node.meta.get("marker_len", 3)
            blocks.append(
                Block(kind, start, end, unclosed=not _fence_closed(text[start:end], markup))
            )
        else:
            blocks.append(Block(kind, start, end))
    return blocks, headings


def code_block_lines(text: str) -> list[tuple[int, int]] | None:
    """Every code block of ``text`` (fenced or indented), at any depth (inside lists and quotes
    too), as [first line, last line + 1), 0-based, as markdown-it-py's token maps give them; None
    where markdown-it-pyrs, which this uses, might part from markdown-it-py (``_needs_py``).
    markdown-it-py costs 70-250 ms of CPU to import, in each worker process that needs it."""
    if _needs_py(text) or not _encodable(text):
        return None
    data = text.encode("utf-8")
    bstarts = _byte_line_starts(data)
    out = []
    todo = list(reversed(_fast_markdown().tree(text).children))
    while todo:  # depth first, in document order
        node = todo.pop()
        if node.name in ("fence", "code_block"):
            if node.srcmap is not None:
                a, b = node.srcmap
                out.append((bisect_right(bstarts, a) - 1, bisect_right(bstarts, max(a, b - 1))))
        else:
            todo.extend(reversed(node.children))
    return out


def _top_level_lines(text: str) -> list[tuple[int, int]]:
    """The top-level blocks of ``text`` as [first line, last line + 1), 0-based, as
    markdown-it-py's token maps give them (markdown-it-pyrs where the two agree)."""
    if _needs_py(text) or not _encodable(text):
        return [
            (tok.map[0], tok.map[1])
            for tok in _markdown().parse(text)
            if tok.level == 0 and tok.map is not None and tok.nesting >= 0
        ]
    bstarts = _byte_line_starts(text.encode("utf-8"))
    return [
        (bisect_right(bstarts, a) - 1, bisect_right(bstarts, max(a, b - 1)))
        for node in _fast_markdown().tree(text).children
        if node.srcmap is not None and node.name != "definition"
        for a, b in (node.srcmap,)
    ]


def _encodable(text: str) -> bool:
    """Can ``text`` go to Rust as UTF-8 (no lone surrogate)?"""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _children(
    tokens, i: int, text: str, starts: list[int], first_line: int
) -> tuple[tuple[int, int], ...]:
    """(start, end) of the list items or inner blocks of the container opened at ``tokens[i]``."""
    level = tokens[i].level + 1
    parts = []
    for tok in tokens[i + 1 :]:
        if tok.level < level:
            break
        if tok.level == level and tok.map is not None and tok.nesting >= 0:
            a = starts[first_line + tok.map[0]]
            b = _line_end(text, starts, first_line + tok.map[1] - 1)
            while b > a and text[b - 1].isspace():
                b -= 1
            if b > a:
                parts.append((a, b))
    return tuple(parts)


def _fence_closed(source: str, markup: str) -> bool:
    lines = LINE_BREAK.split(source)
    if len(lines) < 2 or not markup:
        return False
    last = lines[-1].strip()
    return last.startswith(markup) and set(last) == {markup[0]}


def _line_end(text: str, starts: list[int], line_index: int) -> int:
    """Offset of the end of line ``line_index`` (0-based), before its line break."""
    if line_index + 1 < len(starts):
        end = starts[line_index + 1]
        if text.startswith("\r\n", end - 2):
            return end - 2
        return end - 1
    return len(text)


def _front_matter(text: str, warnings: list[str]) -> tuple[dict | None, int]:
    """Parse a leading YAML block. Returns (mapping or None, offset where the body starts)."""
    m = _FM_OPEN.match(text)
    if not m:
        return None, 0
    close = _FM_CLOSE.search(text, m.end(), m.end() + MAX_FRONTMATTER_CHARS + 8)
    if not close:
        if len(text) - m.end() > MAX_FRONTMATTER_CHARS and _FM_CLOSE.search(text, m.end()):
            warnings.append(f"front matter larger than {MAX_FRONTMATTER_CHARS // 1024} KB ignored")
        return None, 0  # no closing line: an opening thematic break, not front matter
    body_start = close.end()
    lb = LINE_BREAK.match(text, body_start)
    if lb:
        body_start = lb.end()
    raw = text[m.end() : close.start()]
    simple = _simple_front_matter(raw)
    if simple is not None:
        return _jsonable(simple, [MAX_FRONTMATTER_NODES]), body_start
    yaml, loader = _yaml()
    try:
        data = yaml.load(raw, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        warnings.append(f"malformed front matter{where}: {problem}; body indexed without it")
        return None, body_start
    except RecursionError:
        warnings.append("front matter nested too deeply; body indexed without it")
        return None, body_start
    except (
        ValueError,
        TypeError,
        OverflowError,
    ) as e:  # a constructor's: 2024-02-30, !!float abc, huge ints
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        warnings.append(f"malformed front matter: {problem}; body indexed without it")
        return None, body_start
    if data is None:
        return {}, body_start
    if not isinstance(data, dict):
        warnings.append(f"front matter is a {type(data).__name__}, not a mapping; ignored")
        return None, body_start
    try:
        budget = [MAX_FRONTMATTER_NODES]
        return _jsonable(data, budget), body_start
    except (OverflowError, RecursionError):
        warnings.append("front matter too large once expanded (YAML aliases?); ignored")
        return None, body_start


# Front matter of the commonest kind, 'key: value' lines and '[a, b]' lists of plain words, is
# read without PyYAML's parser (300 us a note, a tenth of a fresh index's parsing), each scalar
# resolved and made by PyYAML's own resolver and constructors: the same values (a date, a
# number, yes/no), or None for anything else, which PyYAML reads.
_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# A plain scalar that means the same in a block mapping and a flow sequence: no indicator first,
# none of ':' '#' ',' '[' ']' '{' '}' '|' inside, no tab, no control or unusual space (\w is a
# letter, a digit or '_', in any script).
_PLAIN = re.compile(r"[\w.(/+~][\w .()/+'!?&*%=~@$^;<>\"-]*")


def _simple_front_matter(raw: str) -> dict | None:
    """What PyYAML's safe loader makes of ``raw`` if it is of the commonest kind, else None."""
    if "\t" in raw or "\r" in raw or not raw:
        return None
    resolver, constructor, node = _scalars()
    resolve, plain = resolver.resolve, _PLAIN.fullmatch
    out: dict = {}

    def scalar(value: str):
        tag = resolve(node, value, (True, False))
        if tag == _STR:
            return value
        return constructor.yaml_constructors[tag](constructor, node(tag, value))

    try:
        for line in raw.split("\n"):
            if not line:
                continue
            key, colon, value = line.partition(":")
            if not colon or not _SIMPLE_KEY.fullmatch(key):
                return None
            value = value.strip(" ")
            if value and line[len(key) + 1] != " ":
                return None  # 'a:b' is one scalar, not a mapping
            k = scalar(key)
            if not isinstance(k, str):
                return None  # 'yes:', 'null:'
            if not value:
                out[k] = None
            elif value[0] == "[" and value[-1] == "]":
                inner = value[1:-1].strip(" ")
                items = [i.strip(" ") for i in inner.split(",")] if inner else []
                if not all(map(plain, items)):
                    return None
                out[k] = [scalar(i) for i in items]
            elif plain(value):
                out[k] = scalar(value)
            else:
                return None
    except Exception:  # a constructor's (2024-02-30): PyYAML says what it is
        return None
    return out or None


_STR = "tag:yaml.org,2002:str"


@functools.cache
def _scalars():
    """PyYAML's resolver, safe constructor and scalar node, for _simple_front_matter."""
    yaml, _ = _yaml()
    return yaml.resolver.Resolver(), yaml.constructor.SafeConstructor(), yaml.ScalarNode


def _jsonable(value, budget: list[int]):
    """A JSON-compatible copy of YAML data, spending one unit of ``budget`` per node."""
    budget[0] -= 1
    if budget[0] < 0:
        raise OverflowError
    if isinstance(value, dict):
        return {str(k): _jsonable(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, budget) for v in value]
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def frontmatter_json(fm: dict | None) -> str | None:
    return None if fm is None else json.dumps(fm, ensure_ascii=False, allow_nan=False)


def _first_str(value) -> str:
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


def _str_list(value, split_space: bool = False) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        parts = re.split(r"[,\s]+" if split_space else r",", value)
    elif isinstance(value, list):
        parts = [
            str(v) for v in value if isinstance(v, (str, int, float)) and not isinstance(v, bool)
        ]
    else:
        return []
    out = []
    for p in parts:
        p = p.strip().lstrip("#").strip() if split_space else p.strip()
        if p:
            out.append(p)
    return out


def _date(meta: dict, warnings: list[str]) -> str | None:
    """The note's date: its first DATE_KEYS value that is a date. One that is not (``date:
    soon``) adds a warning, as a date YAML cannot read (``2024-13-45``) does."""
    unread = []
    for key in DATE_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            for kind in (dt.date, dt.datetime):
                try:
                    return kind.fromisoformat(value.replace("Z", "+00:00")).isoformat()
                except ValueError:
                    pass
            unread.append(f"{key}: {value[:40]}")
    if unread:
        warnings.append(
            f"front matter {unread[0]!r} is not a date (YYYY-MM-DD, or with a time); the note"
            " has no date"
        )
    return None


def inline_tags(text: str, blocks: list[Block]) -> list[str]:
    """The inline ``#tags`` of ``blocks`` of ``text`` (code, HTML and rules aside), in order."""
    tags = []
    for b in blocks:
        if b.kind in ("code", "html", "hr"):
            continue
        chunk = text[b.start : b.end]
        if "#" not in chunk:
            continue  # most blocks: no need to blank their inline code
        for m in _TAG.finditer(without_code(chunk)):
            tag = m.group(1).rstrip("/")
            if tag and not tag.replace("/", "").isdigit() and not tag.startswith("/"):
                tags.append(tag)
    return tags


def without_code(text: str) -> str:
    """``text`` with each inline code span a space: a run of backticks opens one that the next
    run of the same length closes (CommonMark). Linear: found by the runs' lengths, not by a
    pattern tried at each run (one tried at each backtick of a long run made a heading of 1,200
    backticks take 57 s to index, and lines of runs of many lengths grew as their square)."""
    runs = [m.span() for m in _BACKTICKS.finditer(text)]
    if len(runs) < 2:
        return text
    closer: dict[int, int] = {}  # a run -> the next run of its length
    last: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        n = runs[i][1] - runs[i][0]
        if n in last:
            closer[i] = last[n]
        last[n] = i
    out, pos, i = [], 0, 0
    while i < len(runs):
        j = closer.get(i)
        if j is None:
            i += 1
            continue
        out += [text[pos : runs[i][0]], " "]
        pos, i = runs[j][1], j + 1
    return "".join(out) + text[pos:] if out else text


_AT_LINE = re.compile(r" at line (\d+):")  # in _front_matter's message for a YAML error


# Every warning _front_matter gives says so; the others among a note's warnings are what decoding
# repaired (invalid bytes, NUL padding after the text: kbase.ingest.decode), which came first.
_FRONT_MATTER = "front matter"


def frontmatter_diagnostics(doc: ParsedDoc) -> list[Diagnostic]:
    """``doc.warnings`` as diagnostics kept with the document: those about its front matter of
    kind 'frontmatter', at the line the YAML parser stopped at when it says which, else the whole
    block, ``text[0:body_start]`` (empty when the block was not taken as front matter at all);
    what decoding repaired of kind 'decode', over the whole text (a NUL byte is no bad front
    matter)."""
    if doc.kind in ("pdf", "canvas"):  # what reading them said: scanned pages, bad entries
        kind = "no_text" if doc.kind == "pdf" else "canvas"
        return [Diagnostic(kind, 0, len(doc.text), w) for w in doc.warnings]
    out, starts = [], None
    for warning in doc.warnings:
        if _FRONT_MATTER not in warning:
            out.append(Diagnostic("decode", 0, len(doc.text), warning))
            continue
        start, end = 0, doc.body_start
        m = _AT_LINE.search(warning)
        if m:
            starts = starts or line_starts(doc.text)
            i = int(m.group(1)) - 1
            if i < len(starts):
                start, end = starts[i], _line_end(doc.text, starts, i)
        out.append(Diagnostic("frontmatter", start, end, warning))
    return out
