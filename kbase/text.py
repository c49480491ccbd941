"""Text helpers shared by the engine and its faces: line arithmetic (line breaks are LF, CRLF or a
lone CR, as in the stored text: nothing is normalised, so offsets stay exact), excerpts, and
values and paths made fit to print."""

from __future__ import annotations

import base64
import operator
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from functools import partial
from itertools import accumulate, chain, islice, repeat

LINE_BREAK = re.compile(r"\r\n|\r|\n")

# A note's name (a path, a file name, a title, an alias, PATH:LINE, a pasted [[link]]) longer
# than this names no note: no path is longer (Linux's PATH_MAX). Every face refuses such a name
# alike (kbase.notes.resolve.lookup; the MCP tools' schema): looking up megabytes of it, which
# cost seconds per note of the index, is never done.
MAX_NAME_CHARS = 4096


# Latin letters, and the combining accents that decomposed Latin text puts after them.
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f\u0300-\u036f]")


def latin_share(text: str) -> float:
    """The share of ``text``'s letters that are Latin (1 for a text without letters): how much of
    it an English embedding model reads. A Thai or Chinese question that names one English term
    ("stateกับpropsต่างกันอย่างไร": 0.37, "Rust有没有三元运算符": 0.33) is mostly not. A letter
    is what str.isalpha says, and a combining mark too: Thai writes its vowel signs and tone
    marks so ("ต่าง", 4 letters), which counted the Thai of a question short."""
    letters = sum(ch.isalpha() or unicodedata.category(ch)[0] == "M" for ch in text)
    return len(_LATIN.findall(text)) / letters if letters else 1.0


def shown_instead(asked: str, path: str, title: str) -> str:
    """What a face says when ``asked`` named no note and the note at ``path``, titled
    ``title``, is shown: that ``asked`` is its title (a link names a note by its file name, so
    [[asked]] leads nowhere), else the name a typo away."""
    if _words(asked) == _words(title):
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return f"showing {path}, titled {title!r} (a link names it [[{stem}]])"
    return f"did you mean {title!r}? showing {path} (no note is named {asked!r})"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts."""
    if "\r" in text:
        return [0] + [m.end() for m in LINE_BREAK.finditer(text)]
    # Only LF: each line's length plus one, summed in C (twice as fast as the pattern's matches)
    return list(accumulate(map((1).__add__, map(len, text.split("\n")[:-1])), initial=0))


def line_of(starts: list[int], offset: int) -> int:
    """1-based line number of ``offset``, given ``line_starts``."""
    return bisect_right(starts, offset)


def lines_of(text: str, offsets: Sequence[int]) -> Iterator[int]:
    """The 1-based line of each of ``offsets`` (a million links'), in C: offsets in order in a
    text without a CR count the LFs between each and the one before; else the line table."""
    if "\r" not in text and all(map(operator.le, offsets, islice(offsets, 1, None))):
        counts = map(text.count, repeat("\n"), chain((0,), offsets), offsets)
        return islice(accumulate(chain((1,), counts)), 1, None)
    return map(partial(line_of, line_starts(text)), offsets)


def excerpt(text: str, span: tuple[int, int], width: int) -> str:
    """``text`` in at most ``width`` characters, keeping ``span`` ([start, end)) in view: each
    end that is cut off becomes an ellipsis."""
    if len(text) <= width:
        return text
    a, b = span
    # The span in the middle of what a window cut at both ends shows (width - 2 characters).
    start = max(0, a - max(0, width - 2 - (b - a)) // 2)
    if start == 0:
        return text[: width - 1] + "…"
    if start + width - 1 >= len(text):
        return "…" + text[len(text) - (width - 1) :]
    return "…" + text[start : start + width - 2] + "…"


# Control characters (Unicode's Cc: C0, DEL and C1) but tab: ESC starts the terminal's escape
# sequences (OSC 0 sets the window title, OSC 52 writes the clipboard, CSI 2J clears the screen),
# BEL ends some, a lone CR or a newline lets a name overwrite or split a listing line. Text of
# many lines (``lines=True``) keeps its LF and CRLF line breaks; a lone CR, a line break too in
# kbase's line arithmetic (old Mac files), becomes LF, so lines keep their numbers.
# Then the invisible controls that reorder text on screen ("Trojan Source", CVE-2021-42574): the
# bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) and the marks (U+200E,
# U+200F, U+061C), which make a name or a line read differently from what it holds.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(rf"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}]")
_CONTROL_IN_LINES = re.compile(rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}]|\r(?!\n)")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _code(ch: str) -> str:
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def _escape(m: re.Match) -> str:
    ch = m.group()
    return _NAMED.get(ch) or _code(ch)


def _escape_in_lines(m: re.Match) -> str:
    ch = m.group()
    return "\n" if ch == "\r" else _code(ch)


def printable(text: str, *, lines: bool = False, tab: bool = True) -> str:
    """``text`` from a file (a path, title, heading, snippet, body, SQL value) fit to print for
    people: every control character but tab shown escaped (``\\x1b``, ``\\n``, ``\\r``: no
    terminal escape sequence reaches the terminal and no line is split), and so every bidi
    control that reorders what is shown (``\\u202e``), undecodable bytes of a
    file name as ``\\xff``. ``lines`` keeps line breaks (a note's text; see above);
    ``tab=False`` escapes tabs too (an aligned table). The one place human output is made
    safe: every renderer calls it on what comes from a file; JSON escapes on its own."""
    if not text.isascii() or not text.isprintable():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            try:
                text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:  # a surrogate that is no escaped byte
                text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        text = (
            _CONTROL_IN_LINES.sub(_escape_in_lines, text) if lines else _CONTROL.sub(_escape, text)
        )
        if not tab:
            text = text.replace("\t", "\\t")
    return text


def one_line(message: str, width: int = 200) -> str:
    """A message (an exception's) fit for one report line: its first line, cut to ``width``."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return excerpt(first, (0, 0), width)


# What JSON leaves as it is but a terminal acts on or reorders: DEL, the C1 controls (U+009B is
# CSI to some terminals) and the bidi controls (see _BIDI).
_JSON_UNSAFE = re.compile(rf"[\x7f-\x9f{_BIDI}]")


def json_text(value, **options) -> str:
    """``json.dumps(value, **options)`` with DEL, the C1 and the bidi controls escaped too (JSON
    escapes C0 itself): no control that comes from a file reaches a terminal or a client's
    screen through JSON text."""
    import json

    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, **options))


def jsonable(value):
    """Blobs (vectors) as base64 text for JSON output."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def cell(value, width: int | None = 60) -> str:
    """An SQL value as one table cell: on one line (line breaks as ⏎, other control characters
    escaped), cut to ``width`` characters (None: whole)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    text = str(value).replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    text = printable(text, tab=False)
    return text if width is None else excerpt(text, (0, 0), width)


def location(path: str, line: int, page: int | None = None, card: str | None = None) -> str:
    """Where a hit is, as people cite it: 'notes/a.md:12', 'paper.pdf p.3' (a PDF's page),
    'board.canvas card 5e0f' (a canvas's card)."""
    if page is not None:
        return f"{path} p.{page}"
    if card is not None:
        return f"{path} card {card}"
    return f"{path}:{line}"
