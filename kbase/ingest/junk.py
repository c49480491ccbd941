"""Pure: the runs of a text that are not text to read (issue 34): base64 and data URIs, URLs that
carry encoded state, hex dumps, minified code. They stay in the stored body, at their offsets, but
the chunker leaves them out of every chunk, so they are neither embedded nor matched by keyword
search (a playground link's base64 made 13% of the Vue guide's chunks, and "zzzqqq" found them).

What counts, each measured against the shared vaults and bench/material's docs sites (none of
their readable URLs, commit hashes, paths or CJK paragraphs is a run):

* a URL (``scheme://...``) holding a blob: a run of MIN_BLOB letters and digits (and ``+``, ``=``)
  with upper case, lower case and digits in it, which no word, hash or path has; or any URL
  longer than MAX_URL characters;
* a ``data:`` URI longer than MIN_BLOB characters;
* outside URLs, a run of MIN_BLOB base64 characters (``+/=`` too) with upper case, lower case and
  digits mixed as in no identifier (MIN_UPPER_RUNS), or of hex digits with digits and letters (a
  SHA-1's 40 stay searchable);
* a hex dump: two or more lines of an offset and eight or more byte groups (``xxd``, ``hexdump``);
* a minified line: MIN_MINIFIED characters or more, almost all ASCII, almost no spaces, some
  code punctuation.
"""

from __future__ import annotations

import re

MIN_BLOB = 48  # characters: no English word, no SHA-1 (40), most base64 images are far longer
MAX_URL = 400  # characters: no readable URL in the shared vaults is half as long
MIN_UPPER_RUNS = 0.3  # share of upper-case letters not followed by a lower-case one (base64: 0.6)
MIN_MINIFIED = 500  # characters in one line
MAX_MINIFIED_SPACE = 0.05  # share of whitespace in such a line (prose has 15% or more)
MIN_CODE_MARKS = 0.05  # share of ;{}()=,: in it (a table's |---| rule has none)

# Candidates: a long run without spaces (URLs, data URIs, blobs; the line of minified code it is
# in), and hex-dump lines.
_URL = re.compile(
    r"""[A-Za-z][A-Za-z0-9+.-]*://[^\s<>"'`]+|data:[\w.+-]+/[^\s<>"'`,]*,[^\s<>"'`)]+"""
)
_ALNUM_RUN = re.compile(rf"[A-Za-z0-9+=]{{{MIN_BLOB},}}")
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/]{{{MIN_BLOB},}}={{0,2}}")
_HEX_LINE = re.compile(
    r"^[ \t]*(?:0x)?[0-9a-fA-F]{4,16}:?(?:[ \t]+(?:[0-9a-fA-F]{2}){1,2}){8,}[^\r\n]*", re.M
)
_DIGIT = re.compile(r"\d")


def _classes(s: str) -> tuple[bool, bool, bool]:
    return any(c.isupper() for c in s), any(c.islower() for c in s), any(c.isdigit() for c in s)


def _blob(s: str) -> bool:
    """Base64 or hex: letters and digits mixed as no word or path is. In base64 an upper-case
    letter is followed by another, a digit or a symbol about 60% of the time; in camelCase
    identifiers and paths, by a lower-case letter (under MIN_UPPER_RUNS of the time)."""
    upper, lower, digits = _classes(s)
    if not digits:
        return False
    if not (upper and lower):
        return all(c in "0123456789abcdefABCDEFx" for c in s)  # hex, one case
    ups = [i for i, c in enumerate(s[:-1]) if c.isupper()]
    return sum(not s[i + 1].islower() for i in ups) >= MIN_UPPER_RUNS * len(ups)


def junk_runs(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The runs of ``text[start:end]`` that are not text, as sorted, disjoint (start, end)."""
    end = len(text) if end is None else end
    runs: list[tuple[int, int]] = []
    for a, b in _long_words(text, start, end):
        if text.find(":", a, b) < 0 and _DIGIT.search(text, a, b) is None:
            continue  # no URL, no blob: a table's rule, a long word
        outside = []  # the parts of the run outside its URLs
        pos = a
        for u in _URL.finditer(text, a, b):
            ua, ub = u.start(), _url_end(text, u.start(), u.end())
            url = text[ua:ub]
            if (
                len(url) > MAX_URL
                or (url.startswith("data:") and len(url) > MIN_BLOB)
                or any(_blob(r.group()) for r in _ALNUM_RUN.finditer(url))
            ):
                runs.append((ua, ub))
            outside.append((pos, ua))
            pos = ub
        outside.append((pos, b))
        for x, y in outside:
            if y - x < MIN_BLOB:
                continue
            for r in _BASE64_RUN.finditer(text, x, y):
                if _blob(r.group()):
                    runs.append(r.span())
    found = merged(runs)
    return merged(found + _minified(text, _long_lines(text, start, end), found))


def _long_words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each run of MIN_BLOB characters or more without whitespace: the words of
    ``str.split`` (twice as fast as a regex, which tries every position), each found after the
    one before (no shorter word can hold it)."""
    piece = text[start:end] if start or end < len(text) else text
    out, pos = [], 0
    for w in piece.split():
        if len(w) >= MIN_BLOB:
            pos = piece.find(w, pos)
            out.append((start + pos, start + pos + len(w)))
            pos += len(w)
    return out


def _long_lines(text: str, start: int, end: int) -> dict[int, int]:
    """start -> end of each line of MIN_MINIFIED characters or more (a split and a loop over
    the lines: five times faster than a regex)."""
    piece = text[start:end] if start or end < len(text) else text
    out, pos = {}, start
    for line in piece.split("\n"):
        n = len(line)
        if n >= MIN_MINIFIED:
            out[pos] = pos + n - line.endswith("\r")
        pos += n + 1
    return out


def _url_end(text: str, a: int, b: int) -> int:
    """The end of the URL matched at ``text[a:b]``: without trailing punctuation that closes what
    holds it (a Markdown link's ')', a sentence's '.')."""
    while b > a and text[b - 1] in ".,;:!?)]}*_":
        ch = text[b - 1]
        if ch == ")" and text.count("(", a, b) >= text.count(")", a, b):
            break
        if ch == "]" and text.count("[", a, b) >= text.count("]", a, b):
            break
        b -= 1
    # A ')' that closes a Markdown link ends it, though the run goes on: '](url)text'.
    depth = 0
    for i in range(a, b):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            if depth == 0:
                return i
            depth -= 1
    return b


def hex_dumps(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The hex dumps in ``text[start:end]`` (two or more lines of an offset and eight or more
    byte groups), as (start, end) from the first dump line's first byte to the last one's end.
    Kept apart from ``junk_runs``, as it costs as much again: the chunker looks for them in code
    blocks (and plain text) only, where dumps are."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    run: list[tuple[int, int]] = []
    for m in _HEX_LINE.finditer(text, start, end):
        if run and not _next_line(text, run[-1][1], m.start()):
            if len(run) >= 2:
                out.append((run[0][0], run[-1][1]))
            run = []
        run.append((m.start() + len(m.group()) - len(m.group().lstrip()), m.end()))
    if len(run) >= 2:
        out.append((run[0][0], run[-1][1]))
    return out


def _next_line(text: str, end: int, start: int) -> bool:
    """Is ``start`` on the line right after the one ending at ``end``?"""
    gap = text[end:start]
    return gap.count("\n") + gap.count("\r") - gap.count("\r\n") == 1 and not gap.strip()


def _minified(
    text: str, lines: dict[int, int], found: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Long lines of code without spaces, not counting the runs already ``found`` in them."""
    out = []
    for a, b in sorted(lines.items()):
        line = text[a:b]
        inside = sum(min(y, b) - max(x, a) for x, y in found if x < b and y > a)
        size = len(line) - inside
        if size < MIN_MINIFIED or (
            not line.isascii() and sum(map(str.isascii, line)) < 0.9 * len(line)
        ):
            continue  # Chinese, Japanese: no spaces between words
        spaces = len(line) - sum(map(len, line.split()))  # (what str.isspace calls a space)
        marks = sum(map(line.count, ";{}()=,:"))
        if spaces <= MAX_MINIFIED_SPACE * size and marks >= MIN_CODE_MARKS * size:
            out.append((a + len(line) - len(line.lstrip()), a + len(line.rstrip())))
    return out


def merged(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out
