"""Numbered steps that bring an index written by an older kbase up to ``schema.sql``.

Each step takes the schema from version ``n - 1`` to ``n``: SQL, or a function of the connection
for a step that needs more than a script. ``db.connect`` runs the missing ones in order, each in
its own transaction together with the ``user_version`` bump. A new index is made from
``schema.sql`` directly; tests/test_db.py checks that a version 1 index, migrated, matches it.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

# The DDL of schema version 5, frozen here: a later schema.sql must not change what this step makes.
_SCHEMA_5 = {
    "chunks": """
CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,       -- row id
    -- the document (documents.id)
    doc_id       INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,      -- 0-based position of the chunk in its document
    start_char   INTEGER NOT NULL,      -- offset of the first character in documents.body
    end_char     INTEGER NOT NULL,      -- offset after the last character (exclusive)
    line         INTEGER NOT NULL,      -- 1-based line number of start_char
    end_line     INTEGER NOT NULL,      -- 1-based line number of the chunk's last character
    -- enclosing headings joined by ' > ', e.g. 'Guide > Install'
    heading_path TEXT NOT NULL DEFAULT '',
    -- prose, code, table, list, quote, config, cli, mixed
    kind         TEXT NOT NULL DEFAULT 'prose',
    tokens       INTEGER NOT NULL,      -- size in the embedding model's tokens (see meta 'chunker')
    -- bit 1: oversized (a protected block above the budget)
    flags        INTEGER NOT NULL DEFAULT 0,
    embed_hash   BLOB NOT NULL,         -- first 8 bytes of the sha256 of the text the embedder sees
    embedded     INTEGER NOT NULL DEFAULT 0, -- 1 once chunks_vec holds this chunk's vector
    UNIQUE (doc_id, seq)
) STRICT""",
    "chunks_embed_hash": """
CREATE INDEX chunks_embed_hash ON chunks(embed_hash) WHERE embedded = 1""",
    "chunks_before_delete": """
CREATE TRIGGER chunks_before_delete BEFORE DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', id, title, headings, body FROM chunks_fts_content WHERE id = old.id;
END""",
    "chunks_before_update": """
CREATE TRIGGER chunks_before_update
BEFORE UPDATE OF id, doc_id, start_char, end_char, heading_path ON chunks BEGIN
    SELECT RAISE(ABORT, 'chunks are replaced, not updated: delete and insert instead');
END""",
    "unresolved_links": """
CREATE VIEW unresolved_links AS
SELECT l.id, l.source_id, s.path AS source_path, l.line, l.kind, l.embed, l.target, l.anchor,
       l.alias
FROM links AS l JOIN documents AS s ON s.id = l.source_id
WHERE l.target_id IS NULL AND l.target_path IS NULL""",
    "broken_anchors": """
CREATE VIEW broken_anchors AS
SELECT l.id, l.source_id, s.path AS source_path, l.line, l.target, t.path AS target_path, l.anchor
FROM links AS l JOIN documents AS s ON s.id = l.source_id JOIN documents AS t ON t.id = l.target_id
WHERE l.anchor_ok = 0""",
    "chunks_fts_content": """
CREATE VIEW chunks_fts_content AS
SELECT c.id                                                    AS id,
       d.title || coalesce((SELECT ' ' || group_concat(a.alias, ' ') FROM aliases AS a
                            WHERE a.doc_id = d.id), '')       AS title,
       CASE WHEN c.heading_path = d.title THEN ''
            WHEN substr(c.heading_path, 1, length(d.title) + 3) = d.title || ' > '
            THEN substr(c.heading_path, length(d.title) + 4)
            ELSE c.heading_path END                            AS headings,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS body
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id""",
    "chunks_fts": """
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    body, title, headings,
    content = 'chunks_fts_content',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
)""",
}
# chunks_vec's trigger as version 5 made it (kbase.embed.vectors creates chunks_vec).
_VECTOR_TRIGGER_5 = (
    "CREATE TRIGGER IF NOT EXISTS chunks_vec_after_delete AFTER DELETE ON chunks"
    " WHEN old.embedded BEGIN"
    " DELETE FROM chunks_vec WHERE rowid = old.id; END"
)


def _schema_5(con: apsw.Connection) -> None:
    """Rebuild chunks and chunks_fts with their version-5 definitions (``_SCHEMA_5``).

    chunks: embed_hash from 32 hex digits to 8 bytes. SQLite cannot change a column's type, so the
    table is renamed (legacy mode keeps the views pointing at 'chunks'), recreated, copied and
    dropped; the triggers on it are made again, the vector one only if the index had vectors.
    chunks_fts: recreated with body as its first column and rebuilt from its content view, which
    now leaves out of the heading path a first heading that repeats the title.
    links: target_path cleared where target_id names the note; the views that read it redone.
    """
    had_vectors = con.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = 'chunks_vec_after_delete'"
    ).fetchone()
    con.execute("PRAGMA legacy_alter_table = ON")
    try:
        con.execute("ALTER TABLE chunks RENAME TO chunks_v4")
    finally:
        con.execute("PRAGMA legacy_alter_table = OFF")
    con.execute(_SCHEMA_5["chunks"])
    con.execute(
        "INSERT INTO chunks (id, doc_id, seq, start_char, end_char, line, end_line, heading_path,"
        " kind, tokens, flags, embed_hash, embedded)"
        " SELECT id, doc_id, seq, start_char, end_char, line, end_line, heading_path, kind, tokens,"
        " flags, unhex(substr(embed_hash, 1, 16)), embedded FROM chunks_v4"
    )
    con.execute("DROP TABLE chunks_v4")  # with its indexes and triggers
    for name in ("chunks_embed_hash", "chunks_before_delete", "chunks_before_update"):
        con.execute(_SCHEMA_5[name])
    if had_vectors:
        con.execute(_VECTOR_TRIGGER_5)
    # links.target_path: only attachments keep it, a note is target_id; two views follow.
    con.execute("UPDATE links SET target_path = NULL WHERE target_id IS NOT NULL")
    for view in ("unresolved_links", "broken_anchors"):
        con.execute(f"DROP VIEW {view}")
        con.execute(_SCHEMA_5[view])
    con.execute("DROP TABLE chunks_fts")
    con.execute("DROP VIEW chunks_fts_content")  # its heading path no longer repeats the title
    con.execute(_SCHEMA_5["chunks_fts_content"])
    con.execute(_SCHEMA_5["chunks_fts"])
    con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")


# The chunks_fts_content view of schema version 6, frozen here (see _schema_6).
_CHUNKS_FTS_CONTENT_6 = """
CREATE VIEW chunks_fts_content AS
SELECT c.id AS id,
       d.title
       || (SELECT CASE WHEN stem = '' OR lower(stem) = lower(d.title) THEN '' ELSE ' ' || stem END
           FROM (SELECT CASE WHEN instr(base, '.') > 1
                             THEN substr(base, 1, length(rtrim(base, replace(base, '.', ''))) - 1)
                             ELSE base END AS stem
                 FROM (SELECT substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1)
                              AS base)))
       || coalesce((SELECT ' ' || group_concat(a.alias, ' ') FROM aliases AS a
                    WHERE a.doc_id = d.id), '') AS title,
       CASE WHEN c.heading_path = d.title THEN ''
            WHEN substr(c.heading_path, 1, length(d.title) + 3) = d.title || ' > '
            THEN substr(c.heading_path, length(d.title) + 4)
            ELSE c.heading_path END AS headings,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS body
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
"""


# A rename changes the file name the title column holds: its keyword rows are rewritten.
_RENAME_WHEN_6 = """WHEN substr(old.path, length(rtrim(old.path, replace(old.path, '/', ''))) + 1)
     IS NOT substr(new.path, length(rtrim(new.path, replace(new.path, '/', ''))) + 1)"""
_RENAME_TRIGGERS_6 = (
    f"""CREATE TRIGGER documents_before_rename BEFORE UPDATE OF path ON documents
{_RENAME_WHEN_6} BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = old.id);
END""",
    f"""CREATE TRIGGER documents_after_rename AFTER UPDATE OF path ON documents
{_RENAME_WHEN_6} BEGIN
    INSERT INTO chunks_fts (rowid, title, headings, body)
    SELECT f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = new.id);
END""",
)


def _schema_6(con: apsw.Connection) -> None:
    """Names are searchable: the keyword index's title column also holds the file name (without
    extension) when it differs from the title. The view is replaced and the index rebuilt from it;
    triggers rewrite a renamed note's rows; the titles themselves are derived anew by the next
    index run (chunk.CHUNKER_VERSION 3)."""
    con.execute("DROP VIEW chunks_fts_content")
    con.execute(_CHUNKS_FTS_CONTENT_6)
    con.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")
    for trigger in _RENAME_TRIGGERS_6:
        con.execute(trigger)


def _schema_7(con: apsw.Connection) -> None:
    """Front matter warnings are kept: rows of diagnostics with kind 'frontmatter', and the view
    frontmatter_warnings. The notes already indexed are not read again by the next index run, so
    their warnings are found here, from the stored text of each note whose front matter was
    left out (frontmatter NULL, text opening with '---')."""
    con.execute(
        "CREATE VIEW frontmatter_warnings AS"
        " SELECT g.doc_id, d.path, d.title, g.line, g.detail"
        " FROM diagnostics AS g JOIN documents AS d ON d.id = g.doc_id"
        " WHERE g.kind = 'frontmatter'"
    )
    from kbase.ingest.parse import frontmatter_diagnostics, parse
    from kbase.text import line_of, line_starts

    rows = con.execute(
        "SELECT d.id, CASE WHEN d.path = '' THEN r.path ELSE d.path END, d.body FROM documents AS d"
        " JOIN roots AS r ON r.id = d.root_id"
        " WHERE d.frontmatter IS NULL AND substr(d.body, 1, 3) = '---'"
    ).fetchall()
    for doc_id, name, body in rows:
        starts = line_starts(body)
        con.executemany(
            "INSERT INTO diagnostics (doc_id, kind, start_char, end_char, line, detail)"
            " VALUES (?,?,?,?,?,?)",
            [
                (doc_id, d.kind, d.start, d.end, line_of(starts, d.start), d.detail)
                for d in frontmatter_diagnostics(parse(body, name))
            ],
        )


def _schema_8(con: apsw.Connection) -> None:
    """chunks_cjk: the keyword index of runs in scripts without spaces (kbase/store/cjk_table.py),
    filled from the chunks already indexed."""
    from kbase.store import cjk_table

    con.execute(
        "CREATE VIRTUAL TABLE chunks_cjk USING fts5(body, title, headings, content = '',"
        " contentless_delete = 1,"
        " tokenize = 'porter unicode61 remove_diacritics 2 categories ''L* N* Co M*''')"
    )
    con.execute(
        "CREATE TRIGGER chunks_cjk_before_delete BEFORE DELETE ON chunks BEGIN"
        " DELETE FROM chunks_cjk WHERE rowid = old.id; END"
    )
    cjk_table.rebuild(con)


# The DDL of schema version 9, frozen here (see _schema_9).
_SCHEMA_9 = (
    """
CREATE TABLE pages (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    page       INTEGER NOT NULL,
    start_char INTEGER NOT NULL,
    end_char   INTEGER NOT NULL,
    PRIMARY KEY (doc_id, page)
) STRICT, WITHOUT ROWID""",
    """
CREATE TABLE pdf_info (
    doc_id     INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    pages      INTEGER NOT NULL,
    text_pages INTEGER NOT NULL,
    encrypted  INTEGER NOT NULL DEFAULT 0,
    title      TEXT,
    author     TEXT,
    subject    TEXT,
    keywords   TEXT,
    creator    TEXT,
    producer   TEXT,
    created    TEXT,
    modified   TEXT,
    names      TEXT NOT NULL DEFAULT ''
) STRICT""",
    """
CREATE TABLE canvas_cards (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    card_id    TEXT NOT NULL,
    kind       TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char   INTEGER NOT NULL,
    file       TEXT,
    subpath    TEXT,
    url        TEXT,
    x          REAL,
    y          REAL,
    width      REAL,
    height     REAL,
    color      TEXT,
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID""",
    """
CREATE TABLE canvas_edges (
    doc_id    INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    edge_id   TEXT NOT NULL,
    from_card TEXT NOT NULL,
    to_card   TEXT NOT NULL,
    label     TEXT,
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID""",
    """
CREATE VIEW pdf_pages AS
SELECT p.doc_id, d.path, d.title, p.page, p.start_char, p.end_char,
       substr(d.body, p.start_char + 1, p.end_char - p.start_char) AS text
FROM pages AS p JOIN documents AS d ON d.id = p.doc_id""",
    """
CREATE VIEW chunk_pages AS
SELECT c.id AS chunk_id, c.doc_id, d.path,
       (SELECT max(p.page) FROM pages AS p
        WHERE p.doc_id = c.doc_id AND p.start_char <= c.start_char) AS page,
       (SELECT max(p.page) FROM pages AS p
        WHERE p.doc_id = c.doc_id AND p.start_char < c.end_char) AS end_page
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
WHERE d.kind = 'pdf'""",
    """
CREATE VIEW chunk_cards AS
SELECT c.id AS chunk_id, c.doc_id, d.path, k.card_id, k.kind AS card_kind
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
JOIN canvas_cards AS k ON k.doc_id = c.doc_id
     AND k.seq = (SELECT max(seq) FROM canvas_cards
                  WHERE doc_id = c.doc_id AND start_char <= c.start_char)
WHERE d.kind = 'canvas'""",
)
_CHUNKS_FTS_CONTENT_9 = """
CREATE VIEW chunks_fts_content AS
SELECT c.id                                                    AS id,
       d.title
       || (SELECT CASE WHEN stem = '' OR lower(stem) = lower(d.title) THEN '' ELSE ' ' || stem END
           FROM (SELECT CASE WHEN instr(base, '.') > 1
                             THEN substr(base, 1, length(rtrim(base, replace(base, '.', ''))) - 1)
                             ELSE base END AS stem
                 FROM (SELECT substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1)
                              AS base)))
       || coalesce((SELECT ' ' || group_concat(a.alias, ' ') FROM aliases AS a
                    WHERE a.doc_id = d.id), '')
       || coalesce((SELECT ' ' || p.names FROM pdf_info AS p
                    WHERE p.doc_id = d.id AND p.names <> ''), '') AS title,
       CASE WHEN c.heading_path = d.title THEN ''
            WHEN substr(c.heading_path, 1, length(d.title) + 3) = d.title || ' > '
            THEN substr(c.heading_path, length(d.title) + 4)
            ELSE c.heading_path END                            AS headings,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS body
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
"""


def _schema_9(con: apsw.Connection) -> None:
    """PDFs and canvases (issue 25): their pages, document information and cards, the views over
    them, and the keyword index's title column with a PDF's metadata names. No document of an
    older index is a PDF or a canvas, so the keyword index holds the same rows: no rebuild."""
    for ddl in _SCHEMA_9:
        con.execute(ddl)
    con.execute("DROP VIEW chunks_fts_content")
    con.execute(_CHUNKS_FTS_CONTENT_9)


# The views over links as schema version 10 made them, frozen here (see _schema_10).
_LINK_VIEWS_10 = {
    "resolved_links": """
CREATE VIEW resolved_links AS
SELECT l.id, l.doc_id, s.path AS source_path, l.target_id, t.path AS target_path, l.line,
       l.kind, l.embed, l.target, l.anchor, l.alias, l.anchor_ok
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id""",
    "backlinks": """
CREATE VIEW backlinks AS
SELECT l.target_id AS doc_id, t.path, l.doc_id AS source_id, s.path AS source_path,
       s.title AS source_title, l.line, l.embed, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id
WHERE l.target_id <> l.doc_id""",
    "unresolved_links": """
CREATE VIEW unresolved_links AS
SELECT l.id, l.doc_id, s.path AS source_path, l.line, l.kind, l.embed, l.target, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.doc_id
WHERE l.target_id IS NULL AND l.target_path IS NULL""",
    "broken_anchors": """
CREATE VIEW broken_anchors AS
SELECT l.id, l.doc_id, s.path AS source_path, l.line, l.target, t.path AS target_path, l.anchor
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id
WHERE l.anchor_ok = 0""",
    "document_stats": """
CREATE VIEW document_stats AS
SELECT d.id AS doc_id, d.path, d.title,
       (SELECT count(*) FROM chunks WHERE doc_id = d.id) AS chunks,
       (SELECT count(DISTINCT l.doc_id) FROM links AS l
        WHERE l.target_id = d.id AND l.doc_id <> d.id) AS backlinks,
       (SELECT count(*) FROM links AS l WHERE l.doc_id = d.id) AS outlinks
FROM documents AS d""",
}


def _schema_10(con: apsw.Connection) -> None:
    """links.source_id is links.doc_id, as in every other table that belongs to a document (a
    first query by a new user failed on it); its index is links_doc. The views that read it are
    made again: resolved_links, unresolved_links and broken_anchors call it doc_id too (with
    source_path), backlinks keeps source_id for the linking note (its doc_id is the target)."""
    for name in _LINK_VIEWS_10:
        con.execute(f"DROP VIEW IF EXISTS {name}")
    con.execute("DROP INDEX IF EXISTS links_source")
    con.execute("ALTER TABLE links RENAME COLUMN source_id TO doc_id")
    con.execute("CREATE INDEX links_doc ON links(doc_id)")
    for ddl in _LINK_VIEWS_10.values():
        con.execute(ddl)


# chunks_cjk and the triggers that keep it, as schema version 12 made them (see _schema_12).
_CJK_12 = (
    """
CREATE VIRTUAL TABLE chunks_cjk USING fts5(
    body, title, headings,
    content = '',
    tokenize = 'porter unicode61 remove_diacritics 2 categories ''L* N* Co M*'''
)""",
    """
CREATE TRIGGER chunks_cjk_before_delete BEFORE DELETE ON chunks
WHEN EXISTS (SELECT 1 FROM chunks_cjk_docsize WHERE id = old.id) BEGIN
    INSERT INTO chunks_cjk (chunks_cjk, rowid, body, title, headings)
    SELECT 'delete', id, kbase_cjk_pairs(body), kbase_cjk_pairs(title), kbase_cjk_pairs(headings)
    FROM chunks_fts_content WHERE id = old.id;
END""",
    f"""
CREATE TRIGGER documents_before_rename BEFORE UPDATE OF path ON documents
{_RENAME_WHEN_6} BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = old.id);
    INSERT INTO chunks_cjk (chunks_cjk, rowid, body, title, headings)
    SELECT 'delete', f.id, kbase_cjk_pairs(f.body), kbase_cjk_pairs(f.title),
           kbase_cjk_pairs(f.headings) FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = old.id)
      AND EXISTS (SELECT 1 FROM chunks_cjk_docsize AS z WHERE z.id = f.id);
END""",
    f"""
CREATE TRIGGER documents_after_rename AFTER UPDATE OF path ON documents
{_RENAME_WHEN_6} BEGIN
    INSERT INTO chunks_fts (rowid, title, headings, body)
    SELECT f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = new.id);
    INSERT INTO chunks_cjk (rowid, body, title, headings)
    SELECT id, b, t, h FROM (
        SELECT f.id, f.body, f.title, f.headings, kbase_cjk_pairs(f.body) AS b,
               kbase_cjk_pairs(f.title) AS t, kbase_cjk_pairs(f.headings) AS h
        FROM chunks_fts_content AS f WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = new.id))
    WHERE b <> body OR t <> title OR h <> headings;
END""",
)


def _schema_12(con: apsw.Connection) -> None:
    """chunks_cjk without FTS5's contentless_delete option, which SQLite before 3.43 cannot read
    (Debian 12's sqlite3, Python's sqlite3 there, Datasette on it failed to open the index): a
    contentless table whose rows are deleted with the 'delete' command and their pair text, made
    again by kbase_cjk_pairs() (kbase.store.db registers it). The table is made again and filled
    from the chunks; the rename triggers now rewrite its rows too (the title column holds the
    file name)."""
    from kbase.store import cjk_table

    for trigger in (
        "chunks_cjk_before_delete",
        "documents_before_rename",
        "documents_after_rename",
    ):
        con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    con.execute("DROP TABLE chunks_cjk")
    for ddl in _CJK_12:
        con.execute(ddl)
    cjk_table.rebuild(con)


# version -> step. Version 1 was the first schema (kept in tests/data/schema_v1.sql).
MIGRATIONS: dict[int, str | Callable[[apsw.Connection], None]] = {
    # roots.relpath: the root relative to the index file's folder, so that when the notes and the
    # index move together kbase finds the notes again (kbase roots, kbase index).
    2: "ALTER TABLE roots ADD COLUMN relpath TEXT;",
    # Size (BENCHMARKS.md): chunks.hash was never read (vectors are reused by embed_hash), and no
    # query looks documents up by hash (renames are matched in memory during a run).
    3: "ALTER TABLE chunks DROP COLUMN hash; DROP INDEX documents_hash;",
    # kbase writes a chunk's keyword-index row itself (store.write_document), with the values it
    # already has: through this trigger and the view it cost 150 us a chunk, directly 25 us.
    # Deleting still goes through chunks_before_delete, which reads the same view.
    4: "DROP TRIGGER chunks_after_insert;",
    # Size (BENCHMARKS.md; 10,000-note vault: 63.3 -> 51.7 MB). chunks_fts lists body first, chunks
    # keeps embed_hash as 8 bytes with an index of embedded chunks only, chunks_to_embed goes,
    # links.target_path is kept for attachments only (a note's path is its documents row's).
    5: _schema_5,
    # Names (issue: a note's own name did not find it): the file name joins the title column.
    6: _schema_6,
    # Malformed front matter is kept per document (diagnostics kind 'frontmatter') and listed by
    # the view frontmatter_warnings, kbase status and kbase check.
    7: _schema_7,
    # Chinese, Japanese, Korean, Thai, ... searchable (issue 13; BENCHMARKS.md): a second keyword
    # index with rows only for chunks in those scripts.
    8: _schema_8,
    # PDFs and canvases with their pages and cards (issue 25): pages, pdf_info, canvas_cards,
    # canvas_edges, the views pdf_pages, chunk_pages and chunk_cards; PDF metadata is searchable.
    9: _schema_9,
    # links.source_id -> links.doc_id (issue 28): every table names its document column doc_id.
    10: _schema_10,
    # Files unreadable for what they hold are remembered by their stat, so that a hostile PDF
    # costs its time limit once, not on every run (issue 25).
    11: """CREATE TABLE unreadable (
    root_id  INTEGER NOT NULL REFERENCES roots(id) ON DELETE CASCADE,
    path     TEXT NOT NULL,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    reader   TEXT NOT NULL,
    reason   TEXT NOT NULL,
    PRIMARY KEY (root_id, path)
) STRICT, WITHOUT ROWID;""",
    # Any SQLite client (issue 35): chunks_cjk without contentless_delete (SQLite 3.43), so that
    # SQLite 3.40 (Debian 12, Python's sqlite3, Datasette) opens the index.
    12: _schema_12,
    # Heading ids from attribute lists ('## Props {#props}', issue 34): links to '#props' resolve
    # to that heading. Filled when the chunker version's change derives every document again.
    13: "ALTER TABLE headings ADD COLUMN anchor TEXT;",
    # What decoding repaired (NUL padding, invalid UTF-8 bytes) was kept as a front matter warning
    # (issue 35): its own kind, 'decode'; kbase check and frontmatter_warnings list front matter.
    14: "UPDATE diagnostics SET kind = 'decode'"
    " WHERE kind = 'frontmatter' AND instr(detail, 'front matter') = 0;",
    # A long note rewritten or deleted (issue 33): kbase removes its keyword rows itself, reading
    # its text once; the trigger removes only rows still there (through the view it read the
    # whole text for each chunk: 4,000 chunks of a 3.8 MB note, 12 s more to re-index).
    15: """DROP TRIGGER chunks_before_delete;
CREATE TRIGGER chunks_before_delete BEFORE DELETE ON chunks
WHEN EXISTS (SELECT 1 FROM chunks_fts_docsize WHERE id = old.id) BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', id, title, headings, body FROM chunks_fts_content WHERE id = old.id;
END;""",
    # Ids of a note's elements ('<a id="old-name"></a>', '{ #id }'): links to '#old-name'
    # resolve. Filled when the chunker version's change derives every document again.
    16: """CREATE TABLE html_ids (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    html_id    TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char   INTEGER NOT NULL,
    PRIMARY KEY (doc_id, html_id)
) STRICT, WITHOUT ROWID;""",
}

SCHEMA_VERSION = 1 + len(MIGRATIONS)
