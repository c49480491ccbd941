"""Which code page a text in a Latin script was written in, by its letters.

A few accented words cannot tell charset-normalizer's statistics apart: b'r\\xe8gne' is 'règne'
in cp1252 and 'rčgne' in cp1257, and short Hungarian, Lithuanian or Turkish text reads as
cp1252 with letters no language has together ('idõjárás', 'Aèiû', 'Toplantý'). Each reading
(the Windows code pages of Latin scripts, and ISO 8859-2) is scored by the language it fits
best: one point, a stranger, for each non-ASCII letter outside that language's alphabet, each
symbol inside a word and each control character. The reading with the fewest strangers wins;
on a tie, the language more notes are written in.
"""

from __future__ import annotations

import re
import unicodedata

# (the code pages each language is written in, its non-ASCII letters in lowercase), languages
# in the order of how many legacy-encoded notes there are in them, most first: a tie goes to
# the earlier one. German allows é for its loanwords (Café).
WESTERN, CENTRAL, TURKISH, BALTIC = ("cp1252",), ("cp1250", "iso8859_2"), ("cp1254",), ("cp1257",)
LANGUAGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (WESTERN, "àâæçéèêëîïôœùûüÿ"),  # French
    (WESTERN, "äöüßé"),  # German
    (WESTERN, "áéíñóúü"),  # Spanish
    (WESTERN, "àáâãçéêíóôõú"),  # Portuguese
    (WESTERN, "àèéìíîòóù"),  # Italian
    (WESTERN, "áàéèêëïíóöüú"),  # Dutch
    (CENTRAL, "ąćęłńóśźż"),  # Polish
    (TURKISH, "çğıöşüâîû"),  # Turkish
    (CENTRAL, "áčďéěíňóřšťúůýž"),  # Czech
    (CENTRAL, "áéíóöőúüű"),  # Hungarian
    (WESTERN, "åäöé"),  # Swedish, Finnish
    (WESTERN, "æøåéó"),  # Danish, Norwegian
    (CENTRAL, "ăâîşţșț"),  # Romanian
    (CENTRAL, "áäčďéíĺľňóôŕšťúýž"),  # Slovak
    (CENTRAL, "čćđšž"),  # Croatian, Slovene, Bosnian
    (WESTERN, "àçèéíïòóúü"),  # Catalan
    (BALTIC, "ąčęėįšųūž"),  # Lithuanian
    (BALTIC, "āčēģīķļņšūž"),  # Latvian
    (BALTIC, "äõöüšž"),  # Estonian
    (WESTERN, "áðéíóúýþæö"),  # Icelandic
)
# (code page, the letters of one language), in the order a tie is settled: Windows' page of a
# language before ISO 8859-2 (the same text where both decode the bytes alike).
_ALPHABETS = tuple(
    (page, frozenset(letters + letters.upper() + ("İ" if "ı" in letters else "")))
    for pages, letters in LANGUAGES
    for page in pages
)
CODE_PAGES = tuple(dict.fromkeys(page for page, _ in _ALPHABETS))
# Punctuation that stands inside or against a word in real text: quotes, dashes, the
# apostrophe, Catalan's middle dot (Spanish ¿ and ¡ open a word, and never stand inside one).
_WORD_PUNCTUATION = frozenset("’‘‚“”„«»‹›–—…•·\u00a0")


_NON_ASCII = re.compile("[^\x00-\x7f]")


def _suspects(text: str) -> list[str]:
    """The non-ASCII characters of ``text`` that some language must explain: its letters,
    combining marks and controls, and symbols inside a word (b'b\\xb3\\xb9d', Polish 'błąd',
    as cp1252 'b³¹d')."""
    suspects = []
    for m in _NON_ASCII.finditer(text):
        ch = m.group()
        if unicodedata.category(ch)[0] in "LMC":  # letters, combining marks, controls
            suspects.append(ch)
        elif ch not in _WORD_PUNCTUATION and _inside_a_word(text, m.start()):
            suspects.append(ch)
    return suspects


def _inside_a_word(text: str, i: int) -> bool:
    """A letter on each side of ``text[i]``, past the other non-ASCII symbols beside it."""
    before, after = i - 1, i + 1
    while before >= 0 and _symbol(text[before]):
        before -= 1
    while after < len(text) and _symbol(text[after]):
        after += 1
    return before >= 0 and after < len(text) and text[before].isalpha() and text[after].isalpha()


def _symbol(ch: str) -> bool:
    return not ch.isascii() and not ch.isalpha()


def best_reading(data: bytes) -> tuple[str, int] | None:
    """(code page, strangers) of the Latin code page whose reading of ``data`` fits a language
    best, strangers being the characters that language's alphabet leaves unexplained; None
    when no such page decodes ``data``."""
    suspects = {}
    for page in CODE_PAGES:
        try:
            suspects[page] = _suspects(data.decode(page))
        except UnicodeDecodeError:
            continue
    best: tuple[str, int] | None = None
    for page, alphabet in _ALPHABETS:
        if page in suspects:
            n = sum(ch not in alphabet for ch in suspects[page])
            if best is None or n < best[1]:
                best = (page, n)
    return best


def fit(text: str) -> int:
    """The fewest strangers of ``text`` for any language."""
    suspects = _suspects(text)
    return min(sum(ch not in alphabet for ch in suspects) for _, alphabet in _ALPHABETS)
