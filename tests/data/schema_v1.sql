-- kbase index schema, version 1 (later versions: the numbered steps in kbase/store/migrations.py).
--
-- This file is the single source of the DDL: kbase runs it when it creates an index, and it is
-- packaged into the wheel. Later changes are numbered steps in kbase/store/migrations.py, gated by
-- PRAGMA user_version. The file is also the reference for people who query the index with SQL;
-- prefer the views at the end to the tables, they are the stable surface.
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
    last_indexed_at TEXT                    -- UTC ISO-8601 time of the last completed index run
) STRICT;

-- One row per indexed file, with its decoded text.
CREATE TABLE documents (
    id          INTEGER PRIMARY KEY,        -- row id
    root_id     INTEGER NOT NULL REFERENCES roots(id), -- the root (roots.id) it belongs to
    path        TEXT NOT NULL,          -- path relative to the root, '/'-separated ('' for a file root)
    kind        TEXT NOT NULL,          -- 'markdown' or 'text'
    title       TEXT NOT NULL,          -- front matter title, else first heading, else file name
    size        INTEGER NOT NULL,       -- file size in bytes when indexed
    mtime_ns    INTEGER NOT NULL,       -- file modification time (ns since the epoch) when indexed
    hash        TEXT NOT NULL,          -- sha256 of the file's bytes (hex)
    encoding    TEXT NOT NULL,          -- encoding the bytes were decoded with, e.g. 'utf_8', 'cp1252'
    frontmatter TEXT,                   -- front matter as a JSON object, NULL if none or malformed
    body_start  INTEGER NOT NULL DEFAULT 0, -- offset where the text after the front matter starts
    date        TEXT,                   -- date from front matter (date/created/updated), ISO-8601
    indexed_at  TEXT NOT NULL,          -- UTC ISO-8601 time this version was indexed
    body        TEXT NOT NULL,          -- the whole decoded text, line endings as in the file
    UNIQUE (root_id, path)
) STRICT;
CREATE INDEX documents_hash ON documents(hash); -- (dropped in schema 3)

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
    hash         TEXT NOT NULL,         -- (dropped in schema 3)
    embed_hash   TEXT NOT NULL,         -- sha256 (first 32 hex digits) of the text the embedder sees
    embedded     INTEGER NOT NULL DEFAULT 0, -- 1 once chunks_vec holds this chunk's vector
    UNIQUE (doc_id, seq)
) STRICT;
CREATE INDEX chunks_embed_hash ON chunks(embed_hash);
CREATE INDEX chunks_to_embed ON chunks(id) WHERE embedded = 0;

-- chunks_vec (sqlite-vec, created by kbase once the embedding model's dimension is known):
--   CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[384] distance_metric=cosine)
-- one row per embedded chunk, rowid = chunks.id. The model that made the vectors is recorded in
-- meta 'embedder'; vectors of two models never mix.

-- How documents were chunked, as rows rather than log lines: a protected block over the budget
-- ('oversized'), a code fence that never closes ('unclosed_fence'), and any split that had to
-- cut inside a sentence ('cut_sentence') or a word ('cut_word').
CREATE TABLE diagnostics (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    kind       TEXT NOT NULL,      -- oversized, unclosed_fence, cut_sentence, cut_word
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

-- Headings of Markdown documents, in order.
CREATE TABLE headings (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    seq        INTEGER NOT NULL,   -- 0-based position among the document's headings
    level      INTEGER NOT NULL,   -- 1 to 6
    text       TEXT NOT NULL,      -- heading text without the '#' markers
    start_char INTEGER NOT NULL,   -- offset of the heading line in documents.body
    end_char   INTEGER NOT NULL,   -- offset after the heading line's text (exclusive)
    line       INTEGER NOT NULL,   -- 1-based line number
    PRIMARY KEY (doc_id, seq)
) STRICT, WITHOUT ROWID;

-- Links from a note: [[wikilinks]], ![[embeds]], Markdown links to local files, and wikilinks in
-- front matter properties. Resolution follows Obsidian's rules within the note's root (vault);
-- it is redone whenever notes appear, move or vanish, so an unresolved link resolves by itself
-- once its target exists, and turns unresolved again when the target goes.
CREATE TABLE links (
    id          INTEGER PRIMARY KEY,        -- row id
    source_id   INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the note the link is in (documents.id)
    start_char  INTEGER NOT NULL,   -- body[start_char:end_char] is the link's source, e.g. '[[Note|alias]]'
    end_char    INTEGER NOT NULL,           -- offset after the last character (exclusive)
    line        INTEGER NOT NULL,   -- 1-based line of start_char
    kind        TEXT NOT NULL,      -- 'wiki', 'markdown' or 'frontmatter'
    embed       INTEGER NOT NULL,   -- 1 for ![[...]] and ![](...)
    target      TEXT NOT NULL,      -- the target as written, without anchor; '' = the note itself
    anchor      TEXT,               -- 'Heading#Sub' or '^blockid' (without the leading '#'), or NULL
    alias       TEXT,               -- display text, or NULL
    target_id   INTEGER REFERENCES documents(id) ON DELETE SET NULL, -- the note linked to, or NULL
    target_path TEXT,               -- root-relative path of the resolved file (note or attachment), or NULL
    anchor_ok   INTEGER             -- 1/0: the heading or block exists in the target; NULL if not checked
) STRICT;
CREATE INDEX links_source ON links(source_id);
CREATE INDEX links_target ON links(target_id);

-- Block ids ('^id' at the end of a block) that links can point at with [[Note#^id]].
CREATE TABLE block_ids (
    doc_id     INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, -- the document (documents.id)
    block_id   TEXT NOT NULL COLLATE NOCASE,  -- without the '^'
    start_char INTEGER NOT NULL,              -- body[start_char:end_char] == '^' || block_id
    end_char   INTEGER NOT NULL,            -- offset after the last character (exclusive)
    PRIMARY KEY (doc_id, block_id)
) STRICT, WITHOUT ROWID;

-- Files in a root that are not notes but can be linked to (images, PDFs, ...).
CREATE TABLE attachments (
    root_id INTEGER NOT NULL REFERENCES roots(id) ON DELETE CASCADE, -- the root (roots.id) it belongs to
    path    TEXT NOT NULL,          -- relative to the root
    PRIMARY KEY (root_id, path)
) STRICT, WITHOUT ROWID;

-- What the keyword index reads: one row per chunk with its document's title and aliases, its
-- heading path and its text. FTS5 uses it as external content, so chunk text is stored once (in
-- documents.body). Aliases are other titles of a note, so they are searched with the title.
CREATE VIEW chunks_fts_content AS
SELECT c.id                                                    AS id,
       d.title || coalesce((SELECT ' ' || group_concat(a.alias, ' ') FROM aliases AS a
                            WHERE a.doc_id = d.id), '')       AS title,
       c.heading_path                                          AS headings,
       substr(d.body, c.start_char + 1, c.end_char - c.start_char) AS body
FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id;

-- Keyword index over chunks. Query it with MATCH, rank with bm25(chunks_fts, 2.0, 1.0, 1.0)
-- (title, headings, body weights), and use highlight()/snippet() on the body column (2).
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, headings, body,
    content = 'chunks_fts_content',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- The triggers keep chunks_fts equal to chunks. Whatever removes or rewrites a document removes
-- its chunks first, while the old body and aliases are still there for FTS5's 'delete' command;
-- a writer inserts a document's aliases before its chunks.
-- (dropped in schema 4: kbase inserts the FTS row itself, with the same values)
CREATE TRIGGER chunks_after_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, title, headings, body)
    SELECT id, title, headings, body FROM chunks_fts_content WHERE id = new.id;
END;

CREATE TRIGGER chunks_before_delete BEFORE DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, headings, body)
    SELECT 'delete', id, title, headings, body FROM chunks_fts_content WHERE id = old.id;
END;

CREATE TRIGGER chunks_before_update
BEFORE UPDATE OF id, doc_id, start_char, end_char, heading_path ON chunks BEGIN
    SELECT RAISE(ABORT, 'chunks are replaced, not updated: delete and insert instead');
END;

CREATE TRIGGER documents_before_delete BEFORE DELETE ON documents BEGIN
    DELETE FROM chunks WHERE doc_id = old.id;
END;

CREATE TRIGGER documents_before_rewrite BEFORE UPDATE OF title, body ON documents BEGIN
    DELETE FROM chunks WHERE doc_id = old.id;
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

-- Links whose target note exists: source and target with their paths.
CREATE VIEW resolved_links AS
SELECT l.id, l.source_id, s.path AS source_path, l.target_id, t.path AS target_path, l.line,
       l.kind, l.embed, l.target, l.anchor, l.alias, l.anchor_ok
FROM links AS l JOIN documents AS s ON s.id = l.source_id JOIN documents AS t ON t.id = l.target_id;

-- For each note, the notes that link to it (one row per link).
CREATE VIEW backlinks AS
SELECT l.target_id AS doc_id, t.path, l.source_id, s.path AS source_path, s.title AS source_title,
       l.line, l.embed, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.source_id JOIN documents AS t ON t.id = l.target_id
WHERE l.target_id <> l.source_id;

-- Links that point at nothing (no note or attachment of that name in the root).
CREATE VIEW unresolved_links AS
SELECT l.id, l.source_id, s.path AS source_path, l.line, l.kind, l.embed, l.target, l.anchor, l.alias
FROM links AS l JOIN documents AS s ON s.id = l.source_id
WHERE l.target_path IS NULL;

-- Links whose note exists but whose #heading or #^block does not.
CREATE VIEW broken_anchors AS
SELECT l.id, l.source_id, s.path AS source_path, l.line, l.target, l.target_path, l.anchor
FROM links AS l JOIN documents AS s ON s.id = l.source_id
WHERE l.anchor_ok = 0;

-- Per-note counts: chunks, words of text, distinct notes linking in, links out.
CREATE VIEW document_stats AS
SELECT d.id AS doc_id, d.path, d.title,
       (SELECT count(*) FROM chunks WHERE doc_id = d.id) AS chunks,
       (SELECT count(DISTINCT source_id) FROM links WHERE target_id = d.id AND source_id <> d.id) AS backlinks,
       (SELECT count(*) FROM links WHERE source_id = d.id) AS outlinks
FROM documents AS d;
