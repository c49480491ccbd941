-- kbase index schema, version 14 (PRAGMA user_version).
--
-- This file is the single source of the DDL: kbase runs it when it creates an index, and it is
-- packaged into the wheel. An index written by an older kbase is brought up to this version by
-- the numbered steps in kbase/migrations.py (tests check that the result equals a new index).
-- The file is also the reference for people who query the index with SQL; prefer the views at
-- the end to the tables, they are the stable surface.
--
-- Conventions: character offsets (start_char, end_char) index the decoded text in
-- documents.body, 0-based and end-exclusive, counted in Unicode code points, so that
-- substr(body, start_char + 1, end_char - start_char) in SQL and body[start_char:end_char] in
-- Python give exactly the chunk's or heading's text.

-- Key/value settings: schema details, embedder fingerprint, chunker settings, last index time.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,      -- setting name
    value TEXT NOT NULL          -- setting value (JSON where structured)
) STRICT;

-- The folders (or single files) that were indexed; a document's path is relative to its root.
CREATE TABLE roots (
    id              INTEGER PRIMARY KEY,    -- row id
    path            TEXT NOT NULL UNIQUE,   -- absolute path of the folder or file as indexed
    added_at        TEXT NOT NULL,          -- UTC ISO-8601 time the root was first indexed
    last_indexed_at TEXT,                   -- UTC ISO-8601 time of the last completed index run
    relpath         TEXT                    -- the root relative to the index file's folder (found again when both move)
) STRICT;

-- One row per indexed file, with its decoded text.
CREATE TABLE documents (
    id          INTEGER PRIMARY KEY,        -- row id
    root_id     INTEGER NOT NULL REFERENCES roots(id), -- the root (roots.id) it belongs to
    path        TEXT NOT NULL,          -- path relative to the root, '/'-separated ('' for a file root)
    kind        TEXT NOT NULL,          -- 'markdown', 'text', 'pdf' or 'canvas'
    title       TEXT NOT NULL,          -- the file name, as Obsidian shows it; for a slug (ch04-01-what-is-ownership) the front matter title, else the heading that opens the note (a PDF's or canvas's: always the file name)
    size        INTEGER NOT NULL,       -- file size in bytes when indexed
    mtime_ns    INTEGER NOT NULL,       -- file modification time (ns since the epoch) when indexed
    hash        TEXT NOT NULL,          -- sha256 of the file's bytes (hex)
    encoding    TEXT NOT NULL,          -- encoding the bytes were decoded with, e.g. 'utf_8', 'cp1252'; 'pdf' for a PDF
    frontmatter TEXT,                   -- front matter as a JSON object, NULL if none or malformed
    body_start  INTEGER NOT NULL DEFAULT 0, -- offset where the text after the front matter starts
    date        TEXT,                   -- date from front matter (date/created/updated), ISO-8601
    indexed_at  TEXT NOT NULL,          -- UTC ISO-8601 time this version was indexed
    body        TEXT NOT NULL,          -- the whole decoded text, line endings as in the file (PDF, canvas: see pages, canvas_cards)
    UNIQUE (root_id, path)
) STRICT;

-- Passages of a document; the text is not stored twice: it is body[start_char:end_char].
CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,       -- row id
    doc_id       INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    seq          INTEGER NOT NULL,      -- 0-based position of the chunk in its document
    start_char   INTEGER NOT NULL,      -- offset of the first character in documents.body
    end_char     INTEGER NOT NULL,      -- offset after the last character (exclusive)
    line         INTEGER NOT NULL,      -- 1-based line number of start_char
    end_line     INTEGER NOT NULL,      -- 1-based line number of the chunk's last character
    heading_path TEXT NOT NULL DEFAULT '', -- enclosing headings joined by ' > ', e.g. 'Guide > Install'
    kind         TEXT NOT NULL DEFAULT 'prose', -- prose, code, table, list, quote, config, cli, mixed
    tokens       INTEGER NOT NULL,      -- size in the embedding model's tokens (see meta 'chunker')
    flags        INTEGER NOT NULL DEFAULT 0, -- bit 1: oversized (a protected block above the budget)
    embed_hash   BLOB NOT NULL,         -- first 8 bytes of the sha256 of the text the embedder sees
    embedded     INTEGER NOT NULL DEFAULT 0, -- 1 once chunks_vec holds this chunk's vector
    UNIQUE (doc_id, seq)
) STRICT;
-- Finds a stored vector for the same embedder input (only embedded chunks can give one).
CREATE INDEX chunks_embed_hash ON chunks(embed_hash) WHERE embedded = 1;

-- chunks_vec (sqlite-vec, created by kbase once the embedding model's dimension is known):
--   CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[384] distance_metric=cosine)
-- one row per embedded chunk, rowid = chunks.id. The model that made the vectors is recorded in
-- meta 'embedder'; vectors of two models never mix.

-- How documents were read and chunked, as rows rather than log lines: front matter that could not
-- be read and was left out ('frontmatter': malformed YAML, not a mapping, too large), what
-- decoding repaired ('decode': invalid bytes shown as U+FFFD, NUL bytes after the text), a protected
-- block over the budget ('oversized'), a code fence that never closes ('unclosed_fence'), any
-- split that had to cut inside a sentence ('cut_sentence') or a word ('cut_word'), a PDF with
-- pages without text ('no_text': scanned pages, no OCR) and canvas entries left out ('canvas').
CREATE TABLE diagnostics (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    kind       TEXT NOT NULL,      -- frontmatter, decode, oversized, unclosed_fence, cut_sentence, cut_word, no_text, canvas
    start_char INTEGER NOT NULL,   -- the block or chunk concerned: body[start_char:end_char]
    end_char   INTEGER NOT NULL,            -- offset after the last character (exclusive)
    line       INTEGER NOT NULL,   -- 1-based line of start_char
    detail     TEXT NOT NULL DEFAULT ''  -- what happened, for people
) STRICT;
CREATE INDEX diagnostics_doc ON diagnostics(doc_id);

-- Tags from front matter ('tags') and inline '#tags' outside code.
CREATE TABLE tags (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    tag    TEXT NOT NULL COLLATE NOCASE,   -- without the leading '#', nested tags keep their '/'
    source TEXT NOT NULL,                  -- 'frontmatter' or 'inline'
    PRIMARY KEY (doc_id, tag)
) STRICT, WITHOUT ROWID;
CREATE INDEX tags_tag ON tags(tag);

-- Front matter aliases: other names a note answers to.
CREATE TABLE aliases (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    alias  TEXT NOT NULL COLLATE NOCASE,    -- another name of the note, as written in front matter
    PRIMARY KEY (doc_id, alias)
) STRICT, WITHOUT ROWID;
CREATE INDEX aliases_alias ON aliases(alias);

-- Headings of Markdown documents (and of canvases' text cards), in order. A PDF's are its outline
-- (bookmarks): each at the start of the page it points at, with no text of its own there
-- (start_char = end_char).
CREATE TABLE headings (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    seq        INTEGER NOT NULL,   -- 0-based position among the document's headings
    level      INTEGER NOT NULL,   -- 1 to 6
    text       TEXT NOT NULL,      -- heading text without the '#' markers and without a trailing attribute list ('{#id .class}')
    start_char INTEGER NOT NULL,   -- offset of the heading line in documents.body (a heading in a quote: after the quote's '>' markers; a PDF's bookmark: of the page it points at)
    end_char   INTEGER NOT NULL,   -- offset after the heading line's text (exclusive; a PDF's bookmark has no text in the body: start_char)
    line       INTEGER NOT NULL,   -- 1-based line number
    anchor     TEXT,               -- the id its attribute list gives it ('## Props {#props}': 'props'), NULL if none
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID;

-- Links from a note: [[wikilinks]], ![[embeds]], Markdown links to local files, and wikilinks in
-- front matter properties. Resolution follows Obsidian's rules within the note's root (vault);
-- it is redone whenever notes appear, move or vanish, so an unresolved link resolves by itself
-- once its target exists, and turns unresolved again when the target goes.
CREATE TABLE links (
    id          INTEGER PRIMARY KEY,        -- row id
    doc_id      INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the note the link is in (documents.id)
    start_char  INTEGER NOT NULL,   -- body[start_char:end_char] is the link's source, e.g. '[[Note|alias]]'
    end_char    INTEGER NOT NULL,           -- offset after the last character (exclusive)
    line        INTEGER NOT NULL,   -- 1-based line of start_char
    kind        TEXT NOT NULL,      -- 'wiki', 'markdown' or 'frontmatter'
    embed       INTEGER NOT NULL,   -- 1 for ![[...]] and ![](...)
    target      TEXT NOT NULL,      -- the target as written, without anchor; '' = the note itself
    anchor      TEXT,               -- 'Heading#Sub' or '^blockid' (without the leading '#'), or NULL
    alias       TEXT,               -- display text, or NULL
    target_id   INTEGER REFERENCES documents(id) ON DELETE SET NULL, -- the note linked to, or NULL
    target_path TEXT,               -- root-relative path of the attachment linked to; NULL for a note (see target_id)
    anchor_ok   INTEGER             -- 1/0: the heading or block exists in the target; NULL if not checked
) STRICT;
CREATE INDEX links_doc ON links(doc_id);
CREATE INDEX links_target ON links(target_id);

-- Block ids ('^id' at the end of a block) that links can point at with [[Note#^id]].
CREATE TABLE block_ids (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    block_id   TEXT NOT NULL COLLATE NOCASE,  -- without the '^'
    start_char INTEGER NOT NULL,              -- body[start_char:end_char] == '^' || block_id
    end_char   INTEGER NOT NULL,            -- offset after the last character (exclusive)
    PRIMARY KEY (doc_id, block_id)
) STRICT, WITHOUT ROWID;

-- Ids that elements of a note have on its site, which a Markdown link's '#id' may name: HTML id
-- attributes ('<a id="old-name"></a>') and attribute lists' ('{ #id }'), outside code; not a
-- heading's (headings.anchor).
CREATE TABLE html_ids (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    html_id    TEXT NOT NULL,                 -- the id as written
    start_char INTEGER NOT NULL,              -- body[start_char:end_char] == html_id
    end_char   INTEGER NOT NULL,              -- offset after the last character (exclusive)
    PRIMARY KEY (doc_id, html_id)
) STRICT, WITHOUT ROWID;

-- Files in a root that are not notes but can be linked to (images, PDFs, ...).
CREATE TABLE attachments (
    root_id INTEGER NOT NULL REFERENCES roots(id) ON DELETE CASCADE, -- the root (roots.id) it belongs to
    path    TEXT NOT NULL,          -- relative to the root
    PRIMARY KEY (root_id, path)
) STRICT, WITHOUT ROWID;

-- The pages of PDF documents. A PDF's body is its pages' texts joined by form feeds (U+000C), as
-- pdftotext writes them: page n is substr(body, start_char + 1, end_char - start_char), and the
-- character at end_char is the form feed before page n + 1. Every non-empty page ends with a line
-- break, so each page starts a line. A page without text (a scanned page) is empty.
CREATE TABLE pages (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the PDF (documents.id)
    page       INTEGER NOT NULL,   -- 1-based page number, in the PDF's order (as #page=N counts)
    start_char INTEGER NOT NULL,   -- offset of the page's first character in documents.body
    end_char   INTEGER NOT NULL,   -- offset after its last character (exclusive)
    PRIMARY KEY (doc_id, page)
) STRICT, WITHOUT ROWID;

-- A PDF's document information (what its Info dictionary says) and page counts.
CREATE TABLE pdf_info (
    doc_id     INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE, -- the PDF (documents.id)
    pages      INTEGER NOT NULL,   -- number of pages
    text_pages INTEGER NOT NULL,   -- pages with text (the others are images: scans, no OCR)
    encrypted  INTEGER NOT NULL DEFAULT 0, -- 1: encrypted, and opened with the empty user password
    title      TEXT,               -- the metadata title (often a tool's: 'Microsoft Word - draft3.doc')
    author     TEXT,               -- Author
    subject    TEXT,               -- Subject
    keywords   TEXT,               -- Keywords
    creator    TEXT,               -- the application that made the original document
    producer   TEXT,               -- the application that wrote the PDF
    created    TEXT,               -- CreationDate as ISO-8601 (also documents.date)
    modified   TEXT,               -- ModDate as ISO-8601
    names      TEXT NOT NULL DEFAULT '' -- title, author, subject and keywords as the keyword index's title column adds them
) STRICT;

-- The cards of Obsidian canvases (.canvas, JSON Canvas). A canvas's body is one segment per card
-- (in the file's order, then one per labelled edge), joined by form feeds: a text card's Markdown,
-- a file card as the embed '![[file#subpath]]' (which is also its row in links, kind 'canvas'), a
-- link card's URL, a group's or an edge's label; each ends with a line break unless empty.
CREATE TABLE canvas_cards (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the canvas (documents.id)
    seq        INTEGER NOT NULL,   -- 0-based position in the body
    card_id    TEXT NOT NULL,      -- the node's (or edge's) id in the canvas file
    kind       TEXT NOT NULL,      -- text, file, link, group, or edge (an edge's label)
    start_char INTEGER NOT NULL,   -- body[start_char:end_char] is the card's segment
    end_char   INTEGER NOT NULL,   -- offset after its last character (exclusive)
    file       TEXT,               -- a file card's vault path, as written
    subpath    TEXT,               -- a file card's subpath without '#' ('Heading', 'page=3')
    url        TEXT,               -- a link card's URL
    x          REAL,               -- position and size on the canvas
    y          REAL,               -- (top)
    width      REAL,               -- width
    height     REAL,               -- height
    color      TEXT,               -- '1'..'6' or '#rrggbb'
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID;

-- The edges (arrows) of canvases, between two cards (canvas_cards.card_id).
CREATE TABLE canvas_edges (
    doc_id    INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the canvas (documents.id)
    seq       INTEGER NOT NULL,    -- 0-based position in the file
    edge_id   TEXT NOT NULL,       -- the edge's id in the canvas file
    from_card TEXT NOT NULL,       -- card_id of the card it starts at
    to_card   TEXT NOT NULL,       -- card_id of the card it points to
    label     TEXT,                -- its label, or NULL (a labelled edge is also a card, kind 'edge')
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID;

-- Files that could not be indexed for what they hold (a damaged, truncated or password-locked PDF,
-- one that hung or crashed the PDF reader, binary data, a canvas that is no JSON). Until the
-- file's size or mtime changes, or the reader's version does, an index run skips it at once with
-- the same reason instead of reading it again. What was indexed of it before stays in documents.
CREATE TABLE unreadable (
    root_id  INTEGER NOT NULL REFERENCES roots(id) ON DELETE CASCADE, -- the root (roots.id) it is in
    path     TEXT NOT NULL,        -- relative to the root
    size     INTEGER NOT NULL,     -- file size in bytes when it failed
    mtime_ns INTEGER NOT NULL,     -- modification time (ns since the epoch) when it failed
    reader   TEXT NOT NULL,        -- what failed to read it, e.g. 'pypdfium2 5.15.2'
    reason   TEXT NOT NULL,        -- the reason, as kbase index printed it
    PRIMARY KEY (root_id, path)
) STRICT, WITHOUT ROWID;

-- What the keyword index reads: one row per chunk with its document's names, its heading path
-- and its text. FTS5 uses it as external content, so chunk text is stored once (in
-- documents.body). The title column holds every name a note answers to: its title, its file
-- name without extension when that differs from the title, and its aliases (for a PDF: the title,
-- author, subject and keywords of its document information), so that a note is found by the name
-- a person knows it by. A first heading that repeats the title is left out of
-- the heading path here: the title column already holds those words (they would count twice,
-- three times with the body).
CREATE VIEW chunks_fts_content AS
SELECT c.id                                                    AS id,
       d.title
       || (SELECT CASE WHEN stem = '' OR lower(stem) = lower(d.title) THEN '' ELSE ' ' || stem END
           FROM (SELECT CASE WHEN instr(base, '.') > 1
                             THEN substr(base, 1, length(rtrim(base, replace(base, '.', ''))) - 1)
                             ELSE base END AS stem
                 FROM (SELECT substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1) AS base)))
       || coalesce((SELECT ' ' || group_concat(a.alias, ' ') FROM aliases AS a
                    WHERE a.doc_id = d.id), '')
       || coalesce((SELECT ' ' || p.names FROM pdf_info AS p
                    WHERE p.doc_id = d.id AND p.names <> ''), '') AS title,
       CASE WHEN c.heading_path = d.title THEN ''
            WHEN substr(c.heading_path, 1, length(d.title) + 3) = d.title || ' > '
            THEN substr(c.heading_path, length(d.title) + 4)
            ELSE c.heading_path END                            AS headings,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS body
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id;

-- Keyword index over chunks. Query it with MATCH, rank with bm25(chunks_fts) (kbase weighs body,
-- title and headings the same), and use highlight()/snippet() on the body column (0).
-- Body comes first because FTS5 marks each position list of any other column with the column's
-- number, and most positions are in the body: this order makes the index a third smaller.
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    body, title, headings,
    content = 'chunks_fts_content',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- kbase writes a chunk's chunks_fts row itself, with the values of chunks_fts_content (a trigger
-- through the view cost six times as much), and removes a document's rows itself when it rewrites
-- or deletes it (the view's body reads the whole text for each chunk: a long note's chunks took
-- minutes); rows it did not remove, the triggers below remove: whatever removes
-- or rewrites a document removes its chunks first, while the old body and aliases are still there
-- for FTS5's 'delete' command; a writer inserts a document's aliases before its chunks.

CREATE TRIGGER chunks_before_delete BEFORE DELETE ON chunks
WHEN EXISTS (SELECT 1 FROM chunks_fts_docsize WHERE id = old.id) BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', id, title, headings, body FROM chunks_fts_content WHERE id = old.id;
END;

CREATE TRIGGER chunks_before_update
BEFORE UPDATE OF id, doc_id, start_char, end_char, heading_path ON chunks BEGIN
    SELECT RAISE(ABORT, 'chunks are replaced, not updated: delete and insert instead');
END;

-- Keyword index for scripts written without spaces between words: Chinese, Japanese, Korean, Thai,
-- Lao, Khmer, Myanmar (kbase/search/cjk.py). Only chunks that contain such characters (in the text,
-- title or headings) have a row; it holds the values of their chunks_fts row with every run of
-- those characters written as its overlapping pairs ('同步设置' -> '同步 步设 设置'), so a word of
-- two or more characters matches as the phrase of its pairs: MATCH '"同步 步设 设置"'. Contentless:
-- the text is chunks_fts_content's; highlight() and snippet() are not available here. Its rows are
-- removed with FTS5's 'delete' command and the pair text they were written with, which kbase's
-- function kbase_cjk_pairs() makes again (kbase registers it; other SQLite clients read this table
-- but cannot delete chunks of documents that have a row). No contentless_delete option: SQLite
-- 3.40 reads this table.
CREATE VIRTUAL TABLE chunks_cjk USING fts5(
    body, title, headings,
    content = '',
    tokenize = 'porter unicode61 remove_diacritics 2 categories ''L* N* Co M*'''
);

CREATE TRIGGER chunks_cjk_before_delete BEFORE DELETE ON chunks
WHEN EXISTS (SELECT 1 FROM chunks_cjk_docsize WHERE id = old.id) BEGIN
    INSERT INTO chunks_cjk (chunks_cjk, rowid, body, title, headings)
    SELECT 'delete', id, kbase_cjk_pairs(body), kbase_cjk_pairs(title), kbase_cjk_pairs(headings)
    FROM chunks_fts_content WHERE id = old.id;
END;

CREATE TRIGGER documents_before_delete BEFORE DELETE ON documents BEGIN
    DELETE FROM chunks WHERE doc_id = old.id;
END;

CREATE TRIGGER documents_before_rewrite BEFORE UPDATE OF title, body ON documents BEGIN
    DELETE FROM chunks WHERE doc_id = old.id;
END;

-- A note renamed or moved (same text, new path) may change its file name, which the keyword
-- index's title column holds (chunks_fts_content): its rows (in chunks_fts, and in chunks_cjk for
-- the chunks with a row there) are taken out with the old name and put back with the new one. A
-- move to another folder keeps the file name and costs nothing.
CREATE TRIGGER documents_before_rename BEFORE UPDATE OF path ON documents
WHEN substr(old.path, length(rtrim(old.path, replace(old.path, '/', ''))) + 1)
     IS NOT substr(new.path, length(rtrim(new.path, replace(new.path, '/', ''))) + 1) BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = old.id);
    INSERT INTO chunks_cjk (chunks_cjk, rowid, body, title, headings)
    SELECT 'delete', f.id, kbase_cjk_pairs(f.body), kbase_cjk_pairs(f.title),
           kbase_cjk_pairs(f.headings) FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = old.id)
      AND EXISTS (SELECT 1 FROM chunks_cjk_docsize AS z WHERE z.id = f.id);
END;

CREATE TRIGGER documents_after_rename AFTER UPDATE OF path ON documents
WHEN substr(old.path, length(rtrim(old.path, replace(old.path, '/', ''))) + 1)
     IS NOT substr(new.path, length(rtrim(new.path, replace(new.path, '/', ''))) + 1) BEGIN
    INSERT INTO chunks_fts (rowid, title, headings, body)
    SELECT f.id, f.title, f.headings, f.body FROM chunks_fts_content AS f
    WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = new.id);
    INSERT INTO chunks_cjk (rowid, body, title, headings)
    SELECT id, b, t, h FROM (
        SELECT f.id, f.body, f.title, f.headings, kbase_cjk_pairs(f.body) AS b,
               kbase_cjk_pairs(f.title) AS t, kbase_cjk_pairs(f.headings) AS h
        FROM chunks_fts_content AS f WHERE f.id IN (SELECT id FROM chunks WHERE doc_id = new.id))
    WHERE b <> body OR t <> title OR h <> headings;
END;

-- Stable views for scripts -------------------------------------------------------------------

-- Every note with its root-relative path, absolute path and main metadata.
CREATE VIEW notes AS
SELECT d.id, d.path,
       CASE WHEN d.path = '' THEN r.path ELSE r.path || '/' || d.path END AS abspath,
       d.title, d.kind, d.size, d.encoding, d.date,
       datetime(d.mtime_ns / 1000000000, 'unixepoch') AS modified,
       d.indexed_at, d.frontmatter
FROM documents AS d JOIN roots AS r ON r.id = d.root_id;

-- One row per (note, tag).
CREATE VIEW note_tags AS
SELECT t.doc_id, d.path, d.title, t.tag, t.source
FROM tags AS t JOIN documents AS d ON d.id = t.doc_id;

-- Every chunk with its text, line and location.
CREATE VIEW chunk_texts AS
SELECT c.id, c.doc_id, d.path, c.seq, c.start_char, c.end_char, c.line, c.end_line, c.heading_path, c.kind,
       c.tokens, c.flags,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS text
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id;

-- Links whose target note exists: the note the link is in (doc_id, source_path) and the target.
CREATE VIEW resolved_links AS
SELECT l.id, l.doc_id, s.path AS source_path, l.target_id, t.path AS target_path, l.line,
       l.kind, l.embed, l.target, l.anchor, l.alias, l.anchor_ok
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id;

-- For each note (doc_id, path), the notes that link to it (source_id, source_path: the note the
-- link is in, links.doc_id), one row per link.
CREATE VIEW backlinks AS
SELECT l.target_id AS doc_id, t.path, l.doc_id AS source_id, s.path AS source_path,
       s.title AS source_title, l.line, l.embed, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id
WHERE l.target_id <> l.doc_id;

-- Links that point at nothing (no note or attachment of that name in the root).
CREATE VIEW unresolved_links AS
SELECT l.id, l.doc_id, s.path AS source_path, l.line, l.kind, l.embed, l.target, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.doc_id
WHERE l.target_id IS NULL AND l.target_path IS NULL;

-- Links whose note exists but whose #heading or #^block does not.
CREATE VIEW broken_anchors AS
SELECT l.id, l.doc_id, s.path AS source_path, l.line, l.target, t.path AS target_path, l.anchor
FROM links AS l JOIN documents AS s ON s.id = l.doc_id JOIN documents AS t ON t.id = l.target_id
WHERE l.anchor_ok = 0;

-- Notes whose front matter kbase could not read (one row per problem); each was indexed without
-- its front matter. line: where the YAML parser stopped, else 1; kbase check lists them.
CREATE VIEW frontmatter_warnings AS
SELECT g.doc_id, d.path, d.title, g.line, g.detail
FROM diagnostics AS g JOIN documents AS d ON d.id = g.doc_id
WHERE g.kind = 'frontmatter';

-- Per-note counts: chunks, words of text, distinct notes linking in, links out.
CREATE VIEW document_stats AS
SELECT d.id AS doc_id, d.path, d.title,
       (SELECT count(*) FROM chunks WHERE doc_id = d.id) AS chunks,
       (SELECT count(DISTINCT l.doc_id) FROM links AS l
        WHERE l.target_id = d.id AND l.doc_id <> d.id) AS backlinks,
       (SELECT count(*) FROM links AS l WHERE l.doc_id = d.id) AS outlinks
FROM documents AS d;

-- Every page of every PDF, with its text.
CREATE VIEW pdf_pages AS
SELECT p.doc_id, d.path, d.title, p.page, p.start_char, p.end_char,
       substr(d.body, p.start_char + 1, p.end_char - p.start_char) AS text
FROM pages AS p JOIN documents AS d ON d.id = p.doc_id;

-- The page of each chunk of a PDF: where it starts and where it ends. A search hit's page (kbase
-- search, --json 'page') is the page of its first match inside the chunk: page_at(offset) is
-- SELECT max(page) FROM pages WHERE doc_id = ? AND start_char <= offset.
CREATE VIEW chunk_pages AS
SELECT c.id AS chunk_id, c.doc_id, d.path,
       (SELECT max(p.page) FROM pages AS p
        WHERE p.doc_id = c.doc_id AND p.start_char <= c.start_char) AS page,
       (SELECT max(p.page) FROM pages AS p
        WHERE p.doc_id = c.doc_id AND p.start_char < c.end_char) AS end_page
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
WHERE d.kind = 'pdf';

-- The card of each chunk of a canvas (the card it starts in).
CREATE VIEW chunk_cards AS
SELECT c.id AS chunk_id, c.doc_id, d.path, k.card_id, k.kind AS card_kind
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id
JOIN canvas_cards AS k ON k.doc_id = c.doc_id
     AND k.seq = (SELECT max(seq) FROM canvas_cards
                  WHERE doc_id = c.doc_id AND start_char <= c.start_char)
WHERE d.kind = 'canvas';
