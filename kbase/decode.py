"""bytes -> text. BOM first, then strict UTF-8, then BOM-less UTF-16/32, then charset-normalizer.

Binary files (NUL bytes that are not UTF-16/32, or nothing decodes cleanly) are refused with a
reason, so the caller can skip them with a warning.
"""

from __future__ import annotations

import codecs
import re
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


def decode(data: bytes) -> Decoded:
    """Decode a file's bytes; raises ``UndecodableError`` for binary or undecodable data."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return _checked(data[len(bom):].decode(encoding), encoding, bom=True)
            except UnicodeDecodeError:
                break  # a BOM followed by garbage: let the other detectors decide
    try:
        text = data.decode("utf_8")
    except UnicodeDecodeError:
        text = None
    # ASCII-range UTF-16/32 without a BOM is valid UTF-8 too (full of NULs): not a verdict yet.
    if text is not None and "\x00" not in text:
        return _checked(text, "utf_8")
    if b"\x00" in data:
        encoding = _guess_utf16_32(data)
        if encoding is None:
            raise UndecodableError("binary file (contains NUL bytes)")
        try:
            return _checked(data.decode(encoding), encoding)
        except UnicodeDecodeError:
            raise UndecodableError(f"binary file (NUL bytes, not valid {encoding})") from None
    return _charset_normalizer(data)


def _checked(text: str, encoding: str, bom: bool = False) -> Decoded:
    if "\x00" in text:
        raise UndecodableError("binary file (contains NUL characters)")
    if text:
        sample = text[:65536]
        controls = len(_CONTROL.findall(sample))
        if controls / len(sample) > MAX_CONTROL_RATIO:
            raise UndecodableError(f"binary file ({controls} control characters in the first {len(sample)})")
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
PREFERRED_ENCODINGS = ("cp1252", "latin_1", "iso8859_15", "mac_roman", "cp1251", "shift_jis", "gb2312", "big5", "euc_kr")
COHERENCE_TIE = 0.01
CHAOS_TIE = 0.15


def _charset_normalizer(data: bytes) -> Decoded:
    from charset_normalizer import from_bytes

    results = from_bytes(data)
    best = results.best()
    if best is None:
        raise UndecodableError("undecodable: no text encoding fits these bytes")
    tied = {
        m.encoding: m for m in results
        if m.chaos - best.chaos <= CHAOS_TIE and m.coherence >= best.coherence - COHERENCE_TIE
    }
    best = next((tied[e] for e in PREFERRED_ENCODINGS if e in tied), best)
    try:
        text = data.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):
        text = str(best)
    return _checked(text, best.encoding)
