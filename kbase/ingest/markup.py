"""Pure: Markdown source -> the text a person reads, keeping track of where each character came
from (``render``), and that text folded onto one line (``plain``: titles, headings). Titles are
made at parse time (kbase.ingest.parse) and snippets at search time (kbase.search.snippet): both
read Markdown through this one module.

Rendering works by edits over the source: each construct (a heading marker, ``**``, a
``[[target|alias]]``, a ``%% comment %%``, ...) is found by one regular expression and replaced
by pieces that either keep a range of the source (the alias, the link text, the code) or insert a
little text (" > " between a note and its heading). Because every output character knows its
source offset, highlight ranges found in the source (FTS5's highlight()) map exactly onto the
rendered snippet, and the line number of a match stays the file's.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Container

# A piece of output: (source start, source end) kept as is, or (text, source offset) inserted.
_Piece = tuple[int, int] | tuple[str, int]

# A fenced code block, from its opening fence to its closing one (or the end of the text).
FENCED = (
    r"^(?P<fence_quote>[ \t]*(?:>[ \t]*)*)(?P<fence_mark>`{3,}|~{3,})[^\r\n]*"
    r"(?P<fence_body>(?:\r\n?|\n).*?)??"
    r"(?:(?:\r\n?|\n)[ \t]*(?:>[ \t]*)*(?P=fence_mark)[`~]*[ \t]*(?=[\r\n]|\Z)|\Z)"
)
FENCED_BLOCK = re.compile(FENCED, re.S | re.M)
_TASK = r"(?:\[[ xX/\-<>!?*]\][ \t]+)?"
# A link's destination: no line break, parentheses one level deep ('.../Foo_(bar)').
_DEST = r"(?:[^()\r\n]|\([^()\r\n]*\))*+"
# A link reference definition (CommonMark): '[label]:', its destination on that line or the next,
# then maybe a title ("...", '...' or (...), on one line) after a blank or on the next line; the
# definition ends its line, else a title on the next line is not its title and '[Note]: some
# words' is a paragraph, not a definition. links.py reads the same shape for the link graph.
DEF_TITLE = r"""(?:"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*'|\((?:[^()\\\r\n]|\\.)*\))"""
_LINE_END = r"[ \t]*(?=\r|\n|\Z)"
DEF_TAIL = (
    r"[ \t]*(?:\r\n?|\n)?[ \t]*(?:<(?P<def_angle>(?:[^<>\\\r\n]|\\.)*)>"
    r"|(?P<def_bare>[^\x00-\x20<][^\x00-\x20]*))"
    rf"(?:[ \t]+{DEF_TITLE}(?={_LINE_END})|[ \t]*(?:\r\n?|\n)[ \t]*{DEF_TITLE}(?={_LINE_END}))?"
    + _LINE_END
)
# An attribute list that names an id, a class or a key ('{ #id .class key=value }', '{: .x }').
_ATTRS = r"\{:?[ \t]*(?:[#.][\w-]|[\w-]+=)[^{}\r\n]*\}"
# An attribute list as MkDocs' attr_list reads it (and the renderer hides it): at a line's end
# after text ('## Props {#props}'), right after an inline element ('**`locale`**{ #mkdocs-locale
# }', '[Start](#){ .md-button }', an icon's '{ .heart }'), or a paragraph's, on the line after
# it ('{ .annotate }').
ATTR_LIST = (
    r"(?<=\S)[ \t]*\{(?::[ \t]*|[ \t]*(?=[#.]|[\w-]+=)|[ \t]+(?=[\w-]))"
    r"[^{}\r\n]*\}(?=[ \t]*(?:\r|\n|$))"
    rf"|(?<=[*_`)\]:]){_ATTRS}|^[ \t]*{_ATTRS}(?=[ \t]*(?:\r|\n|$))"
)
# The longest inline code span rendered as code; a longer one shows its backticks.
CODE_MAX = 1000
# Alternatives in priority order: at a given position the first that matches wins, and a match
# consumes its whole span (a pipe inside [[a|b]] is the link's, not a table's).
_PATTERN = re.compile(
    # Every alternative starts with one of these characters: a letter fails at once (3x faster).
    r"(?=[<%`!\[\]\\$*_~=|> \t#^0-9+\-:{?])(?:"
    + "|".join(
        [
            r"(?P<html_comment><!--.*?(?:-->|\Z))",
            r"(?P<comment>%%.*?(?:%%|\Z))",
            # A fenced code block, whole: its lines are kept exactly, the fences go.
            rf"(?P<fence>{FENCED})",
            # on one line
            # (Its text at most CODE_MAX characters: a run with no closing run scans that far,
            # not to the line's end; a line of runs of many lengths was quadratic, minutes a MB.)
            rf"(?P<code>(?<!`)(?P<ticks>`+)(?!`)(?P<code_text>[^\r\n]{{1,{CODE_MAX}}}?)(?<!`)"
            r"(?P=ticks)(?!`))",
            # (A bracket's scan stops at the next '[', a destination's at a '(' not closed in
            # it, an autolink's at a '<', a directive's at a '{{': scanned to the line's end
            # from each of them, a line of '[[[[' or '[a](' was quadratic, hours for 1 MB.)
            r"(?P<embed>!\[\[(?P<embed_target>[^\[\]|#\r\n]*)[^\[\]\r\n]*\]\])",
            r"(?P<wiki>\[\[(?P<wiki_target>[^\[\]|\r\n]*)(?:\|(?P<wiki_alias>[^\[\]\r\n]*))?\]\])",
            rf"(?P<image>!\[(?P<image_alt>[^\[\]\r\n]*)\]\({_DEST}\))",
            rf"(?P<link>\[(?P<link_text>[^\[\]\r\n]+)\]\({_DEST}\))",
            # A link whose destination the text's end cuts off (a chunk ends before a long URL,
            # which the index leaves out: Vue's '[Try it in the Playground](https://play...'.
            r"(?P<cut_link>!?\[(?P<cut_text>[^\[\]\r\n]*)\]\([^()\s]*\Z)",
            # A link reference definition line '[label]: dest "title"' goes whole; a reference
            # link '[text][label]' shows its text.
            rf"(?P<linkdef>^[ ]{{0,3}}\[(?!\^)[^\]\r\n]+\]:{DEF_TAIL}(?:\r\n?|\n)?)",
            r"(?P<reflink>\[(?P<ref_text>[^\[\]\r\n]+)\]\[[^\[\]\r\n]*\])",
            r"(?P<footnote>\[\^[^\[\]\r\n]+\])",
            # Halves of a link cut by a chunk's edge: "…target|alias]] more" or "[[target…".
            r"(?P<orphan>!?\[\[|\]\]|\]\([^()\s]*\)|``+)",
            r"(?P<autolink><(?P<url>[a-z][a-z0-9+.-]*:[^<>\s]+)>)",
            r"(?P<tag></?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>)",
            # Line starts, inside quotes too (a chunk may begin after a quote's '>').
            r"(?P<callout>^[ \t]*(?:>[ \t]*)*\[!(?P<callout_type>[^\]\r\n]+)\][+-]?[ \t]*)",
            # A shortcut reference link '[text]' (or image '![alt]'): its text, where the note
            # defines its label (render's ``labels``), else as written. Backticks in pairs only:
            # a code span that crosses the ']' binds first ('[see `a] b`').
            r"(?P<shortcut>!?\[(?P<short_text>(?:[^\[\]\r\n`]|`[^`\[\]\r\n]*`)++)\](?![\[(]))",
            # Docs sites' containers: '::: tip Title' / ':::' (VitePress, Docusaurus) and MkDocs'
            # '!!! note "Title"' ('??? note' folds): their title, else their type, as callouts.
            r"(?P<container>^[ \t]*:{3,}[ \t]*(?:(?P<container_type>[\w-]+)"
            r"(?:[ \t]+(?P<container_title>[^\r\n]*?))?)?[ \t]*(?=\r|\n|$))",
            r"(?P<admonition>^[ \t]*(?:!!!|\?\?\?\+?)[ \t]+(?P<admonition_type>[\w-]+)"
            r"(?:[ \t]+[\w-]+)*(?:[ \t]+\"(?P<admonition_title>[^\"\r\n]*)\")?[ \t]*(?=\r|\n|$))",
            # Material for MkDocs' content tabs: '=== "Tab"' ('===+' opens, '===!' starts a new
            # set) shows its title, as a container does.
            r"(?P<tab>^[ \t]*===[+!]{0,2}[ \t]+\"(?P<tab_title>[^\"\r\n]*)\"[ \t]*(?=\r|\n|$))",
            # Material for MkDocs' icons (':material-link:', ':octicons-file-code-16:'): a
            # picture, no words.
            r"(?P<icon>:(?:material|octicons|fontawesome|simple)-[a-z0-9-]+:)",
            # Site generators' directives show nothing: Hugo's {{< shortcode >}} and {{% x %}},
            # mdBook's {{#include file.rs}}; nor does an attribute list ('## Props {#props}').
            r"(?P<directive>\{\{[<%](?:(?!\{\{).)*?[%>]\}\}|\{\{#[A-Za-z_]+[^{}\r\n]*\}\})",
            # ... nor one right after an inline element, nor a paragraph's (ATTR_LIST).
            rf"(?P<attr_list>{ATTR_LIST})",
            r"(?P<heading>^[ \t]*(?:>[ \t]*)*#{1,6}(?=[ \t]|$)[ \t]*)",
            rf"(?P<item>^[ \t]*(?:>[ \t]*)*(?:[-*+]|\d{{1,9}}[.)])[ \t]+{_TASK})",
            r"(?P<quote>^[ \t]*(?:>[ \t]?)+)",
            # (from the first blank of a run: tried at each, a long run was quadratic)
            r"(?P<heading_close>(?<![ \t])[ \t]+#+[ \t]*(?=\r|$))",  # before CRLF and CR too
            r"(?P<rule>^[ \t]*(?:(?:[-=_*][ \t]*){3,}"
            r"|\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)+\|?)[ \t]*$)",
            r"(?P<edge_pipe>^[ \t]*\||\|[ \t]*$)",
            r"(?P<pipe>(?<!\\)\|)",
            r"(?P<block_id>(?:[ \t]|^|(?<=\]\]))\^[A-Za-z0-9-]+[ \t]*$)",
            r"(?P<math>\$\$)",
            r"(?P<strong>\*\*|__(?!\w)|(?<!\w)__|~~|==)",
            r"(?P<em>(?<![\w*\\])\*(?=[^\s*])|(?<=[^\s*\\])\*(?![\w*])|(?<![\w\\])_(?=[^\s_])|(?<=[^\s_\\])_(?!\w))",
            r"(?P<escape>\\(?P<escaped>[\\`*_{}\[\]()#+\-.!|~<>=$%^]))",
        ]
    )
    + ")",
    re.S | re.M,
)


def _wiki(m: re.Match) -> list[_Piece]:
    """[[target|alias]] -> alias; [[Note#Heading]] -> Note > Heading; [[Note#^block]] -> Note."""
    if m.group("wiki_alias") is not None and m.group("wiki_alias").strip():
        return [m.span("wiki_alias")]
    start, end = m.span("wiki_target")
    pieces: list[_Piece] = []
    for i, part in enumerate(m.group("wiki_target").split("#")):
        if part and not (i and part.startswith("^")):
            if pieces:
                pieces.append((" > ", start))
            pieces.append((start, start + len(part)))
        start += len(part) + 1
    return pieces


def _code(m: re.Match) -> list[_Piece]:
    a, b = m.span("code_text")
    text = m.group("code_text")
    if (
        len(text) > 2 and text[0] == " " and text[-1] == " "
    ):  # CommonMark strips one space each side
        a, b = a + 1, b - 1
    return [(a, b)]


_QUOTE_PREFIX = re.compile(r"[ \t]*(?:>[ \t]?)+")


def _fence(m: re.Match) -> list[_Piece]:
    """A code block's text as written; inside a quote or callout, without the quote markers."""
    if m.group("fence_body") is None:
        return []
    a, b = m.span("fence_body")
    if ">" not in m.group("fence_quote"):
        return [(a, b)]
    pieces: list[_Piece] = []
    text = m.string
    for line in re.finditer(r"(?:\r\n?|\n)[^\r\n]*", text[a:b]):
        start, end = a + line.start(), a + line.end()
        brk = 2 if text.startswith("\r\n", start) else 1
        pieces.append((start, start + brk))
        prefix = _QUOTE_PREFIX.match(text, start + brk, end)
        pieces.append((prefix.end() if prefix else start + brk, end))
    return pieces


def _embed(m: re.Match) -> list[_Piece]:
    a, b = m.span("embed_target")
    name = m.group("embed_target")
    cut = name.rfind("/") + 1  # an embed shows its file's name, not its folder
    return [(a + cut, b)] if name[cut:] else []


def _callout(m: re.Match, text: str) -> list[_Piece]:
    """The callout's own title when the line has one, else its type ('note' -> 'Note')."""
    rest = text[m.end() : m.end() + 1]
    if rest and rest not in "\r\n":
        return []
    kind = m.group("callout_type").strip()
    return [(kind[:1].upper() + kind[1:], m.start())]


def _container(m: re.Match, kind: str) -> list[_Piece]:
    """A container's title as written, else its type ('tip' -> 'Tip'); a closing ':::' and an
    admonition with an empty title ('!!! note ""') show nothing."""
    title = m.group(f"{kind}_title")
    if title is not None:
        return [m.span(f"{kind}_title")] if title.strip() else []
    kind_name = m.group(f"{kind}_type")
    if not kind_name:
        return []
    return [(kind_name[:1].upper() + kind_name[1:], m.start())]


# A task list item's checkbox ('- [x] ', '> - [ ] '): its '[' after the line's markers.
_TASK_BOX = re.compile(r"[ \t]*(?:>[ \t]*)*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_TASK_MARKS = frozenset(" xX/-<>!?*")


def is_task_box(text: str, start: int, end: int) -> bool:
    """Is ``text[start:end]`` ('[x]') a task list item's checkbox, not a bracket of text?"""
    if end - start != 3 or text[start + 1] not in _TASK_MARKS:
        return False
    line = line_start(text, start)
    return _TASK_BOX.fullmatch(text, line, start) is not None and text[end : end + 1] in " \t"


def _shortcut(m: re.Match, labels: Container[str]) -> list[_Piece]:
    """A shortcut reference link's (or image's) text when the note defines its label, else the
    brackets as written around their text: not a link ('[x]' in prose, a task's checkbox)."""
    a, b = m.span("short_text")
    key = label_key(m.group("short_text"))
    if key and key in labels and not is_task_box(m.string, a - 1, b + 1):
        return [(a, b)]
    return [(m.start(), a), (a, b), (b, m.end())]


def line_start(text: str, i: int, lo: int = 0) -> int:
    """The offset where the line holding ``text[i]`` starts (after an LF, a CRLF or a lone CR),
    looking back no further than that line, nor before ``lo`` (``lo`` if it starts before).
    (Back a window at a time: a search for a CR in a text of LFs would go back to ``lo``.)"""
    stop, width = i, 256
    while True:
        a = max(lo, i - width)
        brk = max(text.rfind("\n", a, stop), text.rfind("\r", a, stop))
        if brk >= 0:
            return brk + 1
        if a == lo:
            return lo
        stop, width = a, width * 2


_BREAK = re.compile(r"\r\n?|\n")


def _next_line(text: str, i: int, end: int) -> int:
    """The offset where the line after the one holding ``text[i]`` starts (``end`` if none)."""
    m = _BREAK.search(text, i, end)
    return m.end() if m is not None else end


def label_key(label: str) -> str:
    """CommonMark's label matching: case-insensitive, inner whitespace collapsed."""
    return " ".join(label.split()).casefold()


_ALT = re.compile(r"""\balt\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.I)


# Tags that break a line or a cell: a space where they were ('`hide due date`<br>`hide
# scheduled date`' in a table cell read 'datehide' in Obsidian Tasks' docs).
_BREAKING_TAG = re.compile(r"</?(?:br|p|div|li|tr|td|th|hr|h[1-6]|ul|ol|table|blockquote)\b", re.I)


def _tag(m: re.Match) -> list[_Piece]:
    """An HTML tag goes (a tag that breaks a line leaves a space); an image's alt text stays (it
    is what the image says)."""
    alt = _ALT.search(m.group("tag")) if m.group("tag")[:4].lower() == "<img" else None
    if alt is None:
        return [(" ", m.start())] if _BREAKING_TAG.match(m.group("tag")) else []
    g = 1 if alt.group(1) is not None else 2
    return [(m.start() + alt.start(g), m.start() + alt.end(g))] if alt.group(g).strip() else []


_HANDLERS: dict[str, Callable[[re.Match], list[_Piece]]] = {
    "tag": _tag,
    "fence": _fence,
    "code": _code,
    "embed": _embed,
    "wiki": _wiki,
    "image": lambda m: [m.span("image_alt")] if m.group("image_alt").strip() else [],
    "link": lambda m: [m.span("link_text")],
    "cut_link": lambda m: [m.span("cut_text")] if m.group("cut_text").strip() else [],
    "reflink": lambda m: [m.span("ref_text")],
    "autolink": lambda m: [m.span("url")],
    "pipe": lambda m: [(" · ", m.start())],
    "escape": lambda m: [m.span("escaped")],
    "footnote": lambda m: [m.span()],  # [^1] stays readable: it says there is a note
    "tab": lambda m: [m.span("tab_title")] if m.group("tab_title").strip() else [],
}


# Pieces that hold Markdown of their own ([**bold** link](url), [[a|*alias*]]) are rendered too.
# Code is not: inline code and code blocks keep their text exactly (`[^1]`, `**kwargs`, `[[x]]`
# are what the note quotes, and often what was searched for).
_NESTED = frozenset(
    {
        "wiki",
        "link",
        "cut_link",
        "reflink",
        "shortcut",
        "image",
        "callout",
        "container",
        "admonition",
        "tab",
    }
)


def render(
    text: str,
    start: int = 0,
    end: int | None = None,
    *,
    offsets: bool = True,
    labels: Container[str] = frozenset(),
) -> tuple[str, list[int]]:
    """``text[start:end]`` (Markdown) as a person reads it, and for each output character the
    offset in ``text`` it comes from (none without ``offsets``: a list of them is some 40 bytes
    a character, 220 MB for a 5 MB paragraph titled by it). Line breaks stay (snippets fold
    them); syntax goes. ``labels``: the link labels the note defines (``defined_labels``), which
    make a shortcut reference ``[text]`` a link, shown as its text."""
    end = len(text) if end is None else end
    out: list[str] = []
    source: list[int] = []

    def keep(a: int, b: int) -> None:
        out.append(text[a:b])
        if offsets:
            source.extend(range(a, b))

    def inner(a: int, b: int) -> tuple[str, list[int]]:
        return render(text, a, b, offsets=offsets, labels=labels)

    pos = start
    for m in _PATTERN.finditer(text, start, end):
        keep(pos, m.start())
        kind = next(k for k in _ALTERNATIVES if m.group(k) is not None)
        if kind == "callout":
            pieces = _callout(m, text)
        elif kind == "shortcut":
            pieces = _shortcut(m, labels)
        elif kind in ("container", "admonition"):
            pieces = _container(m, kind)
        else:
            handler = _HANDLERS.get(kind)
            pieces = handler(m) if handler else []
        for piece in pieces:
            if isinstance(piece[0], str):
                out.append(piece[0])
                if offsets:
                    source.extend([piece[1]] * len(piece[0]))
            elif kind in _NESTED and (nested := inner(piece[0], piece[1]))[0].strip():
                out.append(nested[0])
                source.extend(nested[1])
            else:
                keep(piece[0], piece[1])
        pos = m.end()
    keep(pos, end)
    return "".join(out), source


_ALTERNATIVES = tuple(
    name
    for name in _PATTERN.groupindex
    if not any(
        name.startswith(p)
        for p in (
            "ticks",
            "code_text",
            "fence_quote",
            "fence_mark",
            "fence_body",
            "embed_target",
            "wiki_target",
            "wiki_alias",
            "image_alt",
            "link_text",
            "cut_text",
            "def_",
            "ref_text",
            "short_text",
            "url",
            "callout_type",
            "container_type",
            "container_title",
            "admonition_type",
            "admonition_title",
            "tab_title",
            "escaped",
        )
    )
)


# A link reference definition ('[label]: url', maybe a title), as the linkdef alternative reads
# it; a text of such lines alone shows nothing, and the words of its labels match a search
# (kbase.search then shows another passage of the note, if it has one).
_DEFINITION = re.compile(rf"^[ ]{{0,3}}\[(?!\^)(?P<label>[^\]\r\n]+)\]:{DEF_TAIL}", re.M)


# What may be a shortcut reference link (render's shortcut): a '[text]' not in '[[...]]', not
# before '(' or '['. Text without one reads the same whatever labels its note defines.
_SHORTCUT_HINT = re.compile(r"(?<![\[\]])\[[^\[\]\r\n]+\](?![\[\](])")


def may_have_shortcuts(text: str) -> bool:
    """Might ``text`` hold a shortcut reference link, which the note's labels make one?"""
    return "]" in text and _SHORTCUT_HINT.search(text) is not None


def defined_labels(text: str) -> frozenset[str]:
    """The labels (``label_key``) that the link reference definitions of a note's ``text``
    define, as render's ``labels``: lines of that shape outside fenced code blocks (as the
    renderer reads them: inside a list item or a quote too). Found from each ']:' (a search hit
    reads its note's whole text: no pattern tried at every line)."""
    found: list[tuple[int, str]] = []
    i = text.find("]:")
    while i >= 0:  # (each line looked at once: a definition starts its line)
        line = line_start(text, i)
        m = _DEFINITION.match(text, line)
        if m is not None:
            found.append((line, label_key(m.group("label"))))
        i = text.find("]:", m.end() if m is not None else _next_line(text, i, len(text)))
    if found and ("```" in text or "~~~" in text):
        fences = fence_spans(text)
        starts = [a for a, _ in fences]
        found = [
            (at, key)
            for at, key in found
            if (k := bisect_right(starts, at) - 1) < 0 or fences[k][1] <= at
        ]
    return frozenset(key for _, key in found if key)


# A fence line: '```' or '~~~' (three or more) after blanks and quote markers.
_FENCE_LINE = re.compile(r"[ \t]*(?:>[ \t]*)*(`{3,}|~{3,})")


def fence_spans(text: str, end: int | None = None) -> list[tuple[int, int]]:
    """The fenced code blocks of ``text[:end]`` as (start of the opening line, end of the
    closing fence, or ``end`` for one left open), in order: a fence opens a block and one of the
    same character, at least as long, closes it. Found from each run of '```' and '~~~'
    (str.find; a pattern tried at every line is ten times slower)."""
    end = len(text) if end is None else end
    marks: list[tuple[int, str, int]] = []  # (line start, fence, its end)
    for mark in ("```", "~~~"):
        i = text.find(mark, 0, end)
        while i >= 0:  # (each line looked at once: a fence starts its line)
            line = line_start(text, i)
            m = _FENCE_LINE.match(text, line, end)
            if m is not None and m.start(1) == i:
                marks.append((line, m.group(1), m.end(1)))
            i = text.find(mark, _next_line(text, i, end), end)
    marks.sort()
    spans: list[tuple[int, int]] = []
    opened: tuple[int, str, int] | None = None
    for line, fence, stop in marks:
        if opened is None:
            opened = (line, fence, stop)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]):
            spans.append((opened[0], stop))
            opened = None
    if opened is not None:
        spans.append((opened[0], end))
    return spans


def only_definitions(text: str) -> bool:
    """Is ``text`` link reference definitions alone?"""
    if "]:" not in text:
        return False
    rest = _DEFINITION.sub("", text)
    return len(rest) < len(text) and not rest.strip()


def ends_in_definition(text: str, start: int = 0, end: int | None = None) -> bool:
    """Does ``text[start:end]`` end with a link reference definition (its last line, or its last
    two or three when the destination and the title are on lines of their own)?"""
    end = len(text) if end is None else end
    if "]:" not in text[max(start, end - 4096) : end]:  # (a definition ends within its lines)
        return False
    lo = max(0, start - 3)  # (a definition's line may start with up to three spaces)
    a = line_start(text, end, lo)
    for _ in range(2):  # back to the start of the third line from the end
        if a <= lo:
            break
        a = line_start(text, a - (2 if text.startswith("\r\n", a - 2) else 1), lo)
    # (from a line's start, where '^' matches: the first line's may be before ``start``)
    return any(m.end() == end for m in _DEFINITION.finditer(text, a, end))


def plain(text: str) -> str:
    """``text`` rendered and folded onto one line (titles, headings)."""
    return " ".join(render(text, offsets=False)[0].split())
