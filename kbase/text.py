"""Line arithmetic shared by parsing, chunking and search. Line breaks are LF, CRLF or a lone CR,
as in the stored text (nothing is normalised, so offsets stay exact)."""

from __future__ import annotations

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
