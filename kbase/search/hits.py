"""Ranked lists' records and their hydration into Hits: snippet, line, staleness."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from kbase.errors import InputError
from kbase.ingest.markup import defined_labels, may_have_shortcuts, only_definitions, plain
from kbase.records import Hit
from kbase.search import cjk
from kbase.search import snippet as snippets
from kbase.store.db import located_root
from kbase.text import LINE_BREAK


@dataclass(frozen=True)
class Ranked:
    """A document in one ranked list, with the chunk that speaks for it."""

    doc_id: int
    chunk_id: int
    score: float  # higher is better; falls with rank
    matched: int  # chunks of the document that matched
    match: str | None = None  # the FTS5 expression that matched (to highlight the snippet)
    explain: dict = field(default_factory=dict)  # how the score was made


LENGTH_FREE_CHUNKS = 32


# How many more documents than asked each list considers before the length prior re-orders them.
RERANK_SLACK = 20

# How deep every ranked list (keyword tiers and passes, semantic, their fusion) looks, whatever
# the limit asked (a larger limit looks as deep as it asks): so that the first hits do not depend
# on the limit. A page of 3 and a page of 50 are cut from the same candidates, and the keyword
# list's "some words" pass runs when fewer than this many notes hold every word, not fewer than
# the page (with limit 3, three notes holding every word used to skip it: issue 32).
CANDIDATES = 100


def length_units(chunks: int) -> float:
    """How long a note is, for the length prior: log of its chunks past LENGTH_FREE_CHUNKS."""
    return math.log(chunks / LENGTH_FREE_CHUNKS) if chunks > LENGTH_FREE_CHUNKS else 0.0


def chunk_counts(con: apsw.Connection, doc_ids: list[int]) -> dict[int, int]:
    """How many chunks each document has (their count, not the matching ones)."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    return dict(
        con.execute(
            f"SELECT doc_id, max(seq) + 1 FROM chunks WHERE doc_id IN ({marks}) GROUP BY doc_id",
            doc_ids,
        ).fetchall()
    )


# A MATCH expression holding a phrase of several words ('"the value"'): FTS5 checks the
# phrase's positions at every row that holds all of its words, so one statement over all of its
# matches costs more than one per row or range; for any other (words, prefixes) one statement
# for a whole page costs less, and much less for a prefix, which FTS5 expands over the whole
# vocabulary in every statement (BENCHMARKS.md section 24).
_SEVERAL_WORDS = re.compile(r'"(?:[^"]|"")*[^\w"*](?:[^"]|"")*"')


def definitions_alone(con: apsw.Connection, chunk_ids: Iterable[int]) -> set[int]:
    """Those of ``chunk_ids`` that are link reference definitions alone ('[label]: url' lines:
    their labels' words match, and a person reads nothing there; MkDocs sites end sections
    with them), in one statement."""
    ids = list(chunk_ids)
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    return {
        cid
        for cid, text in con.execute(
            "SELECT c.id, substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
            f" FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.id IN ({marks})",
            ids,
        )
        if only_definitions(text or "")
    }


def readable_first(con: apsw.Connection, ranked: list[int]) -> int | None:
    """The first of ``ranked`` (chunk ids, best first) that is not link reference definitions
    alone (``definitions_alone``), or None when all are."""
    for at in range(0, len(ranked), 32):  # (the first is nearly always readable)
        part = ranked[at : at + 32]
        unread = definitions_alone(con, part)
        for cid in part:
            if cid not in unread:
                return cid
    return None


def one_pass(match: str) -> bool:
    """Is one statement over all of ``match``'s rows cheaper than one per row (see above)?"""
    return _SEVERAL_WORDS.search(match) is None


def highlighted(
    con: apsw.Connection, wanted: Iterable[tuple[str | None, int]]
) -> dict[tuple[str, int], str | None]:
    """chunks_fts's highlight() (hit's markers) of each (match, chunk id) of ``wanted``, for the
    expressions that ``one_pass`` finds cheaper in one statement for all their chunks (a page's
    hits), None for a chunk the expression does not match; the others are left to ``hit``."""
    by_match: dict[str, list[int]] = {}
    for match, chunk_id in wanted:
        if match is not None and one_pass(match) and not cjk.is_pair_match(match):
            by_match.setdefault(match, []).append(chunk_id)
    out: dict[tuple[str, int], str | None] = {}
    for match, ids in by_match.items():
        if len(ids) < 2:
            continue  # (hit's own statement for one row)
        marks = ",".join("?" * len(ids))
        # ``+rowid``: the filter stays out of FTS5, which walks the matches once
        for rowid, marked in con.execute(
            "SELECT rowid, highlight(chunks_fts, 0, char(2), char(3)) FROM chunks_fts"
            f" WHERE chunks_fts MATCH ? AND +rowid IN ({marks})",
            [match, *ids],
        ):
            out[(match, rowid)] = marked
        for chunk_id in ids:
            out.setdefault((match, chunk_id), None)
    return out


def hit(
    con: apsw.Connection,
    doc_id: int,
    chunk_id: int,
    score: float,
    n: int,
    match: str | None = None,
    explain: dict | None = None,
    page_marks: Mapping[tuple[str, int], str | None] | None = None,
) -> Hit:
    """A Hit for a document and its chunk: a reading snippet (Markdown syntax removed) around the
    first match of ``match`` that stays visible, if any, and that match's line in the file.
    ``page_marks``: highlighted's answers for the page, where it has this one's."""
    pair_match = match if match is not None and cjk.is_pair_match(match) else None
    if pair_match is not None:
        match = None  # chunks_cjk has no highlight(): marked below from the chunk's text
    known = page_marks is not None and match is not None and (match, chunk_id) in page_marks
    row = con.execute(
        """SELECT d.path, r.path, r.relpath, d.title, d.size, d.mtime_ns, d.hash, d.kind, c.line,
                  c.start_char, c.heading_path,
                  substr(d.body, c.start_char + 1, c.end_char - c.start_char),
                  CASE WHEN ?1 IS NOT NULL THEN
                      (SELECT highlight(chunks_fts, 0, char(2), char(3)) FROM chunks_fts
                       WHERE chunks_fts MATCH ?1 AND rowid = c.id) END,
                  (SELECT group_concat(tag, ' ') FROM tags WHERE doc_id = d.id)
           FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
                JOIN roots AS r ON r.id = d.root_id
           WHERE c.id = ?2""",
        (None if known else match, chunk_id),
    ).fetchone()
    (
        path,
        root,
        relpath,
        title,
        size,
        mtime_ns,
        digest,
        kind,
        line,
        start,
        heading_path,
        text,
        marked,
        tags,
    ) = row
    if known:
        assert page_marks is not None and match is not None
        marked = page_marks[(match, chunk_id)]
    ranges: list[tuple[int, int]] = []
    if pair_match is not None:
        marked = cjk.highlighted(con, chunk_id, text, pair_match)
    if marked:
        unmarked, ranges = snippets.unmark(marked)
        if unmarked != text:  # cannot happen with external content; never show wrong highlights
            ranges = []
    markdown = kind in ("markdown", "canvas")
    # A shortcut reference '[text]' shows its text where the note defines its label.
    labels = (
        note_labels(con, doc_id, digest, size)
        if markdown and may_have_shortcuts(text)
        else frozenset()
    )
    # The snippet starts at the passage (sentence, line) from which it shows the most of the
    # query's words, and its line is that of the passage in view that holds the most of them.
    shown = None
    if ranges and len(text) <= snippets.RENDER_WHOLE:
        shown = snippets.Shown.of(text, markdown, labels)
    focus, line_at = snippets.focus(text, ranges, shown) or (None, None)
    snippet, highlights, anchor = snippets.snippet(
        text, ranges, markdown=markdown, focus=focus, anchor_at=line_at, shown=shown, labels=labels
    )
    if markdown and text.strip() and (not snippet.strip() or (ranges and not highlights)):
        # All of the passage renders to nothing (an HTML comment, a bare image or tag), or every
        # match is in what rendering hides (a link's destination, a definition line): show the
        # source, from the line of the first match (rust-book-ja keeps the English original in
        # comments; mdBook's definitions hold the words of the pages they link to).
        if ranges:
            focus = line_at = text.rfind("\n", 0, min(ranges)[0]) + 1
        snippet, highlights, anchor = snippets.snippet(
            text, ranges, markdown=False, focus=focus, anchor_at=line_at
        )
    page, card = segment_at(con, doc_id, kind, start + anchor)
    root = located_root(root, relpath, con.filename)  # moved along with the index?
    abspath = os.path.join(root, path) if path else root
    stale, missing = disk_state(abspath, size, mtime_ns)
    return Hit(
        doc_id=doc_id,
        path=path or Path(root).name,
        abspath=abspath,
        title=title,
        score=score,
        chunk_id=chunk_id,
        line=line + len(LINE_BREAK.findall(text, 0, anchor)),
        heading_path=plain_headings(heading_path) if markdown else heading_path,
        snippet=snippet,
        highlights=highlights,
        matched_chunks=n,
        tags=tuple((tags or "").split()),
        stale=stale,
        missing=missing,
        explain=explain or {},
        page=page,
        card=card,
    )


# A note's link labels (markup.defined_labels: what makes its '[text]' links), by the sha256 of
# its file, for this many notes: a long-lived process (kbase mcp, kbase browse) reads a note's
# text for them once. A note over LABELS_MAX_BYTES is not read for them (its '[text]' shows as
# written): a hit on it would read all of it.
_LABELS: dict[str, frozenset[str]] = {}
LABELS_NOTES = 256
LABELS_MAX_BYTES = 1024 * 1024


def note_labels(con: apsw.Connection, doc_id: int, digest: str, size: int) -> frozenset[str]:
    """The link labels that document ``doc_id`` (of file hash ``digest``, ``size`` bytes)
    defines."""
    found = _LABELS.get(digest)
    if found is None:
        if size > LABELS_MAX_BYTES:
            return frozenset()
        row = con.execute("SELECT body FROM documents WHERE id = ?", (doc_id,)).fetchone()
        found = defined_labels(row[0]) if row else frozenset()
        if len(_LABELS) >= LABELS_NOTES:
            _LABELS.pop(next(iter(_LABELS)))
        _LABELS[digest] = found
    return found


def segment_at(
    con: apsw.Connection, doc_id: int, kind: str, offset: int
) -> tuple[int | None, str | None]:
    """(page, card) at ``offset`` of a document's body: a PDF's 1-based page, a canvas's card id;
    None for what the document does not have."""
    if kind == "pdf":
        row = con.execute(
            "SELECT max(page) FROM pages WHERE doc_id = ? AND start_char <= ?", (doc_id, offset)
        ).fetchone()
        return (row[0] if row else None), None
    if kind == "canvas":
        row = con.execute(
            "SELECT card_id FROM canvas_cards WHERE doc_id = ? AND start_char <= ?"
            " ORDER BY seq DESC LIMIT 1",
            (doc_id, offset),
        ).fetchone()
        return None, (row[0] if row else None)
    return None, None


def plain_headings(heading_path: str) -> str:
    """A heading path as read: 'Example **template**' shows as 'Example template'."""
    if not any(ch in heading_path for ch in "*_`[<~=%\\$"):
        return heading_path
    return " > ".join(plain(h) for h in heading_path.split(" > "))


def is_stale(abspath: str, size: int, mtime_ns: int) -> bool:
    """True when the file changed (or vanished) since it was indexed: one stat."""
    return disk_state(abspath, size, mtime_ns)[0]


def disk_state(abspath: str, size: int, mtime_ns: int) -> tuple[bool, bool]:
    """(stale, missing): the file changed or vanished since it was indexed, and whether it is
    gone (a moved vault: ``kbase roots move``); one stat."""
    try:
        st = os.stat(abspath)
    except OSError:
        return True, True
    return st.st_size != size or st.st_mtime_ns != mtime_ns, False


@dataclass(frozen=True)
class ChunkRef:
    """Where a chunk sits in its document: ``body[start:end]``, lines ``line`` to ``end_line``."""

    id: int
    doc_id: int
    seq: int
    start: int
    end: int
    line: int
    end_line: int
    heading_path: str
    kind: str


def chunk_ref(con: apsw.Connection, chunk_id: int) -> ChunkRef:
    row = con.execute(
        "SELECT id, doc_id, seq, start_char, end_char, line, end_line, heading_path, kind"
        " FROM chunks WHERE id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        raise InputError(f"no chunk {chunk_id} in the index", "it was replaced: search again")
    return ChunkRef(*row)
