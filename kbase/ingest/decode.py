"""bytes -> text. BOM first, then the 7-bit escape encodings (ISO-2022-JP/-KR, HZ), then strict
UTF-8, then BOM-less UTF-16/32 (by where the NUL bytes sit, or, for CJK, by which byte order reads
as text), then UTF-8 with a few invalid bytes (marked U+FFFD, one warning), then
charset-normalizer, then the CJK codecs it leaves out.

Binary files (NUL bytes that are not UTF-16/32, or nothing decodes cleanly) are refused with a
reason, so the caller can skip them with a warning. NUL padding after the text (what an
interrupted sync or a preallocating copy leaves) is removed with a warning, and the text kept.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import re
import unicodedata
from dataclasses import dataclass

# Longest first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf_32_le"),
    (codecs.BOM_UTF32_BE, "utf_32_be"),
    (codecs.BOM_UTF8, "utf_8"),
    (codecs.BOM_UTF16_LE, "utf_16_le"),
    (codecs.BOM_UTF16_BE, "utf_16_be"),
)
# Share of control characters (other than tab, newlines, form feed) above which decoded text is
# really binary: real notes have next to none, random bytes decoded as cp125x have many.
MAX_CONTROL_RATIO = 0.05
_CONTROL = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")  # C0 controls but tab, newlines, \f, \v, ESC


class UndecodableError(ValueError):
    """The bytes are not text kbase can index; ``str(e)`` is the reason."""


@dataclass(frozen=True)
class Decoded:
    """Decoded text and how it was obtained."""

    text: str
    encoding: str  # Python codec name, e.g. 'utf_8', 'utf_16_le', 'cp1252'
    bom: bool = False
    warnings: tuple[str, ...] = ()  # what was repaired, for the index run's report


def decode(data: bytes) -> Decoded:
    """Decode a file's bytes; raises ``UndecodableError`` for binary or undecodable data."""
    padding = _nul_padding(data)
    if padding:
        decoded = _decode(data[:-padding])
        if decoded.encoding.startswith(
            ("utf_16", "utf_32")
        ):  # NUL-free bytes read as UTF-16: noise
            raise UndecodableError("binary file (contains NUL bytes)")
        warning = f"{padding:,} NUL bytes after the text (an interrupted sync or copy?) left out"
        return dataclasses.replace(decoded, warnings=(*decoded.warnings, warning))
    return _decode(data)


def _nul_padding(data: bytes) -> int:
    """The length of a run of NUL bytes that ends ``data`` after NUL-free text, else 0. UTF-16/32
    text has NULs inside (and its padding is left to the binary test)."""
    text_end = len(data.rstrip(b"\x00"))
    if text_end == len(data) or b"\x00" in data[:text_end] or not data[:text_end].strip():
        return 0
    return len(data) - text_end


def _decode(data: bytes) -> Decoded:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return _checked(data[len(bom) :].decode(encoding), encoding, bom=True)
            except UnicodeDecodeError:
                break  # a BOM followed by garbage: let the other detectors decide
    escaped = _escape_encoded(data)
    if escaped is not None:
        return escaped
    text: str | None
    try:
        text = data.decode("utf_8")
    except UnicodeDecodeError:
        text = None
    # ASCII-range UTF-16/32 without a BOM is valid UTF-8 too (full of NULs): not a verdict yet.
    if text is not None and "\x00" not in text:
        return _checked(text, "utf_8")
    if b"\x00" in data:
        wide = _guess_utf16_32(data) or _plausible_utf16(data)
        if wide is None:
            raise UndecodableError("binary file (contains NUL bytes)")
        try:
            return _checked(data.decode(wide), wide)
        except UnicodeDecodeError:
            raise UndecodableError(f"binary file (NUL bytes, not valid {wide})") from None
    mostly = _mostly_utf8(data)
    if mostly is not None:
        return mostly
    # UTF-16 of Han or kana alone has no NUL byte at all: charset-normalizer recognises it.
    return _latin_if_it_fits(data, _charset_normalizer(data))


# Two non-ASCII bytes in a row: text in a multi-byte code (CJK), or words of a script that is
# not Latin (Cyrillic, Greek, ...) in a single-byte one, all have some.
_HIGH_PAIR = re.compile(rb"[\x80-\xff]{2}")


def _latin_if_it_fits(data: bytes, decoded: Decoded) -> Decoded:
    """The Latin code page whose letters fit a language best (``kbase.ingest.latin``) instead of
    ``decoded``, when charset-normalizer chose another Latin page that fits no better, or when
    the reading it chose cannot be the text's: every non-ASCII byte stands alone between ASCII
    ones (an apostrophe, an accent, a euro sign) while it chose a multi-byte code (each such
    byte then eats the ASCII letter after it: b'It\\x92s' read as Big5 'It𠏋') or letters of
    another script (b'caf\\xe9' as Cyrillic 'cafй'), or a Latin reading fits and a wide character
    of the one it chose stands against an ASCII letter (b'Gr\\xf6\\xdfe' as Korean 'Gr廻e')."""
    from kbase.ingest.latin import best_reading, fit

    sample = data[:LATIN_SAMPLE]
    latin = best_reading(sample)
    if latin is None or latin[0] == decoded.encoding:
        return decoded
    page, strangers = latin
    text = decoded.text[: len(sample)]
    others = [ch for ch in text if _other_letter(ch)]
    if len(decoded.text) == len(data) and all(
        unicodedata.name(ch, "").startswith("LATIN") for ch in others
    ):
        if strangers > fit(text):
            return decoded
    elif strangers or (_HIGH_PAIR.search(data) and not _wide_against_a_letter(text)):
        return decoded
    try:
        return _checked(data.decode(page), page)
    except UnicodeDecodeError:
        return decoded


# Bytes of a file the Latin code pages are weighed on (they decode a byte to a character).
LATIN_SAMPLE = 65536
_WIDE_AGAINST_A_LETTER = re.compile(r"[A-Za-z][^\x00-\u2fff]|[^\x00-\u2fff][A-Za-z]")


def _wide_against_a_letter(text: str) -> bool:
    return _WIDE_AGAINST_A_LETTER.search(text) is not None


def _other_letter(ch: str) -> bool:
    return not ch.isascii() and ch.isalpha()


# UTF-8 with a few invalid bytes (a cut-off copy, a byte flipped by a sync, a paste from a
# cp1252 file) is decoded, each bad byte shown as U+FFFD with one warning, when the file holds
# at least this many valid multi-byte characters per bad byte: text in a legacy code page
# (cp1252, GBK, Shift-JIS) read as UTF-8 has next to no valid multi-byte sequences.
UTF8_EVIDENCE_PER_BAD_BYTE = 20
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _mostly_utf8(data: bytes) -> Decoded | None:
    text = data.decode("utf_8", "surrogateescape")  # each invalid byte: one lone surrogate
    n = len(_ESCAPED_BYTE.findall(text))
    if not n:
        return None
    valid = len(text) - len(text.encode("ascii", "ignore")) - n  # multi-byte characters
    if valid < UTF8_EVIDENCE_PER_BAD_BYTE * n:
        return None
    lines, line, pos = [], 1, 0
    for m, _ in zip(_ESCAPED_BYTE.finditer(text), range(3), strict=False):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        lines.append(f"{line:,}")
    where = "line" + "s" * (len(set(lines)) > 1) + " " + ", ".join(dict.fromkeys(lines))
    more = ", ..." if n > 3 else ""
    warning = (
        f"{n:,} invalid UTF-8 byte{'s' * (n != 1)} ({where}{more}) shown as U+FFFD;"
        " the rest decoded"
    )
    decoded = _checked(_ESCAPED_BYTE.sub("\ufffd", text), "utf_8")
    return dataclasses.replace(decoded, warnings=(warning,))


# Characters of the scripts and punctuation real text is written in: UTF-16 decoded with the right
# byte order is almost nothing else; with the wrong one, CJK text spreads over every block
# (unassigned, private use, surrogates). BOM-less UTF-16 is taken when one byte order gives at
# least PLAUSIBLE_UTF16 of these and the other clearly less.
_COMMON_CHARS = (
    "[\t\n\r\x20-\x7e\xa0-\u024f\u0370-\u052f\u0590-\u06ff\u0900-\u0dff\u0e00-\u0eff"
    "\u1100-\u11ff\u1e00-\u1fff\u2000-\u206f\u2100-\u27bf\u2e80-\u2fdf\u3000-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00010000-\U0010ffff]"
)


@functools.cache
def _common():  # compiled when first needed (2 ms: its ranges), not at every start
    return re.compile(_COMMON_CHARS)


PLAUSIBLE_UTF16 = 0.97
UTF16_MARGIN = 0.05  # Japanese read in the wrong byte order: 0.89 of them
UTF16_SAMPLE = 65536  # bytes


def _plausible_utf16(data: bytes) -> str | None:
    """utf_16_le or utf_16_be when the bytes read as text in one byte order only (see
    _COMMON_CHARS): CJK text, whose NUL bytes do not sit in every other byte as ASCII's do."""
    if len(data) % 2 or len(data) < 16:
        return None
    sample = data[:UTF16_SAMPLE]
    scores = {}
    for codec in ("utf_16_le", "utf_16_be"):
        try:
            text = sample.decode(codec)
        except UnicodeDecodeError as e:
            if e.start < len(sample) - 2:  # a lone surrogate: not this byte order
                continue
            text = sample[: e.start].decode(codec)  # a pair cut by the sample's end
        if not text or "\x00" in text:
            continue
        scores[codec] = (len(_common().findall(text)) / len(text), text)
    if not scores:
        return None
    best = max(scores, key=lambda c: scores[c][0])
    score, text = scores[best]
    others = [v[0] for c, v in scores.items() if c != best]
    if score < PLAUSIBLE_UTF16 or (others and others[0] > score - UTF16_MARGIN):
        return None
    try:
        data.decode(best)
    except UnicodeDecodeError:
        return None
    return best


# 7-bit encodings that switch character sets with escape sequences. Their bytes are valid ASCII
# (so valid UTF-8), and ISO-2022-KR's shift bytes SO/SI look like binary: they must be recognised
# before either test. A codec is taken only if it decodes the whole file strictly, in this order
# (the plain codec before the supersets that accept more escapes).
_ISO2022_JP = re.compile(rb"\x1b(?:\$[@B]|\$\(D|\([BJI])")
_ISO2022_JP_CODECS = (
    "iso2022_jp",
    "iso2022_jp_2",
    "iso2022_jp_ext",
    "iso2022_jp_2004",
    "iso2022_jp_3",
)
_ISO2022_KR = re.compile(rb"\x1b\$\)C")
_HZ = re.compile(rb"~\{[\x21-\x7e]{2}")
# HZ needs no escape character at all ('~{' ... '~}'), so in plain ASCII text a '~{' could be
# anything: the decoded GB2312 runs must be Chinese (a run of ASCII letters decodes as hanzi
# too, but text with '~' before anything but '{', '}', '~' or a line end is not HZ at all).
HZ_MIN_HAN_RATIO = 0.5


def _escape_encoded(data: bytes) -> Decoded | None:
    if not data.isascii():
        return None
    candidates: tuple[str, ...] = ()
    if _ISO2022_KR.search(data):
        candidates = ("iso2022_kr",)
    elif _ISO2022_JP.search(data):
        candidates = _ISO2022_JP_CODECS
    elif _HZ.search(data):
        candidates = ("hz",)
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if encoding == "hz":
            han = sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef")
            if han < HZ_MIN_HAN_RATIO * sum(1 for ch in text if not ch.isascii()) or not han:
                return None
        return _checked(text, encoding)
    return None


def _checked(text: str, encoding: str, bom: bool = False) -> Decoded:
    if "\x00" in text:
        raise UndecodableError("binary file (contains NUL characters)")
    if text:
        sample = text[:65536]
        controls = len(_CONTROL.findall(sample))
        if controls / len(sample) > MAX_CONTROL_RATIO:
            raise UndecodableError(
                f"binary file ({controls} control characters in the first {len(sample)})"
            )
    return Decoded(text, encoding, bom)


def _guess_utf16_32(data: bytes) -> str | None:
    """Recognise BOM-less UTF-16/32 by where the NUL bytes sit (text is mostly BMP/ASCII)."""
    sample = data[:65536]
    n = len(sample)
    if n < 2:
        return None
    if n % 4 == 0:
        quads = [sample[i::4].count(0) / (n / 4) for i in range(4)]
        if quads[2] > 0.95 and quads[3] > 0.95 and quads[1] > 0.5:
            return "utf_32_le"
        if quads[0] > 0.95 and quads[1] > 0.95 and quads[2] > 0.5:
            return "utf_32_be"
    if n % 2 == 0:
        even = sample[0::2].count(0) / (n / 2)
        odd = sample[1::2].count(0) / (n / 2)
        if odd > 0.3 and even < 0.05:
            return "utf_16_le"
        if even > 0.3 and odd < 0.05:
            return "utf_16_be"
    return None


# When charset-normalizer finds several encodings equally plausible (short Western text often
# decodes cleanly as cp1250, cp1252, cp1257...), prefer the one most files are really written in.
# "Equally plausible": the same language coherence (within COHERENCE_TIE) and a "chaos" score
# within CHAOS_TIE, which on short texts is noise (French 'Ça ...' scores 0.12 as cp1252).
PREFERRED_ENCODINGS = (
    "cp1252",
    "latin_1",
    "iso8859_15",
    "mac_roman",
    "cp1251",
    "shift_jis",
    "gb2312",
    "big5",
    "euc_kr",
)
COHERENCE_TIE = 0.01
CHAOS_TIE = 0.15


def _charset_normalizer(data: bytes) -> Decoded:
    from charset_normalizer import from_bytes
    from charset_normalizer.utils import is_multi_byte_encoding

    results = from_bytes(data)
    best = results.best()
    if best is None or (best.coherence == 0 and not is_multi_byte_encoding(best.encoding)):
        # Nothing fits, or only a single-byte code page that makes no language out of the bytes.
        cjk = _cjk_fallback(data)
        if cjk is not None:
            return cjk
    if best is None:
        raise UndecodableError("undecodable: no text encoding fits these bytes")
    tied = {
        m.encoding: m
        for m in results
        if m.chaos - best.chaos <= CHAOS_TIE and m.coherence >= best.coherence - COHERENCE_TIE
    }
    best = next((tied[e] for e in PREFERRED_ENCODINGS if e in tied), best)
    try:
        text = data.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):
        text = str(best)
    return _checked(text, best.encoding)


# CJK codecs that charset-normalizer turns down when the text is short or unusual (rare hangul
# syllables, Hong Kong characters, symbols): its "chaos" measure counts the rare characters as
# noise. Tried in this order, only when it found nothing better; the first whose strict decoding
# holds nothing but assigned, printable characters with some CJK among them wins. GB18030 and
# Shift-JIS are not here: charset-normalizer finds them, and GB18030 decodes nearly any bytes.
CJK_FALLBACK_CODECS = ("cp949", "johab", "big5hkscs")


def _cjk_fallback(data: bytes) -> Decoded | None:
    for encoding in CJK_FALLBACK_CODECS:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _plausible_cjk(text):
            return _checked(text, encoding)
    return None


def _plausible_cjk(text: str) -> bool:
    cjk = False
    for ch in text:
        if ch.isascii():
            continue
        category = unicodedata.category(ch)
        if category in ("Co", "Cn", "Cs") or (category == "Cc" and not ch.isspace()):
            return False
        cjk = cjk or unicodedata.east_asian_width(ch) == "W"
    return cjk
