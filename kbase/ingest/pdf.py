"""PDF files -> text, page by page, with pypdfium2 (PDFium: the PDF engine of Chromium, BSD/Apache
licensed, wheels for every platform). Pure: bytes in, text out; kbase.ingest runs it in worker
processes (kbase.indexer.workers) under a time limit, so a PDF that hangs or crashes PDFium costs
one skipped file, never the run.

The stored text of a PDF is its pages' texts joined by form feeds (``\\f``), as pdftotext writes
them, so that offsets into it stay exact and every offset falls on one page: page ``n`` (1-based)
is ``text[start:end]`` with ``(start, end) = pages[n - 1]``. Each non-empty page ends with a line
break, so a page's first line is a line of its own. Within a page, PDFium's line breaks (CRLF)
become LF, its marker of a hyphen that broke a word at a line end (U+FFFE) is dropped (the word is
whole again), and control characters (which would clash with the form feed and the snippet's
highlight markers) become spaces. TeX's negated relations (``\\neq``, ``\\notin``: the symbol
font's slash drawn over ``=``), which PDFium reads as the digit 6 ('x 6= y'), are given back as
one character ('x ≠ y'; see ``tex_negations``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kbase.records import Block, Heading, ParsedDoc

FORM_FEED = "\f"
# The document information keys kept (PDF 1.7, 14.3.3), under kbase's names.
INFO_KEYS = {
    "Title": "title",
    "Author": "author",
    "Subject": "subject",
    "Keywords": "keywords",
    "Creator": "creator",
    "Producer": "producer",
    "CreationDate": "created",
    "ModDate": "modified",
}
# A PDF ends with '%%EOF' (maybe followed by a line break or a little padding); a file without
# one in its last bytes was cut short (an interrupted download or sync).
EOF_WINDOW = 2048
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufeff\ufff0-\ufffd\uffff]")
_PDF_DATE = re.compile(r"(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?")

# progress(pages done, pages in the file)
PageProgress = Callable[[int, int], None]


class PdfError(Exception):
    """The PDF cannot be read; ``str(e)`` is the reason, one line for the user."""


@dataclass(frozen=True)
class PdfText:
    text: str  # the pages' texts joined by form feeds
    pages: tuple[tuple[int, int], ...]  # [start, end) of each page's text in ``text``
    info: dict = field(default_factory=dict)  # title, author, ... (INFO_KEYS), only those set
    encrypted: bool = False  # encrypted, and opened with the empty user password
    # The outline (bookmarks): (level, 1-based, title, 0-based page index), in the PDF's order.
    outline: tuple[tuple[int, str, int], ...] = ()
    declared: int = 0  # pages the page tree names (more than ``pages`` when cut to the budget)
    budget: int | None = None  # the page budget, when the PDF names more pages than it
    unreadable: tuple[int, ...] = ()  # 0-based pages PDFium could not load (kept empty)
    missing: int = 0  # pages named at the end of the tree that could not be loaded: left out
    messages: tuple[str, ...] = ()  # what PDFium (pypdfium2) said while reading, once each

    @property
    def empty_pages(self) -> int:
        return sum(1 for a, b in self.pages if not self.text[a:b].strip())


# The pages read of a PDF are bounded by its bytes: a page tree can name one page object a
# million times (6 bytes a time: a 6 MB file of 1,000,000 pages), or nest such lists (a few KB
# of a million pages). A real page costs far more than BYTES_PER_PAGE (its dictionary, its
# content stream and their xref entries: 1.5 KB and more in the PDFs of shared/data), so the
# budget cuts only such files: at least MIN_PAGE_BUDGET pages, else one per BYTES_PER_PAGE bytes.
MIN_PAGE_BUDGET = 2_000
BYTES_PER_PAGE = 500


def page_budget(size: int) -> int:
    """How many pages kbase reads of a PDF of ``size`` bytes."""
    return max(MIN_PAGE_BUDGET, size // BYTES_PER_PAGE)


def clean_page(text: str) -> str:
    """A page's text as stored: LF line breaks, no control characters, no form feed, trailing
    whitespace of each line kept but the page's own trailing blank lines dropped, and a final LF
    unless the page is empty."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\ufffe" in text:
        text = text.replace("\ufffe", "")  # PDFium's mark of a word broken by a hyphen
    text = _CONTROL.sub(" ", text)
    text = text.rstrip()
    return text + "\n" if text else ""


# TeX's math symbol fonts (the OMS encoding: Computer Modern's cmsy and cmbsy, Latin Modern's
# LMMathSymbols) hold the slash of \\not, which TeX draws over the next symbol (\\neq is \\not=),
# at the code of '6', with a glyph name that maps to no character: without a ToUnicode entry for it
# (pdfTeX writes none unless asked) PDFium reads it as '6'. Such a '6' is never a digit (those
# fonts have none); next to a symbol that has a negated form it is that form ('6=' -> '≠').
_SLASH_FONT = re.compile(r"(?:^|\+)(?:CMB?SY\d|LMMathSymbols)", re.IGNORECASE)
# Each symbol with a negated form: the symbol followed by U+0338 composes into it (NFC).
_NEGATES = "←→↔⇐⇔⇒∃∈∋∣∥∼≃≅≈=≡≍<>≤≥≲≳≶≷≺≻⊂⊃⊆⊇⊢⊨⊩⊫≼≽⊑⊒⊲⊳⊴⊵"
_SLASH_NEXT_TO = re.compile(f"6(?=[{_NEGATES}])|(?<=[{_NEGATES}])6")


def tex_negations(textpage, text: str) -> str:
    """``text`` (a page's, as PDFium's ``textpage`` gives it) with each '6' that is the \\not
    slash of a TeX symbol font (by the font of its character, _SLASH_FONT) and the symbol next
    to it (after it, else before it) made the negated symbol: 'x 6= y' and 'x =6 y' -> 'x ≠ y',
    '6∈' -> '∉'. A '6' of any other font, or one next to no such symbol, is left as it is."""
    import ctypes
    import unicodedata
    from bisect import bisect_left

    import pypdfium2.raw as pdfium_c

    found = list(_SLASH_NEXT_TO.finditer(text)) if "6" in text else []
    if not found:
        return text
    wide = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]  # two UTF-16 units each
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    out, pos = [], 0
    for m in found:
        i = m.start()
        if i < pos:
            continue  # (the symbol of the slash before: taken)
        char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage.raw, i + bisect_left(wide, i))
        if char < 0 or pdfium_c.FPDFText_GetUnicode(textpage.raw, char) != ord("6"):
            continue
        size = pdfium_c.FPDFText_GetFontInfo(textpage.raw, char, name, 128, ctypes.byref(flags))
        if not 0 < size <= 128 or not _SLASH_FONT.search(name.value.decode("latin-1")):
            continue
        after = i + 1 < len(text) and text[i + 1] in _NEGATES
        a, b = (i, i + 2) if after else (i - 1, i + 1)
        out += [text[pos:a], unicodedata.normalize("NFC", text[a:b].replace("6", "") + "\u0338")]
        pos = b
    return "".join(out) + text[pos:]


def pdf_date(value: str) -> str | None:
    """A PDF date ('D:20220403180542+02'00'') as ISO-8601 ('2022-04-03T18:05:42'), or None."""
    m = _PDF_DATE.match(value.strip())
    if not m:
        return None
    y, mo, d, h, mi, s = m.groups()
    try:
        import datetime as dt

        return dt.datetime(
            int(y), int(mo or 1), int(d or 1), int(h or 0), int(mi or 0), int(s or 0)
        ).isoformat()
    except ValueError:
        return None


def truncated(data: bytes) -> bool:
    return b"%%EOF" not in data[-EOF_WINDOW:]


def extract(data: bytes, progress: PageProgress | None = None) -> PdfText:
    """The text of every page of the PDF ``data``, and its document information.

    Raises ``PdfError`` when it cannot be read: not a PDF, damaged, cut short, or encrypted with a
    password (the empty user password, which many 'protected' PDFs have, is tried first).

    At most ``page_budget(len(data))`` pages are read; a page PDFium cannot load is kept empty
    (so that pages keep their numbers), or left out at the end of the tree (a count that lies).
    """
    with _pypdfium2_messages() as heard:
        return _extract(data, progress, heard)


@contextlib.contextmanager
def _pypdfium2_messages() -> Iterator[list[str]]:
    """What pypdfium2 logs while reading ('A circular bookmark reference was detected ...'),
    caught for the file's warning instead of reaching stderr raw and without a file name."""
    import logging

    heard: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            heard.append(record.getMessage())

    logger = logging.getLogger("pypdfium2")
    handler, propagate = Catch(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield heard
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _extract(data: bytes, progress: PageProgress | None, heard: list[str]) -> PdfText:
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    if not data.lstrip()[:1024].find(b"%PDF-") >= 0:
        raise PdfError("not a PDF (no %PDF- header)")
    if truncated(data):
        raise PdfError("truncated: no %%EOF at the end (an interrupted download or copy?)")
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        message = str(e)
        code = getattr(e, "err_code", None)
        if code == pdfium_c.FPDF_ERR_PASSWORD or "password" in message.lower():
            raise PdfError("encrypted; cannot read (it needs a password)") from None
        if code == pdfium_c.FPDF_ERR_SECURITY:
            raise PdfError("encrypted with an unsupported security handler; cannot read") from None
        detail = message.split("(PDFium:", 1)[-1].rstrip(").").strip() or message
        raise PdfError(f"damaged or not a PDF ({detail.lower()})") from None
    try:
        encrypted = pdfium_c.FPDF_GetSecurityHandlerRevision(doc.raw) != -1
        # A form's filled-in values (a tax form's figures) are widgets, not page text: with the
        # form loaded, each page with annotations is flattened (in memory) before it is read.
        forms = doc.get_formtype() != pdfium_c.FORMTYPE_NONE
        if forms:
            doc.init_forms()
        info = {}
        for key, name in INFO_KEYS.items():
            try:
                value = doc.get_metadata_value(key)
            except Exception:  # a value PDFium cannot decode is left out
                continue
            value = _CONTROL.sub(" ", value).strip()
            if value and name in ("created", "modified"):
                value = pdf_date(value) or ""
            if value:
                info[name] = value
        declared = len(doc)
        n = min(declared, page_budget(len(data)))
        outline = _outline(doc, n)
        texts: list[str | None] = []  # None: a page PDFium could not load
        for i in range(n):
            if progress is not None:
                progress(i, n)
            try:
                page = doc[i]
            except pdfium.PdfiumError:  # a broken page tree (a cycle, a count that lies)
                texts.append(None)
                continue
            if forms and pdfium_c.FPDFPage_GetAnnotCount(page.raw) > 0:
                try:
                    flattened = page.flatten() == pdfium_c.FLATTEN_SUCCESS
                except (pdfium.PdfiumError, RuntimeError):
                    flattened = False
                if flattened:  # the flattened content shows once the page is loaded again
                    page.close()
                    page = doc[i]
            try:
                textpage = page.get_textpage()
                try:
                    raw_text = tex_negations(textpage, textpage.get_text_range())
                finally:
                    textpage.close()
            except pdfium.PdfiumError:
                raw_text = ""  # a page PDFium cannot lay out counts as one without text
            finally:
                page.close()
            texts.append(clean_page(raw_text))
        if progress is not None:
            progress(n, n)
    finally:
        doc.close()
    missing = 0
    while texts and texts[-1] is None:  # named by the tree, not in the file: left out
        texts.pop()
        missing += 1
    if missing and not texts:
        raise PdfError(f"damaged: none of the {missing:,} pages its page tree names can be read")
    parts: list[str] = []
    pages: list[tuple[int, int]] = []
    pos = 0
    for i, text in enumerate(texts):
        text = text or ""
        if i:
            parts.append(FORM_FEED)
            pos += 1
        parts.append(text)
        pages.append((pos, pos + len(text)))
        pos += len(text)
    return PdfText(
        "".join(parts),
        tuple(pages),
        info,
        encrypted,
        tuple(o for o in outline if o[2] < len(pages)),
        declared=declared,
        budget=n if n < declared else None,
        unreadable=tuple(i for i, t in enumerate(texts) if t is None),
        missing=missing,
        messages=tuple(dict.fromkeys(heard)),
    )


# A blank line inside a page: PDFium rarely gives one, pdfTeX's paragraphs sometimes.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")


def info_record(pdf: PdfText) -> dict:
    """What the index keeps of a PDF besides its text (pdf_info's columns)."""
    return {
        **pdf.info,
        "pages": len(pdf.pages),
        "text_pages": len(pdf.pages) - pdf.empty_pages,
        "encrypted": pdf.encrypted,
    }


def searchable_names(info: dict) -> str:
    """The document information words the keyword index adds to a PDF's names (pdf_info.names):
    its title, author, subject and keywords."""
    return " ".join(v for k in ("title", "author", "subject", "keywords") if (v := info.get(k)))


# Bookmarks kept of a PDF's outline (a generated PDF may have one per line).
MAX_OUTLINE = 10_000


def _outline(doc, pages: int) -> tuple[tuple[int, str, int], ...]:
    """(level, title, page index) of each bookmark that points at a page; () if the outline is
    missing or cannot be read (it is a nicety: never a reason to skip the PDF)."""
    out = []
    try:
        for b in doc.get_toc(max_depth=8):
            dest = b.get_dest()
            index = dest.get_index() if dest is not None else None
            title = _CONTROL.sub(" ", b.get_title() or "").strip()
            if title and index is not None and 0 <= index < pages:
                out.append((b.level + 1, " ".join(title.split()), index))
                if len(out) >= MAX_OUTLINE:
                    break
    except Exception:  # a broken outline: the text is what matters
        return ()
    return tuple(out)


def outline_headings(
    text: str, pages: tuple[tuple[int, int], ...], outline: tuple[tuple[int, str, int], ...]
) -> tuple[Heading, ...]:
    """The outline as headings: each at the start of the page it points at (no text of its own:
    start == end), lines as in the stored text."""
    from kbase.text import line_of, line_starts

    starts = line_starts(text) if outline else []
    return tuple(
        Heading(level, title, pages[i][0], pages[i][0], line_of(starts, pages[i][0]))
        for level, title, i in outline
    )


def document(
    text: str,
    pages: tuple[tuple[int, int], ...],
    name: str,
    info: dict,
    warnings: tuple[str, ...] = (),
    headings: tuple[Heading, ...] = (),
) -> ParsedDoc:
    """The ParsedDoc of a PDF's stored text: titled by its file name (as Obsidian shows it; PDF
    titles are often 'Microsoft Word - draft3.doc'), one paragraph block per run of lines of a
    page (blank lines separate them), dated by its creation date; ``headings``: its outline
    (``outline_headings``), which gives each page's chunks their heading path."""
    from pathlib import PurePosixPath

    blocks = []
    for a, b in pages:
        pos = a
        for m in _PARAGRAPH_BREAK.finditer(text, a, b):
            if text[pos : m.start()].strip():
                blocks.append(Block("paragraph", pos, m.start()))
            pos = m.end()
        end = b
        while end > pos and text[end - 1].isspace():
            end -= 1
        if end > pos:
            blocks.append(Block("paragraph", pos, end))
    stem = PurePosixPath(name).stem or name
    return ParsedDoc(
        text=text,
        kind="pdf",
        title=stem,
        frontmatter=None,
        body_start=0,
        date=info.get("created"),
        tags=(),
        aliases=(),
        headings=headings,
        blocks=tuple(blocks),
        warnings=warnings,
        segments=pages,
        pdf=info,
    )


def read_warnings(pdf: PdfText, size: int | None = None) -> tuple[str, ...]:
    """What to tell the user about a PDF that was read: pages cut by the budget, pages that could
    not be read, what PDFium said, pages without text (scanned?). ``size``: the file's bytes."""
    out = []
    if pdf.budget is not None:
        out.append(
            f"the page tree names {pdf.declared:,} pages"
            + (f" in {size:,} bytes" if size is not None else "")
            + f"; kbase read the first {pdf.budget:,} and left out the rest (one page per"
            f" {BYTES_PER_PAGE} bytes of the file, at least {MIN_PAGE_BUDGET:,}: a page object"
            " named over and over?)"
        )
    lost = list(pdf.unreadable) + list(range(len(pdf.pages), len(pdf.pages) + pdf.missing))
    if lost:
        named = len(pdf.pages) + pdf.missing
        s = "s" * (len(lost) > 1)
        out.append(
            f"page{s} {_ranges(lost)} of {named:,} could not be read (a broken page tree?);"
            + (" the other pages are indexed" if pdf.pages else " no page read")
        )
    if pdf.messages:
        said = "; ".join(" ".join(_CONTROL.sub(" ", m).split()) for m in pdf.messages[:3])
        more = f" (and {len(pdf.messages) - 3:,} more)" if len(pdf.messages) > 3 else ""
        out.append(f"PDFium: {said[:300]}{more}")
    skip = set(pdf.unreadable)
    empty = [i for i, (a, b) in enumerate(pdf.pages) if i not in skip]
    out.extend(page_warnings(pdf.text, tuple(pdf.pages[i] for i in empty)))
    return tuple(out)


def _ranges(pages: list[int], most: int = 5) -> str:
    """0-based page indexes as 1-based ranges: '2, 5-9, 12' (the first ``most`` runs)."""
    runs: list[list[int]] = []
    for p in pages:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    shown = [f"{a + 1:,}" if a == b else f"{a + 1:,}-{b + 1:,}" for a, b in runs[:most]]
    return ", ".join(shown) + (", ..." if len(runs) > most else "")


def page_warnings(text: str, pages: tuple[tuple[int, int], ...]) -> tuple[str, ...]:
    """``read_warnings`` from a PDF's stored text and pages."""
    empty = sum(1 for a, b in pages if not text[a:b].strip())
    if not empty:
        return ()
    n = len(pages)
    of = "" if empty == n else f" of {n:,}"
    return (
        f"no text layer on {empty:,} page{'s' * (empty != 1)} ({of.strip() + '; ' if of else ''}"
        "scanned? kbase does no OCR); its metadata is indexed",
    )
