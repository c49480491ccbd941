"""Library access for the TUI, safe to use from worker threads. No Textual in here.

apsw connections may be shared across threads but not used by two at once, so every worker
borrows a whole ``KB`` from a ``KBPool`` for the length of its call: the keyword and the hybrid
search of one keystroke run side by side on two connections, and a superseded worker simply
finishes on its own ``KB`` and gives it back.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from kbase.records import Status
from kbase.text import LINE_BREAK, line_starts

MODES = ("keyword", "semantic", "hybrid")
SEARCH_LIMIT = 50
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")
WIKI_SCHEME = "kbase-note:"

KBFactory = Callable[[Path], Any]  # db path -> a kbase.api.KB (or anything with its methods)


def default_factory(path: Path):
    import kbase  # imported in the first worker thread, not before the first paint

    return kbase.open(path)


class KBPool:
    """``KB`` objects for worker threads: ``with pool.kb() as kb: ...`` lends one exclusively."""

    def __init__(self, db_path: Path, factory: KBFactory | None = None) -> None:
        self.db_path = Path(db_path)
        self._factory = factory or default_factory
        self._lock = threading.Lock()
        self._free: list[Any] = []
        self._all: list[Any] = []
        # Semantic and hybrid searches share one KB, one at a time: its in-memory copy of the
        # vectors (KB.vector_cache, ~80 MB for 50,000 chunks) and the model are loaded once.
        self._vector_lock = threading.Lock()
        self._vector_kb: Any = None

    @contextmanager
    def kb(self) -> Iterator[Any]:
        with self._lock:
            kb = self._free.pop() if self._free else None
        if kb is None:
            kb = self._factory(self.db_path)
            with self._lock:
                self._all.append(kb)
        try:
            yield kb
        finally:
            with self._lock:
                self._free.append(kb)

    @contextmanager
    def vector_kb(self) -> Iterator[Any]:
        """The KB for model and vector work; callers queue for it (a superseded search ends
        before the next one starts, and typing never waits: keyword searches use ``kb()``)."""
        with self._vector_lock:
            if self._vector_kb is None:
                self._vector_kb = self._factory(self.db_path)
                with self._lock:
                    self._all.append(self._vector_kb)
            yield self._vector_kb

    def size(self) -> int:
        with self._lock:
            return len(self._all)

    def close(self) -> None:
        """Close the connections nobody is using (a worker still running keeps its own)."""
        with self._lock:
            free, self._free = self._free, []
            if self._vector_kb is not None and self._vector_lock.acquire(blocking=False):
                free.append(self._vector_kb)
                self._vector_kb = None
                self._vector_lock.release()
            self._all = [kb for kb in self._all if kb not in free]
        for kb in free:
            try:
                kb.close()
            except Exception:
                pass


@dataclass(frozen=True)
class Location:
    """Something the preview can show: a note, optionally at a line or a heading."""

    path: str  # root-relative, as hits and links give it
    abspath: str | None = None  # exact file when known (hits); links only know ``path``
    line: int | None = None  # 1-based line in the stored body
    anchor: str | None = None  # a heading to scroll to when there is no line
    title: str = ""
    chunk_id: int | None = None  # the hit's chunk (search results), to highlight all of it
    span: tuple[int, int] | None = None  # that chunk's first and last line, once looked up
    page: int | None = None  # a PDF's page (the hit's): the preview shows that page

    @property
    def target(self) -> str:
        """What ``KB.document`` is asked for."""
        return self.abspath or self.path


@dataclass(frozen=True)
class BarFilters:
    """The filter bar: a path (folder or glob) to keep, ``-path`` entries to leave out, tags."""

    path: str = ""
    tags: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def parse(cls, path: str, tags: str) -> BarFilters:
        words = path.split()
        keep = " ".join(w for w in words if not w.startswith("-"))
        exclude = tuple(w[1:] for w in words if w.startswith("-") and len(w) > 1)
        return cls(keep, tuple(t for t in re.split(r"[\s,]+", tags.strip()) if t), exclude)

    def __bool__(self) -> bool:
        return bool(self.path or self.tags or self.exclude)

    def describe(self) -> str:
        parts = [f"path:{self.path}"] if self.path else []
        parts += [f"-path:{e}" for e in self.exclude]
        parts += [f"#{t.lstrip('#')}" for t in self.tags]
        return " ".join(parts)

    def kwargs(self) -> dict:
        return {"path": self.path or None, "tags": list(self.tags), "exclude": list(self.exclude)}


def sibling_abspath(note: Location, path: str) -> str | None:
    """The absolute path of ``path`` in the same root as ``note`` (links resolve within a root)."""
    if not note.abspath or not note.path:
        return None
    rel = note.path.replace("/", os.sep)
    if not note.abspath.endswith(rel):
        return None
    return note.abspath[: len(note.abspath) - len(rel)] + path.replace("/", os.sep)


_PAGE_ANCHOR = re.compile(r"(?:^|&)page=(\d+)")


def preview_page(doc, location: Location) -> int | None:
    """The page of a PDF (``doc``, a DocRef) the preview shows for ``location``: the hit's page,
    else the one its line is on, else a link's ``#page=N``, else the first; None for other
    documents."""
    n = len(doc.pages)
    if not n:
        return None
    page = location.page
    if page is None and location.line:
        starts = line_starts(doc.body)
        page = doc.page_at(starts[min(location.line, len(starts)) - 1])
    if page is None and location.anchor:
        m = _PAGE_ANCHOR.search(location.anchor)
        page = int(m.group(1)) if m else None
    return min(max(page or 1, 1), n)


def is_markdown(path: str) -> bool:
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def lines_before(text: str, offset: int) -> int:
    """Line breaks in ``text[:offset]`` (LF, CRLF or CR, as kbase counts them)."""
    return len(LINE_BREAK.findall(text, 0, offset))


_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n|]+?)(?:\|([^\[\]\n]*?))?\]\]")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def wikilinks_to_markdown(text: str) -> str:
    """``[[Note#Heading|label]]`` -> ``[label](kbase-note:Note%23Heading)`` outside code, so the
    Markdown widget makes them clickable, and a callout's ``> [!info]+ Title`` line -> ``>
    **Title**`` (``> [!NOTE]`` -> ``> **Note**``), as search snippets show it: the Markdown
    widget would print the marker. Line count and line order are unchanged."""
    out, fence = [], None
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
        elif fence is not None and m and m.group(1).startswith(fence):
            fence = None
        elif fence is None:
            if "[!" in line:
                line = _CALLOUT.sub(_callout_sub, line, count=1)
            if "[[" in line:
                line = _WIKILINK.sub(_wikilink_sub, _protect_code_spans(line)).replace(
                    "\x01\x01", "[["
                )
        out.append(line)
    return "".join(out)


_CALLOUT = re.compile(
    r"^(?P<quote>[ \t]*(?:>[ \t]*)+)\[!(?P<kind>[^\]\r\n]+)\][+-]?[ \t]*(?P<title>[^\r\n]*)"
)


def _callout_sub(m: re.Match) -> str:
    kind = m.group("kind").strip()
    title = m.group("title").strip() or kind[:1].upper() + kind[1:].lower()
    return f"{m.group('quote')}**{title}**"


def _protect_code_spans(line: str) -> str:
    """Hide the ``[[`` inside `code spans` (restored after the substitution)."""
    return re.sub(r"`[^`\n]*`", lambda m: m.group(0).replace("[[", "\x01\x01"), line)


def _wikilink_sub(m: re.Match) -> str:
    target, label = m.group(2).strip(), (m.group(3) or "").strip()
    shown = label or target.replace("#^", " ^").replace("#", " › ")
    shown = shown.replace("[", "(").replace("]", ")")
    return f"[{shown}]({WIKI_SCHEME}{quote(target, safe='')})"


def link_from_href(href: str) -> tuple[str, str | None] | None:
    """(note name, anchor) for a link clicked in the preview, or None for an outside URL."""
    if href.startswith(WIKI_SCHEME):
        name = unquote(href[len(WIKI_SCHEME) :])
    elif re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href):
        return None  # http:, mailto:, ...
    else:
        name = unquote(href)
    name, _, anchor = name.partition("#")
    return name, (anchor or None)


def highlight_spans(snippet: str, highlights) -> list[tuple[int, int]]:
    """The highlight ranges that lie inside ``snippet``, sorted and clipped."""
    out = []
    for start, end in highlights or ():
        start, end = max(0, int(start)), min(len(snippet), int(end))
        if start < end:
            out.append((start, end))
    return sorted(out)


def clip_snippet(
    snippet: str, spans: list[tuple[int, int]], width: int = 140
) -> tuple[str, list[tuple[int, int]]]:
    """At most ``width`` characters of ``snippet``, starting a little before the first match."""
    if len(snippet) <= width:
        return snippet, spans
    first = spans[0][0] if spans else 0
    start = max(0, min(first - 30, len(snippet) - width))
    if start:
        space = snippet.find(" ", start, first if first > start else start + 20)
        start = space + 1 if space >= 0 else start
    end = start + width
    for a, b in spans:  # never cut a match in two
        if a < end < b:
            end = b
    text = snippet[start:end]
    prefix = "…" if start > 0 and not text.startswith("…") else ""
    suffix = "…" if end < len(snippet) else ""
    shift = len(prefix) - start
    kept = [(a + shift, min(b, end) + shift) for a, b in spans if a >= start and a < end]
    return prefix + text + suffix, kept


def shorten_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` terminal cells, shortened from the left, where folders matter
    least: whole leading folders give way to '…/' ('…/Information Security/Public Key
    Cryptography.md:1'); a file name that alone is too long loses its start."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(path) <= width:
        return path
    parts = path.split("/")
    for i in range(1, len(parts)):
        tail = "…/" + "/".join(parts[i:])
        if cell_len(tail) <= width:
            return tail
    if width < 2:
        return "…"[: max(width, 0)]
    return "…" + set_cell_size(parts[-1][::-1], width - 1)[::-1]  # the end of the file name


def embedding_coverage(status: Status) -> str:
    """'embedded 40/50 (80%)', or that there are no embeddings."""
    if not status.embedded_chunks:
        return "no embeddings (keyword search only)"
    return (
        f"embedded {status.embedded_chunks:,}/{status.chunks:,}"
        f" ({100 * status.embedded_chunks // status.chunks}%)"
    )
