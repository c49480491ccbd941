"""Small PDFs written by hand for tests and benchmarks: pages of text in Helvetica, document
information, and optionally the standard security handler (RC4, 40-bit, revision 2), so that
encrypted PDFs can be made without any PDF library. Only what kbase's tests need."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")
FILE_ID = bytes.fromhex("0123456789abcdef0123456789abcdef")


def _rc4(key: bytes, data: bytes) -> bytes:
    s = list(range(256))
    j = 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) % 256
        s[i], s[j] = s[j], s[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + s[i]) % 256
        s[i], s[j] = s[j], s[i]
        out.append(byte ^ s[(s[i] + s[j]) % 256])
    return bytes(out)


def _padded(password: str) -> bytes:
    return (password.encode("latin-1") + _PAD)[:32]


class _Security:
    """Standard security handler, revision 2 (PDF 1.7, 7.6.3)."""

    def __init__(self, user: str, owner: str) -> None:
        self.p = -4  # every permission
        self.o = _rc4(hashlib.md5(_padded(owner or user)).digest()[:5], _padded(user))
        h = hashlib.md5(_padded(user) + self.o + self.p.to_bytes(4, "little", signed=True))
        h.update(FILE_ID)
        self.key = h.digest()[:5]
        self.u = _rc4(self.key, _PAD)

    def encrypt(self, num: int, data: bytes) -> bytes:
        k = hashlib.md5(self.key + num.to_bytes(3, "little") + (0).to_bytes(2, "little")).digest()
        return _rc4(k[: len(self.key) + 5], data)


def _escape(text: str) -> bytes:
    data = text.encode("cp1252", "replace")
    return data.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _hex(data: bytes) -> bytes:
    return b"<" + data.hex().encode() + b">"


def make_pdf(
    pages: Sequence[str | None],
    *,
    info: dict[str, str] | None = None,
    user_password: str | None = None,
    owner_password: str = "owner",
    padding: int = 0,
    fields: dict[str, str] | None = None,
    outline: Sequence[tuple[int, str, int]] = (),
) -> bytes:
    """A PDF with one page per item: its lines of text (``None``: a page without any text, as a
    scanned page). ``user_password``: encrypt (``''``: encrypted, opens without a password).
    ``padding``: bytes of comment after the header (a large file with little text).
    ``fields``: text form fields on the first page, name -> filled-in value (a widget with its
    appearance, and the document's AcroForm), as a filled-in form has them.
    ``outline``: bookmarks (level from 1, title, 0-based page index), in order."""
    sec = _Security(user_password, owner_password) if user_password is not None else None
    objects: list[bytes] = []  # object n is objects[n - 1]

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    def string(num: int, value: bytes) -> bytes:
        return _hex(sec.encrypt(num, value)) if sec else b"(" + value + b")"

    catalog = add(b"")  # filled in below
    tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    kids = []
    widgets: list[int] = []
    for n, (name, value) in enumerate((fields or {}).items()):
        ap = b"BT /F1 10 Tf 2 4 Td (" + _escape(value) + b") Tj ET"
        num = len(objects) + 1
        stream = sec.encrypt(num, ap) if sec else ap
        appearance = add(
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 300 20]"
            b" /Resources << /Font << /F1 %d 0 R >> >> /Length %d >>\nstream\n"
            % (font, len(stream))
            + stream
            + b"\nendstream"
        )
        num = len(objects) + 1
        widgets.append(
            add(
                b"<< /Type /Annot /Subtype /Widget /FT /Tx /T "
                + string(num, _escape(name))
                + b" /V "
                + string(num, _escape(value))
                + b" /Rect [50 %d 350 %d] /F 4 /AP << /N %d 0 R >> >>"
                % (600 - 30 * n, 620 - 30 * n, appearance)
            )
        )
    for i, text in enumerate(pages):
        ops = []
        if text is not None:
            ops.append(b"BT /F1 11 Tf 14 TL 50 790 Td")
            for line in text.split("\n"):
                ops.append(b"(" + _escape(line) + b") Tj T*")
            ops.append(b"ET")
        else:
            ops.append(b"0.5 g 50 50 495 740 re f")  # a grey box: an 'image', no text
        stream = b"\n".join(ops)
        num = len(objects) + 1
        if sec:
            stream = sec.encrypt(num, stream)
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842]"
                b" /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R"
                % (tree, font, content)
                + (
                    b" /Annots [" + b" ".join(b"%d 0 R" % w for w in widgets) + b"]"
                    if widgets and i == 0
                    else b""
                )
                + b" >>"
            )
        )
    outlines = b""
    if outline:
        root = add(b"")
        items = [len(objects) + 1 + i for i in range(len(outline))]
        parents: list[int] = []  # for each item, its parent object (the root for level 1)
        for i, (level, _title, _page) in enumerate(outline):
            parent = root
            for j in range(i - 1, -1, -1):
                if outline[j][0] < level:
                    parent = items[j]
                    break
            parents.append(parent)
        for i, (_level, title, page) in enumerate(outline):
            siblings = [k for k in range(len(outline)) if parents[k] == parents[i]]
            pos = siblings.index(i)
            children = [k for k in range(len(outline)) if parents[k] == items[i]]
            entry = (
                b"<< /Title " + string(items[i], _escape(title)) + b" /Parent %d 0 R" % parents[i]
            )
            if pos > 0:
                entry += b" /Prev %d 0 R" % items[siblings[pos - 1]]
            if pos < len(siblings) - 1:
                entry += b" /Next %d 0 R" % items[siblings[pos + 1]]
            if children:
                entry += b" /First %d 0 R /Last %d 0 R /Count %d" % (
                    items[children[0]],
                    items[children[-1]],
                    len(children),
                )
            add(entry + b" /Dest [%d 0 R /Fit] >>" % kids[page])
        top = [k for k in range(len(outline)) if parents[k] == root]
        objects[root - 1] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (
            items[top[0]],
            items[top[-1]],
            len(top),
        )
        outlines = b" /Outlines %d 0 R" % root
    acroform = (
        b" /AcroForm << /Fields [" + b" ".join(b"%d 0 R" % w for w in widgets) + b"] >>"
        if widgets
        else b""
    )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R%s%s >>" % (tree, acroform, outlines)
    objects[tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    info_num = None
    if info:
        num = len(objects) + 1
        entries = b" ".join(
            b"/" + k.encode() + b" " + string(num, _escape(v)) for k, v in info.items()
        )
        info_num = add(b"<< " + entries + b" >>")
    encrypt_num = None
    if sec:
        encrypt_num = add(
            b"<< /Filter /Standard /V 1 /R 2 /O %s /U %s /P %d >>"
            % (_hex(sec.o), _hex(sec.u), sec.p)
        )
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    if padding:
        out += b"%" + b"p" * padding + b"\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    trailer = b"<< /Size %d /Root %d 0 R /ID [%s %s]" % (
        len(objects) + 1,
        catalog,
        _hex(FILE_ID),
        _hex(FILE_ID),
    )
    if info_num:
        trailer += b" /Info %d 0 R" % info_num
    if encrypt_num:
        trailer += b" /Encrypt %d 0 R" % encrypt_num
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def raw_pdf(objects: Sequence[bytes], root: int = 1) -> bytes:
    """A PDF of the given objects as written (object n is ``objects[n - 1]``), with its xref
    table and trailer: for page trees no PDF writer would make."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        root,
        xref,
    )
    return bytes(out)


def _text_page(parent: int, content: int) -> bytes:
    return (
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842]"
        b" /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (parent, content)
    )


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _content(text: str) -> bytes:
    ops = b"BT /F1 11 Tf 50 790 Td (" + _escape(text) + b") Tj ET"
    return b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream"


def repeated_page_pdf(times: int, text: str = "one small page") -> bytes:
    """A page tree that names one page ``times`` times (1,000,000: a 6 MB file)."""
    kids = b" ".join([b"4 0 R"] * times)
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % times,
            _FONT,
            _text_page(2, 5),
            _content(text),
        ]
    )


def nested_repeat_pdf(fanout: int, depth: int, text: str = "one small page") -> bytes:
    """A page tree of ``depth`` levels, each node naming the node below it ``fanout`` times:
    fanout ** depth pages in a file of about 6 * fanout * depth bytes."""
    # objects: 1 catalog, 2 .. depth + 1 the Pages nodes (2 the root), then font, page, content
    font, page, content = depth + 2, depth + 3, depth + 4
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(depth):
        num = 2 + level
        child = num + 1 if level < depth - 1 else page
        kids = b" ".join([b"%d 0 R" % child] * fanout)
        parent = b" /Parent %d 0 R" % (num - 1) if level else b""
        count = fanout ** (depth - level)
        objects.append(b"<< /Type /Pages%s /Kids [%s] /Count %d >>" % (parent, kids, count))
    objects += [_FONT.replace(b"", b"", 0), _text_page(depth + 1, content), _content(text)]
    pdf = raw_pdf(objects)
    return pdf.replace(b"/F1 3 0 R", b"/F1 %d 0 R" % font)


def broken_tree_pdf(kind: str) -> bytes:
    """Two pages that read and a page tree that is broken: ``cycle`` (a Pages node among its
    own kids, and an outline that points back on itself), ``count`` (a /Count of 1,000 for two
    kids), ``missing`` (a kid that is no object of the file)."""
    kids = {
        "cycle": b"4 0 R 2 0 R 6 0 R",
        "count": b"4 0 R 6 0 R",
        "missing": b"4 0 R 99 0 R 6 0 R",
    }
    count = {"cycle": 3, "count": 1000, "missing": 3}[kind]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R%s >>" % (b" /Outlines 8 0 R" if kind == "cycle" else b""),
        b"<< /Type /Pages /Kids [" + kids[kind] + b"] /Count %d >>" % count,
        _FONT,
        _text_page(2, 5),
        _content("the first page reads fine"),
        _text_page(2, 7),
        _content("and so does the second"),
    ]
    if kind == "cycle":
        objects += [
            b"<< /Type /Outlines /First 9 0 R /Last 9 0 R /Count 1 >>",
            b"<< /Title (Loop) /Parent 8 0 R /First 9 0 R /Last 9 0 R /Next 9 0 R"
            b" /Count 1 /Dest [4 0 R /Fit] >>",
        ]
    return raw_pdf(objects)
