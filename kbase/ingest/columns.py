"""Columns for what one document may hold a million of (a canvas's cards and edges, its chunks,
a PDF's pages, the chunks' hashes): each field a packed array or one joined string, read as a
sequence whose items are made as they are asked for. A million small objects cost hundreds of
bytes each, to hold, to pickle from a worker and to read back in the writer (a canvas of
1,000,000 text cards: over a GB in each process); their columns cost a few bytes a field, pickle
as a few objects, and the writer reads its rows from them one at a time. Pure: no I/O."""

from __future__ import annotations

import dataclasses
import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, repeat
from typing import Any, TypeVar, overload

from kbase.records import Chunk

T = TypeVar("T")

_I32 = 2**31


def ints(values: Iterable[int]) -> array:
    """``values`` as an array of 4-byte ints if they fit, else of 8-byte ones."""
    out = values if isinstance(values, array) and values.typecode == "q" else array("q", values)
    if out and -_I32 <= min(out) and max(out) < _I32:
        return array("i", out)
    return out


class Column(Sequence[T]):
    """A sequence read from columns: ``_item(i)`` and ``__iter__`` make the items."""

    __slots__ = ()

    def _item(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._item(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"{type(self).__name__} index out of range")
        return self._item(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class Strings(Column[str | None]):
    """Strings or Nones: when they repeat (a card's kind or colour), the distinct values and a
    code each; else (a card's id) one joined string, where each ends, and which are None."""

    __slots__ = ("_n", "_values", "_codes", "_joined", "_ends", "_nones")

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        values = values if isinstance(values, list) else list(values)
        self._n = len(values)
        self._values: list[str | None] = [None]
        self._codes: array | None = None  # None: all are _values[0]
        self._joined, self._ends, self._nones = "", array("q"), array("q")
        # Coded while at most a quarter are distinct (so no dict of a million ids is made)
        distinct: dict[str | None, int] = {None: 0}
        codes, limit = array("q"), max(16, self._n // 4)
        for v in values:
            codes.append(distinct.setdefault(v, len(distinct)))
            if len(distinct) > limit:
                break
        else:
            if len(distinct) > 1:
                width = "B" if len(distinct) <= 256 else "H" if len(distinct) <= 65536 else "i"
                self._values, self._codes = list(distinct), array(width, codes)
            return
        del codes, distinct
        self._ends = ints(accumulate(0 if v is None else len(v) for v in values))
        self._joined = "".join(filter(None, values))
        self._nones = ints(i for i, v in enumerate(values) if v is None)

    def __len__(self) -> int:
        return self._n

    def _item(self, i: int) -> str | None:
        if not self._ends:
            return self._values[self._codes[i]] if self._codes is not None else None
        nones = self._nones
        if nones and (k := bisect_left(nones, i)) < len(nones) and nones[k] == i:
            return None
        return self._joined[self._ends[i - 1] if i else 0 : self._ends[i]]

    def __iter__(self) -> Iterator[str | None]:
        if not self._ends:
            if self._codes is None:
                return iter(repeat(None, self._n))
            return map(self._values.__getitem__, self._codes)
        ends = self._ends
        out: Iterator[str | None] = map(
            self._joined.__getitem__, map(slice, chain((0,), ends), ends)
        )
        if self._nones:
            nones = set(self._nones)
            return (None if i in nones else t for i, t in enumerate(out))
        return out

    def __reduce__(self):
        return _strings, (self._n, self._values, self._codes, self._joined, self._ends, self._nones)


def _strings(n, values, codes, joined, ends, nones) -> Strings:
    s = Strings.__new__(Strings)
    s._n, s._values, s._codes, s._joined, s._ends, s._nones = n, values, codes, joined, ends, nones
    return s


class Floats(Column[float | None]):
    """Floats or Nones (NaN stands for None: the values kept are finite), or only how many
    when all are None."""

    __slots__ = ("_n", "_values")

    def __init__(self, values: Iterable[float | None] = ()) -> None:
        if isinstance(values, array) and values.typecode == "d":
            col = values  # NaN for None already
        else:
            col = array("d", [math.nan if v is None else v for v in values])
        self._n = len(col)
        self._values: array | None = None if all(map(math.isnan, col)) else col

    def __len__(self) -> int:
        return self._n

    def _item(self, i: int) -> float | None:
        v = math.nan if self._values is None else self._values[i]
        return None if math.isnan(v) else v

    def __iter__(self) -> Iterator[float | None]:
        if self._values is None:
            return iter(repeat(None, self._n))
        return (None if math.isnan(v) else v for v in self._values)

    def __reduce__(self):
        return _floats, (self._n, self._values)


def _floats(n, values) -> Floats:
    f = Floats.__new__(Floats)
    f._n, f._values = n, values
    return f


class Spans(Column[tuple[int, int]]):
    """``(start, end)`` pairs (a PDF's pages, a canvas's cards) read from two columns of ints."""

    __slots__ = ("starts", "ends")

    def __init__(self, starts: Sequence[int], ends: Sequence[int]) -> None:
        self.starts, self.ends = starts, ends

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> Spans:
        if isinstance(pairs, Spans):
            return pairs
        pairs = pairs if isinstance(pairs, (list, tuple)) else list(pairs)
        return cls(ints([a for a, _ in pairs]), ints([b for _, b in pairs]))

    def __len__(self) -> int:
        return len(self.starts)

    def _item(self, i: int) -> tuple[int, int]:
        return self.starts[i], self.ends[i]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.starts, self.ends)

    def __reduce__(self):
        return Spans, (self.starts, self.ends)


class Bytes(Column[bytes]):
    """Byte strings of one width (the chunks' hashes) as one bytes object."""

    __slots__ = ("data", "width")

    def __init__(self, items: Iterable[bytes] = (), width: int = 0) -> None:
        items = items if isinstance(items, list) else list(items)
        self.width = len(items[0]) if items else width
        if any(len(b) != self.width for b in items):
            raise ValueError("byte strings of one width only")
        self.data = b"".join(items)

    def __len__(self) -> int:
        return len(self.data) // self.width if self.width else 0

    def _item(self, i: int) -> bytes:
        w = self.width
        return self.data[i * w : i * w + w]

    def __iter__(self) -> Iterator[bytes]:
        w, data = self.width, self.data
        return (data[i : i + w] for i in range(0, len(data), w)) if w else iter(())

    def __reduce__(self):
        return _bytes, (self.data, self.width)


def _bytes(data, width) -> Bytes:
    b = Bytes.__new__(Bytes)
    b.data, b.width = data, width
    return b


class Records(Column[T]):
    """Records of one dataclass (``make``), kept as one column a field, in the order of its
    fields; read as a sequence of records made when asked for, or column by column."""

    __slots__ = ("make", "names", "columns")

    def __init__(self, make: Callable[..., T], columns: Sequence[Sequence[Any]]) -> None:
        self.make, self.columns = make, tuple(columns)
        self.names = tuple(f.name for f in dataclasses.fields(make))  # type: ignore[arg-type]
        if len(self.names) != len(self.columns) or len({len(c) for c in self.columns}) > 1:
            raise ValueError(f"one column of the same length for each field of {make}")

    @classmethod
    def of(cls, make: Callable[..., T], items: Iterable[T], kinds: str) -> Records[T]:
        """``items`` as columns (as they are if they are Records already). ``kinds``: a letter
        a field, ``i`` ints, ``s`` strings or None, ``f`` floats or None, ``n`` the position."""
        if isinstance(items, Records):
            return items
        items = items if isinstance(items, (list, tuple)) else list(items)
        names = [f.name for f in dataclasses.fields(make)]  # type: ignore[arg-type]
        build: dict[str, Callable[[list], Sequence]] = {
            "i": ints,
            "s": Strings,
            "f": Floats,
            "n": lambda col: range(len(col)),
        }
        return cls(make, [build[k]([getattr(r, n) for r in items]) for n, k in zip(names, kinds)])

    def column(self, name: str) -> Sequence[Any]:
        return self.columns[self.names.index(name)]

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def _item(self, i: int) -> T:
        return self.make(*(c[i] for c in self.columns))

    def __iter__(self) -> Iterator[T]:
        return map(self.make, *self.columns)

    def __reduce__(self):
        return _records, (self.make, self.names, self.columns)


def _records(make, names, columns) -> Records:
    r = Records.__new__(Records)
    r.make, r.names, r.columns = make, names, columns
    return r


def field(items: Sequence[Any], name: str) -> Sequence[Any]:
    """One field of each of ``items``: a column of Records as it is, else read item by item."""
    if isinstance(items, Records):
        return items.column(name)
    return [getattr(x, name) for x in items]


def chunk_columns(chunks: Sequence[Chunk]) -> Records[Chunk]:
    """Chunks as columns (as they are if they are already)."""
    return Records.of(Chunk, chunks, "iiiissiii")
