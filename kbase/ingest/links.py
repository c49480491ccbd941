"""Links between notes, parsed and resolved the way Obsidian does it. Pure: no I/O, no database.

Parsing (``parse_links``) finds, in a ParsedDoc:

* wikilinks ``[[target#anchor|alias]]`` and embeds ``![[...]]`` (one line, no brackets inside);
  the target and anchor are trimmed, ``\\|`` (escaped for a table) separates like ``|``,
  an embed's trailing ``|100`` or ``|100x200`` is a size, not an alias;
* Markdown links ``[text](dest)`` and images ``![alt](dest)`` to local files: ``dest`` is
  percent-decoded, may be ``<in angle brackets>``, may carry a ``"title"``; destinations with
  a URL scheme (``https:``, ``mailto:``, ``obsidian:``...) are external and skipped, while a
  pure ``#anchor`` is kept as a link to the note itself, as Obsidian follows it;
* wikilinks inside front matter string values (``related: "[[X]]"``), as Obsidian's
  ``frontmatterLinks``; an unquoted ``[[X]]`` is a YAML list, not a link, in Obsidian too;
* reference-style links (CommonMark): ``[text][label]``, ``[label][]`` and ``[label]`` (and
  their images ``![alt][label]``; not a task's checkbox, ``- [x] done``) where a link reference
  definition ``[label]: dest "title"`` (between blocks, outside code; its destination and its
  title may each be on the next line) defines the label; labels compare case-insensitively
  with whitespace collapsed (``markup.label_key``), the first definition wins; the link's offsets
  are those of ``[text][label]`` as written, its target and anchor come from ``dest`` (local
  files only, as inline links). mdBook vaults (the Rust books) link this way.

Skipped, as Obsidian skips them: fenced and indented code blocks (nested in lists and quotes
too), inline code spans of any backtick count, HTML comments ``<!-- -->``, an unclosed ``[[``,
and a ``[[`` escaped with a backslash. Links inside ``%% comments %%`` are kept: Obsidian's
metadata cache records them. Links never overlap: of ``[![img](a.png)](b.md)`` only the
outer link is kept. Not handled: math; a definition inside a list or quote, or whose label or
title spans lines.

Resolution (``Resolver``) follows Obsidian's ``MetadataCache.getLinkpathDest``: files are
looked up by lowercased file name (the target with its extension if it has one, else with
``.md``). A name found once is that file. Else ``./`` and ``../`` resolve against the source's
folder; a target equal to a vault path (``/`` in front allowed) is that file, even if the
source's folder has a same-named one; otherwise every same-named file whose lowercased path
ends with the target qualifies, those whose path starts with the source's folder (a plain
string prefix, so subfolders count) first, each group shortest path first. Beyond Obsidian,
a target that finds no file can resolve through a note's front matter ``aliases`` (Obsidian
only offers aliases as link suggestions); ``use_aliases=False`` turns that off. A ``.html`` or
``.htm`` target that finds no file resolves to the ``.md`` of the same path if there is one
(mdBook's Markdown links to the page its ``.md`` becomes). A target that finds no file and names
a folder (``/examples/``, ``../guide/``, ``./``, ``/``; against the source's folder, then the
root) resolves to the folder's index page, ``index.md``, else ``README.md``, else ``_index.md``
(Hugo's), as a static site serves a folder; ``page.md/`` with no such folder is ``page.md``. A
Markdown link's query (``page.md?v=2``, ``?q=search``) is no part of its target.

Anchors (``anchor_ok``) compare headings after Obsidian's ``stripHeading`` (punctuation to
spaces, spaces collapsed), case-insensitively; ``Heading#Sub`` must nest; block ids
(``^id``, letters, digits and dashes) compare case-insensitively. In a Markdown link
(``[x](Note.md#what-is-ownership)``, ``[x](#what-is-ownership)``, mdBook's ``.html`` ones) a
one-part anchor may also be a heading's HTML id: the one its attribute list gives it
(``## Props {#props}``: ``props``, and then only that one, as on the site), else the one made
from its text as GitHub and mdBook make it (lowercased, spaces to dashes, punctuation other than
``-`` and ``_`` dropped) or as MkDocs and VitePress do (runs of dashes made one), or the id of
another element of the note (``html_ids``: ``<a id="old-name"></a>``, ``{ #id }``). Headings in
quotes are headings. Wikilinks name headings as written, as Obsidian shows them
(``[[Page#Props]]``, the attribute list aside), never an HTML id.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import accumulate, chain, repeat
from typing import Any
from urllib.parse import unquote

from kbase.ingest.markup import ATTR_LIST, DEF_TAIL, is_task_box, label_key, plain
from kbase.ingest.parse import attribute_ids, code_block_lines
from kbase.records import Heading, ParsedDoc

__all__ = [
    "ATTACHMENT_EXTENSIONS",
    "LinkRef",
    "Links",
    "Resolver",
    "anchor_ok",
    "block_ids",
    "heading_slug",
    "html_ids",
    "is_attachment",
    "parse_links",
]


@dataclass(frozen=True, slots=True)  # slots: a note may have a million
class LinkRef:
    """One link in a document: ``text[start:end]`` is exactly its source."""

    start: int
    end: int
    target: str  # as written, unescaped and percent-decoded, without the anchor; '' = this note
    anchor: str | None  # 'Heading#Sub' or '^blockid' without the leading '#'; None if absent
    alias: str | None  # display text: '|alias' of a wikilink, the text of a Markdown link
    embed: bool  # ![[...]] or ![](...)
    kind: str  # 'wiki', 'markdown' or 'frontmatter'
    size: str | None = None  # an embed's '|100' or '|100x200'


LINK_KINDS = ("wiki", "markdown", "frontmatter", "canvas")
_KIND_CODE = {k: i for i, k in enumerate(LINK_KINDS)}
_KIND_OF_CODE = tuple(LINK_KINDS[c >> 1] for c in range(2 * len(LINK_KINDS)))
_EMBED_OF_CODE = tuple(c & 1 for c in range(2 * len(LINK_KINDS)))
# (start, end, target, anchor, alias, embed, kind, size): a LinkRef's fields as parsing makes
# them; a target None is a wikilink's whole inside, ``[[target]]``, read from the text.
_Fields = tuple[int, int, str | None, str | None, str | None, bool, str, str | None]


class Links(Sequence[LinkRef]):
    """The links of a document's ``text``, in order, kept column by column: a note may have a
    million, and a LinkRef each (with its row for the writer) made 700 MB of them and took seconds
    to pickle from a worker. A wikilink whose inside is its target (``[[target]]``) keeps no
    string of its own: its target is read from the text. Reads as a sequence of LinkRef (made as
    they are asked for); the writer takes the columns."""

    __slots__ = ("text", "starts", "ends", "targets", "anchors", "aliases", "codes", "sizes")

    def __init__(self, text: str = "", links: Iterable[LinkRef] = ()) -> None:
        self.text = text
        self.starts = array("q")
        self.ends = array("q")
        self.targets: list[str | None] = []  # None: the text inside the brackets
        self.anchors: list[str | None] = []
        self.aliases: list[str | None] = []
        self.codes = bytearray()  # kind << 1 | embed
        self.sizes: dict[int, str] = {}  # an embed's size, by position (few links have one)
        for lk in links:
            self.add(lk.start, lk.end, lk.target, lk.anchor, lk.alias, lk.embed, lk.kind, lk.size)

    def add(
        self,
        start: int,
        end: int,
        target: str | None,
        anchor: str | None,
        alias: str | None,
        embed: bool,
        kind: str,
        size: str | None = None,
    ) -> None:
        if size is not None:
            self.sizes[len(self.codes)] = size
        self.starts.append(start)
        self.ends.append(end)
        self.targets.append(target)
        self.anchors.append(anchor)
        self.aliases.append(alias)
        self.codes.append(_KIND_CODE[kind] << 1 | bool(embed))

    def __reduce__(self):
        # As a worker sends them: each column of strings as one string and their lengths, not a
        # million strings, which pickle remembers one by one (a 100 MB memo) and which take a
        # million objects to read back. The text is the document's (pickled once with it).
        return (
            _unpacked,
            (
                self.text,
                self.starts,
                self.ends,
                pack_strings(self.targets),
                pack_strings(self.anchors),
                pack_strings(self.aliases),
                self.codes,
                self.sizes,
            ),
        )

    def target(self, i: int) -> str:
        t = self.targets[i]
        if t is None:  # [[target]] (after a '!' for an embed)
            return self.text[self.starts[i] + 2 + (self.codes[i] & 1) : self.ends[i] - 2]
        return t

    def target_column(self) -> Iterator[str]:
        return map(self.target, range(len(self)))

    def set_kind(self, i: int, kind: str) -> None:
        self.codes[i] = _KIND_CODE[kind] << 1 | self.codes[i] & 1

    def kinds(self) -> Iterator[str]:
        return map(_KIND_OF_CODE.__getitem__, self.codes)

    def embeds(self) -> Iterator[int]:
        return map(_EMBED_OF_CODE.__getitem__, self.codes)

    def fields(self) -> Iterator[_Fields]:
        """Each link's fields as ``add`` takes them."""
        sizes = self.sizes
        return zip(
            self.starts,
            self.ends,
            self.targets,
            self.anchors,
            self.aliases,
            map(bool, self.embeds()),
            self.kinds(),
            (sizes.get(i) for i in range(len(self))) if sizes else repeat(None),
        )

    def __len__(self) -> int:
        return len(self.codes)

    def _ref(self, i: int) -> LinkRef:
        code = self.codes[i]
        return LinkRef(
            self.starts[i],
            self.ends[i],
            self.target(i),
            self.anchors[i],
            self.aliases[i],
            bool(code & 1),
            LINK_KINDS[code >> 1],
            self.sizes.get(i),
        )

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._ref(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("link index out of range")
        return self._ref(i)

    def __iter__(self) -> Iterator[LinkRef]:
        return map(self._ref, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Links({list(self)!r})"


def pack_strings(strings: list) -> tuple[str, array | int]:
    """A list of strings and Nones as one string and their lengths (-1: None); a list of Nones
    as its length alone."""
    if not any(t is not None for t in strings):
        return "", len(strings)
    lengths = array("q", [-1 if t is None else len(t) for t in strings])
    return "".join(filter(None, strings)), lengths


def unpack_strings(packed: tuple[str, array | int]) -> list:
    joined, lengths = packed
    if isinstance(lengths, int):
        return [None] * lengths
    ends = list(accumulate(map(max, lengths, repeat(0))))
    out: list = list(map(joined.__getitem__, map(slice, chain((0,), ends), ends)))
    if min(lengths, default=0) < 0:
        out = [None if n < 0 else t for t, n in zip(out, lengths)]
    return out


def _unpacked(text, starts, ends, targets, anchors, aliases, codes, sizes) -> Links:
    links = Links(text)
    links.starts, links.ends, links.codes, links.sizes = starts, ends, codes, sizes
    links.targets, links.anchors = unpack_strings(targets), unpack_strings(anchors)
    links.aliases = unpack_strings(aliases)
    return links


# Extensions Obsidian opens as attachments rather than notes (images, audio, video, PDF, canvas).
ATTACHMENT_EXTENSIONS = frozenset(
    "png jpg jpeg gif bmp svg webp avif ico tif tiff "
    "mp3 wav m4a ogg oga 3gp flac webm mp4 ogv mov mkv "
    "pdf canvas base".split()
)

# The link regexes begin after a literal '[' (an embed's '!' is looked for before it): with a
# literal first character the regex engine skips ahead fast, four times faster than '!?\['.
# [[...]]: one line, no brackets inside (Obsidian forbids '[' and ']' in linkable names).
_WIKI = r"\[(?P<inner>[^\[\]\r\n]*)\]\]"
_WIKILINK = re.compile(r"\[" + _WIKI)
# [text](dest "title") after CommonMark: bracket-balanced text (one nesting level), the
# destination in <angle brackets> or bare without spaces and with balanced parentheses.
# Possessive text: a '[' that is not a link must fail fast, not backtrack over its text.
_MD = r"""
    (?P<text>(?:[^\[\]\\\r\n]|\\[^\r\n]|(?:\r\n?|\n)(?![ \t]*[\r\n])|\[(?:[^\[\]\\\r\n]|\\.)*+\])*+)
    \]\(
    [ \t]*(?:\r\n|\r|\n)?[ \t]*
    (?:<(?P<angle>(?:[^<>\\\r\n]|\\.)*+)>
      |(?P<bare>(?:[^\x00-\x20()\\]|\\.|\((?:[^\x00-\x20()\\]|\\.)*+\))++))
    (?:[ \t\r\n]+(?:"(?:[^"\\]|\\.)*+"|'(?:[^'\\]|\\.)*+'|\((?:[^()\\]|\\.)*+\)))?
    [ \t]*(?:\r\n|\r|\n)?[ \t]*\)
"""
# Both at once, so that the leftmost wins and a wikilink wins at the same offset.
_LINK = re.compile(r"\[(?:" + _WIKI + "|" + _MD + ")", re.X | re.S)
_INNER, _TEXT, _ANGLE, _BARE = (_LINK.groupindex[g] for g in ("inner", "text", "angle", "bare"))
# [text][label], [label][] or [label]: the text as _MD's, then an optional [label].
_REF = re.compile(
    r"""\[
    (?P<text>(?:[^\[\]\\\r\n]|\\[^\r\n]|(?:\r\n?|\n)(?![ \t]*[\r\n])|\[(?:[^\[\]\\\r\n]|\\.)*+\])*+)
    \](?:\[(?P<label>(?:[^\[\]\\\r\n]|\\.)*+)\])?""",
    re.X,
)
# A link reference definition: [label]: <dest> or dest (on that line or the next), then maybe a
# title (markup.DEF_TAIL, the shape the display hides).
_REF_DEF = re.compile(r"^[ ]{0,3}\[(?P<label>(?:[^\[\]\\\r\n]|\\.){1,999})\]:" + DEF_TAIL, re.M)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_SIZE = re.compile(r"\d+(?:x\d+)?")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # CommonMark: backslash before ASCII punctuation
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)[ \t>]*(?:\r\n|\r|\n)")
# A block id: '^id' at the end of a line, alone, after whitespace, or right after a wikilink or
# embed's ']]'. Obsidian's help asks for a space before the caret (in 'x^2' the caret belongs to
# the word), but its own help vault writes
# '![[version-history-collaboration.png]]^version-history-image' and embeds that block from
# another note: after ']]' no word can run on into the id.
_BLOCK_ID = re.compile(
    r"(?:(?<=[ \t])|(?<=^)|(?<=\]\]))\^([A-Za-z0-9-]+)[ \t]*(?=\r\n|\r|\n|\Z)", re.M
)
# What may hide an indented or fenced code block inside a list or quote.
_NESTED_CODE_HINT = re.compile(r"```|~~~|(?:\r\n|\r|\n)[ \t>]*(?:\r\n|\r|\n)[ \t>]*(?: {4}|\t)")
# Obsidian's stripHeading: these become spaces, then runs of whitespace collapse.
_HEADING_PUNCT = re.compile(r"[!\"#$%&()*+,.:;<=>?@^`{|}~/\[\]\\\r\n]")


@cache
def _markdown():
    """Block structure only (loaded on first use, like kbase.ingest.parse's)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])


# ---------------------------------------------------------------------------------- parsing


def parse_links(doc: ParsedDoc) -> Links:
    """Every link of a Markdown document, in order of ``start``; plain text documents have none."""
    text = doc.text
    links = Links(text)
    if doc.kind != "markdown":
        return links
    for fields in _frontmatter_links(doc):
        links.add(*fields)
    defs = _reference_definitions(doc) if "]:" in text else {}
    if "[[" not in text and "](" not in text and not defs:
        return links
    body = _Body(doc)
    _inline_links(text, body, links)
    if defs:
        links = _with_references(text, body, links, defs)
    return links


def _inline_links(text: str, body: _Body, links: Links) -> None:
    """Append the wikilinks and inline Markdown links of ``body`` to ``links``."""
    add = links.add
    for start, end in body.ranges:
        if "[[" not in text[start:end] and "](" not in text[start:end]:
            continue
        skip = body.skipped(start, end)
        k, n_skip = 0, len(skip)  # skip[k] is the next code span or comment
        pos = start
        while pos < end:
            for m in _LINK.finditer(text, pos, end):
                begin, stop = m.span()
                if k < n_skip:
                    while k < n_skip and skip[k][1] <= begin:
                        k += 1
                    if k < n_skip and skip[k][0] <= begin:
                        pos = skip[k][1]  # in code or a comment: go on after it
                        break
                inner = m[_INNER]
                if inner is not None:
                    link = _wikilink(text, begin, stop, inner, "wiki")
                else:
                    link = _markdown_link(text, begin, stop, m)
                if link is None:
                    pos = begin + 1  # not a link here, but one may start inside the match
                    break
                add(*link)
            else:
                break


@dataclass(frozen=True)
class _Definition:
    start: int  # of the definition (its '[')
    end: int
    dest: str  # as written: unescaped, still percent-encoded


def _reference_definitions(doc: ParsedDoc) -> dict[str, _Definition]:
    """The link reference definitions of a document by label key (the first of each wins).

    A definition is a line of its own between blocks (markdown-it makes no block of it), so
    only the gaps between the document's blocks, after the front matter, are searched: lines
    inside paragraphs, code blocks and the rest are not definitions."""
    text = doc.text
    defs: dict[str, _Definition] = {}
    pos = doc.body_start
    gaps = []
    for block in sorted(doc.blocks, key=lambda b: b.start):
        if block.start > pos:
            gaps.append((pos, block.start))
        pos = max(pos, block.end)
    if pos < len(text):
        gaps.append((pos, len(text)))
    for a, b in gaps:
        if "]:" not in text[a:b]:
            continue
        for m in _REF_DEF.finditer(text, a, b):
            label = m["label"]
            if label.startswith("^") or not label.strip():  # '[^1]: ...' is a footnote
                continue
            key = label_key(label)
            dest = m["def_angle"] if m["def_angle"] is not None else m["def_bare"]
            if key not in defs:
                defs[key] = _Definition(
                    m.start() + len(m[0]) - len(m[0].lstrip(" ")), m.end(), dest
                )
    return defs


def _with_references(text: str, body: _Body, links: Links, defs: dict[str, _Definition]) -> Links:
    """``links`` (in order) merged with the reference links of ``body``: outside code spans,
    comments, definition lines and the links already found."""
    taken = sorted([*zip(links.starts, links.ends), *((d.start, d.end) for d in defs.values())])
    taken_starts = [a for a, _ in taken]
    refs: list[_Fields] = []
    for start, end in body.ranges:
        if "[" not in text[start:end]:
            continue
        skip = body.skipped(start, end)
        skip_starts = [a for a, _ in skip]
        pos = start
        while True:
            m = _REF.search(text, pos, end)
            if m is None:
                break
            begin, stop = m.span()
            pos = begin + 1
            hidden = _hidden_until(skip, skip_starts, begin) if skip else 0
            if hidden:
                pos = hidden
                continue
            inside = _hidden_until(taken, taken_starts, begin)
            if inside:
                pos = inside
                continue
            k = bisect_left(taken_starts, begin)
            if k < len(taken_starts) and taken_starts[k] < stop:
                continue  # a link or definition starts inside: the bracket is not a link
            link = _reference_link(text, begin, stop, m, defs)
            if link is None:
                continue
            refs.append(link)
            pos = stop
    if not refs:
        return links
    merged = Links(text)
    for fields in sorted([*links.fields(), *refs], key=lambda f: f[0]):
        merged.add(*fields)
    return merged


def _reference_link(
    text: str, begin: int, stop: int, m: re.Match[str], defs: dict[str, _Definition]
) -> _Fields | None:
    """A LinkRef for the reference link ``text[begin:stop]``, or None if it is escaped, its
    label is not defined, or it leads out of the vault."""
    if begin and text[begin - 1] == "\\" and _escaped(text, begin):
        return None
    if begin and text[begin - 1] == "]":  # '[a][b]' seen from its second bracket
        return None
    label = m["label"]
    if label is None:  # shortcut '[label]': not when an inline link or a '[...]' follows
        if stop < len(text) and text[stop] in "([":
            return None
        if is_task_box(text, begin, stop):  # '- [x] done' is a task, whatever '[x]:' says
            return None
        label = m["text"]
    elif not label.strip():  # collapsed '[label][]'
        label = m["text"]
    if label.startswith("^"):
        return None
    found = defs.get(label_key(label))
    if found is None:
        return None
    embed = _bang_before(text, begin)
    dest = _ESCAPE.sub(r"\1", found.dest) if "\\" in found.dest else found.dest
    dest = dest.strip()
    if not dest or dest.startswith("//") or _SCHEME.match(dest):
        return None
    path, _, anchor = dest.partition("#")
    path = path.partition("?")[0]  # a query ('page.md?v=2', '?q=search') is no part of the file
    target = _nfc(unquote(path) if "%" in path else path).strip()
    anchor = (unquote(anchor) if "%" in anchor else anchor).strip()
    if not target and not anchor:
        return None
    return (begin - embed, stop, target, anchor or None, m["text"], embed, "markdown", None)


def block_ids(doc: ParsedDoc) -> list[tuple[str, int, int]]:
    """``(id, start, end)`` of each ``^block-id`` marker, ``text[start:end] == '^' + id``."""
    if doc.kind != "markdown" or "^" not in doc.text:
        return []
    text = doc.text
    body = _Body(doc)
    out = []
    for start, end in body.ranges:
        if "^" not in text[start:end]:
            continue
        skip = body.skipped(start, end)
        starts = [s for s, _ in skip]
        for m in _BLOCK_ID.finditer(text, start, end):
            if not (skip and _hidden_until(skip, starts, m.start())):
                out.append((m.group(1), m.start(), m.start() + 1 + len(m.group(1))))
    return out


# An HTML element's id attribute: '<a id="old-name"></a>', "<div id='x' class=y>", '<span id=x>'.
_TAG_ID = re.compile(
    r"""<[A-Za-z][A-Za-z0-9-]*(?=[\s/>])[^<>]*?\sid[ \t]*=[ \t]*"""
    r"""(?:"(?P<dq>[^"<>]*)"|'(?P<sq>[^'<>]*)'|(?P<bare>[^\s"'=<>`]+))"""
)
_ATTR_LISTS = re.compile(ATTR_LIST, re.M)


def html_ids(doc: ParsedDoc) -> list[tuple[str, int, int]]:
    """``(id, start, end)`` of each id an element of the note has on its site (``text[start:end]
    == id``), outside code and comments: an HTML tag's ``id`` attribute (``<a id="old-name">``,
    mdBook's and MkDocs' anchors) and an attribute list's ``#id`` or ``id=`` (MkDocs' attr_list:
    ``**`locale`**{ #mkdocs-locale }``, ``{ #feedback }``), but a heading's, which is its anchor
    (``Heading.anchor``). A Markdown link's ``#id`` may name one (``anchor_ok``)."""
    text = doc.text
    if doc.kind != "markdown" or ("<" not in text and "{" not in text):
        return []
    if _TAG_ID.search(text) is None and _ATTR_LISTS.search(text) is None:
        return []  # most notes (the body's ranges, what they skip, are then not worked out)
    body = _Body(doc)
    heads = sorted((h.start, h.end) for h in doc.headings)
    head_starts = [a for a, _ in heads]
    out: list[tuple[str, int, int]] = []
    for start, end in body.ranges:
        tags = "<" in text[start:end]
        lists = "{" in text[start:end]
        if not tags and not lists:
            continue
        found: list[tuple[int, str, int, int]] = []  # (where, id, start, end)
        if tags:
            for m in _TAG_ID.finditer(text, start, end):
                g = "dq" if m["dq"] is not None else "sq" if m["sq"] is not None else "bare"
                found.append((m.start(), m[g], m.start(g), m.end(g)))
        if lists:
            for m in _ATTR_LISTS.finditer(text, start, end):
                if _hidden_until(heads, head_starts, m.start()):
                    continue  # a heading's attribute list: its anchor
                brace = text.index("{", m.start(), m.end())
                a = brace + 2 if text.startswith(":", brace + 1) else brace + 1
                for value, x, y in attribute_ids(text[a : m.end() - 1]):
                    found.append((m.start(), value, a + x, a + y))
        if not found:
            continue
        skip = body.skipped(start, end)
        starts = [a for a, _ in skip]
        for where, value, a, b in sorted(found):
            if value and not (skip and _hidden_until(skip, starts, where)):
                out.append((value, a, b))
    return out


class _Body:
    """Where links can be in a document body: outside code blocks, code spans and comments."""

    def __init__(self, doc: ParsedDoc) -> None:
        self.text = doc.text
        self.ranges: list[tuple[int, int]] = []  # the body less its code blocks, merged
        self.block_ends: list[int] = []  # a code span cannot run past the end of its block
        code_before = False  # is there code between the last range and the next part?
        for block in doc.blocks:
            if block.kind == "code":
                code_before = True
                continue
            if block.kind in ("list", "quote") and _NESTED_CODE_HINT.search(
                self.text, block.start, block.end
            ):
                parts = _minus_nested_code(self.text, block.start, block.end)
            else:
                parts = [(block.start, block.end)]
            prev = block.start
            for start, end in parts:  # the gaps between parts are nested code blocks
                if start > prev:
                    code_before = True
                self.block_ends.append(end)
                if self.ranges and not code_before:
                    self.ranges[-1] = (self.ranges[-1][0], end)
                else:
                    self.ranges.append((start, end))
                code_before = False
                prev = end
            if prev < block.end:
                code_before = True

    def skipped(self, start: int, end: int) -> list[tuple[int, int]]:
        """Inline code spans and HTML comments in ``text[start:end]``, in order.

        A code span closes with a backtick run of the same length within its paragraph and
        block, else its backticks are literal (CommonMark). An unclosed ``<!--`` is literal
        text, unless it opens a line, where it starts an HTML block that runs to the end.
        """
        text = self.text
        spans: list[tuple[int, int]] = []
        if "`" not in text[start:end] and "<!--" not in text[start:end]:
            return spans
        tick = text.find("`", start, end)
        comment = text.find("<!--", start, end)
        while tick >= 0 or comment >= 0:
            if comment >= 0 and (tick < 0 or comment < tick):
                close = text.find("-->", comment + 4, end)
                if close >= 0:
                    spans.append((comment, close + 3))
                    pos = close + 3
                elif _opens_line(text, comment):
                    spans.append((comment, end))
                    return spans
                else:
                    pos = comment + 4
            else:
                run_end = tick + 1
                while run_end < end and text[run_end] == "`":
                    run_end += 1
                opening = tick + 1 if _escaped(text, tick) else tick  # '\`' is literal
                pos = run_end
                if opening < run_end:
                    k = bisect_left(self.block_ends, run_end)
                    limit = min(end, self.block_ends[k]) if k < len(self.block_ends) else end
                    closing = _closing_ticks(run_end - opening).search(text, run_end, limit)
                    if closing and not _BLANK_LINE.search(text, run_end, closing.start()):
                        spans.append((opening, closing.end()))
                        pos = closing.end()
            if 0 <= tick < pos:
                tick = text.find("`", pos, end)
            if 0 <= comment < pos:
                comment = text.find("<!--", pos, end)
        return spans


def _opens_line(text: str, i: int) -> bool:
    """Is ``text[i]`` the first non-blank of its line, indented at most 3 spaces?"""
    line = max(text.rfind("\n", 0, i), text.rfind("\r", 0, i)) + 1
    return i - line <= 3 and text[line:i].strip(" ") == ""


def _minus_nested_code(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``text[start:end]`` outside the code blocks nested in it (in lists and
    quotes, which parse.py, keeping top-level blocks only, does not show); rare, so parsing
    the block again is cheap enough."""
    chunk = text[start:end]
    lines = [0] + [m.end() for m in _LINE_BREAK.finditer(chunk)]
    out, pos = [], 0
    maps = code_block_lines(chunk)  # markdown-it-pyrs where it agrees, which loads in no time
    if maps is None:
        maps = [
            (tok.map[0], tok.map[1])
            for tok in _markdown().parse(chunk)
            if tok.type in ("fence", "code_block") and tok.map
        ]
    for first, stop in maps:
        a = lines[first]
        b = lines[stop] if stop < len(lines) else len(chunk)
        if a > pos:
            out.append((start + pos, start + a))
        pos = max(pos, b)
    if pos < len(chunk):
        out.append((start + pos, end))
    return out


@lru_cache(maxsize=64)
def _closing_ticks(n: int) -> re.Pattern[str]:
    return re.compile(rf"(?<!`)`{{{n}}}(?!`)")


def _escaped(text: str, i: int) -> bool:
    """Is ``text[i]`` preceded by an odd number of backslashes?"""
    j = i
    while j > 0 and text[j - 1] == "\\":
        j -= 1
    return (i - j) % 2 == 1


def _hidden_until(spans: list[tuple[int, int]], starts: list[int], offset: int) -> int:
    """The end of the span that ``offset`` is in, or 0 if it is in none."""
    k = bisect_right(starts, offset) - 1
    return spans[k][1] if k >= 0 and offset < spans[k][1] else 0


def _wikilink(text: str, begin: int, stop: int, inner: str, kind: str) -> _Fields | None:
    """A LinkRef for the wikilink ``text[begin:stop]`` (an embed's '!' is before ``begin``),
    or None if it is escaped or empty."""
    if begin and text[begin - 1] == "\\" and _escaped(text, begin):  # '\[[' is literal
        return None
    embed = _bang_before(text, begin)
    alias: str | None
    target, bar, alias = inner.partition("|")
    if bar and target.endswith("\\"):  # '[[a\|b]]': the pipe escaped for a table
        target = target[:-1]
    target, _, anchor = target.partition("#")
    target = target.strip()
    anchor = anchor.strip()
    if not target and not anchor:
        return None
    size = None
    if not bar:
        alias = None
        if not anchor and target == inner:  # [[target]]: read from the text (see Links)
            return (begin - embed, stop, None, None, None, embed, kind, None)
    else:
        if embed:
            head, _, last = alias.rpartition("|")
            if _SIZE.fullmatch(last.strip()):
                size = last.strip()
                alias = head if head else None
        if alias is not None:
            alias = alias.strip()
    return (begin - embed, stop, target, anchor or None, alias, embed, kind, size)


def _markdown_link(text: str, begin: int, stop: int, m: re.Match[str]) -> _Fields | None:
    """A LinkRef for the Markdown link ``text[begin:stop]`` matched by ``m`` (an image's '!'
    is before ``begin``), or None if it is escaped or not to a local file."""
    if begin and text[begin - 1] == "\\" and _escaped(text, begin):  # '\[' is literal
        return None
    embed = _bang_before(text, begin)
    dest = m[_ANGLE]
    if dest is None:
        dest = m[_BARE]
    if "\\" in dest:
        dest = _ESCAPE.sub(r"\1", dest)
    dest = dest.strip()
    if not dest or dest.startswith("//") or _SCHEME.match(dest):
        return None
    path, _, anchor = dest.partition("#")
    path = path.partition("?")[0]  # a query ('page.md?v=2', '?q=search') is no part of the file
    target = _nfc(unquote(path) if "%" in path else path).strip()
    anchor = (unquote(anchor) if "%" in anchor else anchor).strip()
    if not target and not anchor:
        return None
    return (begin - embed, stop, target, anchor or None, m[_TEXT], embed, "markdown", None)


def _bang_before(text: str, i: int) -> bool:
    """Is there an unescaped '!' just before ``text[i]`` (an embed)? '\\![[x]]' is a literal
    '!' before a link."""
    return i > 0 and text[i - 1] == "!" and not _escaped(text, i - 1)


def _frontmatter_links(doc: ParsedDoc) -> list[_Fields]:
    """Wikilinks in front matter string values, located in the raw YAML."""
    if not doc.frontmatter or doc.body_start <= 0:
        return []
    raw = doc.text[: doc.body_start]
    if "[[" not in raw:
        return []
    wanted: dict[str, int] = {}
    for value in _strings(doc.frontmatter):
        for m in _WIKILINK.finditer(value):
            wanted[m.group()] = wanted.get(m.group(), 0) + 1
    out = []
    for m in _WIKILINK.finditer(raw):
        # Only a link that a parsed value holds: not a key, a comment or an unquoted [[x]].
        if wanted.get(m.group(), 0) > 0:
            link = _wikilink(raw, m.start(), m.end(), m.group("inner"), "frontmatter")
            if link is not None:
                wanted[m.group()] -= 1
                out.append(link)
    return out


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# -------------------------------------------------------------------------------- resolving


def is_attachment(target: str) -> bool:
    """Does a link target name an attachment (image, PDF, ...) rather than a note?"""
    name = target.rsplit("/", 1)[-1]
    return "." in name and name.rsplit(".", 1)[1].lower() in ATTACHMENT_EXTENSIONS


def _folder(path: str) -> str:
    """Obsidian's parent-folder of a path: 'a/b/c.md' -> 'a/b', 'c.md' -> ''."""
    return path[: max(0, path.rfind("/"))]


# What a static site serves for a folder, in this order (Hugo's section page last).
INDEX_PAGES = ("index.md", "readme.md", "_index.md")


def _normpath(path: str) -> str | None:
    """``path`` with its ``.`` and ``..`` parts worked out ('' is the root); None if it climbs
    out of the root."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def _nfc(s: str) -> str:
    return s if s.isascii() else unicodedata.normalize("NFC", s)


class Resolver:
    """Built once per vault from every file path in it (notes AND attachments, root-relative,
    '/'-separated) and the notes' aliases; resolves link targets to paths."""

    def __init__(
        self,
        paths: Iterable[str],
        aliases: Mapping[str, Iterable[str]] = {},
        *,
        use_aliases: bool = True,
    ) -> None:
        self._by_name: dict[str, list[tuple[str, str]]] = {}  # lower name -> [(lower path, path)]
        self._exists: set[str] = set()
        for path in paths:
            path = _nfc(path).lstrip("/")
            if path in self._exists:
                continue
            self._exists.add(path)
            low = path.lower()
            self._by_name.setdefault(low.rsplit("/", 1)[-1], []).append((low, path))
        for group in self._by_name.values():
            group.sort(key=_shortest_first)
        self._aliases: dict[str, list[tuple[str, str]]] = {}
        if use_aliases:
            for path, names in aliases.items():
                path = _nfc(path).lstrip("/")
                for name in names:
                    key = _nfc(str(name)).strip().lower()
                    if key:
                        self._aliases.setdefault(key, []).append((path.lower(), path))
            for group in self._aliases.values():
                group.sort(key=_shortest_first)
        # (target, source folder, relative) -> path
        self._cache: dict[tuple[str, str, bool], str | None] = {}
        self._folders: dict[str, str] = {}  # source -> its folder, lowercased
        # A folder's index page, as static sites serve a folder: lowercased folder -> path.
        self._index_pages: dict[str, str] = {}
        for low, path in sorted(
            (p for name in INDEX_PAGES for p in self._by_name.get(name, ())),
            key=lambda item: INDEX_PAGES.index(item[0].rsplit("/", 1)[-1]),
        ):
            self._index_pages.setdefault(_folder(low), path)

    def __contains__(self, path: str) -> bool:
        return _nfc(path) in self._exists

    def resolve(self, target: str, source: str, *, relative: bool = False) -> str | None:
        """The path of the file that ``target`` (without anchor) points to from ``source``.

        ``''`` is the source itself. None means unresolved. ``relative``: a Markdown link,
        which a docs site (MkDocs, VitePress, GitHub) reads from the source's folder: the file
        at that path from there, if there is one, comes before Obsidian's choice (the root's
        ``index.md`` for ``[x](index.md)`` in ``plugins/blog.md``).
        """
        if target == "":
            return source
        folder = self._folders.get(source)
        if folder is None:
            folder = self._folders[source] = _folder(_nfc(source)).lower()
        key = (target, folder, relative)
        found = self._cache.get(key, _MISSING)
        if found is _MISSING:
            found = self._in_folder(_nfc(target), folder) if relative and folder else None
            if found is None:
                found = self._linkpath_dest(_nfc(target), folder)
            if found is None:
                stem, dot, ext = target.rpartition(".")
                if dot and stem and ext.lower() in ("html", "htm"):
                    found = self._linkpath_dest(_nfc(stem + ".md"), folder)
            if found is None and self._index_pages:
                found = self._index_page(_nfc(target), folder)
            if found is None and self._aliases:
                found = self._by_alias(_nfc(target), folder)
            if len(self._cache) < CACHE_PAIRS:
                self._cache[key] = found
        return found

    def _in_folder(self, e: str, folder: str) -> str | None:
        """The file at the plain path ``e`` (``x``, ``x.md``, ``x.html``, ``sub/x.md``) from
        the source's ``folder`` (lowercased), exactly; None if there is none there. Paths that
        start with '/', './' or '../' are left to _linkpath_dest, which reads them so already."""
        if e.startswith(("/", "./", "../")):
            return None
        n = e.lower()
        stem, dot, ext = n.rpartition(".")
        names = [n, n + ".md"] + ([stem + ".md"] if dot and stem and ext in ("html", "htm") else [])
        for name in names:
            want = _normpath(f"{folder}/{name}")
            if want is None:
                continue
            for low, path in self._by_name.get(want.rsplit("/", 1)[-1], ()):
                if low == want:
                    return path
        return None

    def _linkpath_dest(self, e: str, folder: str) -> str | None:
        """Obsidian's ``getLinkpathDest(e, source)[0]``; ``folder`` is the source's, lowercased."""
        n = e.lower()
        name = n.rsplit("/", 1)[-1]
        group = self._by_name.get(name) if "." in name else None
        if not group:
            n = (e + ".md").lower()
            name = n.rsplit("/", 1)[-1]
            group = self._by_name.get(name)
            if not group:
                return None
        if name == n and len(group) == 1:
            return group[0][1]
        # Names that differ only in case (Note.md and note.md, side by side on Linux): the one
        # spelled as the link spells it first, then the others in their order.
        seg = e.rsplit("/", 1)[-1]
        exact = seg if seg.lower() == name else seg + ".md"
        if len(group) > 1:
            first = {low: i for i, (low, _) in reversed(list(enumerate(group)))}
            group = sorted(group, key=lambda it: (first[it[0]], it[1].rsplit("/", 1)[-1] != exact))
        o = folder
        if n.startswith("./") or n.startswith("../"):
            if n.startswith("./../"):
                n = n[2:]
            if n.startswith("./"):
                o = o + "/" if o else o
                n = o + n[2:]
            else:
                while n.startswith("../"):
                    n = n[3:]
                    o = _folder(o)
                o = o + "/" if o else o
                n = o + n
            for low, path in group:
                if low == n:
                    return path
        if n.startswith("/"):
            n = n[1:]
        for low, path in group:
            if low == n:
                return path
        if e.startswith("/"):
            return None
        # Same-named files ending with the target: those under the source's folder first (a
        # plain string prefix, as in Obsidian), each group already sorted shortest first.
        other = None
        for low, path in group:
            if low.endswith(n):
                if low.startswith(o):
                    return path
                if other is None:
                    other = path
        return other

    def _index_page(self, e: str, folder: str) -> str | None:
        """The index page of the folder ``e`` names (``/examples/``, ``../guide/``, ``./``,
        ``guide``): against the source's folder, then (a relative one) the root; else, for a
        target with a slash after a file's name (``configuration.md/``), that file."""
        name = e.lower().rstrip("/")
        if e.startswith("/"):
            candidates = [_normpath(name)]
        else:
            candidates = [_normpath(f"{folder}/{name}" if folder else name), _normpath(name)]
        for where in candidates:
            if where is not None and where in self._index_pages:
                return self._index_pages[where]
        if e.endswith("/") and name:
            return self._linkpath_dest(e.rstrip("/"), folder)
        return None

    def _by_alias(self, e: str, folder: str) -> str | None:
        group = self._aliases.get(e.strip().lower())
        if not group:
            return None
        for low, path in group:
            if low.startswith(folder):
                return path
        return group[0][1]


_MISSING: Any = object()
# Targets resolved are remembered by (target, source folder), this many at most: a vault links
# far fewer distinct pairs; a note of a million distinct [[t123]] held a million (150 MB).
CACHE_PAIRS = 100_000


def _shortest_first(item: tuple[str, str]) -> tuple[int, str]:
    return (len(item[1]), item[1])


# --------------------------------------------------------------------------------- anchors


@lru_cache(maxsize=1 << 16)  # resolving a root's links asks for each heading's once per link to it
def heading_slug(text: str) -> str:
    """The key Obsidian compares heading anchors by: ``stripHeading`` (punctuation to spaces,
    whitespace collapsed, trimmed), lowercased."""
    return " ".join(_HEADING_PUNCT.sub(" ", text).split()).lower()


def anchor_ok(
    anchor: str,
    headings: Sequence[Heading],
    blocks: Sequence[str],
    *,
    html_ids: bool = False,
    element_ids: Collection[str] = (),
) -> bool:
    """Does ``anchor`` ('Heading', 'Heading#Sub', '^id'; a leading '#' is allowed) exist in the
    note with these headings and block ids ('id' or '^id')?

    ``Heading#Sub`` needs ``Sub`` inside the section of ``Heading``, at any depth. With
    ``html_ids`` (a Markdown link: GitHub and mdBook name headings so) a heading's HTML id
    (``html_id``) names it too, and so does one of the note's ``element_ids`` (its elements'
    ids: ``html_ids``, lowercased); Obsidian's wikilinks never use those ids.
    """
    anchor = anchor.lstrip("#")
    if anchor.startswith("^"):
        wanted = anchor[1:].strip().lower()
        return any(b.lstrip("^").lower() == wanted for b in blocks)
    parts = [heading_slug(p) for p in anchor.split("#")]
    parts = [p for p in parts if p]
    if not parts:
        return True
    keys = [heading_slug(h.text) for h in headings]
    if _match_heading_path(headings, keys, parts, 0, len(headings)):
        return True
    if not html_ids:
        return False
    return _by_html_id(anchor, headings) is not None or anchor.strip().lower() in element_ids


def html_id(text: str) -> str:
    """A heading's HTML id as mdBook's ``normalize_id`` makes it (GitHub's is alike):
    lowercased, whitespace to '-', characters other than letters, digits, '-' and '_' dropped."""
    return "".join(
        "-" if c.isspace() else c for c in text.strip().lower() if c.isalnum() or c in "-_ \t"
    )


_DASHES = re.compile(r"-{2,}")
_NOT_WORD = re.compile(r"[^\w]+")


@lru_cache(maxsize=1 << 14)
def _html_ids(h: Heading) -> tuple[str, ...]:
    """The ids a site gives heading ``h``: the one its attribute list names (``{#props}``),
    alone; else the ones made from its text: as mdBook and GitHub make it, as MkDocs
    (Python-Markdown's toc) does (runs of dashes made one, none at the ends) and as VitePress
    does (punctuation to dashes: "What's new" -> 'what-s-new')."""
    if h.anchor is not None:
        return (h.anchor.lower(),)
    ids = [html_id(h.text)]
    shown = plain(h.text) if any(c in h.text for c in "<[`*_") else h.text  # as the page shows it
    for text in dict.fromkeys((h.text, shown)):
        made = html_id(text)
        ids += [
            made,
            _DASHES.sub("-", made).strip("-"),
            _NOT_WORD.sub("-", text.lower()).strip("-"),
        ]
    return tuple(dict.fromkeys(ids))


def _by_html_id(anchor: str, headings: Sequence[Heading]) -> int | None:
    """The first heading whose HTML id is the one-part ``anchor``, or None."""
    wanted = anchor.strip().lower()
    if not wanted or "#" in wanted or " " in wanted:
        return None
    for i, h in enumerate(headings):
        if wanted in _html_ids(h):
            return i
    return None


def find_heading(anchor: str, headings: Sequence[Heading]) -> int | None:
    """The index in ``headings`` of the heading ``anchor`` ('Heading', 'Heading#Sub') names, as
    ``anchor_ok`` matches it (the first in document order), or None. A one-part anchor that
    names no heading by its text may be a heading's HTML id (``props`` for ``## Props {#props}``,
    ``what-is-ownership``): ``kbase show 'Page#props'`` opens what a link to it opens."""
    parts = [heading_slug(p) for p in anchor.lstrip("#").split("#")]
    parts = [p for p in parts if p]
    if not parts:
        return None
    keys = [heading_slug(h.text) for h in headings]
    found = _find_heading_path(headings, keys, parts, 0, len(headings))
    return found if found is not None else _by_html_id(anchor.lstrip("#"), headings)


def _match_heading_path(
    headings: Sequence[Heading], keys: list[str], parts: list[str], lo: int, hi: int
) -> bool:
    """Is there a heading in ``headings[lo:hi]`` for ``parts[0]`` whose section holds the rest?"""
    return _find_heading_path(headings, keys, parts, lo, hi) is not None


def _find_heading_path(
    headings: Sequence[Heading], keys: list[str], parts: list[str], lo: int, hi: int
) -> int | None:
    """The heading in ``headings[lo:hi]`` for ``parts[-1]``, inside sections for the parts
    before it."""
    for i in range(lo, hi):
        if keys[i] != parts[0]:
            continue
        if len(parts) == 1:
            return i
        level = headings[i].level
        j = i + 1
        while j < hi and headings[j].level > level:
            j += 1
        found = _find_heading_path(headings, keys, parts[1:], i + 1, j)
        if found is not None:
            return found
    return None
