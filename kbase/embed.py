"""The index side of embeddings: the ``chunks_vec`` table, reuse of vectors a note already had,
and filling in the vectors that are missing with an ``Embedder`` (``kbase.embedder``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import apsw

from kbase.embedder import Embedder, embed_input
from kbase.errors import KbaseError
from kbase.models import EmbedReport
def has_vectors(con: apsw.Connection) -> bool:
    return con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is not None


def stored_fingerprint(con: apsw.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    return row[0] if row else None


def check_fingerprint(con: apsw.Connection, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models."""
    stored = stored_fingerprint(con)
    if stored is not None and stored != embedder.fingerprint:
        raise KbaseError(
            f"the index holds vectors of another embedding model ({json.loads(stored).get('model')})",
            "re-embed everything with: kbase embed --rebuild",
        )


# Removes a chunk's vector with the chunk (made with chunks_vec, which schema.sql cannot declare).
VECTOR_TRIGGER = (
    "CREATE TRIGGER IF NOT EXISTS chunks_vec_after_delete AFTER DELETE ON chunks WHEN old.embedded BEGIN"
    " DELETE FROM chunks_vec WHERE rowid = old.id; END"
)


def ensure_vector_table(con: apsw.Connection, embedder: Embedder) -> None:
    """Create chunks_vec for the model's dimension (and the trigger that keeps it in step)."""
    check_fingerprint(con, embedder)
    with con:
        con.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
            f"embedding float[{int(embedder.dimension)}] distance_metric=cosine)"
        )
        con.execute(VECTOR_TRIGGER)
        con.execute(
            "INSERT INTO meta (key, value) VALUES ('embedder', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (embedder.fingerprint,),
        )


def drop_vectors(con: apsw.Connection) -> None:
    """Forget every vector (another model is coming)."""
    with con:
        con.execute("DROP TRIGGER IF EXISTS chunks_vec_after_delete")
        con.execute("DROP TABLE IF EXISTS chunks_vec")
        con.execute("UPDATE chunks SET embedded = 0 WHERE embedded")
        con.execute("DELETE FROM meta WHERE key = 'embedder'")


def missing_count(con: apsw.Connection) -> int:
    return con.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]


def coverage(con: apsw.Connection) -> tuple[int, int]:
    """(chunks with a vector, all chunks): how much of the index semantic search sees."""
    return con.execute("SELECT count(*) FILTER (WHERE embedded), count(*) FROM chunks").fetchone()


# progress(done, total): once before the first batch (0, total), then after each committed batch
EmbedProgress = Callable[[int, int], None]
# Chunks are taken this many at a time, newest notes first, and run sorted by length within the
# window (batches of similar lengths pad little).
WINDOW = 256


def embed_missing(
    con: apsw.Connection,
    embedder: Embedder,
    *,
    progress: EmbedProgress | None = None,
    batch: int | None = None,
    limit: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> EmbedReport:
    """Embed the chunks that have no vector yet, the newest notes (by file time) first, one
    committed batch at a time: an interruption loses at most the batch in flight.

    ``limit`` (chunks) and ``should_stop`` (asked between batches) end the run early;
    a long-lived process embeds this way when it is idle, a little at a time. A vector already
    stored for the same embedder input (another chunk with identical context and text) is copied
    instead of computed.
    """
    ensure_vector_table(con, embedder)
    batch = batch or embedder.batch_size
    total = missing_count(con)
    if limit is not None:
        total = min(total, limit)
    done = reused = 0
    t0 = time.perf_counter()
    embed_seconds = 0.0
    if progress:
        progress(0, total)
    stopped = False
    while done < total and not stopped:
        ids = [r for (r,) in con.execute(
            "SELECT c.id FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.embedded = 0"
            " ORDER BY d.mtime_ns DESC, c.doc_id, c.seq LIMIT ?", (min(WINDOW, total - done),))]
        if not ids:
            break
        rows = con.execute(
            "SELECT c.id, c.embed_hash, c.tokens, d.title, c.heading_path,"
            " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
            f" FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(ids))})",
            ids).fetchall()
        copies: dict[int, bytes] = {}
        todo = []
        for chunk_id, ehash, tokens, title, heading_path, text in rows:
            copy = con.execute(
                "SELECT v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
                " WHERE c.embed_hash = ? AND c.embedded = 1 LIMIT 1",
                (ehash,),
            ).fetchone()
            if copy:
                copies[chunk_id] = copy[0]
            else:
                todo.append((tokens, chunk_id, embed_input(title, heading_path, text)))
        if copies:
            _store(con, copies)
            reused += len(copies)
            done += len(copies)
        todo.sort()  # by length (the chunk's tokens; the context adds at most ~32)
        for start in range(0, len(todo), batch):
            if should_stop is not None and should_stop():
                stopped = True
                break
            part = todo[start:start + batch]
            t1 = time.perf_counter()
            vectors = embedder.embed_batch([text for _, _, text in part])
            embed_seconds += time.perf_counter() - t1
            _store(con, {chunk_id: vec for (_, chunk_id, _), vec in zip(part, vectors)})
            done += len(part)
            if progress:
                progress(done, total)
    return EmbedReport(embedded=done - reused, reused=reused, seconds=time.perf_counter() - t0,
                       model_seconds=embed_seconds, remaining=missing_count(con))


def _store(con: apsw.Connection, vectors: dict[int, bytes]) -> None:
    with con:
        for chunk_id, vec in vectors.items():
            con.execute("INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)", (chunk_id, vec))
        con.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in vectors])


def embed_newest(con: apsw.Connection, embedder: Embedder, limit: int) -> int:
    """Embed up to ``limit`` chunks that lack a vector, newest notes first (by file time); how
    many were done (0: nothing is missing). For a long-lived process that embeds while idle, a
    batch at a time (kbase mcp --watch); ``embed_missing`` with ``limit`` and ``should_stop``."""
    result = embed_missing(con, embedder, limit=limit)
    return result.embedded + result.reused


def copy_vectors(con: apsw.Connection, old: dict[bytes, bytes], new_chunks: Sequence[tuple[int, bytes]]) -> int:
    """Give new chunks the vectors their identical predecessors had (same embedder input)."""
    n = 0
    for chunk_id, ehash in new_chunks:
        vec = old.get(ehash)
        if vec is not None:
            con.execute("INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)", (chunk_id, vec))
            con.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
            n += 1
    return n


def vectors_of(con: apsw.Connection, doc_id: int) -> dict[bytes, bytes]:
    """embed_hash -> vector for a document's embedded chunks (kept across its rewrite)."""
    if not has_vectors(con):
        return {}
    return dict(con.execute(
        "SELECT c.embed_hash, v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
        " WHERE c.doc_id = ? AND c.embedded",
        (doc_id,),
    ).fetchall())
