"""kbase.ingest.columns: what a document may hold a million of, kept as columns, reads as the
records it stands for, and comes back from pickle (a worker's answer) the same."""

from __future__ import annotations

import pickle
from array import array

import pytest

from kbase.ingest.canvas import Card
from kbase.ingest.columns import Bytes, Floats, Records, Spans, Strings, chunk_columns, ints
from kbase.records import Chunk


@pytest.mark.parametrize(
    "values",
    [
        ["text", "file", "text", "text", None, "text", "text", "text"] * 10,  # coded
        [f"id{i}" for i in range(40)] + [None, "", "last"],  # joined, with Nones and ""
        [None] * 7,
        [],
        ["é—\U0001f600", None, "x"],
    ],
    ids=["repeated", "distinct", "none", "empty", "unicode"],
)
def test_strings_read_back_as_they_were(values):
    col = Strings(values)
    back = pickle.loads(pickle.dumps(col))
    for s in (col, back):
        assert list(s) == values and len(s) == len(values)
        assert [s[i] for i in range(len(values))] == values
        assert s[1:4] == values[1:4] and s == values
        if values:
            assert s[-1] == values[-1]
    with pytest.raises(IndexError):
        col[len(values)]


def test_a_column_of_repeated_strings_is_stored_as_codes_and_distinct_ones_as_one_string():
    repeated = Strings(["text"] * 100_000)
    distinct = Strings([f"c{i}" for i in range(100_000)])
    assert len(pickle.dumps(repeated)) < 101_000  # a byte each, not a string each
    assert len(pickle.dumps(distinct)) < 100_000 * (4 + 7)  # its characters, and an end each


def test_ints_narrow_when_they_fit():
    assert ints([1, -5, 2**31 - 1]).typecode == "i"
    assert ints([2**40]).typecode == "q" and list(ints([2**40, -1])) == [2**40, -1]


def test_floats_keep_none_and_spans_bytes_read_back():
    f = Floats([1.5, None, -0.0, 3.0])
    assert list(pickle.loads(pickle.dumps(f))) == [1.5, None, -0.0, 3.0] and f[1] is None
    assert list(Floats([None, None])) == [None, None]
    s = Spans.of([(0, 4), (5, 9)])
    assert list(s) == [(0, 4), (5, 9)] and s == ((0, 4), (5, 9)) and s[-1] == (5, 9)
    b = Bytes([b"12345678", b"abcdefgh"])
    assert list(pickle.loads(pickle.dumps(b))) == [b"12345678", b"abcdefgh"] and b[1] == b"abcdefgh"
    with pytest.raises(ValueError):
        Bytes([b"1", b"22"])


def test_records_read_as_their_dataclass_and_pickle_as_columns():
    chunks = [
        Chunk(i, 10 * i, 10 * i + 5, i + 1, "A > B" if i % 2 else "", "prose", 3, 0, i + 1)
        for i in range(1000)
    ]
    cols = chunk_columns(chunks)
    back = pickle.loads(pickle.dumps(cols))
    assert list(back) == chunks and back == chunks and back[999] == chunks[999]
    assert back[10:12] == chunks[10:12] and chunk_columns(back) is back
    assert all(isinstance(c, array) for c in (back.column("start"), back.column("tokens")))
    cards = Records.of(
        Card, [Card(0, "a", "text", 0, 3, x=1.0), Card(1, "b", "file", 4, 9)], "nssiisssffffsss"
    )
    assert cards[1].kind == "file" and cards[0].x == 1.0 and cards[1].x is None
    with pytest.raises(ValueError):
        Records(Card, [range(2)])
