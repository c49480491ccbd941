"""Nearest-neighbour search over chunks_vec, in memory, for long-lived processes.

sqlite-vec's wheel is built without SIMD, and its brute-force k-NN costs about 1 ms per 1,000
vectors here; a process that answers many queries (the TUI, the Python API, a benchmark) instead
keeps the vectors as one float32 matrix and scores them all with a single matrix product. The
matrix is loaded on the first query and reloaded when another connection changed the file
(``PRAGMA data_version``). One-shot commands keep using sqlite-vec directly: loading costs
more than it saves for a single query.
"""

from __future__ import annotations

from collections.abc import Collection

import apsw


class VectorCache:
    """chunks_vec as a matrix: ``nearest(con, vector, k)`` -> [(chunk_id, cosine distance)]."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._ids = None  # numpy int64 array of chunk ids
        self._matrix = None  # numpy float32 (n, dim), rows are unit vectors
        self._docs = None  # numpy int64 array: the document of each row (loaded when asked for)

    def _load(self, con: apsw.Connection) -> None:
        import numpy as np

        key = (con.execute("PRAGMA data_version").fetchone()[0], con.filename)
        if key == self._key and self._matrix is not None:
            return
        rows = con.execute("SELECT rowid, embedding FROM chunks_vec").fetchall()
        if rows:
            self._ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
            self._matrix = np.frombuffer(b"".join(v for _, v in rows), dtype="<f4").reshape(len(rows), -1)
        else:
            self._ids = np.zeros(0, dtype=np.int64)
            self._matrix = np.zeros((0, 1), dtype="<f4")
        self._docs = None
        self._key = key

    def arrays(self, con: apsw.Connection) -> tuple:
        """(chunk ids, unit vectors, document ids) as numpy arrays, row for row; for scoring
        whole notes (kbase.related). Call inside the read transaction that uses them."""
        import numpy as np

        self._load(con)
        if self._docs is None:
            doc_of = dict(con.execute("SELECT id, doc_id FROM chunks WHERE embedded"))
            self._docs = np.fromiter((doc_of.get(int(i), -1) for i in self._ids), dtype=np.int64,
                                     count=len(self._ids))
        return self._ids, self._matrix, self._docs

    def nearest(self, con: apsw.Connection, vector: bytes, k: int,
                allowed: Collection[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest chunks (optionally among ``allowed`` chunk ids), nearest first."""
        import numpy as np

        self._load(con)
        ids, matrix = self._ids, self._matrix
        if allowed is not None:
            mask = np.isin(ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            ids, matrix = ids[mask], matrix[mask]
        if len(ids) == 0:
            return []
        q = np.frombuffer(vector, dtype="<f4")
        sims = matrix @ q
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(ids[i]), float(1.0 - sims[i])) for i in top]
