"""The one-shot k-NN within a sampled distance bound (kbase.embed.nearest.knn) answers exactly what
sqlite-vec's plain k-NN answers: the same chunk ids and distances in the same order, with
duplicated vectors (ties), deleted rows, a bound too tight (asked again) and k near the size."""

from __future__ import annotations

import random
import struct

import pytest

from kbase.embed import nearest
from kbase.store import db

DIM = 16


def _vec(values) -> bytes:
    return struct.pack(f"{DIM}f", *values)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    con = db.connect(tmp_path_factory.mktemp("knn") / "knn.db", create=True)
    con.execute(
        f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{DIM}] distance_metric=cosine)"
    )
    rnd = random.Random(11)
    centres = [[rnd.gauss(0, 1) for _ in range(DIM)] for _ in range(8)]
    rows = []
    for i in range(1, 5001):  # clusters, and every 7th row a copy of an earlier one (ties)
        if i % 7 == 0:
            rows.append((i, rows[rnd.randrange(len(rows))][1]))
        else:
            c = centres[i % 8]
            rows.append((i, _vec(x + rnd.gauss(0, 0.3) for x in c)))
    with con:
        con.executemany("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)", rows)
        con.execute("DELETE FROM chunks_vec WHERE rowid % 13 = 0")  # invalid slots in blocks
    return con


def _plain(con, q: bytes, k: int):
    sql = "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?"
    return con.execute(sql, (q, k)).fetchall()


def test_the_bounded_knn_is_the_plain_knn(con, monkeypatch) -> None:
    monkeypatch.setattr(nearest, "KNN_BOUND_FROM", 0)  # (a bound at any size)
    rnd = random.Random(5)
    stored = [v for (v,) in con.execute("SELECT embedding FROM chunks_vec")]
    bounded = 0
    for t in range(40):
        if t % 2:  # a stored vector itself: its copies tie with it
            q = rnd.choice(stored)
        else:
            q = _vec(rnd.gauss(0, 1) for _ in range(DIM))
        for k in (1, 10, 40, 480):
            assert nearest.knn(con, q, k) == _plain(con, q, k)
            bounded += nearest._knn_bound(con, q, k) is not None
    assert bounded == 40 * 4  # (each asked within a bound)


def test_a_bound_too_tight_asks_again(con, monkeypatch) -> None:
    q = _vec([1.0] * DIM)
    plain = _plain(con, q, 40)
    monkeypatch.setattr(nearest, "_knn_bound", lambda con, vector, k: plain[4][1])  # 5 within
    assert nearest.knn(con, q, 40) == plain


def test_no_bound_where_it_would_not_pay(con) -> None:
    q = _vec([1.0] * DIM)
    assert nearest._knn_bound(con, q, 40) is None  # 4,616 x 40 is below KNN_BOUND_FROM
    assert nearest.knn(con, q, 40) == _plain(con, q, 40)
