"""One budget for every tool result: what fits, and what was left out.

Agents' clients cap a tool result (often near 25,000 tokens) and then drop it whole, so every
result is cut to a budget before it is sent: by default about 8,000 tokens of text (the
``budget`` argument of each tool changes it). Both forms of a result count: the readable text
and the structured content, each within the budget, and the structured content never holds an
item, or a longer value, than the text shows.

Tokens are estimated without a tokenizer: four characters of ASCII make a token, and each other
character (accented letters, CJK, emoji) one token, which errs on the generous side for the
tokenizers agents use (about 4 characters of English a token, 1-2 tokens a CJK character).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_BUDGET = 8_000
MIN_BUDGET, MAX_BUDGET = 500, 100_000
RESERVE = 120  # tokens kept back for the line that says what was left out and how to go on
FIELD_CHARS = 1_000  # a title, a path, a context line or a cell longer than this is cut (…)
ERROR_CHARS = 1_000  # an error's text (it echoes what it was given: a name, a path, a value)
RUN_CHARS = 200  # a run of an error's text without a space (a name, a path) is cut to this


def tokens(text: str) -> int:
    """The estimated token count of ``text`` (see the module's docstring)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def json_tokens(value: Any) -> int:
    return tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def clip(text: str, chars: int = FIELD_CHARS) -> str:
    """``text`` in at most ``chars`` characters, an ellipsis marking a cut."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def error_text(text: str) -> str:
    """An error's text within ``ERROR_CHARS`` whatever it echoes: each run of more than
    ``RUN_CHARS`` characters without a space cut in its middle, and a text still too long cut in
    its middle too, so its beginning (what failed) and its end (the hint) are kept."""
    if len(text) <= RUN_CHARS:
        return text
    half = RUN_CHARS // 2

    def cut(m: re.Match[str]) -> str:
        run = m.group(0)
        return f"{run[:half]}…({len(run) - 2 * half:,} characters)…{run[-half:]}"

    text = _LONG_RUN.sub(cut, text)
    if len(text) > ERROR_CHARS:
        head, tail = ERROR_CHARS * 3 // 5, ERROR_CHARS // 4
        text = f"{text[:head]} …({len(text) - head - tail:,} characters)… {text[-tail:]}"
    return text


_LONG_RUN = re.compile(rf"\S{{{RUN_CHARS + 1},}}")


def longest_prefix(text: str, fits: Callable[[str], bool]) -> str:
    """The longest prefix of ``text`` (cut at a character) that ``fits``; costs grow with the
    prefix, so a binary search finds it."""
    if fits(text):
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(text[:mid]):
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


@dataclass
class Fit:
    """How many of a list's items fit, and the tokens the list takes in each form."""

    count: int
    text_tokens: int
    json_tokens: int


def fit(
    items: Sequence[Any],
    *,
    text_room: int,
    json_room: int,
    text_of: Callable[[Any], str],
    json_of: Callable[[Any], Any],
    at_least: int = 0,
) -> Fit:
    """The longest run of ``items`` from the first whose text (a line or more each) takes at
    most ``text_room`` tokens and whose JSON at most ``json_room``. ``at_least`` items are kept
    whatever they cost (callers clip long fields first, so one item is always small)."""
    t = j = n = 0
    for item in items:
        dt = tokens(text_of(item)) + 1  # and its line break
        dj = json_tokens(json_of(item)) + 1  # and its comma
        if n >= at_least and (t + dt > text_room or j + dj > json_room):
            break
        t, j, n = t + dt, j + dj, n + 1
    return Fit(count=n, text_tokens=t, json_tokens=j)
