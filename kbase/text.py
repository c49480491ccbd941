"""Text helpers shared by the engine and its faces: line arithmetic (line breaks are LF, CRLF or a
lone CR, as in the stored text: nothing is normalised, so offsets stay exact), excerpts, and
values and paths made fit to print."""

from __future__ import annotations

import base64
import re
from bisect import bisect_right

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts."""
    return [0] + [m.end() for m in LINE_BREAK.finditer(text)]


def line_of(starts: list[int], offset: int) -> int:
    """1-based line number of ``offset``, given ``line_starts``."""
    return bisect_right(starts, offset)


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


def printable(path: str) -> str:
    """``path`` fit to print: undecodable bytes of a file name shown as ``\\xff``."""
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def one_line(message: str, width: int = 200) -> str:
    """A message (an exception's) fit for one report line: its first line, cut to ``width``."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return excerpt(first, (0, 0), width)


def jsonable(value):
    """Blobs (vectors) as base64 text for JSON output."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def cell(value, width: int | None = 60) -> str:
    """An SQL value as one table cell: on one line, cut to ``width`` characters (None: whole)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    text = str(value).replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return text if width is None else excerpt(text, (0, 0), width)


def location(path: str, line: int, page: int | None = None, card: str | None = None) -> str:
    """Where a hit is, as people cite it: 'notes/a.md:12', 'paper.pdf p.3' (a PDF's page),
    'board.canvas card 5e0f' (a canvas's card)."""
    if page is not None:
        return f"{path} p.{page}"
    if card is not None:
        return f"{path} card {card}"
    return f"{path}:{line}"
