"""Documents as people name them: the one resolver behind every NOTE or PATH argument (show,
links, backlinks, neighbors, graph, the TUI and the Python API), and PATH:LINE regions."""

from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import apsw

from kbase.errors import InputError
from kbase.ingest.discover import follow_outside_key, root_bounds, within
from kbase.records import DocRef
from kbase.search.hits import disk_state
from kbase.store.db import located_root, meta_get
from kbase.text import LINE_BREAK, MAX_NAME_CHARS, excerpt

MAX_CANDIDATES_SHOWN = 8  # an ambiguous name lists this many candidates, then a count


@dataclass(frozen=True)
class _Named:
    id: int
    path: str  # inside its root ('' for a root that is one file: then the file's name)
    abspath: str


def _key(s: str) -> str:
    """Names compare as Obsidian compares them: any case, Unicode normalised (macOS file names)."""
    return unicodedata.normalize("NFC", s).casefold()


def _stem(path: str) -> str:
    """The path without its file's extension, by pathlib's rule (a dot that neither starts nor
    ends the name), in plain string work: pathlib here cost 30 ms per 1,000 notes."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    return path if not 0 < dot < len(name) - 1 else path[: len(path) - len(name) + dot]


def bounded(name: str) -> None:
    """An ``InputError`` for a name longer than ``MAX_NAME_CHARS`` (see kbase.text), before any
    work on it: every way a face names a note passes here."""
    if len(name) > MAX_NAME_CHARS:
        raise InputError(
            f"the note name {excerpt(name, (0, 0), 40)!r} is {len(name):,} characters long;"
            f" a note name is at most {MAX_NAME_CHARS:,} (no path is longer)",
            "give the note's path, file name, title or alias",
        )


def resolve(con: apsw.Connection, name: str, *, near: bool = False) -> int:
    """The id of the document ``name`` names (see ``lookup``; ``near``: a name a typo away too,
    which ``lookup`` says)."""
    return lookup(con, name, near=near)[0]


def lookup(con: apsw.Connection, name: str, *, near: bool = True) -> tuple[int, str | None]:
    """The id of the one document ``name`` names, trying in order (the first step that matches
    anything decides):

    1. an indexed file's path, absolute or relative to the working folder;
    2. a path inside its root, whole (any case; the extension may be left out): ``Projects/Plan``;
    3. the end of such a path after a ``/``, such as a file name: ``Plan``, ``projects/plan.md``;
    4. a folder, as a link to it resolves (``guide/``, ``examples``): its index page,
       ``index.md``, else ``README.md``, else ``_index.md``;
    5. an alias from a note's front matter;
    6. (``near``) a name a typo away: the one note whose title, file name or alias is within one
       edit of the name's last part (two from 8 letters on; kbase.search.spell), nearest first.

    Returns (document id, ``name`` when step 6 found it, else None). ``[[Note]]``,
    ``[[Note|text]]`` and ``[[Note#Heading]]`` name ``Note``. Within a step, a name matching
    several documents picks the one matching it exactly (same case), if any; otherwise
    it is an ``InputError`` listing the candidates, each by a path that names it alone. No match
    is an ``InputError`` too. Obsidian would pick the shortest path silently; a command should
    not guess. A name of more than ``MAX_NAME_CHARS`` characters is an ``InputError`` at once.
    """
    bounded(name)
    exact = con.execute(  # cheap, and what the TUI and scripts pass: a path exactly as stored
        "SELECT d.id FROM documents AS d JOIN roots AS r ON r.id = d.root_id"
        " WHERE d.path = ?1 OR (d.path = '' AND r.path = ?1) OR r.path || '/' || d.path = ?1",
        (name,),
    ).fetchall()
    if len(exact) == 1:
        return exact[0][0], None
    now = {
        p: located_root(p, rel, con.filename)
        for p, rel in con.execute("SELECT path, relpath FROM roots")
    }
    rows = con.execute(
        "SELECT d.id, d.path, r.path FROM documents AS d JOIN roots AS r ON r.id = d.root_id"
    )
    docs = [
        _Named(i, p or os.path.basename(now[root]), os.path.join(now[root], p) if p else now[root])
        for i, p, root in rows
    ]
    text = name.strip()
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2].split("|", 1)[0].split("#", 1)[0].strip()
    try:
        as_file = str(Path(text).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        as_file = text
    rel = text.strip("/")
    t = _key(rel)
    forms = [(d, d.path, _stem(d.path), _key(d.path), _key(_stem(d.path))) for d in docs]
    steps = (  # each: does d match, and does it match in the same case
        lambda d, path, stem, kp, ks: (d.abspath == as_file, True),
        lambda d, path, stem, kp, ks: (t in (kp, ks), rel in (path, stem)),
        lambda d, path, stem, kp, ks: (
            kp.endswith("/" + t) or ks.endswith("/" + t),
            path.endswith("/" + rel) or stem.endswith("/" + rel),
        ),
    )
    for step in steps:
        found = [(f[0], same_case) for f in forms for match, same_case in [step(*f)] if match]
        if found:
            return _one(name, found, docs), None
    index = _index_page(t, forms)  # a folder: its index page, as a link to it resolves
    if index is not None:
        return index, None
    if t:
        by_alias = {
            doc_id: alias.strip() == rel
            for doc_id, alias in con.execute("SELECT doc_id, alias FROM aliases")
            if _key(alias.strip()) == t
        }
        found = [(d, by_alias[d.id]) for d in docs if d.id in by_alias]
        if found:
            return _one(name, found, docs), None
    if near:
        _skipped_file(con, name, rel, as_file, now)
    return _near(con, name, _stem(rel.rsplit("/", 1)[-1]), docs, near)


def _index_page(t: str, forms: list) -> int | None:
    """The index page (``index.md``, else ``README.md``, else ``_index.md``) of the folder whose
    path inside its root is, or ends with, ``t`` (any case; '' is a root), when exactly one
    folder so named has one."""
    from kbase.ingest.links import INDEX_PAGES

    best: dict[str, tuple[int, int]] = {}  # folder -> (rank of its page's name, doc id)
    for d, _path, _stem, kp, _ks in forms:
        folder, _, page = kp.rpartition("/")
        if page in INDEX_PAGES and (folder == t or folder.endswith("/" + t) or not t):
            rank = INDEX_PAGES.index(page)
            if folder not in best or rank < best[folder][0]:
                best[folder] = (rank, d.id)
    if t == "" and "" in best:
        return best[""][1]
    exact = [v for k, v in best.items() if k == t]
    found = exact or list(best.values())
    return found[0][1] if len(found) == 1 else None


def _skipped_file(
    con: apsw.Connection, name: str, rel: str, as_file: str, now: dict[str, str]
) -> None:
    """If ``name`` names a file the index skipped as unreadable (an encrypted or damaged PDF,
    table ``unreadable``), an UnknownDocument saying so and why; else nothing."""
    t = _key(rel)
    if not t:
        return
    try:
        rows = con.execute(
            "SELECT r.path, u.path, u.reason FROM unreadable AS u JOIN roots AS r"
            " ON r.id = u.root_id ORDER BY u.path"
        ).fetchall()
    except apsw.SQLError:  # an index from before the table (opened read-only, not migrated)
        return
    for root, path, reason in rows:
        abspath = os.path.join(now.get(root, root), path)
        kp, ks = _key(path), _key(_stem(path))
        if abspath == as_file or t in (kp, ks) or kp.endswith("/" + t) or ks.endswith("/" + t):
            raise UnknownDocument(
                f"{path} is not in the index: kbase index skipped it: {reason}",
                "kbase index reads it again once the file changes",
            )


def _near(
    con: apsw.Connection, name: str, asked: str, docs: list[_Named], accept: bool
) -> tuple[int, None | str]:
    """The note a typo away from ``asked`` when exactly one is nearest (and ``accept``); else an
    UnknownDocument that says "did you mean" with the nearest names, or the most similar."""
    from kbase.search import spell

    hint = "see kbase status for the roots, or kbase search"
    if not accept:  # an exact look-up (a caller trying forms of a name): no names to compare
        raise UnknownDocument(f"no indexed document matches {name!r}", hint)
    paths = {d.id: d.path for d in docs}
    near = [n for n in spell.near_names(con, asked) if n.doc_id in paths]
    if near and (len(near) == 1 or near[0].distance < near[1].distance):
        return near[0].doc_id, name
    shown = near or spell.similar_names(con, asked)
    if shown:
        hint = (
            "did you mean "
            + ", ".join(
                f"{n.name!r} ({paths[n.doc_id]})"
                for n in shown[:MAX_CANDIDATES_SHOWN]
                if n.doc_id in paths
            )
            + "?"
        )
    raise UnknownDocument(f"no indexed document matches {name!r}", hint)


def _one(name: str, found: list[tuple[_Named, bool]], docs: list[_Named]) -> int:
    if len(found) == 1:
        return found[0][0].id
    same_case = [d for d, exact in found if exact]
    if len(same_case) == 1:
        return same_case[0].id
    per_path = Counter(d.path for d in docs)
    # Each candidate by a name that resolves to it alone: its path exactly, or (the same path in
    # two roots) its absolute path.
    names = sorted(d.path if per_path[d.path] == 1 else d.abspath for d, _ in found)
    shown = ", ".join(names[:MAX_CANDIDATES_SHOWN])
    more = (
        f" and {len(names) - MAX_CANDIDATES_SHOWN} more"
        if len(names) > MAX_CANDIDATES_SHOWN
        else ""
    )
    raise InputError(
        f"{name!r} matches {len(names)} documents: {shown}{more}",
        f"name one by its path, e.g. {names[0]!r}",
    )


def load(con: apsw.Connection, doc_id: int) -> DocRef:
    """A stored document, flagged ``stale`` when its file changed since it was indexed
    (one stat)."""
    row = con.execute(
        "SELECT d.id, d.path, r.path, r.relpath, d.title, d.body, d.body_start, d.kind, d.size,"
        " d.mtime_ns, r.id"
        " FROM documents AS d JOIN roots AS r ON r.id = d.root_id WHERE d.id = ?",
        (doc_id,),
    ).fetchone()
    doc_id, path, root, relpath, title, body, body_start, kind, size, mtime_ns, root_id = row
    root = located_root(root, relpath, con.filename)
    abspath = os.path.join(root, path) if path else root
    check_inside(con, abspath, root_id, path or Path(root).name)
    pages: tuple[tuple[int, int], ...] = ()
    if kind == "pdf":
        pages = tuple(
            con.execute(
                "SELECT start_char, end_char FROM pages WHERE doc_id = ? ORDER BY page", (doc_id,)
            ).fetchall()
        )
    return DocRef(
        doc_id,
        path or Path(root).name,
        abspath,
        title,
        body,
        body_start,
        kind,
        *disk_state(abspath, size, mtime_ns),
        pages=pages,
    )


def check_inside(con: apsw.Connection, abspath: str, root_id: int, shown: str) -> None:
    """Refuse a document whose file resolves outside every indexed root (a symlink to
    ``/etc/passwd`` in an index made before kbase skipped those, or a path that climbs out with
    ``..``), unless its root was indexed with ``--follow-outside``: whatever the index holds,
    reading it never serves a file from elsewhere."""
    real = os.path.realpath(abspath)
    bounds = root_bounds(con)
    if within(real, bounds) or meta_get(con, follow_outside_key(root_id)) is not None:
        return
    raise InputError(
        f"{shown} resolves to {real}, outside the indexed roots: not served",
        "kbase index drops it; index such links on purpose with kbase index --follow-outside",
    )


def find_document(con: apsw.Connection, name: str, *, near: bool = True) -> DocRef:
    """The document ``name`` names (see ``lookup``); ``Note#Heading`` and ``Note#^block`` name
    ``Note`` when no document is called that whole. With ``near``, a name a typo away is taken
    when nothing matches as it is (``corrected_from`` is then the name as given)."""
    try:
        return load(con, resolve(con, name))
    except UnknownDocument:
        note, anchor = split_anchor(name)
        if anchor is not None and note:
            try:
                return load(con, resolve(con, note))
            except UnknownDocument:
                if not near:
                    raise
                return _nearest_document(con, note)
        if not near:
            raise
        return _nearest_document(con, name)


def _nearest_document(con: apsw.Connection, name: str) -> DocRef:
    doc_id, corrected_from = lookup(con, name)
    doc = load(con, doc_id)
    return replace(doc, corrected_from=corrected_from) if corrected_from else doc


class UnknownDocument(InputError):
    """No indexed document matches the name."""


_LOCATION = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


def is_location(target: str) -> bool:
    """Is ``target`` written ``PATH:LINE`` or ``PATH:START-END`` (see ``region``)?"""
    return _LOCATION.match(target) is not None


# Obsidian's anchor of a PDF's page: 'paper.pdf#page=12' (maybe with '&selection=...' after it).
_PAGE_ANCHOR = re.compile(r"page=(\d+)(?:&.*)?$")


@dataclass(frozen=True)
class Region:
    """Lines ``first`` to ``last`` (1-based, inclusive) of a stored document, as ``kbase show``
    prints them."""

    doc: DocRef
    first: int
    last: int
    line: int | None  # the line PATH:LINE asked for (the others are its context), else None
    lines: tuple[str, ...]  # the text of lines first..last, without their line breaks
    total: int  # lines in the document (a final line break ends the last line, it opens none)
    whole: bool  # no region was asked for: the whole document
    page: int | None = None  # PATH#page=N: the PDF page asked for (lines first..last are it)
    pages: int = 0  # a PDF's page count (0: not a PDF)

    @property
    def text(self) -> str:
        """The region's text: a page as stored (form feeds left out), else its lines joined."""
        if self.page is not None:
            a, b = self.doc.pages[self.page - 1]
            return self.doc.body[a:b]
        return "\n".join(self.lines)


def region(con: apsw.Connection, target: str, context: int = 10) -> Region:
    """``PATH`` (the whole document), ``PATH:LINE`` (the line and ``context`` lines either side,
    cut at the document's ends) or ``PATH:START-END`` (an END past the last line means to the
    end). A line that does not exist, or END before START, is an ``InputError`` giving the
    document's lines. A name that contains ``:5`` itself is taken whole first."""
    if context < 0:
        raise InputError(f"context must be 0 lines or more, not {context}", "pass -C 0 or more")
    bounded(target)
    note, anchor = split_anchor(target)
    page = _PAGE_ANCHOR.match(anchor or "")
    if page is not None:  # paper.pdf#page=12, [[paper.pdf#page=12]]: a PDF's page
        if _is_link(target):  # a link's '#' always starts its anchor
            return page_region(find_document(con, note), int(page.group(1)))
        try:
            load(con, resolve(con, target))  # a file named so, '#page=12' and all, comes first
        except UnknownDocument:
            return page_region(find_document(con, note), int(page.group(1)))
    if anchor is not None and _is_link(target):  # a link names a heading
        return anchor_region(con, find_document(con, note), anchor)
    m = _LOCATION.match(target)
    try:
        doc, start, end = load(con, resolve(con, target)), None, None
    except UnknownDocument:
        if anchor is not None and not m:
            return anchor_region(con, find_document(con, note), anchor)
        start = end = None
        if not m:
            _check_line_part(con, target)
            doc = find_document(con, target)  # a name a typo away, or the error
        else:
            try:
                doc, start = find_document(con, m.group("path")), int(m.group("start"))
                end = int(m.group("end")) if m.group("end") else None
            except UnknownDocument:
                doc = find_document(con, target)  # a typo of a name with ':5' in it
    lines = _lines(doc)
    total = len(lines)
    valid = "line 1" if total == 1 else f"lines 1-{total}"
    if start is None:
        return Region(doc, 1, total, None, tuple(lines), total, True, pages=len(doc.pages))
    if not 1 <= start <= total:
        raise InputError(f"{doc.path} has {valid}, not {start}", f"give a line from 1 to {total}")
    if end is not None and end < start:
        raise InputError(
            f"{doc.path}:{start}-{end} is reversed; {doc.path} has {valid}",
            f"give START-END with START <= END, e.g. {doc.path}:{max(end, 1)}-{start}",
        )
    first, last = (start, end) if end is not None else (start - context, start + context)
    first, last = max(first, 1), min(last, total)
    return Region(
        doc,
        first,
        last,
        start if end is None else None,
        tuple(lines[first - 1 : last]),
        total,
        False,
        pages=len(doc.pages),
    )


def _check_line_part(con: apsw.Connection, target: str) -> None:
    """``Note.md:abc``, ``Note.md:12x``, ``Note.md:``: when no document is named so whole and the
    part before the last ':' names one (or one a typo away), the part after it is a line that is
    not a number: an ``InputError`` says so, instead of a typo of the whole name. A part after ':'
    with a space in it (``Meeting: notes``) is left to the name lookup."""
    path, sep, line = target.rpartition(":")
    if not sep or not path.strip() or any(ch.isspace() for ch in line):
        return
    try:
        doc = find_document(con, path)
    except InputError:
        return
    total = len(_lines(doc))
    first, last = min(3, total), min(5, total)  # an example that names lines the note has
    raise InputError(
        f"{target!r}: the part after ':' must be a line number, not {line!r}"
        if line
        else f"{target!r}: a line number must follow ':'",
        f"write PATH:LINE or PATH:START-END, e.g. {doc.path}:{first} or"
        f" {doc.path}:{first}-{last} (or {doc.path} for the whole note)",
    )


def _is_link(target: str) -> bool:
    """Is ``target`` a pasted wikilink or embed, ``[[...]]`` or ``![[...]]``?"""
    text = target.strip().removeprefix("!")
    return text.startswith("[[") and text.endswith("]]")


def split_anchor(name: str) -> tuple[str, str | None]:
    """A name and the heading or block it points at, as a link writes them:
    ``[[Settings#Spellcheck|spell]]`` and ``Settings#Spellcheck`` give ('Settings',
    'Spellcheck'), ``Note#^block`` ('Note', '^block'); a name without '#' comes back alone."""
    text = name.strip()
    if text.startswith("![[") and text.endswith("]]"):
        text = text[1:]
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2].split("|", 1)[0]
    note, sep, anchor = text.partition("#")
    return (note.strip(), anchor.strip() or None) if sep else (text.strip(), None)


_ITEM = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:[-*+]|\d{1,9}[.)])[ \t]")


def anchor_region(con: apsw.Connection, doc: DocRef, anchor: str) -> Region:
    """The lines ``anchor`` names in ``doc``: a heading's section (the heading line to the line
    before the next heading of the same or a higher level), or a block (``^id``: its paragraph
    or item, to the line holding the id), or an element by its id (``<a id="old-name">``, ``{
    #id }``: from its line). Headings match as Obsidian matches them (punctuation and case
    aside; ``Heading#Sub`` inside ``Heading``). ``line`` is the heading's line, or the block's
    first, or the element's."""
    from kbase.ingest.links import find_heading
    from kbase.records import Heading
    from kbase.text import line_of, line_starts

    lines = _lines(doc)
    total = len(lines)
    if anchor.startswith("^"):
        row = con.execute(
            "SELECT start_char FROM block_ids WHERE doc_id = ? AND block_id = ?",
            (doc.id, anchor[1:].strip()),
        ).fetchone()
        if row is None:
            known = [
                "^" + b
                for (b,) in con.execute(
                    "SELECT block_id FROM block_ids WHERE doc_id = ? ORDER BY start_char",
                    (doc.id,),
                )
            ]
            raise InputError(
                f"{doc.path} has no block {anchor}",
                f"its blocks: {_some(known)}" if known else "it has no block ids (^id)",
            )
        last = line_of(line_starts(doc.body), row[0])
        first = last
        if lines[last - 1].strip().startswith("^") and last > 1:
            first = last = last - 1  # an id on a line of its own names the block above it
        while (  # up to the block's first line: a list item is a block of its own
            first > 1
            and not _ITEM.match(lines[first - 1])
            and lines[first - 2].strip()
            and not lines[first - 2].lstrip().startswith("#")
        ):
            first -= 1
        return Region(doc, first, last, first, tuple(lines[first - 1 : last]), total, False)
    headings = [
        Heading(*row)
        for row in con.execute(
            "SELECT level, text, start_char, end_char, line, anchor FROM headings"
            " WHERE doc_id = ? ORDER BY seq",
            (doc.id,),
        )
    ]
    i = find_heading(anchor, headings)
    if i is None and (at := _element_line(con, doc, anchor)) is not None:
        # An element's id ('<a id="old-name"></a>'): from its line to the next heading, or the
        # section of the heading right after it (an old heading's anchor names the new one).
        after = [k for k, h in enumerate(headings) if h.line > at]
        if after and not any(s.strip() for s in lines[at : headings[after[0]].line - 1]):
            i = after[0]
            below = [h.line for h in headings[i + 1 :] if h.level <= headings[i].level]
        else:
            below = [headings[after[0]].line] if after else []
        last = below[0] - 1 if below else total
        while last > at and not lines[last - 1].strip():
            last -= 1
        return Region(doc, at, last, at, tuple(lines[at - 1 : last]), total, False)
    if i is None:
        raise InputError(
            f"{doc.path} has no heading {anchor!r}",
            f"its headings: {_some([h.text for h in headings])}"
            if headings
            else "it has no headings; name a line instead: PATH:LINE",
        )
    first = headings[i].line
    below = [h.line for h in headings[i + 1 :] if h.level <= headings[i].level]
    last = below[0] - 1 if below else total
    while last > first and not lines[last - 1].strip():
        last -= 1  # the blank lines before the next heading
    return Region(doc, first, last, first, tuple(lines[first - 1 : last]), total, False)


def _element_line(con: apsw.Connection, doc: DocRef, anchor: str) -> int | None:
    """The line of the element whose id (html_ids) is the one-part ``anchor``, as a Markdown
    link's '#id' names it (case aside), or None."""
    from kbase.text import line_of, line_starts

    wanted = anchor.lstrip("#").strip().lower()
    if not wanted or "#" in wanted:
        return None
    for html_id, start in con.execute(
        "SELECT html_id, start_char FROM html_ids WHERE doc_id = ? ORDER BY start_char",
        (doc.id,),
    ):
        if html_id.lower() == wanted:
            return line_of(line_starts(doc.body), start)
    return None


def _some(names: list[str], n: int = 8) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def _lines(doc: DocRef) -> list[str]:
    """A stored document's lines; a PDF's or canvas's without the form feeds that separate their
    pages or cards (each starts a line, so none is lost)."""
    lines = LINE_BREAK.split(doc.body)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the text ends with a line break: no line after it
    if doc.kind in ("pdf", "canvas"):
        lines = [ln.replace("\f", "") if "\f" in ln else ln for ln in lines]
    return lines


def page_region(doc: DocRef, page: int) -> Region:
    """Page ``page`` (1-based) of a PDF, as ``kbase show paper.pdf#page=12`` prints it: its lines
    (numbered as in the whole text) and its text."""
    if doc.kind != "pdf":
        raise InputError(
            f"{doc.path} is not a PDF: it has no pages", f"show a line instead: {doc.path}:LINE"
        )
    n = len(doc.pages)
    if not 1 <= page <= n:
        raise InputError(
            f"{doc.path} has {'page 1' if n == 1 else f'pages 1-{n}'}, not {page}",
            f"give a page from 1 to {n}",
        )
    lines = _lines(doc)
    a, b = doc.pages[page - 1]
    first = _line_at(doc.body, a)
    count = len(LINE_BREAK.findall(doc.body, a, b))
    last = max(first, first + count - 1) if b > a else first
    return Region(
        doc,
        first,
        last,
        None,
        tuple(lines[first - 1 : last]) if b > a else (),
        len(lines),
        False,
        page=page,
        pages=n,
    )


def _line_at(body: str, offset: int) -> int:
    return len(LINE_BREAK.findall(body, 0, offset)) + 1
