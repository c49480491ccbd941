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
