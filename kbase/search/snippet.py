"""Pure: one-line snippets around the matches of a search, rendered from the Markdown source
(kbase.ingest.markup) with exact highlight ranges, and the passage of a chunk that answers.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Container, Sequence
from dataclasses import dataclass

from kbase.ingest.markup import FENCED_BLOCK, fence_spans, render

SNIPPET_BEFORE = 60  # characters of context before the first match
SNIPPET_WIDTH = 200  # total snippet length in characters
# A long chunk is rendered from the line this many characters before its first match to the line
# this many after: enough for any snippet, and rendering is most of a hit's cost.
WINDOW_BEFORE, WINDOW_AFTER = 400, 1200
OPEN, CLOSE = "\x02", "\x03"  # highlight markers; never in indexed text (control chars)


def unmark(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Text with OPEN/CLOSE highlight markers -> (text without them, highlighted ranges in it)."""
    out: list[str] = []
    ranges: list[tuple[int, int]] = []
    pos, opened = 0, -1
    for part in re.split(f"([{OPEN}{CLOSE}])", marked):
        if part == OPEN:
            opened = pos
        elif part == CLOSE:
            if opened >= 0 and pos > opened:
                ranges.append((opened, pos))
            opened = -1
        else:
            out.append(part)
            pos += len(part)
    return "".join(out), ranges


# What a heading's line break becomes in a one-line snippet (other line breaks become a space).
HEADING_SEPARATOR = " — "
_HEADING_LINE = re.compile(r"[ \t]*(?:>[ \t]*)*#{1,6}(?:[ \t]|$)")


_BREAKS = re.compile(r"[\r\n]+")


def _heading_ends(text: str, rendered: str, source: Sequence[int]) -> frozenset[int]:
    """Positions in ``rendered`` where a heading line of ``text`` ends: its line break, or the
    spaces before it (not a '# comment' inside a code block)."""
    ends = set()
    code = (
        [m.span() for m in FENCED_BLOCK.finditer(text, source[0], source[-1] + 1)]
        if source and ("```" in text or "~~~" in text)
        else []
    )
    for m in _BREAKS.finditer(rendered):  # (each run of line breaks, at its first)
        i = m.start()
        at = source[i]
        if any(a <= at < b for a, b in code):
            continue
        line = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
        if _HEADING_LINE.match(text, line):
            while i > 0 and rendered[i - 1] in " \t":
                i -= 1
            ends.add(i)
    return frozenset(ends)


def _outside_fence(text: str, lo: int) -> int:
    """``lo``, or the start of the code block it falls inside (rendering from the middle of one
    would read its text as Markdown)."""
    spans = fence_spans(text, lo)
    return spans[-1][0] if spans and spans[-1][1] >= lo else lo


def _added(rendered: str, source: Sequence[int], text: str, i: int) -> bool:
    """Is ``rendered[i]`` space, or punctuation rendering put there (the ' > ' that the '#' of
    '[[Note#Heading]]' reads as)? Such characters at a match's ends are not highlighted."""
    ch = rendered[i]
    return ch.isspace() or (not ch.isalnum() and ch != text[source[i]])


def snippet(
    text: str,
    ranges: Sequence[tuple[int, int]] = (),
    markdown: bool = True,
    focus: int | None = None,
    *,
    anchor_at: int | None = None,
    shown: Shown | None = None,
    labels: Container[str] = frozenset(),
) -> tuple[str, tuple[tuple[int, int], ...], int]:
    """A one-line reading snippet of ``text`` (rendered if ``markdown``) around the first visible
    match, or starting at ``focus`` (an offset in ``text``: where the passages that answer
    start, see focus) when given; ``anchor_at`` (at or after ``focus``): the passage whose first
    match gives the line (default: ``focus``). ``shown``: ``text`` as rendered already (Shown),
    not rendered again. ``labels``: the link labels its note defines (render's).

    ``ranges`` are match ranges in ``text``. Returns (snippet, highlight ranges in the snippet,
    offset in ``text`` of the anchor's first visible match, or of the focus, or of the first
    visible match, or of the first match, or 0): the caller turns that offset into the file's
    line number.
    """
    lo, hi = 0, len(text)
    at = focus if focus is not None else (min(ranges)[0] if ranges else None)
    if shown is not None:
        rendered, source = shown.rendered, shown.source
    else:
        if at is not None and hi > WINDOW_AFTER:  # a long chunk: render only the lines around it
            lo = max(text.rfind("\n", 0, max(0, at - WINDOW_BEFORE)) + 1, 0)
            end = text.find("\n", at + WINDOW_AFTER)
            hi = hi if end < 0 else end
            lo = _outside_fence(text, lo)
        rendered, source = (
            render(text, lo, hi, labels=labels) if markdown else (text[lo:hi], range(lo, hi))
        )
    heading_ends = _heading_ends(text, rendered, source) if markdown else frozenset()
    # Output positions of each match that is still visible after rendering: the output characters
    # that come from inside it (``source`` never decreases), without the spaces at its ends.
    marks: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        i, j = bisect_left(source, a), bisect_left(source, b)
        while i < j and _added(rendered, source, text, i):
            i += 1
        while j > i and _added(rendered, source, text, j - 1):
            j -= 1
        if j > i and (not marks or i >= marks[-1][1]):
            marks.append((i, j))
    if focus is not None and (i := bisect_left(source, focus)) < len(source):
        while i < len(rendered) and rendered[i].isspace():
            i += 1
        # The passage's own first character comes first (a passage is a sentence or a line); the
        # line is that of its first match, which stays in view: a passage whose first match lies
        # past the snippet's width starts a little before the match instead.
        start = i
        first = next((a for a, _ in marks if a >= i), None)
        at_line = bisect_left(source, anchor_at) if anchor_at is not None else i
        line_mark = next((a for a, _ in marks if a >= at_line), first)
        anchor = (
            source[line_mark]
            if line_mark is not None
            else (source[i] if i < len(source) else focus)
        )
        if first is not None and first - start > SNIPPET_WIDTH - SNIPPET_BEFORE:
            start = first - SNIPPET_BEFORE
            space = rendered.find(" ", start, first)
            start = space + 1 if space >= 0 else start
    else:
        anchor = source[marks[0][0]] if marks else (min(ranges)[0] if ranges else 0)
        first = marks[0][0] if marks else 0
        start = max(0, first - SNIPPET_BEFORE)
        if start:
            space = rendered.find(" ", start, first)
            start = space + 1 if space >= 0 else start
    # Fold whitespace to single spaces, moving the marks along.
    out: list[str] = []
    new_pos: dict[int, int] = {}
    last_space = True
    width_hit = False
    mark_ends = {b for _, b in marks}
    mark_starts = {a for a, _ in marks}
    inside = False
    for i in range(start, len(rendered)):
        if i in mark_starts:
            inside = True
        if i in mark_ends:
            inside = False
        ch = rendered[i]
        new_pos[i] = len(out)
        if ch.isspace():
            if last_space:
                continue
            if i in heading_ends:  # "Heading — its text", not "Heading its text"
                out.extend(HEADING_SEPARATOR[:-1])
            ch, last_space = " ", True
        else:
            last_space = False
        if len(out) >= SNIPPET_WIDTH and not inside:
            width_hit = True
            break
        out.append(ch)
    else:
        new_pos[len(rendered)] = len(out)
    if focus is not None and line_mark is not None and line_mark not in new_pos:
        # The line's passage starts in view but its words lie past the width: the line is that
        # of the first word shown instead (the line always holds a highlighted word).
        shown_marks = [a for a, _ in marks if start <= a and a in new_pos]
        if shown_marks:
            anchor = source[shown_marks[0]]
    text_out = "".join(out).rstrip()
    highlights = []
    for a, b in marks:
        if a < start or a not in new_pos:
            continue
        na, nb = new_pos[a], new_pos.get(b, len(out))
        nb = min(nb, len(text_out))
        if nb > na:
            highlights.append((na, nb))
    prefix = "…" if start > 0 and text_out else ""
    suffix = "…" if width_hit else ""
    shift = len(prefix)
    return (
        prefix + text_out + suffix,
        tuple((a + shift, b + shift) for a, b in highlights),
        anchor,
    )


# Passages: what a snippet may start at. A prose paragraph is cut into sentences (across its
# wrapped lines); a list item, table row, heading, quote or code line is a passage of its own.
_OWN_LINE = re.compile(r"[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|#|\||>|`{3,}|~{3,})")
_FENCE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:`{3,}|~{3,})")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^\s])")
MIN_SENTENCE = 40  # characters: a shorter "sentence" (e.g., "e.g.") stays with the next


def passages(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets in ``text`` of its passages in order (blank and fence lines skipped)."""
    out: list[tuple[int, int]] = []
    spans, pos = [], 0
    for m in re.finditer(r"\r\n|\r|\n", text):
        spans.append((pos, m.start()))
        pos = m.end()
    if pos < len(text):
        spans.append((pos, len(text)))
    i = 0
    while i < len(spans):
        a, b = spans[i]
        line = text[a:b]
        if not line.strip() or _FENCE.match(line):
            i += 1
            continue
        if _OWN_LINE.match(line):
            out.append((a, b))
            i += 1
            continue
        j = i  # a paragraph: the following lines up to a blank or own-line one
        while (
            j + 1 < len(spans)
            and text[spans[j + 1][0] : spans[j + 1][1]].strip()
            and not _OWN_LINE.match(text, spans[j + 1][0])
        ):
            j += 1
        end, s0 = spans[j][1], a
        for m in _SENTENCE_END.finditer(text, a, end):
            if m.start() - s0 >= MIN_SENTENCE:
                out.append((s0, m.start()))
                s0 = m.end()
        out.append((s0, end))
        i = j + 1
    return out


_ENDING = re.compile(r"(?:ing|ed|es|s)$")


def _word_key(word: str) -> str:
    """A matched word as one query word: case and a plural or verb ending aside ('Ciphers' and
    'cipher' count once, as FTS5's stemmer matched them)."""
    w = word.casefold()
    return _ENDING.sub("", w) if len(w) > 4 else w


# A chunk up to this long is rendered whole to choose where its snippet starts (most chunks are a
# few hundred characters; the snippet of one up to WINDOW_AFTER reuses that rendering); a longer
# one is measured in its source characters, Markdown syntax counted as text.
RENDER_WHOLE = 4 * WINDOW_AFTER


@dataclass(frozen=True)
class Shown:
    """A chunk's text as its snippet reads it: ``rendered`` (Markdown removed, kbase.ingest.markup)
    and for each of its characters the offset in the text it comes from (``source``); the runs
    of whitespace that the snippet folds to one space (their starts, ends, and the characters
    folding has removed by the end of each)."""

    rendered: str
    source: Sequence[int]
    starts: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()

    @classmethod
    def of(cls, text: str, markdown: bool = True, labels: Container[str] = frozenset()) -> Shown:
        """``text`` as read; ``labels``: the link labels its note defines (render's)."""
        rendered, source = render(text, labels=labels) if markdown else (text, range(len(text)))
        runs = [m.span() for m in re.finditer(r"\s{2,}", rendered)]
        removed, gone = [], 0
        for a, b in runs:
            gone += b - a - 1
            removed.append(gone)
        return cls(
            rendered, source, tuple(a for a, _ in runs), tuple(b for _, b in runs), tuple(removed)
        )

    def column(self, offset: int) -> int:
        """The position in the snippet's reading (rendered, whitespace folded) of the text's
        character at ``offset`` (of the next one shown, for one that rendering hides)."""
        i = bisect_left(self.source, offset)
        k = bisect_right(self.starts, i) - 1
        if k < 0:
            return i
        before = self.removed[k - 1] if k else 0
        return i - before - max(0, min(i, self.ends[k]) - self.starts[k] - 1)

    def visible(self, a: int, b: int) -> bool:
        """True when some of ``text[a:b]`` is shown (a link's target, say, is not)."""
        return bisect_left(self.source, a) < bisect_left(self.source, b)


def focus(
    text: str, ranges: Sequence[tuple[int, int]], shown: Shown | None = None
) -> tuple[int, int] | None:
    """Where the snippet of ``text`` starts and which passage gives its line, from the matched
    words (``ranges``; distinct ones, case and endings aside) a reader sees:

    - the start: the passage from which the snippet (the passage, and at least SNIPPET_WIDTH
      characters of the text as read) shows the most of them, the first of equals;
    - the line: the passage in that snippet's width that holds the most of them itself, the
      first of equals.

    Only a passage (see passages) that holds a match counts, not a heading (a hit shows its
    heading path beside the snippet; a heading's words count from a passage before it), and
    only a match that stays visible; None without one. ``shown``: ``text`` as read (without it,
    a long chunk: widths in the source's characters, Markdown syntax counted)."""
    column = shown.column if shown is not None else (lambda offset: offset)
    found = [(a, b) for a, b in ranges if shown is None or shown.visible(a, b)]
    words = [(a, b, column(a), _word_key(text[a:b])) for a, b in found]
    views = []  # (passage start, its column, its end's column, distinct words it holds)
    for a, b in passages(text):
        held = {w for x, y, _, w in words if a <= x and y <= b}
        if held and not _HEADING_LINE.match(text, a):  # (every face shows the heading path)
            views.append((a, column(a), column(b), len(held)))
    best, best_count = None, 0
    for a, col, end, _ in views:
        seen = len({w for _, _, c, w in words if col <= c < max(end, col + SNIPPET_WIDTH)})
        if seen > best_count:
            best, best_count = (a, col), seen
    if best is None:
        return None
    start, col = best
    line = max((n, -a) for a, c, _, n in views if col <= c < col + SNIPPET_WIDTH)
    return start, -line[1]
