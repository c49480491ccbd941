"""Keeping a long-lived index file healthy: check (and repair) its invariants, compact it, and
re-point roots after the notes moved."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from kbase.embed import vectors
from kbase.errors import InputError
from kbase.indexer import writes
from kbase.ingest.chunk import ChunkSettings, TokenCounter, default_counter
from kbase.ingest.derive import derive
from kbase.ingest.parse import parse
from kbase.records import Heading, ParsedDoc, RootInfo, RootMove
from kbase.store import cjk_table, db
from kbase.store.db import located_root, meta_set

if TYPE_CHECKING:  # (loaded where they are made: an index run makes none of them)
    from kbase.records import CompactReport, FrontmatterWarning, Problem, RootRemoval, Status


def check(con: apsw.Connection) -> list[Problem]:
    """SQLite's integrity check plus kbase's own invariants; an empty list means healthy."""
    from kbase.records import Problem

    problems: list[Problem] = []
    one = lambda sql, *a: con.execute(sql, a).fetchone()[0]  # noqa: E731
    result = [r[0] for r in con.execute("PRAGMA integrity_check")]
    if result != ["ok"]:
        problems.append(
            Problem("sqlite_integrity", len(result), "; ".join(result[:3]), fixable=False)
        )
    # Each text's length is measured once (length() counts its characters: once per chunk or
    # page, a PDF of 30,000 pages took minutes, a 3.8 MB note of many chunks 24 s).
    bad = one(
        "WITH d AS MATERIALIZED (SELECT id, kind, length(body) AS n FROM documents)"
        " SELECT count(*) FROM chunks c JOIN d ON d.id = c.doc_id"
        " WHERE c.start_char < 0 OR c.end_char > d.n OR c.end_char < c.start_char"
        " OR (c.end_char = c.start_char AND d.kind <> 'pdf')"
    )
    if bad:
        problems.append(
            Problem("chunk_offsets", bad, "chunks whose offsets fall outside their document's text")
        )
    orphan = one("SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
    if orphan:
        problems.append(
            Problem("orphan_chunks", orphan, "chunks of documents that no longer exist")
        )
    uncovered = uncovered_documents(con)
    if uncovered:
        problems.append(
            Problem(
                "missing_chunks",
                len(uncovered),
                "documents whose chunks no longer cover their text (chunk rows deleted); they"
                " are re-chunked from their stored text",
            )
        )
    try:
        # The index's structure, and that it holds the words of the chunks: by FTS5 (rank 1)
        # unless that would read long texts over and over (see keyword_index_matches).
        if _fts5_rereads(con):
            con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
            if not keyword_index_matches(con):
                raise apsw.CorruptError("the indexed words are not the chunks' words")
        else:
            con.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
        con.execute("INSERT INTO chunks_cjk (chunks_cjk) VALUES ('integrity-check')")
    except apsw.Error as e:
        problems.append(
            Problem(
                "fts",
                one("SELECT count(*) FROM chunks"),
                f"the keyword index does not match the chunks ({e.__class__.__name__})",
            )
        )
    if vectors.has_vectors(con):
        n_vec = one("SELECT count(*) FROM chunks_vec")
        stray = one("SELECT count(*) FROM chunks_vec WHERE rowid NOT IN (SELECT id FROM chunks)")
        lost = one(
            "SELECT count(*) FROM chunks WHERE embedded"
            " AND id NOT IN (SELECT rowid FROM chunks_vec)"
        )
        unflagged = one(
            "SELECT count(*) FROM chunks WHERE NOT embedded"
            " AND id IN (SELECT rowid FROM chunks_vec)"
        )
        if stray or lost or unflagged:
            problems.append(
                Problem(
                    "vectors",
                    stray + lost + unflagged,
                    f"{n_vec} vectors: {stray} without a chunk, {lost} chunks marked embedded "
                    f"without a vector, {unflagged} vectors of chunks not marked embedded",
                )
            )
        # (no codes table at all is no problem: search then scans exactly, and the next
        # kbase embed makes the table from the vectors)
        missing, _ = vectors.codes_in_step(con)
        if missing > 0:
            problems.append(
                Problem(
                    "vector_codes",
                    missing,
                    "vectors without their binary code (search of a large index would miss them)",
                )
            )
        stored = vectors.stored_fingerprint(con)
        from kbase.embed import catalog

        if stored is not None and not catalog.known(catalog.name_of(stored)):
            problems.append(
                Problem(
                    "embedder",
                    n_vec,
                    "the vectors come from a model kbase does not know; run kbase embed --rebuild",
                    fixable=False,
                )
            )
    elif one("SELECT count(*) FROM chunks WHERE embedded"):
        problems.append(
            Problem(
                "vectors",
                one("SELECT count(*) FROM chunks WHERE embedded"),
                "chunks marked embedded but there is no vector table",
            )
        )
    dangling = one(
        "SELECT count(*) FROM links WHERE target_id IS NOT NULL"
        " AND target_id NOT IN (SELECT id FROM documents)"
    )
    if dangling:
        problems.append(
            Problem("links", dangling, "links pointing at documents that no longer exist")
        )
    # A PDF's pages cut its text exactly: page 1 starts it, each next page starts one past the
    # end of the one before (the form feed), the last ends it; as many as pdf_info says.
    bad_pdfs = one(
        """WITH d AS MATERIALIZED (SELECT id, length(body) AS n FROM documents WHERE kind = 'pdf'),
           p AS (SELECT doc_id, page, start_char, end_char,
                        lag(page) OVER w AS prev_page, lag(end_char) OVER w AS prev_end,
                        lead(page) OVER w AS next_page
                 FROM pages WHERE doc_id IN (SELECT id FROM d)
                 WINDOW w AS (PARTITION BY doc_id ORDER BY page)),
           per AS (SELECT p.doc_id, count(*) AS pages,
                          sum(p.end_char < p.start_char OR p.end_char > d.n
                              OR (p.page = 1 AND p.start_char <> 0)
                              OR (p.page > 1 AND (p.prev_page IS NOT p.page - 1
                                                  OR p.start_char <> 1 + p.prev_end))) AS bad,
                          max(CASE WHEN p.next_page IS NULL THEN p.end_char END) AS last_end
                   FROM p JOIN d ON d.id = p.doc_id GROUP BY p.doc_id)
        SELECT count(*) FROM d LEFT JOIN per ON per.doc_id = d.id
        WHERE coalesce(per.pages, 0) IS NOT (SELECT pages FROM pdf_info WHERE doc_id = d.id)
           OR coalesce(per.bad, 0) > 0 OR per.last_end IS NOT d.n"""
    )
    if bad_pdfs:
        problems.append(
            Problem(
                "pages",
                bad_pdfs,
                "PDFs whose recorded pages do not cut their text; touch the files and run"
                " kbase index to read them again",
                fixable=False,
            )
        )
    chunker = con.execute("SELECT value FROM meta WHERE key = 'chunker'").fetchone()
    if chunker is not None:
        settings = ChunkSettings.from_fingerprint(chunker[0])
        if settings.fingerprint(default_counter()) != chunker[0]:
            problems.append(
                Problem(
                    "chunker",
                    one("SELECT count(*) FROM documents"),
                    "the chunks were made by another chunker version; they will be re-made",
                )
            )
    return problems


def uncovered_documents(con: apsw.Connection) -> list[int]:
    """The documents some of whose chunk rows are gone (deleted by hand, by a tool): a chunk's
    ``seq`` is missing (each document's run 0, 1, 2, ... has a hole), or text after the last
    chunk (or a text without chunks) that re-chunking the stored text puts in a chunk. Two
    passes over the chunks' index and one over the texts' ends; a document is chunked again
    only when its end holds a word after its last chunk (a rule, a base64 blob kbase skips)."""
    gaps = [
        doc
        for (doc,) in con.execute(
            "SELECT doc_id FROM chunks GROUP BY doc_id"
            " HAVING min(seq) <> 0 OR count(*) <> max(seq) + 1"
        )
    ]
    tails = con.execute(
        "WITH last AS MATERIALIZED (SELECT doc_id, max(end_char) AS e FROM chunks GROUP BY doc_id)"
        " SELECT id, substr(t, 1, 200) FROM (SELECT d.id, trim(substr(d.body,"
        " coalesce(last.e, d.body_start) + 1), ' ' || char(9, 10, 11, 12, 13)) AS t"
        " FROM documents AS d LEFT JOIN last ON last.doc_id = d.id) WHERE t <> ''"
    ).fetchall()
    candidates = [doc for doc, tail in tails if doc not in gaps and _WORD.search(tail)]
    chunker = db.meta_get(con, "chunker")
    if not candidates or chunker is None:
        return gaps
    counter = default_counter()
    settings = ChunkSettings.from_fingerprint(chunker)
    if settings.fingerprint(counter) != chunker:
        return gaps  # another chunker made them: the 'chunker' problem re-makes them all
    from kbase.ingest.chunk import chunk

    for doc_id in candidates:
        body, name, root = con.execute(
            "SELECT d.body, d.path, r.path FROM documents AS d JOIN roots AS r"
            " ON r.id = d.root_id WHERE d.id = ?",
            (doc_id,),
        ).fetchone()
        doc = stored_document(con, doc_id, body, name or Path(root).name)
        made = [(c.start, c.end) for c in chunk(doc, counter, settings).chunks]
        stored = con.execute(
            "SELECT start_char, end_char FROM chunks WHERE doc_id = ? ORDER BY seq", (doc_id,)
        ).fetchall()
        if made != stored:
            gaps.append(doc_id)
    return gaps


_WORD = re.compile(r"\w")


# FTS5's own check reads the whole text of a document for each of its chunks (through the
# content view's substr()): fine for notes of a few dozen chunks (it is C, and three times as fast
# as keyword_index_matches on the shared vaults), quadratic in a long note's length. Past this
# many characters read again per character of text, keyword_index_matches does it instead.
FTS5_REREAD_RATIO = 200


def _fts5_rereads(con: apsw.Connection) -> bool:
    """Would FTS5's check read the texts over FTS5_REREAD_RATIO times (a long note of thousands
    of chunks)? Counted from each document's length and chunks: one pass over the texts."""
    reread, total = con.execute(
        "SELECT total(n * length(d.body)), total(length(d.body)) FROM documents AS d"
        " JOIN (SELECT doc_id, count(*) AS n FROM chunks GROUP BY doc_id) AS c ON c.doc_id = d.id"
    ).fetchone()
    return reread > FTS5_REREAD_RATIO * max(total, 1.0)


_TOKENIZE = re.compile(r"tokenize\s*=\s*'([^']*)'")


def keyword_index_matches(con: apsw.Connection) -> bool:
    """Does the keyword index (chunks_fts) hold exactly the words of its content rows
    (chunks_fts_content: each chunk's text, title and headings)? FTS5's own check ('integrity-check'
    with rank 1) compares the two by a sum of a hash of each (word, row, column, position); so
    does this, with the index's side read through fts5vocab and the content's tokenized by the
    table's own tokenizer, each document's text read once: FTS5 read the view's body column, a
    slice of the whole text, whole for each chunk (a 3.8 MB note of 4,000 chunks took 11 s)."""
    (schema,) = con.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts'"
    ).fetchone()
    found = _TOKENIZE.search(schema)
    name, *args = (found.group(1) if found else "unicode61").split()
    tokenize = con.fts5_tokenizer(name, args)

    def words(text: str | None) -> list[str]:
        if not text:
            return []
        return tokenize(
            text.encode("utf-8", "surrogatepass"),
            apsw.FTS5_TOKENIZE_DOCUMENT,
            None,
            include_offsets=False,
            include_colocated=False,
        )

    content = count = 0
    doc_id, body = None, ""
    rows = con.execute(
        "SELECT c.doc_id, c.id, c.start_char, c.end_char, v.title, v.headings"
        " FROM chunks AS c JOIN chunks_fts_content AS v ON v.id = c.id ORDER BY c.doc_id, c.id"
    )
    for doc, rowid, start, end, title, headings in rows:
        if doc != doc_id:
            doc_id = doc
            (body,) = con.execute("SELECT body FROM documents WHERE id = ?", (doc,)).fetchone()
        # substr(body, start + 1, end - start), as the view gives it
        text = body[max(start, 0) : max(end, start, 0)] if end > 0 else ""
        for column, value in (("body", text), ("title", title), ("headings", headings)):
            found_words = words(value)
            count += len(found_words)
            content += sum(
                map(hash, zip(found_words, repeat(rowid), repeat(column), itertools.count()))
            )
    con.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kbase_fts_words"
        " USING fts5vocab(main, chunks_fts, instance)"
    )
    try:
        index = sum(
            map(hash, con.execute("SELECT term, doc, col, offset FROM temp.kbase_fts_words"))
        )
        (indexed,) = con.execute("SELECT count(*) FROM temp.kbase_fts_words").fetchone()
    finally:
        con.execute("DROP TABLE temp.kbase_fts_words")
    return index == content and indexed == count


def frontmatter_warnings(con: apsw.Connection) -> list[FrontmatterWarning]:
    """Notes indexed without their front matter because it could not be read: path, line, why."""
    from kbase.records import FrontmatterWarning

    return [
        FrontmatterWarning(*row)
        for row in con.execute(
            "SELECT path, line, detail FROM frontmatter_warnings ORDER BY path, line"
        )
    ]


def rechunk_all(
    con: apsw.Connection,
    counter: TokenCounter,
    settings: ChunkSettings,
    progress: Callable[[int, int, str], None] | None = None,
) -> int:
    """Chunk every document again from its stored text (the chunker's settings changed)."""
    rows = con.execute("SELECT id, path FROM documents ORDER BY id").fetchall()
    for done, (doc_id, path) in enumerate(rows):
        if progress:
            progress(done, len(rows), f"re-chunking {path}")
        rederive(con, doc_id, counter, settings)
    for (root_id,) in con.execute("SELECT id FROM roots").fetchall():
        writes.resolve_links(con, root_id)
    return len(rows)


def rederive(
    con: apsw.Connection,
    doc_id: int,
    counter: TokenCounter,
    settings: ChunkSettings,
    doc: ParsedDoc | None = None,
) -> None:
    """Parse and chunk a document again from its stored text and rewrite what derives from it
    (vectors of chunks whose embedder input is unchanged are kept)."""
    root_id, path, size, mtime_ns, digest, encoding, body, root = con.execute(
        "SELECT d.root_id, d.path, d.size, d.mtime_ns, d.hash, d.encoding, d.body, r.path"
        " FROM documents d JOIN roots r ON r.id = d.root_id WHERE d.id = ?",
        (doc_id,),
    ).fetchone()
    doc = doc or stored_document(con, doc_id, body, path or Path(root).name)
    writes.write_document(
        con,
        derive(doc, settings, counter),
        writes.FileRow(root_id, path, size, mtime_ns, digest, encoding),
        doc_id=doc_id,
    )


def stored_document(con: apsw.Connection, doc_id: int, body: str, name: str) -> ParsedDoc:
    """A document parsed again from its stored text, as when it was indexed (no file is read): a
    PDF with its pages and document information, a canvas with its cards, from their rows."""
    (kind,) = con.execute("SELECT kind FROM documents WHERE id = ?", (doc_id,)).fetchone()
    if kind == "pdf":
        from kbase.ingest import pdf

        pages = tuple(
            con.execute(
                "SELECT start_char, end_char FROM pages WHERE doc_id = ? ORDER BY page", (doc_id,)
            ).fetchall()
        )
        cur = con.execute("SELECT * FROM pdf_info WHERE doc_id = ?", (doc_id,))
        row = cur.fetchone()
        info = {}
        if row is not None:
            names = [d[0] for d in cur.getdescription()]
            skip = ("doc_id", "names")
            info = {k: v for k, v in zip(names, row) if v is not None and k not in skip}
            info["encrypted"] = bool(info.get("encrypted"))
        headings = tuple(
            Heading(*row)
            for row in con.execute(
                "SELECT level, text, start_char, end_char, line FROM headings WHERE doc_id = ?"
                " ORDER BY seq",
                (doc_id,),
            )
        )
        return pdf.document(body, pages, name, info, pdf.page_warnings(body, pages), headings)
    if kind == "canvas":
        from kbase.ingest import canvas
        from kbase.ingest.canvas import Canvas, Edge

        cards = canvas.stored_cards(
            con.execute(
                "SELECT card_id, kind, start_char, end_char, file, subpath, url, x, y, width,"
                " height, color FROM canvas_cards WHERE doc_id = ? ORDER BY seq",
                (doc_id,),
            )
        )
        edges = tuple(
            Edge(*row)
            for row in con.execute(
                "SELECT edge_id, from_card, to_card, label FROM canvas_edges WHERE doc_id = ?"
                " ORDER BY seq",
                (doc_id,),
            )
        )
        return canvas.document(Canvas(body, cards, edges), name)
    return parse(body, name)


def fix(con: apsw.Connection) -> list[str]:
    """Rebuild, from the stored document texts, whatever ``check`` found broken; no file is read."""
    done = []
    kinds = {p.kind for p in check(con)}
    if kinds & {"chunk_offsets", "orphan_chunks", "chunker"}:
        with con:
            con.execute("DELETE FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)")
        settings = ChunkSettings.from_fingerprint(
            (con.execute("SELECT value FROM meta WHERE key = 'chunker'").fetchone() or [None])[0]
        )
        n = rechunk_all(con, default_counter(), settings)
        with con:
            meta_set(con, "chunker", settings.fingerprint(default_counter()))
        done.append(f"re-chunked {n} documents from their stored text")
    elif "missing_chunks" in kinds:
        settings = ChunkSettings.from_fingerprint(db.meta_get(con, "chunker"))
        uncovered = uncovered_documents(con)
        for doc_id in uncovered:
            rederive(con, doc_id, default_counter(), settings)
        embedded = " (kbase embed embeds them again)" if vectors.has_vectors(con) else ""
        done.append(
            f"re-chunked {len(uncovered)} documents whose chunks were missing, from their"
            f" stored text{embedded}"
        )
    if "fts" in kinds or kinds & {"chunk_offsets", "orphan_chunks"}:
        with con:
            con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")
            cjk_table.rebuild(con)
        done.append("rebuilt the keyword index")
    if "vectors" in kinds:
        with con:
            if vectors.has_vectors(con):
                con.execute("DELETE FROM chunks_vec WHERE rowid NOT IN (SELECT id FROM chunks)")
                con.execute(
                    "UPDATE chunks SET embedded = 0 WHERE embedded"
                    " AND id NOT IN (SELECT rowid FROM chunks_vec)"
                )
                con.execute(
                    "UPDATE chunks SET embedded = 1 WHERE NOT embedded"
                    " AND id IN (SELECT rowid FROM chunks_vec)"
                )
            else:
                con.execute("UPDATE chunks SET embedded = 0 WHERE embedded")
        done.append("matched vectors to chunks (run kbase embed for any still missing)")
    if kinds & {"vectors", "vector_codes"} and vectors.has_vectors(con):
        vectors.rebuild_codes(con)
        done.append("made the vectors' binary codes again")
    if "links" in kinds or done:
        for (root_id,) in con.execute("SELECT id FROM roots").fetchall():
            writes.resolve_links(con, root_id)
        done.append("re-resolved the links")
    return done


def file_bytes(path: str | os.PathLike[str]) -> int:
    return sum(os.path.getsize(f) for f in (str(path), f"{path}-wal") if os.path.exists(f))


# Keyword index pages an index run merges at most when it is done (FTS5 'merge'; 16 KB pages).
# Negative: segments of every level are merged, as 'optimize' does, a bounded amount at a time
# (positive N merges only levels that have filled up, and the file kept growing: BENCHMARKS.md).
FTS_MERGE_PAGES = -256
# Free pages above this are given back to the file system (with auto_vacuum = INCREMENTAL).
FREE_BYTES_KEPT = 1 << 20
# An index made before kbase set auto_vacuum is switched to it by one VACUUM up to this size.
SWITCH_MAX_BYTES = 256 << 20


def settle(con: apsw.Connection) -> None:
    """After a write run (an index run, a watch batch, an idle embedding step): keep the file
    near its compact size without ``kbase compact``. FTS5 adds a segment per transaction and
    keeps deleted rows' entries until segments merge: a little merge work after each run (the
    'merge' command, ``FTS_MERGE_PAGES`` at most) keeps the keyword index merged. The WAL is
    checkpointed and truncated when no reader needs it (a long-lived reader, the TUI or an MCP
    server, would otherwise keep the WAL file at its largest); with a reader at work it is left
    for the next run, never waited for."""
    with con:
        for table in ("chunks_fts", "chunks_cjk"):
            con.execute(
                f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (FTS_MERGE_PAGES,)
            )
    release_free_pages(con)
    checkpoint(con)


def release_free_pages(con: apsw.Connection) -> int:
    """Give the free pages beyond ``FREE_BYTES_KEPT`` back to the file system; how many. An index
    made with auto_vacuum = INCREMENTAL (by this kbase) returns them a few at a time; one made
    before is switched to it by one VACUUM, the first time it has that much free, when it is no
    larger than ``SWITCH_MAX_BYTES`` (a larger one keeps them for later writes until kbase
    compact). Never waits for a reader: busy, it is left for the next run."""
    page = con.execute("PRAGMA page_size").get
    free = con.execute("PRAGMA freelist_count").get
    if free * page <= FREE_BYTES_KEPT:
        return 0
    if con.execute("PRAGMA auto_vacuum").get == 2:
        con.execute("PRAGMA incremental_vacuum").fetchall()  # all of them: a few MB at most
        return free
    if con.execute("PRAGMA page_count").get * page > SWITCH_MAX_BYTES:
        return 0
    con.set_busy_timeout(0)
    try:
        con.execute("PRAGMA auto_vacuum = INCREMENTAL")
        con.execute("VACUUM")
    except apsw.BusyError:
        return 0
    finally:
        con.set_busy_timeout(db.BUSY_TIMEOUT_MS)
    return free


def checkpoint(con: apsw.Connection) -> bool:
    """Copy the WAL into the file and truncate it, unless a reader holds it (then nothing, never
    waiting): whether it was."""
    con.set_busy_timeout(0)
    try:
        busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy
    except apsw.BusyError:
        return False
    finally:
        con.set_busy_timeout(db.BUSY_TIMEOUT_MS)


def wal_waiting(con: apsw.Connection) -> int:
    """Bytes of the WAL that readers' old snapshots keep out of the file: a PASSIVE checkpoint
    copies what it can without waiting for anyone; the frames it leaves are those a reader that
    began before them still needs (SQLite cannot start the WAL over until that read ends, so
    every write meanwhile makes it longer)."""
    con.set_busy_timeout(0)
    try:
        _, frames, copied = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except apsw.BusyError:
        return 0
    finally:
        con.set_busy_timeout(db.BUSY_TIMEOUT_MS)
    page = con.execute("PRAGMA page_size").get
    return max(0, frames - copied) * (page + 24)  # a frame: its page and a 24-byte header


def compact(con: apsw.Connection, path: str | os.PathLike[str]) -> CompactReport:
    """Merge the keyword index, rebuild the vector table without its dead space, VACUUM."""
    from kbase.records import CompactReport

    before = file_bytes(path)
    with con:
        con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")
        con.execute("INSERT INTO chunks_cjk (chunks_cjk) VALUES ('optimize')")
    if vectors.has_vectors(con):
        # vec0 does not give back the space of deleted rows: copy the live vectors into a new table.
        dim = con.execute("SELECT vec_length(embedding) FROM chunks_vec LIMIT 1").fetchone()
        with con:
            con.execute(
                "CREATE TEMP TABLE kbase_vectors AS SELECT rowid AS id, embedding FROM chunks_vec"
            )
            con.execute("DROP TABLE chunks_vec")
            if dim:
                con.execute(
                    f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{int(dim[0])}]"
                    " distance_metric=cosine)"
                )
                con.execute(
                    "INSERT INTO chunks_vec (rowid, embedding)"
                    " SELECT id, embedding FROM temp.kbase_vectors"
                )
            else:
                con.execute("DROP TRIGGER IF EXISTS chunks_vec_after_delete")
                con.execute("UPDATE chunks SET embedded = 0 WHERE embedded")
                con.execute("DELETE FROM meta WHERE key = 'embedder'")
            con.execute("DROP TABLE temp.kbase_vectors")
    if vectors.has_vectors(con):
        vectors.rebuild_codes(con)  # leaves out the codes of deleted chunks
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA auto_vacuum = INCREMENTAL")  # an older index takes it with the VACUUM
    con.execute("VACUUM")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return CompactReport(bytes_before=before, bytes_after=file_bytes(path))


def roots(con: apsw.Connection, db_path: str | os.PathLike[str]) -> list[RootInfo]:
    """The indexed roots, whether they exist, and where they would be if moved with the index."""
    out = []
    for root_id, path, rel, n, last in con.execute(
        "SELECT r.id, r.path, r.relpath,"
        " (SELECT count(*) FROM documents WHERE root_id = r.id), r.last_indexed_at"
        " FROM roots r ORDER BY path"
    ):
        now = located_root(path, rel, db_path)
        out.append(
            RootInfo(
                id=root_id,
                path=path,
                documents=n,
                exists=os.path.exists(path),
                moved_with_index=now if now != path else None,
                last_indexed_at=last,
            )
        )
    return out


def move_root(
    con: apsw.Connection, old: str, new: str, db_path: str | os.PathLike[str]
) -> RootMove:
    """Point a root at its new place (the notes moved); nothing is re-indexed."""
    new_path = str(Path(new).expanduser().resolve())
    row = find_root(con, old)
    if not os.path.exists(new_path):
        raise InputError(
            f"no such file or folder: {new}", "move the notes first, then re-point the root"
        )
    if con.execute("SELECT 1 FROM roots WHERE path = ? AND id <> ?", (new_path, row[0])).fetchone():
        raise InputError(f"{new_path} is already an indexed root", "remove one of them first")
    with con:
        con.execute(
            "UPDATE roots SET path = ?, relpath = ? WHERE id = ?",
            (new_path, writes.relpath_from_db(new_path, db_path), row[0]),
        )
    return RootMove(old=row[1], new=new_path)


def find_root(con: apsw.Connection, name: str) -> tuple[int, str]:
    """(id, path) of the root ``name`` gives: its path as recorded, or as a path from here."""
    given = os.path.expanduser(name)
    for candidate in (os.path.abspath(given), str(Path(given).resolve()), name):
        row = con.execute("SELECT id, path FROM roots WHERE path = ?", (candidate,)).fetchone()
        if row is not None:
            return row
    known = [p for (p,) in con.execute("SELECT path FROM roots ORDER BY path")]
    raise InputError(
        f"{name} is not an indexed root",
        f"the roots: {', '.join(known)}" if known else "this index has no roots yet",
    )


def remove_root(con: apsw.Connection, name: str) -> RootRemoval:
    """Forget a root and every document indexed from it, in one transaction (nothing on disk
    is touched): their chunks, keyword rows, vectors, tags, links and attachments go with them;
    links from elsewhere to them turn unresolved."""
    from kbase.records import RootRemoval

    root_id, path = find_root(con, name)
    with con:
        n = con.execute("SELECT count(*) FROM documents WHERE root_id = ?", (root_id,)).fetchone()
        con.execute("DELETE FROM documents WHERE root_id = ?", (root_id,))
        con.execute("DELETE FROM roots WHERE id = ?", (root_id,))
    return RootRemoval(path=path, documents=n[0])


def follow_moved_roots(con: apsw.Connection, db_path: str | os.PathLike[str]) -> list[RootMove]:
    """Roots that are gone from their path but sit at the same place relative to the index
    (the vault and the index were moved together): re-point them."""
    moved = []
    for r in roots(con, db_path):
        if not r.exists and r.moved_with_index:
            moved.append(move_root(con, r.path, r.moved_with_index, db_path))
    return moved


def status(con: apsw.Connection, db_path: str | os.PathLike[str]) -> Status:
    """Counts and sizes for ``kbase status``."""
    from kbase.records import Status

    one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    db_bytes = file_bytes(db_path)
    chunker = con.execute("SELECT value FROM meta WHERE key = 'chunker'").fetchone()
    # A PDF's text is what was read of it, not its file (images, fonts).
    text_bytes = one(
        "SELECT coalesce(sum(CASE WHEN kind = 'pdf' THEN length(CAST(body AS BLOB)) ELSE size END),"
        " 0) FROM documents"
    )
    pdfs = con.execute(
        "SELECT count(*), coalesce(sum(pages), 0), coalesce(sum(text_pages), 0) FROM pdf_info"
    ).fetchone()
    last = con.execute("SELECT value FROM meta WHERE key = 'last_index_at'").fetchone()
    return Status(
        db=str(db_path),
        roots=tuple(roots(con, db_path)),
        documents=one("SELECT count(*) FROM documents"),
        chunks=one("SELECT count(*) FROM chunks"),
        embedded_chunks=one("SELECT count(*) FROM chunks WHERE embedded"),
        links=one("SELECT count(*) FROM links"),
        unresolved_links=one(
            "SELECT count(*) FROM links WHERE target_id IS NULL AND target_path IS NULL"
        ),
        tags=one("SELECT count(DISTINCT tag) FROM tags"),
        oversized_chunks=one("SELECT count(*) FROM chunks WHERE flags & 1"),
        diagnostics=dict(
            con.execute(
                "SELECT kind, count(*) FROM diagnostics WHERE kind <> 'frontmatter'"
                " GROUP BY 1 ORDER BY 1"
            ).fetchall()
        ),
        frontmatter_warnings=one("SELECT count(DISTINCT doc_id) FROM frontmatter_warnings"),
        chunker=json.loads(chunker[0]) if chunker else None,
        encodings=dict(
            con.execute(
                "SELECT encoding, count(*) FROM documents GROUP BY 1 ORDER BY 2 DESC"
            ).fetchall()
        ),
        text_bytes=text_bytes,
        db_bytes=db_bytes,
        db_to_text=round(db_bytes / text_bytes, 2) if text_bytes else None,
        last_index_at=last[0] if last else None,
        auto_embed=vectors.auto_embed(con),
        pdfs=pdfs[0],
        pdf_pages=pdfs[1],
        pdf_text_pages=pdfs[2],
        canvases=one("SELECT count(*) FROM documents WHERE kind = 'canvas'"),
        unreadable=one("SELECT count(*) FROM unreadable"),
    )
