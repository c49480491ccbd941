"""The index side of embeddings: the ``chunks_vec`` table, reuse of vectors a note already had,
and filling in the vectors that are missing with an ``Embedder`` (``kbase.embed.embedder``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import apsw

from kbase.errors import KbaseError
from kbase.store.db import meta_set

if TYPE_CHECKING:  # (the model itself is not needed to read the index: keyword search)
    from kbase.embed.embedder import Embedder
    from kbase.records import EmbedReport


def has_vectors(con: apsw.Connection) -> bool:
    return (
        con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is not None
    )


def has_embeddings(con: apsw.Connection) -> bool:
    """O(1): the embedder is recorded with the first vector, and an embedded chunk is found
    through the partial index chunks_embed_hash (asking vec0 for one row read its chunk list:
    0.13 s at a million chunks)."""
    if con.execute("SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None:
        return False
    return con.execute("SELECT 1 FROM chunks WHERE embedded = 1 LIMIT 1").fetchone() is not None


def stored_fingerprint(con: apsw.Connection) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    return row[0] if row else None


def check_fingerprint(con: apsw.Connection, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models."""
    stored = stored_fingerprint(con)
    if stored is not None and stored != embedder.fingerprint:
        raise KbaseError(
            "the index holds vectors of another embedding model"
            f" ({json.loads(stored).get('model')})",
            "re-embed everything with: kbase embed --rebuild",
        )


# Removes a chunk's vector with the chunk (made with chunks_vec, which schema.sql cannot declare).
VECTOR_TRIGGER = (
    "CREATE TRIGGER IF NOT EXISTS chunks_vec_after_delete AFTER DELETE ON chunks"
    " WHEN old.embedded BEGIN"
    " DELETE FROM chunks_vec WHERE rowid = old.id; END"
)


# Binary codes of the vectors (the sign of each dimension) in large blocks, for a one-shot
# nearest-neighbour query over a large index (kbase.embed.nearest.nearest_oneshot): one read of
# 48 MB at a million chunks instead of 1.5 GB, or of sqlite-vec's scan. Derived from chunks_vec:
# each stored vector appends its code; a deleted chunk's code stays until the blocks are rebuilt
# (its id then finds no vector when the shortlist is scored, so it is never a hit).
CODES_TABLE = (
    "CREATE TABLE IF NOT EXISTS chunks_codes ("
    " id INTEGER PRIMARY KEY, ids BLOB NOT NULL, codes BLOB NOT NULL)"
)
# Codes per block once merged (3 MB of codes, 0.5 MB of ids).
CODE_BLOCK = 65536
# The blocks are rebuilt from chunks_vec when they hold this share of codes of deleted chunks.
CODES_STALE = 0.1


def has_codes(con: apsw.Connection) -> bool:
    row = con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_codes'").fetchone()
    return row is not None


def _add_codes(con: apsw.Connection, vectors: dict[int, bytes]) -> None:
    """Append the codes of freshly stored vectors (inside the caller's transaction)."""
    if not vectors or not has_codes(con):
        return
    import numpy as np

    ids = np.fromiter(vectors, dtype="<i8", count=len(vectors))
    matrix = np.frombuffer(b"".join(vectors.values()), dtype="<f4").reshape(len(ids), -1)
    _insert_codes(con, ids, matrix)


def _insert_codes(con: apsw.Connection, ids, matrix) -> None:
    from kbase.embed.nearest import code_columns, sign_codes

    con.execute(
        "INSERT INTO chunks_codes (ids, codes) VALUES (?, ?)",
        (ids.tobytes(), code_columns(sign_codes(matrix)).tobytes()),
    )


def rebuild_codes(con: apsw.Connection) -> int:
    """Make chunks_codes again from chunks_vec (creating it if missing); how many codes."""
    from itertools import islice

    import numpy as np

    n = 0
    with con:
        con.execute(CODES_TABLE)
        con.execute("DELETE FROM chunks_codes")
        if not has_vectors(con):
            return 0
        cursor = con.execute("SELECT rowid, embedding FROM chunks_vec")
        while rows := list(islice(cursor, CODE_BLOCK)):
            ids = np.fromiter((r for r, _ in rows), dtype="<i8", count=len(rows))
            matrix = np.frombuffer(b"".join(v for _, v in rows), dtype="<f4")
            _insert_codes(con, ids, matrix.reshape(len(rows), -1))
            n += len(rows)
    return n


def codes_in_step(con: apsw.Connection) -> tuple[int, int]:
    """(vectors without a code, codes of chunks without a vector); (-1, 0) without the table."""
    import numpy as np

    if not has_codes(con):
        return (-1, 0)
    coded = [np.frombuffer(b, dtype="<i8") for (b,) in con.execute("SELECT ids FROM chunks_codes")]
    coded_ids = np.unique(np.concatenate(coded)) if coded else np.zeros(0, dtype="<i8")
    vec = np.fromiter((r for (r,) in con.execute("SELECT rowid FROM chunks_vec")), dtype="<i8")
    entries = sum(len(c) for c in coded)
    missing = int(np.count_nonzero(~np.isin(vec, coded_ids)))
    return missing, entries - (len(vec) - missing)


# Vectors moved per tidy step at most (sqlite-vec blocks of 1024; 8 blocks: about 12 MB written).
TIDY_MAX_BLOCKS = 8


def tidy_vectors(con: apsw.Connection) -> int:
    """Give back the space of deleted vectors; how many vectors were moved.

    sqlite-vec keeps vectors in blocks (``chunks_vec_chunks``, 1024 slots each, 1.5 MB at 384
    dimensions) and fills only the newest block's free slots: a vector deleted from an older
    block (a note edited, its changed chunk re-embedded) leaves a hole there for good, and the
    file grows by a block every 1024 such edits (``kbase compact`` rebuilds the table). When the
    holes in the older blocks add up to a whole block, the live vectors of the emptiest ones are
    deleted and stored again: they go into free slots, sqlite-vec drops a block that has emptied,
    and its pages are used again. Bounded work (``TIDY_MAX_BLOCKS``); nothing for a dense table.
    """
    if not has_vectors(con):
        return 0
    blocks = con.execute("SELECT chunk_id, size, validity FROM chunks_vec_chunks").fetchall()
    if len(blocks) < 2:
        return 0
    live = {chunk_id: int.from_bytes(v, "little").bit_count() for chunk_id, _, v in blocks}
    last = max(live)
    older = sorted((live[c], c, size) for c, size, _ in blocks if c != last)
    # Moving the live vectors of blocks whose holes add up to what the last block holds needs
    # one block fewer than they take now (the moved vectors fill the last block's free slots,
    # then blocks made from the pages freed): a block is given back, never one more taken.
    needed = live[last]
    chosen, holes = [], 0
    for n, chunk_id, block_size in older[:TIDY_MAX_BLOCKS]:
        chosen.append(chunk_id)
        holes += block_size - n
        if holes >= needed:
            break
    if holes < needed or not chosen:
        return 0
    marks = ",".join("?" * len(chosen))
    with con:
        rows = con.execute(
            "SELECT v.rowid, v.embedding FROM chunks_vec AS v WHERE v.rowid IN"
            f" (SELECT rowid FROM chunks_vec_rowids WHERE chunk_id IN ({marks}))",
            chosen,
        ).fetchall()
        con.executemany("DELETE FROM chunks_vec WHERE rowid = ?", [(r,) for r, _ in rows])
        con.executemany("INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)", rows)
    return len(rows)


def tidy_codes(con: apsw.Connection) -> None:
    """After storing vectors: rebuild the codes when too many are of deleted chunks, else merge
    the small blocks that each stored batch appended into full ones."""
    if not has_codes(con):
        return
    entries, small = con.execute(
        "SELECT coalesce(sum(length(ids)), 0) / 8, count(*) FILTER (WHERE length(ids) < ?)"
        " FROM chunks_codes",
        (CODE_BLOCK * 8,),
    ).fetchone()
    if entries > (1 + CODES_STALE) * coverage(con)[0] + 100:
        rebuild_codes(con)
        return
    if small < 2:
        return
    import numpy as np

    with con:
        rows = con.execute(
            "SELECT id, ids, codes FROM chunks_codes WHERE length(ids) < ? ORDER BY id",
            (CODE_BLOCK * 8,),
        ).fetchall()
        ids = np.concatenate([np.frombuffer(r[1], dtype="<i8") for r in rows])
        # each block's codes are column-major (kbase.embed.nearest.code_columns): join them
        # column-wise
        columns = np.concatenate(
            [np.frombuffer(r[2], dtype="<u8").reshape(-1, len(r[1]) // 8) for r in rows], axis=1
        )
        con.executemany("DELETE FROM chunks_codes WHERE id = ?", [(r[0],) for r in rows])
        for start in range(0, len(ids), CODE_BLOCK):
            con.execute(
                "INSERT INTO chunks_codes (ids, codes) VALUES (?, ?)",
                (
                    ids[start : start + CODE_BLOCK].tobytes(),
                    np.ascontiguousarray(columns[:, start : start + CODE_BLOCK]).tobytes(),
                ),
            )


def ensure_vector_table(con: apsw.Connection, embedder: Embedder) -> None:
    """Create chunks_vec for the model's dimension (and the trigger that keeps it in step), and
    chunks_codes (made from chunks_vec when an older kbase left it out)."""
    check_fingerprint(con, embedder)
    codes_missing = not has_codes(con)
    with con:
        con.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
            f"embedding float[{int(embedder.dimension)}] distance_metric=cosine)"
        )
        con.execute(VECTOR_TRIGGER)
        meta_set(con, "embedder", embedder.fingerprint)
    if codes_missing:
        rebuild_codes(con)


def drop_vectors(con: apsw.Connection) -> None:
    """Forget every vector (another model is coming)."""
    with con:
        con.execute("DROP TRIGGER IF EXISTS chunks_vec_after_delete")
        con.execute("DROP TABLE IF EXISTS chunks_vec")
        con.execute("DROP TABLE IF EXISTS chunks_codes")
        con.execute("UPDATE chunks SET embedded = 0 WHERE embedded")
        con.execute("DELETE FROM meta WHERE key = 'embedder'")
        con.execute("DROP TRIGGER IF EXISTS vectors_next_after_delete")
        con.execute("DROP TABLE IF EXISTS vectors_next")
        con.execute("DELETE FROM meta WHERE key = 'embedder_next'")


# meta 'auto_embed': '1' when kbase index (and watch, browse, an MCP server while idle) embeds the
# new and changed chunks, '0' for an index kept keyword-only (kbase index --no-embed) until
# kbase embed or kbase index --embed. An index from before the setting counts as keyword-only
# when it has chunks but never had a vector (it was built with --no-embed).
AUTO_EMBED = "auto_embed"


def auto_embed(con: apsw.Connection) -> bool:
    """Whether this index embeds new and changed chunks on its own (see ``AUTO_EMBED``)."""
    row = con.execute("SELECT value FROM meta WHERE key = ?", (AUTO_EMBED,)).fetchone()
    if row is not None:
        return row[0] == "1"
    if stored_fingerprint(con) is not None:
        return True
    return con.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None


def set_auto_embed(con: apsw.Connection, on: bool) -> None:
    """Record the choice (in its own transaction unless one is open)."""
    with con:
        meta_set(con, AUTO_EMBED, "1" if on else "0")


def missing_count(con: apsw.Connection) -> int:
    return con.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]


def coverage(con: apsw.Connection) -> tuple[int, int]:
    """(chunks with a vector, all chunks): how much of the index semantic search sees."""
    return con.execute("SELECT count(*) FILTER (WHERE embedded), count(*) FROM chunks").fetchone()


# progress(done, total): once before the first batch (0, total), then after each committed batch
EmbedProgress = Callable[[int, int], None]
# Chunks are taken this many at a time, newest notes first, and run sorted by length within the
# window: batches of similar lengths pad little (real chunks, batch 8: 1.9 % of the tokens were
# padding in windows of 256, 0.6 % in windows of 1,024, 25 % unsorted; BENCHMARKS.md, issue 36;
# kbase.cli.progress waits for a window's rate before it tells the time left).
WINDOW = 256
# Model batches given to the embedder at once, per core it uses: it runs one per core at a time
# (kbase.embed.embedder.run_sorted); the vectors are stored, and ``should_stop`` asked, after each
# such step.
STEP_BATCHES = 4


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
    committed batch at a time (``batch`` chunks; by default ``STEP_BATCHES`` of the model's
    batches per core it uses), the next batch already queued for the model while one is stored
    (an embedder with ``embed_stream``): an interruption loses at most the two batches in flight.

    ``limit`` (chunks) and ``should_stop`` (asked between batches) end the run early;
    a long-lived process embeds this way when it is idle, a little at a time. A vector already
    stored for the same embedder input (another chunk with identical context and text) is copied
    instead of computed.
    """
    ensure_vector_table(con, embedder)
    report = _fill(con, embedder, CURRENT, progress, batch, limit, should_stop)
    tidy_codes(con)
    tidy_vectors(con)
    return replace(report, remaining=missing_count(con))


class _Target:
    """Where ``_fill`` stores vectors: the searched set (chunks_vec) or the next model's
    (vectors_next, while the index switches models)."""

    def __init__(self, missing: str, copy: str, store) -> None:
        self.missing, self.copy, self.store = missing, copy, store


def _store_next(con: apsw.Connection, vectors: dict[int, bytes]) -> None:
    with con:
        con.executemany(
            "INSERT OR REPLACE INTO vectors_next (id, embedding) VALUES (?, ?)", vectors.items()
        )


CURRENT = _Target(
    "c.embedded = 0",
    "SELECT v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
    " WHERE c.embed_hash = ? AND c.embedded = 1 LIMIT 1",
    lambda con, vectors: _store(con, vectors),
)
NEXT = _Target(
    "c.id NOT IN (SELECT id FROM vectors_next)",
    # (chunks_embed_hash covers embedded chunks: during a switch nearly all of them)
    "SELECT n.embedding FROM chunks AS c JOIN vectors_next AS n ON n.id = c.id"
    " WHERE c.embed_hash = ? AND c.embedded = 1 LIMIT 1",
    _store_next,
)


def _fill(
    con: apsw.Connection,
    embedder: Embedder,
    target: _Target,
    progress: EmbedProgress | None,
    batch: int | None,
    limit: int | None,
    should_stop: Callable[[], bool] | None,
) -> EmbedReport:
    from kbase.ingest.embed_text import embed_input  # (hashlib: not for reading the index)

    # chunks embedded and committed together: a few model batches per core the embedder uses
    step = batch or embedder.batch_size * STEP_BATCHES * max(1, getattr(embedder, "threads", 1))
    total = con.execute(f"SELECT count(*) FROM chunks AS c WHERE {target.missing}").fetchone()[0]
    if limit is not None:
        total = min(total, limit)
    done = reused = handed = 0
    t0 = time.perf_counter()
    embed_seconds = 0.0
    if progress:
        progress(0, total)
    stopped = False
    # chunks handed to the model whose vectors are not stored yet (the next step is queued
    # before this one is stored): the next window leaves them out
    in_flight: set[int] = set()

    def steps():
        """The steps to embed, a window at a time; the window's copies are stored on the way."""
        nonlocal stopped, handed, reused, done
        while handed < total:
            want = min(WINDOW, total - handed)
            ids = [
                r
                for (r,) in con.execute(
                    "SELECT c.id FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
                    f" WHERE {target.missing}"
                    " ORDER BY d.mtime_ns DESC, c.doc_id, c.seq LIMIT ?",
                    (want + len(in_flight),),
                )
                if r not in in_flight
            ][:want]
            if not ids:
                return
            rows = con.execute(
                "SELECT c.id, c.embed_hash, c.tokens, d.title, c.heading_path,"
                " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
                " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
                f" WHERE c.id IN ({','.join('?' * len(ids))})",
                ids,
            ).fetchall()
            copies: dict[int, bytes] = {}
            todo = []
            for chunk_id, ehash, tokens, title, heading_path, text in rows:
                copy = con.execute(target.copy, (ehash,)).fetchone()
                if copy:
                    copies[chunk_id] = copy[0]
                else:
                    todo.append((tokens, chunk_id, embed_input(title, heading_path, text)))
            if copies:
                target.store(con, copies)
                reused += len(copies)
                done += len(copies)
            handed += len(ids)
            todo.sort()  # by length (the chunk's tokens; the context adds at most ~32)
            for start in range(0, len(todo), step):
                if should_stop is not None and should_stop():
                    stopped = True
                    return
                part = todo[start : start + step]
                parts.append(part)
                in_flight.update(chunk_id for _, chunk_id, _ in part)
                yield [text for _, _, text in part]

    parts: list = []  # the steps handed out and not stored yet, in order
    stream = getattr(embedder, "embed_stream", None)
    results = stream(steps()) if stream is not None else (embedder.embed_batch(t) for t in steps())
    try:
        t1 = time.perf_counter()
        for vectors in results:
            part = parts.pop(0)
            embed_seconds += time.perf_counter() - t1
            target.store(con, {chunk_id: vec for (_, chunk_id, _), vec in zip(part, vectors)})
            in_flight.difference_update(chunk_id for _, chunk_id, _ in part)
            done += len(part)
            if progress:
                progress(done, total)
            t1 = time.perf_counter()
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # an interruption: the steps in flight are dropped
    from kbase.records import EmbedReport  # (a search reads this module's tables, not reports)

    return EmbedReport(
        embedded=done - reused,
        reused=reused,
        seconds=time.perf_counter() - t0,
        model_seconds=embed_seconds,
    )


# --- switching models -----------------------------------------------------------------------------
# While the index switches to another model, that model's vectors collect in vectors_next (a plain
# table: it is never searched), the newest notes first, a committed batch at a time; search keeps
# using chunks_vec and the model that made it. Once every chunk has its new vector, one
# transaction puts them in chunks_vec and records the new model (``finish_switch``). An
# interrupted switch goes on where it stopped the next time anything embeds.
NEXT_TABLE = (
    "CREATE TABLE IF NOT EXISTS vectors_next ( id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)"
)
NEXT_TRIGGER = (
    "CREATE TRIGGER IF NOT EXISTS vectors_next_after_delete AFTER DELETE ON chunks"
    " BEGIN DELETE FROM vectors_next WHERE id = old.id; END"
)


def next_fingerprint(con: apsw.Connection) -> str | None:
    """The fingerprint of the model the index is switching to (meta 'embedder_next')."""
    row = con.execute("SELECT value FROM meta WHERE key = 'embedder_next'").fetchone()
    return row[0] if row else None


def start_switch(con: apsw.Connection, embedder: Embedder) -> None:
    """Begin (or go on with) switching the index to ``embedder``; a switch to a third model is
    forgotten first."""
    if next_fingerprint(con) == embedder.fingerprint:
        return
    with con:
        con.execute("DROP TABLE IF EXISTS vectors_next")
        con.execute(NEXT_TABLE)
        con.execute(NEXT_TRIGGER)
        meta_set(con, "embedder_next", embedder.fingerprint)


def cancel_switch(con: apsw.Connection) -> None:
    with con:
        con.execute("DROP TRIGGER IF EXISTS vectors_next_after_delete")
        con.execute("DROP TABLE IF EXISTS vectors_next")
        con.execute("DELETE FROM meta WHERE key = 'embedder_next'")


def switch_progress(con: apsw.Connection) -> tuple[int, int]:
    """(chunks with the next model's vector, all chunks); (0, 0) when no switch is under way."""
    if next_fingerprint(con) is None:
        return (0, 0)
    return con.execute(
        "SELECT (SELECT count(*) FROM vectors_next), (SELECT count(*) FROM chunks)"
    ).fetchone()


def embed_switch(
    con: apsw.Connection,
    embedder: Embedder,
    *,
    progress: EmbedProgress | None = None,
    batch: int | None = None,
    limit: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> EmbedReport:
    """Embed the chunks that lack the next model's vector (newest notes first); when none is
    left, swap the new vectors in (``finish_switch``). ``remaining``: chunks still to do."""
    if next_fingerprint(con) != embedder.fingerprint:
        raise KbaseError(
            "the index is not switching to this model", "start with: kbase embed --model NAME"
        )
    report = _fill(con, embedder, NEXT, progress, batch, limit, should_stop)
    done, total = switch_progress(con)
    if done == total:
        finish_switch(con, embedder)
    return replace(report, remaining=total - done)


def finish_switch(con: apsw.Connection, embedder: Embedder) -> None:
    """In one transaction: chunks_vec made again from vectors_next, the new model recorded, the
    old vectors and the switch's tables gone. A reader sees the old set or the new one."""
    from itertools import islice

    import numpy as np

    with con:
        con.execute("DROP TRIGGER IF EXISTS chunks_vec_after_delete")
        con.execute("DROP TABLE IF EXISTS chunks_vec")
        con.execute(
            f"CREATE VIRTUAL TABLE chunks_vec USING vec0("
            f"embedding float[{int(embedder.dimension)}] distance_metric=cosine)"
        )
        con.execute(VECTOR_TRIGGER)
        con.execute(
            "INSERT INTO chunks_vec (rowid, embedding) SELECT id, embedding FROM vectors_next"
        )
        con.execute(
            "UPDATE chunks SET embedded = (id IN (SELECT id FROM vectors_next))"
            " WHERE embedded <> (id IN (SELECT id FROM vectors_next))"
        )
        meta_set(con, "embedder", embedder.fingerprint)
        con.execute("DELETE FROM meta WHERE key = 'embedder_next'")
        con.execute("DROP TRIGGER IF EXISTS vectors_next_after_delete")
        con.execute("DROP TABLE vectors_next")
        con.execute(CODES_TABLE)
        con.execute("DELETE FROM chunks_codes")
        cursor = con.execute("SELECT rowid, embedding FROM chunks_vec")
        while rows := list(islice(cursor, CODE_BLOCK)):
            ids = np.fromiter((r for r, _ in rows), dtype="<i8", count=len(rows))
            matrix = np.frombuffer(b"".join(v for _, v in rows), dtype="<f4")
            _insert_codes(con, ids, matrix.reshape(len(rows), -1))


def _store(con: apsw.Connection, vectors: dict[int, bytes]) -> None:
    with con:
        for chunk_id, vec in vectors.items():
            con.execute(
                "INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                (chunk_id, vec),
            )
        con.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in vectors])
        _add_codes(con, vectors)


def copy_vectors(
    con: apsw.Connection, old: dict[bytes, bytes], new_chunks: Sequence[tuple[int, bytes]]
) -> int:
    """Give new chunks the vectors their identical predecessors had (same embedder input)."""
    copied = {}
    for chunk_id, ehash in new_chunks:
        vec = old.get(ehash)
        if vec is not None:
            con.execute(
                "INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
                (chunk_id, vec),
            )
            con.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk_id,))
            copied[chunk_id] = vec
    _add_codes(con, copied)
    return len(copied)


def vectors_of(con: apsw.Connection, doc_id: int) -> dict[bytes, bytes]:
    """embed_hash -> vector for a document's embedded chunks (kept across its rewrite)."""
    if not has_vectors(con):
        return {}
    return dict(
        con.execute(
            "SELECT c.embed_hash, v.embedding FROM chunks AS c"
            " JOIN chunks_vec AS v ON v.rowid = c.id"
            " WHERE c.doc_id = ? AND c.embedded",
            (doc_id,),
        ).fetchall()
    )
