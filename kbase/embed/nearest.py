"""Nearest-neighbour search over chunks_vec: in memory for long-lived processes, and through
binary codes for a one-shot query over a large index.

sqlite-vec's wheel is built without SIMD: its brute-force k-NN costs 0.6-1.2 ms per 1,000
vectors here (1.2 s at a million chunks, k = 480), and its own bit[] k-NN took 1.7-2.1 s.
So:

- a process that answers many queries (the TUI, the MCP server, the Python API) keeps the
  vectors in memory, loaded on the first query and reloaded when another connection changed the
  file (``PRAGMA data_version``): up to ``QUANTIZE_FROM`` chunks as one float32 matrix scored
  with one matrix product (exact); above, as binary codes (the sign of each dimension, 48 bytes
  a chunk) plus int8 vectors (one scale per dimension, 384 bytes), 0.43 GB at a million chunks
  instead of 1.5: the Hamming distance to every code gives a shortlist, the int8 vectors rank
  it, and the best ``RESCORE`` get their exact cosine from chunks_vec;
- a one-shot query (the CLI) over ``QUANTIZE_FROM`` chunks or more reads the codes, stored in
  large blocks in ``chunks_codes`` (kbase.embed.vectors), and scores its shortlist exactly from
  chunks_vec; below, sqlite-vec's exact k-NN (see QUANTIZE_FROM).

Measured on a million synthetic chunks made from real MiniLM vectors (bench/million.py,
BENCHMARKS.md section 11).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Collection, Iterator
from itertools import islice
from typing import Any

import apsw

# From this many vectors on, search uses binary codes and a rescored shortlist instead of an
# exact scan. Per query (bench/million.py sizes), exact float32 product vs codes + int8 + ~10 ms
# of exact rescoring: 50k 8 vs 14 ms, 100k 17 vs 17, 200k 30 vs 17, 1M 141 vs 23; the exact
# matrix takes 0.29 GB at 200k. Up to here exactness costs at most ~15 ms and 0.3 GB, so smaller
# indexes (every shared vault, SciFact) search exactly as before. For a one-shot query
# sqlite-vec's exact scan costs 0.6-1.2 ms per 1,000 vectors (0.12-0.24 s at 200k), the codes
# ~0.1 s at any size up to a million (mostly the 500 exact lookups).
QUANTIZE_FROM = 200_000
# Shortlist by Hamming distance, in memory (ranked again with int8 vectors): at 1M chunks,
# recall@10 after rescoring 0.960 / 0.985 with 2,000 / 4,000 (bench/million.py).
SHORTLIST = 4000
# The best this many of the int8 ranking get their exact cosine from chunks_vec (0.13 ms each):
# 10 gave recall@10 0.960, 30 0.985, 60 0.985.
RESCORE = 32
# A one-shot query: the Hamming shortlist (ONESHOT_CANDIDATES), ranked by the query's dot
# product with the codes' signs, keeps ONESHOT_SHORTLIST, each scored exactly from chunks_vec
# (0.13 ms each). At 1M chunks, the true top 10 within the shortlist: Hamming alone 0.945 with
# 1,000; candidates 4,000 / 10,000 / 20,000 then 500 by sign scores 0.977 / 0.980 / 0.983.
ONESHOT_CANDIDATES = 10_000
ONESHOT_SHORTLIST = 500
_LOAD_BLOCK = 16384  # vectors read and quantised at a time: bounds the memory of a load (~0.1 GB)
_HAMMING_SLICE = 32768  # codes per step of hamming(): 256 KB of words, within L2


_blas_lock = threading.Lock()


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread meanwhile: a query's product with every vector is one
    matrix-vector product, bound by memory, and OpenBLAS's second thread only waited: 13-16 ms
    of CPU against 10 for the same 54,315 x 384 product (BENCHMARKS.md section 22)."""
    with _blas_lock, _blas().limit(limits=1):
        yield


def sign_codes(matrix):
    """(n, dim) float -> (n, 8 x ceil(dim / 64)) uint8: bit set where the value is positive,
    padded with zero bits to whole 64-bit words (384 dimensions: 48 bytes, no padding)."""
    import numpy as np

    bits = matrix > 0
    pad = -bits.shape[1] % 64
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.packbits(bits, axis=1)


def code_columns(codes):
    """(n, 48) uint8 codes -> (6, n) little-endian uint64: word j of every code contiguous, the
    layout chunks_codes stores (Hamming distance over columns is ~6x faster than over rows)."""
    import numpy as np

    return np.ascontiguousarray(np.ascontiguousarray(codes).view("<u8").T)


def hamming(columns, query_code):
    """Hamming distance from the query's code to every code (uint16 array); computed a slice of
    codes at a time, so the intermediate arrays stay in the CPU's cache (2x faster at 1M)."""
    import numpy as np

    q = np.ascontiguousarray(query_code).view("<u8")
    n = columns.shape[1]
    out = np.empty(n, dtype=np.uint16)
    for s in range(0, n, _HAMMING_SLICE):
        part = columns[:, s : s + _HAMMING_SLICE]
        acc = np.bitwise_count(part[0] ^ q[0]).astype(np.uint16)
        for col, qw in zip(part[1:], q[1:]):
            acc += np.bitwise_count(col ^ qw)
        out[s : s + len(acc)] = acc
    return out


def _nearest_codes(distances, s: int):
    """Indices of the ``s`` smallest Hamming distances (a few more when there are ties at the
    cut), unordered: a histogram of the distances finds the cut faster than a partition."""
    import numpy as np

    if s >= len(distances):
        return np.arange(len(distances))
    cut = int(np.searchsorted(np.cumsum(np.bincount(distances)), s))
    return np.flatnonzero(distances <= cut)


def sign_scores(columns, rows, query):
    """The query's dot product with the sign vectors (+1/-1) of the codes at ``rows``: ranks a
    Hamming shortlist much better than Hamming does (the query keeps its magnitudes)."""
    import numpy as np

    codes = np.ascontiguousarray(columns[:, rows].T).view(np.uint8)
    signs = np.unpackbits(codes, axis=1, count=len(query)).astype("<f4")
    return signs @ (2 * query) - query.sum()


def _smallest(values, s: int):
    """Indices of (at least) the ``s`` smallest values, unordered."""
    import numpy as np

    if s >= len(values):
        return np.arange(len(values))
    return np.argpartition(values, s - 1)[:s]


def exact_similarities(con: apsw.Connection, ids, query) -> dict[int, float]:
    """chunk id -> exact cosine similarity with ``query`` (a unit float32 vector), read from
    chunks_vec one rowid at a time (a rowid IN (...) list makes vec0 scan the whole table);
    chunks without a vector are left out."""
    import numpy as np

    out = {}
    for cid in ids:
        row = con.execute(
            "SELECT embedding FROM chunks_vec WHERE rowid = ?", (int(cid),)
        ).fetchone()
        if row is not None:
            out[int(cid)] = float(np.frombuffer(row[0], dtype="<f4") @ query)
    return out


def _similarity(sim) -> float:
    """A float32 similarity as nearest() and the grouping give it: its float32 distance, that
    distance's complement in float64."""
    import numpy as np

    return 1.0 - float(np.float32(1) - np.float32(sim))


def _order(scores: dict[int, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` best of chunk id -> similarity as [(chunk id, cosine distance)], nearest first
    (distances in float32 arithmetic, as the matrix product gives them)."""
    import numpy as np

    best = sorted(scores.items(), key=lambda kv: -kv[1])[:k]
    dist = (np.float32(1) - np.array([s for _, s in best], dtype="<f4")).tolist()
    return [(cid, d) for (cid, _), d in zip(best, dist)]


class VectorCache:
    """chunks_vec in memory: ``nearest(con, vector, k)`` -> [(chunk_id, cosine distance)]."""

    def __init__(self, quantize_from: int = QUANTIZE_FROM) -> None:
        self.quantize_from = quantize_from
        self._key: tuple | None = None
        self._ids: Any = None  # numpy int64 array of chunk ids
        self._matrix: Any = None  # numpy float32 (n, dim), rows are unit vectors (exact mode)
        self._words: Any = None  # binary codes as uint64 columns (quantised mode)
        self._int8: Any = None  # numpy int8 (n, dim) (quantised mode)
        self._scale: Any = None  # float32 (dim,): value = int8 * scale
        self._docs: Any = (
            None  # numpy int64 array: the document of each row (loaded when asked for)
        )
        self._doc_of: dict[int, int] | None = None  # chunk id -> document id (when asked for)
        self._by_doc: Any = None  # see _rows_by_document
        self._notes: Any = None  # see note_similarities: (documents, their first rows, norms)
        self._product_cache: Any = None  # (query vector, its product with every vector)

    @property
    def quantized(self) -> bool:
        return self._int8 is not None

    def _load(self, con: apsw.Connection) -> None:
        import numpy as np

        key = (con.execute("PRAGMA data_version").fetchone()[0], con.filename)
        if key == self._key and self._ids is not None:
            return
        self._matrix = self._words = self._int8 = self._scale = self._docs = None
        self._doc_of = self._by_doc = self._product_cache = self._notes = None
        n = con.execute("SELECT count(*) FROM chunks WHERE embedded").fetchone()[0]
        if n < max(self.quantize_from, 1):
            rows = con.execute("SELECT rowid, embedding FROM chunks_vec").fetchall()
            self._ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
            self._matrix = (
                np.frombuffer(b"".join(v for _, v in rows), dtype="<f4").reshape(len(rows), -1)
                if rows
                else np.zeros((0, 1), dtype="<f4")
            )
        else:
            self._load_quantized(con, n)
        self._key = key

    def _load_quantized(self, con: apsw.Connection, n: int) -> None:
        """Codes and int8 vectors, a block at a time (never the whole float32 matrix at once).
        The int8 scale per dimension is its largest magnitude over the first block, values
        beyond it clipped (unit vectors: a block of 16,384 sees every dimension's range)."""
        import numpy as np

        dim = con.execute("SELECT vec_length(embedding) FROM chunks_vec LIMIT 1").fetchone()[0]
        ids = np.zeros(n, dtype=np.int64)
        codes = np.zeros((n, 8 * -(-dim // 64)), dtype=np.uint8)
        small = np.zeros((n, dim), dtype=np.int8)
        scale = None
        cursor = con.execute("SELECT rowid, embedding FROM chunks_vec")
        done = 0
        while rows := list(islice(cursor, min(_LOAD_BLOCK, n - done))):
            block = np.frombuffer(b"".join(v for _, v in rows), dtype="<f4").reshape(len(rows), -1)
            if scale is None:
                scale = np.maximum(np.abs(block).max(axis=0), 1e-6).astype("<f4") / 127
            end = done + len(rows)
            ids[done:end] = [r for r, _ in rows]
            codes[done:end] = sign_codes(block)
            small[done:end] = np.clip(np.rint(block / scale), -127, 127)
            done = end
        self._ids, self._int8 = ids[:done], small[:done]
        self._words = code_columns(codes[:done])
        self._scale = scale if scale is not None else np.ones(dim, dtype="<f4")

    def arrays(self, con: apsw.Connection) -> tuple:
        """(chunk ids, vectors, document ids) as numpy arrays, row for row; for scoring whole
        notes (kbase.notes.related). The vectors are unit float32 rows, or above ``quantize_from``
        int8 rows: use ``matmul`` and ``vectors_at`` to compute with them. Call inside the read
        transaction that uses them."""
        import numpy as np

        doc_of = self.documents(con)
        if self._docs is None:
            self._docs = np.fromiter(
                (doc_of.get(int(i), -1) for i in self._ids), dtype=np.int64, count=len(self._ids)
            )
        return self._ids, (self._matrix if self._matrix is not None else self._int8), self._docs

    def documents(self, con: apsw.Connection) -> dict[int, int]:
        """chunk id -> document id of every embedded chunk, read once with the vectors (a
        search groups its nearest chunks by note without a query for them)."""
        self._load(con)
        if self._doc_of is None:
            self._doc_of = dict(con.execute("SELECT id, doc_id FROM chunks WHERE embedded"))
        return self._doc_of

    def matmul(self, con: apsw.Connection, m):
        """All vectors times ``m`` ((dim,) or (dim, j)), row for row with ``arrays()``; computed a
        block at a time from the int8 vectors above ``quantize_from`` (no float32 copy of them)."""
        import numpy as np

        self._load(con)
        if self._matrix is not None:
            if np.ndim(m) != 1:
                return self._matrix @ m  # (a matrix product: both threads do work)
            with one_blas_thread():
                return self._matrix @ m
        m = np.asarray(m, dtype="<f4")
        scaled = m * (self._scale if m.ndim == 1 else self._scale[:, None])
        out = np.empty((len(self._ids),) + m.shape[1:], dtype="<f4")
        for s in range(0, len(self._ids), _LOAD_BLOCK):
            out[s : s + _LOAD_BLOCK] = self._int8[s : s + _LOAD_BLOCK].astype("<f4") @ scaled
        return out

    def vectors_at(self, con: apsw.Connection, rows):
        """The vectors at ``rows`` (indices into ``arrays()``) as float32."""
        self._load(con)
        if self._matrix is not None:
            return self._matrix[rows]
        return self._int8[rows].astype("<f4") * self._scale

    def nearest_in_documents(
        self, con: apsw.Connection, vector: bytes, documents: Collection[int], n: int
    ) -> list[tuple] | None:
        """Every chunk of ``documents`` scored, grouped by document: up to ``n`` rows (doc_id,
        nearest chunk, its similarity, the document's chunks scored, the second-nearest's
        similarity or None), best first (ties: the lower row first), as grouping ``nearest(con,
        vector, all, their chunks)`` row by row gives them (the same numbers and order). None
        above ``quantize_from`` (the int8 ranking is not exact: group what ``nearest`` gives).

        A filtered search at 10,000 notes keeps ~54,000 chunks: the product with every vector is
        the one ``nearest`` computes, the documents' rows are a lookup table, and only the best
        chunks are ordered (those at or above the k-th best similarity, k widened until they
        hold ``n`` documents), each of the ``n`` documents' second chunk read from its own rows
        (182 ms a call before, sorting and grouping every kept chunk)."""
        import numpy as np

        self._load(con)
        if self._matrix is None:
            return None
        self.arrays(con)  # (the document of each row)
        if n <= 0 or not len(self._ids):
            return []
        rows = np.flatnonzero(self._kept_rows(documents))
        if len(rows) == 0:
            return []
        every = self._product(vector)
        sims = every[rows]
        k = min(len(sims), max(8 * n, 64))
        while True:
            if k < len(sims):
                cut = np.partition(sims, len(sims) - k)[len(sims) - k]  # the k-th best
                best = np.flatnonzero(sims >= cut)
            else:
                best = np.arange(len(sims))
            best = best[np.argsort(-sims[best], kind="stable")]  # nearest first, lower rows first
            docs = self._docs[rows[best]]
            _, first = np.unique(docs, return_index=True)
            if len(first) >= n or k >= len(sims):
                break
            k *= 4
        first = np.sort(first)[:n]  # each document's nearest chunk, documents best first
        starts, grouped = self._rows_by_document()
        out = []
        for at in first.tolist():
            doc = int(docs[at])
            row = int(rows[best[at]])
            lo, hi = np.searchsorted(starts, [doc, doc + 1])
            own = grouped[lo:hi]  # the document's rows, lowest first
            second = None
            if hi - lo > 1:
                others = own[own != row]
                second = _similarity(every[others[np.argsort(-every[others], kind="stable")[0]]])
            out.append((doc, int(self._ids[row]), _similarity(every[row]), int(hi - lo), second))
        return out

    def _product(self, vector: bytes):
        """Every vector's dot product with the query ``vector`` (exact mode: one matrix-vector
        product on one BLAS thread), the last query's kept: a search asks for it more than once
        (a wider k-nearest, a filtered grouping)."""
        import numpy as np

        last = self._product_cache
        if last is not None and last[0] == vector:
            return last[1]
        with one_blas_thread():
            every = self._matrix @ np.frombuffer(vector, dtype="<f4")
        self._product_cache = (bytes(vector), every)
        return every

    def note_similarities(
        self, con: apsw.Connection, vector: bytes, documents: Collection[int]
    ) -> dict[int, float] | None:
        """Each of ``documents``' cosine with ``vector`` as a whole note: with the mean of its
        chunk vectors (kbase.search.semantic.note_similarities), as the sum of its chunks'
        products with the query (the product with every vector a search has made already)
        over the norm of its vector sum (worked out once per load). None above
        ``quantize_from`` (the int8 vectors are not exact); a document without vectors is
        absent."""
        import numpy as np

        self._load(con)
        if self._matrix is None:
            return None
        self.arrays(con)  # (the document of each row)
        if not len(self._ids) or not documents:
            return {}
        docs, order = self._rows_by_document()
        if self._notes is None:
            starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
            sums = np.add.reduceat(self._matrix[order], starts, axis=0)
            self._notes = (docs[starts], starts, np.linalg.norm(sums, axis=1))
        ids, starts, norms = self._notes
        dots = np.add.reduceat(self._product(vector)[order], starts)
        wanted = np.fromiter(documents, dtype=np.int64, count=len(documents))
        at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
        found = (ids[at] == wanted) & (wanted >= 0)
        return {
            int(d): float(dots[i] / norms[i]) if norms[i] > 0 else 0.0
            for d, i in zip(wanted[found], at[found], strict=True)
        }

    def _kept_rows(self, documents: Collection[int]):
        """A boolean per row: its document is one of ``documents`` (a lookup table by document
        id; a row of no known document, -1, is never kept)."""
        import numpy as np

        top = int(self._docs.max()) if len(self._docs) else 0
        wanted = np.fromiter(documents, dtype=np.int64, count=len(documents))
        wanted = wanted[(wanted >= 0) & (wanted <= top)]
        table = np.zeros(top + 2, dtype=bool)  # (index -1: the last, never set)
        table[wanted] = True
        return table[self._docs]

    def _rows_by_document(self):
        """(the document of each row, sorted; the rows in that order, lowest first within a
        document): a document's rows are one slice (``np.searchsorted``), computed once per
        load."""
        import numpy as np

        if self._by_doc is None:
            order = np.argsort(self._docs, kind="stable")
            self._by_doc = (self._docs[order], order)
        return self._by_doc

    def nearest(
        self, con: apsw.Connection, vector: bytes, k: int, allowed: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest chunks (optionally among ``allowed`` chunk ids), nearest first."""
        import numpy as np

        self._load(con)
        rows = None  # all
        if allowed is not None:
            rows = np.flatnonzero(
                np.isin(self._ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            )
        n = len(self._ids) if rows is None else len(rows)
        if n == 0 or k <= 0:
            return []
        q = np.frombuffer(vector, dtype="<f4")
        if self._matrix is not None:  # (the product with every vector: a row scores the same
            sims = self._product(vector)  # whatever the filter)
            if rows is not None:
                sims = sims[rows]
        else:
            if n > max(SHORTLIST, 8 * k):
                words = self._words if rows is None else self._words[:, rows]
                short = _nearest_codes(
                    hamming(words, sign_codes(q[None, :])[0]), max(SHORTLIST, 8 * k)
                )
                rows = short if rows is None else rows[short]
            elif rows is None:
                rows = np.arange(n)
            with one_blas_thread():
                sims = self._int8[rows].astype("<f4") @ (q * self._scale)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        ids = self._ids[top] if rows is None else self._ids[rows[top]]
        if self._matrix is not None:  # exact: already in order (what _order would give)
            return list(zip(ids.tolist(), (np.float32(1) - sims[top]).tolist()))
        scores = dict(zip(ids.tolist(), sims[top].tolist()))
        if self._matrix is None:  # the best get their exact cosine; the rest keep the int8 estimate
            scores.update(exact_similarities(con, ids[:RESCORE].tolist(), q))
        return _order(scores, k)


def knn(con: apsw.Connection, vector: bytes, k: int) -> list[tuple[int, float]]:
    """sqlite-vec's exact k-NN of ``vector`` in chunks_vec: (chunk id, cosine distance), nearest
    first, exactly what ``embedding MATCH ? AND k = ?`` answers.

    sqlite-vec picks each block's best k by k passes over the block (1,024 vectors): at 54,315
    chunks k = 480 cost 54 ms of CPU against 27 for k = 40. Given a bound on the distance
    (``AND distance <= ?``, sqlite-vec 0.1.7 on) it picks among the rows within the bound only:
    27 ms when ~1,300 are. The bound is ``_knn_bound``'s, from a sample of the stored vectors;
    whenever k rows are within it, they are the k nearest, in sqlite-vec's own order (every row
    left out is farther than all of them); when fewer are, the query runs again without it.

    Meanwhile the file is memory-mapped (``KNN_MMAP``): SQLite then reads the vectors' pages
    where they lie instead of copying each into its page cache (a cold search at 10,000 notes:
    44 -> 37 ms of CPU)."""
    mapped = con.execute("PRAGMA mmap_size").fetchone()[0]
    con.execute(f"PRAGMA mmap_size = {max(mapped, KNN_MMAP)}")
    try:
        bound = _knn_bound(con, vector, k)
        if bound is not None:
            near = con.execute(
                "SELECT rowid, distance FROM chunks_vec"
                " WHERE embedding MATCH ? AND k = ? AND distance <= ?",
                (vector, k, bound),
            ).fetchall()
            if len(near) == k:
                return near
        return con.execute(
            "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?", (vector, k)
        ).fetchall()
    finally:
        con.execute(f"PRAGMA mmap_size = {mapped}")


# _knn_bound's sample of the stored vectors (about this many), and how many of the sample's
# nearest it takes beyond its expected share of the k nearest (in standard deviations, then a
# few): at 54,315 chunks and k = 480, the 25th nearest of 1,024, within which ~1,300 rows fall.
KNN_SAMPLE = 1024
KNN_SAMPLE_SPREAD = 4
# A bound only from this many vectors times k on (sqlite-vec's picking costs about 1 ns for
# each, the sample 3-5 ms): 54,315 x 480 = 26 million pays (54 -> 30 ms), 54,315 x 40 does
# not, nor does any shared vault's index (4,789 x 480 at most: 5.5 -> 6.5 ms).
KNN_BOUND_FROM = 8_000_000
# How much of the file ``knn`` maps while it reads the vectors (SQLite maps no more than the file).
KNN_MMAP = 1 << 30
# sqlite-vec's storage (vec0's shadow tables: each block's validity bits, its vectors in one
# blob) as of 0.1.7, the first version with distance bounds.
_VEC0_BOUNDS_FROM = (0, 1, 7)


def _knn_bound(con: apsw.Connection, vector: bytes, k: int) -> float | None:
    """A cosine distance that the ``k`` nearest of chunks_vec are likely within: the distance of
    the sample's ``j``-th nearest, ``j`` its expected share of the k nearest and some more.
    None where a bound would not pay (fewer than 8k vectors, or than ``KNN_BOUND_FROM`` / k) or
    cannot be had (an older sqlite-vec, another storage layout): then the plain k-NN. A bound
    that is too tight costs a second query, never another answer (``knn``)."""
    try:
        version = con.execute("SELECT vec_version()").fetchone()[0]
        if tuple(int(x) for x in version.lstrip("v").split("-")[0].split(".")) < _VEC0_BOUNDS_FROM:
            return None
        size = 4 * (len(vector) // 4)
        slots: list[tuple[int, Any]] = []  # (block, its valid slots)
        for block, capacity, validity in con.execute(
            "SELECT chunk_id, size, validity FROM chunks_vec_chunks ORDER BY chunk_id"
        ):
            bits = int.from_bytes(validity, "little")
            if bits == (1 << capacity) - 1:
                slots.append((block, range(capacity)))
            elif bits:
                slots.append((block, [i for i in range(capacity) if bits >> i & 1]))
        n = sum(len(s) for _, s in slots)
        if n < 8 * k or n * k < KNN_BOUND_FROM or size == 0:
            return None
        step, at, start, parts = max(1.0, n / KNN_SAMPLE), 0.0, 0, []
        for block, valid in slots:  # every ``step``-th valid vector, in storage order
            end = start + len(valid)
            if at < end:
                with con.blob_open(
                    "main", "chunks_vec_vector_chunks00", "vectors", block, False
                ) as blob:
                    while at < end:
                        blob.seek(valid[int(at) - start] * size)
                        parts.append(blob.read(size))
                        at += step
            start = end
        far = sorted(
            d
            for (d,) in con.execute(
                "SELECT vec_distance_cosine(substr(?1, value * ?2 + 1, ?2), ?3) FROM json_each(?4)",
                (b"".join(parts), size, vector, f"[{','.join(map(str, range(len(parts))))}]"),
            )
            if d is not None and d == d  # (not NaN)
        )
    except (apsw.Error, ValueError, AttributeError):
        return None
    share = len(far) * k / n
    j = math.ceil(share + KNN_SAMPLE_SPREAD * math.sqrt(share) + KNN_SAMPLE_SPREAD)
    return far[j - 1] if 0 < j <= len(far) else None


def nearest_oneshot(con: apsw.Connection, vector: bytes, k: int) -> list[tuple[int, float]] | None:
    """The ``k`` nearest chunks through the stored codes (kbase.embed.vectors's chunks_codes): a
    Hamming shortlist, ranked again by ``sign_scores``, the best of it scored exactly from
    chunks_vec. None when the index is smaller than ``QUANTIZE_FROM`` or has no codes (then
    sqlite-vec's exact k-NN is the way)."""
    if con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_codes'").fetchone() is None:
        return None
    n = con.execute("SELECT coalesce(sum(length(ids)), 0) / 8 FROM chunks_codes").fetchone()[0]
    if n < QUANTIZE_FROM:
        return None
    import numpy as np  # (only now: a one-shot query below QUANTIZE_FROM needs none)

    ids: list = []
    blocks: list = []
    for id_blob, code_blob in con.execute("SELECT ids, codes FROM chunks_codes"):
        ids.append(np.frombuffer(id_blob, dtype="<i8"))
        blocks.append(np.frombuffer(code_blob, dtype="<u8").reshape(-1, len(ids[-1])))
    all_ids, columns = np.concatenate(ids), np.concatenate(blocks, axis=1)
    q = np.frombuffer(vector, dtype="<f4")
    rows = _nearest_codes(
        hamming(columns, sign_codes(q[None, :])[0]), max(ONESHOT_CANDIDATES, 20 * k)
    )
    rows = rows[_smallest(-sign_scores(columns, rows, q), max(ONESHOT_SHORTLIST, k))]
    # an id can appear twice (a chunk id used again after its chunk was deleted): one lookup each
    return _order(exact_similarities(con, np.unique(all_ids[rows]), q), k)
