"""All writes to the index. One document = one transaction."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING

import apsw

from kbase.embed import vectors
from kbase.ingest.columns import chunk_columns, field
from kbase.ingest.links import Resolver, anchor_ok
from kbase.ingest.parse import frontmatter_diagnostics, frontmatter_json
from kbase.records import Heading, ParsedDoc
from kbase.store import cjk_table
from kbase.text import line_of, line_starts, lines_of

if TYPE_CHECKING:
    from kbase.ingest.derive import Derived


def now_iso() -> str:
    """The time now, to the second, in ISO 8601 (UTC). Made once a second: each document written
    asks for it (30 us a call to make)."""
    global _now
    second = int(time.time())
    if second != _now[0]:
        _now = (second, dt.datetime.fromtimestamp(second, dt.UTC).isoformat())
    return _now[1]


_now = (-1, "")  # (the second, as now_iso gives it)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fts_headings(title: str, heading_path: str) -> str:
    """The heading path as chunks_fts indexes it: without a first heading that repeats the title
    (the same expression as the chunks_fts_content view's, which FTS5 reads to delete the row)."""
    if heading_path == title:
        return ""
    if heading_path.startswith(title + " > "):
        return heading_path[len(title) + 3 :]
    return heading_path


def fts_names(
    con: apsw.Connection,
    doc_id: int,
    title: str,
    path: str,
    has_aliases: bool = True,
    pdf_names: str = "",
) -> str:
    """The title column of a document's chunks_fts rows, as the chunks_fts_content view makes it:
    the title, the file name without its extension unless it is the title in other (ASCII) case,
    then the aliases as stored (written before). Here in Python: the view's nested subqueries
    took 50-100 us a document (tests/test_ingest.py compares the two)."""
    base = path[path.rfind("/") + 1 :]
    stem = base[: base.rfind(".")] if base.find(".") > 0 else base
    names = title
    if stem and _sql_lower(stem) != _sql_lower(title):
        names += " " + stem
    if has_aliases:
        (aliases,) = con.execute(
            "SELECT group_concat(alias, ' ') FROM aliases WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        if aliases is not None:
            names += " " + aliases
    if pdf_names:  # a PDF's metadata (pdf_info.names), written before
        names += " " + pdf_names
    return names


def _sql_lower(text: str) -> bytes:
    """SQLite's lower() without ICU: ASCII letters only."""
    return text.encode("utf-8", "surrogatepass").lower()


@dataclass(frozen=True)
class FileRow:
    """Where a document's text came from: its root, its path there, and the file as it was read."""

    root_id: int
    path: str
    size: int
    mtime_ns: int
    hash: str
    encoding: str


def write_document(
    con: apsw.Connection,
    derived: Derived,
    file: FileRow,
    *,
    doc_id: int | None = None,
    savepoint: bool = True,
) -> int:
    """Insert (``doc_id`` None) or replace one document with everything derived from it, in one
    transaction (or savepoint). ``savepoint=False``: in the caller's transaction, which must roll
    back if this raises (kbase.indexer.pipeline does so; a savepoint per document costs a tenth of
    an index run)."""
    doc, chunks, diagnostics = derived.doc, derived.chunking.chunks, derived.chunking.diagnostics
    links, block_ids, hashes = derived.links, derived.block_ids, derived.hashes
    html_ids = derived.html_ids
    root_id, path, size, mtime_ns, hash, encoding = (
        file.root_id,
        file.path,
        file.size,
        file.mtime_ns,
        file.hash,
        file.encoding,
    )
    text = doc.text
    values = (
        doc.kind,
        doc.title,
        size,
        mtime_ns,
        hash,
        encoding,
        frontmatter_json(doc.frontmatter),
        doc.body_start,
        doc.date,
        now_iso(),
        text,
    )
    old_vectors: dict[bytes, bytes] = {}
    with con if savepoint else contextlib.nullcontext():
        if doc_id is None:
            con.execute(
                "INSERT INTO documents (kind, title, size, mtime_ns, hash, encoding, frontmatter,"
                " body_start, date, indexed_at, body, root_id, path)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                values + (root_id, path),
            )
            doc_id = con.last_insert_rowid()
        else:
            # Vectors of chunks that come back unchanged are kept (no second embedding).
            old_vectors = vectors.vectors_of(con, doc_id)
            remove_keyword_rows(con, doc_id)
            # The update trigger removes the old chunks (and their FTS rows and vectors) first.
            con.execute(
                "UPDATE documents SET kind=?, title=?, size=?, mtime_ns=?, hash=?, encoding=?,"
                " frontmatter=?, body_start=?, date=?, indexed_at=?, body=? WHERE id=?",
                values + (doc_id,),
            )
            for table in DERIVED_TABLES:
                con.execute(f"DELETE FROM {table} WHERE doc_id = ?", (doc_id,))
            con.execute("DELETE FROM links WHERE doc_id = ?", (doc_id,))
        con.executemany(
            "INSERT OR IGNORE INTO tags (doc_id, tag, source) VALUES (?,?,?)",
            [(doc_id, tag, source) for tag, source in doc.tags],
        )
        con.executemany(
            "INSERT OR IGNORE INTO aliases (doc_id, alias) VALUES (?,?)",
            [(doc_id, a) for a in doc.aliases],
        )
        pdf_names = _write_segments(con, doc_id, doc)  # before the keyword rows (names)
        # The ids SQLite would choose (max + 1 each), given here: with RETURNING, apsw's executemany
        # took 30 us a row instead of 2.
        (first,) = con.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()
        ids = range(first, first + len(chunks))
        # Rows are made one at a time here and below (generators), from the chunks' columns: a
        # canvas of 1,000,000 cards has as many chunks, and a list of rows, or a Chunk a row,
        # held hundreds of MB.
        cols = chunk_columns(chunks)
        starts, ends, paths = cols.column("start"), cols.column("end"), cols.column("heading_path")
        con.executemany(
            "INSERT INTO chunks (id, doc_id, seq, start_char, end_char, line, end_line,"
            " heading_path, kind, tokens, flags, embed_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            zip(
                ids,
                repeat(doc_id),
                *map(cols.column, ("seq", "start", "end", "line", "end_line", "heading_path")),
                *map(cols.column, ("kind", "tokens", "flags")),
                hashes,
            ),
        )
        # The keyword index rows, with exactly the values of the chunks_fts_content view (the
        # delete trigger reads them from there).
        if chunks:
            title = fts_names(con, doc_id, doc.title, path, bool(doc.aliases), pdf_names)
            headings = partial(fts_headings, doc.title)

            def rows():
                return zip(
                    ids,
                    repeat(title),
                    map(headings, paths),
                    map(text.__getitem__, map(slice, starts, ends)),
                )

            con.executemany(
                "INSERT INTO chunks_fts (rowid, title, headings, body) VALUES (?, ?, ?, ?)", rows()
            )
            # Headings are lines of the text: a document without a run has no row to write (one
            # search instead of three a chunk, which took a tenth of the writer's time).
            if cjk_table.has_runs(text) or cjk_table.has_runs(title):
                cjk_table.write_rows(con, rows())
        if old_vectors:
            vectors.copy_vectors(con, old_vectors, list(zip(ids, hashes)))
        diagnostics = [*frontmatter_diagnostics(doc), *diagnostics]
        line = _line_finder(text)
        # Links start unresolved; resolve_links() settles them once the whole root is known.
        # Row by row from the columns: a million links' rows are never held at once.
        con.executemany(
            "INSERT INTO links (doc_id, start_char, end_char, line, kind, embed, target, anchor,"
            " alias) VALUES (?,?,?,?,?,?,?,?,?)",
            zip(
                repeat(doc_id),
                links.starts,
                links.ends,
                lines_of(text, links.starts),
                links.kinds(),
                links.embeds(),
                links.target_column(),
                links.anchors,
                links.aliases,
            ),
        )
        con.executemany(
            "INSERT OR IGNORE INTO block_ids (doc_id, block_id, start_char, end_char)"
            " VALUES (?,?,?,?)",
            [(doc_id, bid, a, b) for bid, a, b in block_ids],
        )
        con.executemany(
            "INSERT OR IGNORE INTO html_ids (doc_id, html_id, start_char, end_char)"
            " VALUES (?,?,?,?)",
            [(doc_id, hid, a, b) for hid, a, b in html_ids],
        )
        con.executemany(
            "INSERT INTO diagnostics (doc_id, kind, start_char, end_char, line, detail)"
            " VALUES (?,?,?,?,?,?)",
            [(doc_id, d.kind, d.start, d.end, line(d.start), d.detail) for d in diagnostics],
        )
        con.executemany(
            "INSERT INTO headings (doc_id, seq, level, text, start_char, end_char, line, anchor)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [
                (doc_id, i, h.level, h.text, h.start, h.end, h.line, h.anchor)
                for i, h in enumerate(doc.headings)
            ],
        )
    return doc_id


# Rows derived from a document, replaced whenever it is written again.
DERIVED_TABLES = (
    "tags",
    "aliases",
    "headings",
    "diagnostics",
    "block_ids",
    "html_ids",
    "pages",
    "pdf_info",
    "canvas_cards",
    "canvas_edges",
)
PDF_INFO_COLUMNS = (
    "title",
    "author",
    "subject",
    "keywords",
    "creator",
    "producer",
    "created",
    "modified",
)


# canvas_cards' columns after doc_id, as Card's fields
CARD_COLUMNS = "seq id kind start end file subpath url x y width height color".split()


def _write_segments(con: apsw.Connection, doc_id: int, doc: ParsedDoc) -> str:
    """A PDF's pages and document information, a canvas's cards and edges; returns what the
    keyword index's title column adds (pdf_info.names)."""
    if doc.kind == "pdf":
        from kbase.ingest.pdf import searchable_names

        con.executemany(
            "INSERT INTO pages (doc_id, page, start_char, end_char) VALUES (?,?,?,?)",
            ((doc_id, n, a, b) for n, (a, b) in enumerate(doc.segments, 1)),
        )
        info = doc.pdf or {}
        names = searchable_names(info)
        con.execute(
            "INSERT INTO pdf_info (doc_id, pages, text_pages, encrypted, "
            + ", ".join(PDF_INFO_COLUMNS)
            + ", names) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc_id,
                info.get("pages", len(doc.segments)),
                info.get("text_pages", len(doc.segments)),
                int(bool(info.get("encrypted"))),
                *(info.get(k) for k in PDF_INFO_COLUMNS),
                names,
            ),
        )
        return names
    if doc.kind == "canvas":
        cards = doc.cards
        con.executemany(
            "INSERT INTO canvas_cards (doc_id, seq, card_id, kind, start_char, end_char, file,"
            " subpath, url, x, y, width, height, color) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            zip(repeat(doc_id), *(field(cards, n) for n in CARD_COLUMNS)),
        )
        edges = doc.edges
        con.executemany(
            "INSERT INTO canvas_edges (doc_id, seq, edge_id, from_card, to_card, label)"
            " VALUES (?,?,?,?,?,?)",
            zip(
                repeat(doc_id),
                range(len(edges)),
                *(field(edges, n) for n in ("id", "from_id", "to_id", "label")),
            ),
        )
    return ""


def _line_finder(text: str) -> Callable[[int], int]:
    """offset -> 1-based line, in time linear in the text for all the offsets of a document
    (links, diagnostics): without a CR, offsets in order count the LFs since the one before (in
    C); else, or out of order, the line table (built on first use: most documents have no link).
    Counting from the text's start for each of a million links did not end in ten minutes."""
    last = [0, 1]  # the offset asked before, and its line
    table: list[list[int]] = []
    lf_only = "\r" not in text  # once: each link's own look was itself a scan of the text

    def line(offset: int) -> int:
        pos, n = last
        if offset >= pos and not table and lf_only:
            n += text.count("\n", pos, offset)
            last[:] = [offset, n]
            return n
        if not table:
            table.append(line_starts(text))
        return line_of(table[0], offset)

    return line


_PAGE_ANCHOR = re.compile(r"(?:^|&)page=(\d+)(?:&|$)")


def page_anchor_ok(anchor: str, pages: int) -> int | None:
    """1/0: ``page=N`` (Obsidian's PDF anchor, maybe with '&selection=...' after it) names a page
    the PDF has; None for other anchors (nothing to check them against)."""
    m = _PAGE_ANCHOR.search(anchor.lstrip("#"))
    if m is None:
        return None
    return int(1 <= int(m.group(1)) <= pages)


def touch_document(con: apsw.Connection, doc_id: int, size: int, mtime_ns: int) -> None:
    """The file's content is unchanged (same hash): remember its new stat so it costs a stat next
    time."""
    with con:
        con.execute("UPDATE documents SET size=?, mtime_ns=? WHERE id=?", (size, mtime_ns, doc_id))


def move_document(
    con: apsw.Connection, doc_id: int, root_id: int, path: str, size: int, mtime_ns: int
) -> None:
    """A renamed file: same content, new path; chunks and everything derived from them stay."""
    with con:
        con.execute(
            "UPDATE documents SET root_id=?, path=?, size=?, mtime_ns=? WHERE id=?",
            (root_id, path, size, mtime_ns, doc_id),
        )


def delete_document(con: apsw.Connection, doc_id: int) -> None:
    with con:
        remove_keyword_rows(con, doc_id)
        con.execute("DELETE FROM documents WHERE id = ?", (doc_id,))


def remove_keyword_rows(con: apsw.Connection, doc_id: int) -> None:
    """FTS5's 'delete' of a document's keyword rows (chunks_fts, chunks_cjk) with the values they
    were written with, before its chunks go: the text read once, each chunk's sliced from it. The
    chunks' delete trigger then finds no row to remove; through the view it read the whole text
    for each chunk (a 3.8 MB note of 4,000 chunks: 12 s more to re-index, quadratic)."""
    row = con.execute("SELECT body FROM documents WHERE id = ?", (doc_id,)).fetchone()
    if row is None:
        return
    (body,) = row
    chunks = con.execute(
        "SELECT c.id, c.start_char, c.end_char, v.title, v.headings,"
        " EXISTS (SELECT 1 FROM chunks_cjk_docsize WHERE id = c.id)"
        " FROM chunks AS c JOIN chunks_fts_content AS v ON v.id = c.id WHERE c.doc_id = ?",
        (doc_id,),
    ).fetchall()
    if not chunks:
        return

    def text(start: int, end: int) -> str:  # substr(body, start + 1, end - start), as the view
        return body[max(start, 0) : max(end, start, 0)] if end > 0 else ""

    con.executemany(
        "INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)"
        " VALUES ('delete', ?, ?, ?, ?)",
        ((cid, title, headings, text(a, b)) for cid, a, b, title, headings, _ in chunks),
    )
    con.executemany(
        "INSERT INTO chunks_cjk (chunks_cjk, rowid, body, title, headings)"
        " VALUES ('delete', ?, ?, ?, ?)",
        (
            (cid, *map(cjk_table.pairs_function, (text(a, b), title, headings)))
            for cid, a, b, title, headings, cjk in chunks
            if cjk
        ),
    )


def ensure_root(con: apsw.Connection, path: str) -> int:
    with con:
        row = con.execute("SELECT id FROM roots WHERE path = ?", (path,)).fetchone()
        if row:
            return row[0]
        con.execute(
            "INSERT INTO roots (path, relpath, added_at) VALUES (?, ?, ?)",
            (path, relpath_from_db(path, con.filename), now_iso()),
        )
        return con.last_insert_rowid()


def relpath_from_db(root: str, db_path: str | os.PathLike[str]) -> str | None:
    """The root relative to the index's folder (None across drives or for in-memory indexes)."""
    try:
        return os.path.relpath(root, os.path.dirname(os.path.abspath(db_path))) if db_path else None
    except ValueError:
        return None


def absorb_roots(
    con: apsw.Connection, outer_id: int, outer: str, inner: list[tuple[int, str]]
) -> None:
    """Roots inside a new outer root become part of it: their documents move, nothing is re-read."""
    with con:
        for root_id, path in inner:
            prefix = path[len(outer) + 1 :]
            con.execute(
                "UPDATE documents SET root_id = ?,"
                " path = ? || CASE WHEN path = '' THEN '' ELSE '/' || path END"
                " WHERE root_id = ?",
                (outer_id, prefix, root_id),
            )
            con.execute("DELETE FROM roots WHERE id = ?", (root_id,))


def finish_root(con: apsw.Connection, root_id: int) -> None:
    with con:
        con.execute("UPDATE roots SET last_indexed_at = ? WHERE id = ?", (now_iso(), root_id))


def set_attachments(con: apsw.Connection, root_id: int, prefix: str, paths: Iterable[str]) -> bool:
    """Record the attachments under ``prefix`` of a root; True if the set changed."""
    where = "root_id = ?1" + (
        " AND (path = ?2 OR substr(path, 1, length(?2) + 1) = ?2 || '/')" if prefix else ""
    )
    args = (root_id, prefix) if prefix else (root_id,)
    old = {p for (p,) in con.execute(f"SELECT path FROM attachments WHERE {where}", args)}
    new = set(paths)
    if old == new:
        return False
    with con:
        con.executemany(
            "DELETE FROM attachments WHERE root_id = ? AND path = ?",
            [(root_id, p) for p in old - new],
        )
        con.executemany(
            "INSERT INTO attachments (root_id, path) VALUES (?, ?)",
            [(root_id, p) for p in new - old],
        )
    return True


def resolve_links(con: apsw.Connection, root_id: int, doc_ids: Iterable[int] | None = None) -> int:
    """Resolve the links of a root with Obsidian's rules; returns how many rows changed.

    With ``doc_ids``, only links from or to those documents are looked at (enough when no note
    appeared, vanished or moved and no alias changed); otherwise every link of the root.
    """
    if doc_ids is not None:
        doc_ids = list(doc_ids)
        if not doc_ids:
            return 0  # nothing changed in the root: no link can have changed either
    paths = dict(
        con.execute("SELECT path, id FROM documents WHERE root_id = ?", (root_id,)).fetchall()
    )
    files = list(paths) + [
        p for (p,) in con.execute("SELECT path FROM attachments WHERE root_id = ?", (root_id,))
    ]
    aliases: dict[str, list[str]] = {}
    for path, alias in con.execute(
        "SELECT d.path, a.alias FROM aliases a JOIN documents d ON d.id = a.doc_id"
        " WHERE d.root_id = ?",
        (root_id,),
    ):
        aliases.setdefault(path, []).append(alias)
    resolver = Resolver(files, aliases)
    sql = (
        "SELECT l.id, s.path, l.target, l.anchor, l.target_id, l.target_path, l.anchor_ok,"
        " l.kind FROM links l JOIN documents s ON s.id = l.doc_id WHERE s.root_id = ?"
    )
    args: list = [root_id]
    if doc_ids is not None:
        ids = doc_ids
        marks = ",".join("?" * len(ids))
        sql += f" AND (l.doc_id IN ({marks}) OR l.target_id IN ({marks}))"
        args += ids + ids
    headings: dict[int, list[Heading]] = {}
    blocks: dict[int, list[str]] = {}
    element_ids: dict[int, frozenset[str]] = {}  # the elements' ids (html_ids), lowercased
    # A PDF's anchors are pages ('#page=3'); a canvas has none kbase can check.
    page_counts = dict(
        con.execute(
            "SELECT d.id, p.pages FROM documents AS d JOIN pdf_info AS p ON p.doc_id = d.id"
            " WHERE d.root_id = ?",
            (root_id,),
        ).fetchall()
    )
    other_kinds = {
        i
        for (i,) in con.execute(
            "SELECT id FROM documents WHERE root_id = ? AND kind = 'canvas'", (root_id,)
        )
    }
    # Read row by row, the changes kept in columns: a note of a million links held its million
    # rows, and their changes, as tuples (hundreds of MB).
    changed_ids, changed_tids, changed_tps, changed_oks = array("q"), array("q"), [], bytearray()
    for link_id, source, target, anchor, old_tid, old_tp, old_ok, kind in con.execute(sql, args):
        tp = resolver.resolve(target, source, relative=kind == "markdown")
        tid = paths.get(tp) if tp is not None else None
        if tid is not None:
            tp = None  # a note is target_id; target_path is only kept for attachments
        ok = None
        if anchor is not None and tid is not None and tid in page_counts:
            ok = page_anchor_ok(anchor, page_counts[tid])
        elif anchor is not None and tid is not None and tid not in other_kinds:
            if tid not in headings:
                headings[tid] = [
                    Heading(*row)
                    for row in con.execute(
                        "SELECT level, text, start_char, end_char, line, anchor FROM headings"
                        " WHERE doc_id = ? ORDER BY seq",
                        (tid,),
                    )
                ]
                blocks[tid] = [
                    b
                    for (b,) in con.execute(
                        "SELECT block_id FROM block_ids WHERE doc_id = ?", (tid,)
                    )
                ]
                element_ids[tid] = frozenset(
                    i.lower()
                    for (i,) in con.execute("SELECT html_id FROM html_ids WHERE doc_id = ?", (tid,))
                )
            # A Markdown link may name a heading by its HTML id, as GitHub and mdBook make it
            # ('#what-is-ownership'), or another element by its id ('<a id="old-name">'); a
            # wikilink names a heading as written, as in Obsidian.
            html = kind == "markdown"
            ok = int(
                anchor_ok(
                    anchor, headings[tid], blocks[tid], html_ids=html, element_ids=element_ids[tid]
                )
            )
        if (tid, tp, ok) != (old_tid, old_tp, old_ok):
            changed_ids.append(link_id)
            changed_tids.append(-1 if tid is None else tid)
            changed_tps.append(tp)
            changed_oks.append(2 if ok is None else ok)
    if changed_ids:
        with con:
            # Most links changing (a fresh index: every link starts unresolved), the target
            # index is made again after the update rather than kept in step row by row: 40,650
            # links of the 10,000-note vault 0.83 -> 0.44 s CPU (BENCHMARKS.md, issue 36)
            rebuild = (
                len(changed_ids) >= MASS_UPDATE
                and len(changed_ids) * 2 >= con.execute("SELECT count(*) FROM links").get
            )
            index_sql = (
                con.execute("SELECT sql FROM sqlite_schema WHERE name = 'links_target'").get
                if rebuild
                else None
            )
            if index_sql:
                con.execute("DROP INDEX links_target")
            con.executemany(
                "UPDATE links SET target_id = ?, target_path = ?, anchor_ok = ? WHERE id = ?",
                zip(
                    (None if t < 0 else t for t in changed_tids),
                    changed_tps,
                    (None if k == 2 else k for k in changed_oks),
                    changed_ids,
                ),
            )
            if index_sql:
                con.execute(index_sql)
    return len(changed_ids)


# Links changed at once from which the links_target index is rebuilt instead of updated
MASS_UPDATE = 2000
