"""A one-shot query run through onnxruntime's C library by ctypes: no numpy, no Python binding.

A search from the shell embeds one query and exits. Through onnxruntime's Python binding that
costs its import and numpy's (about 0.16 s of CPU on a quiet machine, most of a cold hybrid
search) for a model call of a few milliseconds. The onnxruntime wheel also ships its C library
(``capi/libonnxruntime.so.VERSION``, the C API behind every other language's binding); loading
it takes ~10 ms, and its ``Run`` computes what the Python session computes: the same library
code, graph and options (kbase.embed.onnx_graph.session with one thread and no pre-packing), so
the same floats (tests/test_query_capi.py compares them).

The C API is a table of function pointers (``OrtApi``) whose order onnxruntime keeps from one
release to the next (new functions are appended). ``ORT_API_VERSION`` asks for the table of a
version old enough for every onnxruntime kbase supports; the indices below are those functions'
places in it. Anything unexpected (no such library, another platform, a status that is not OK)
raises ``Unavailable``, and the caller uses the Python binding as before.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_void_p
from pathlib import Path
from typing import Any

ORT_API_VERSION = 13  # onnxruntime 1.13 and later serve this table
# Places in OrtApi (onnxruntime_c_api.h, ``struct OrtApi``; the same in every version since).
_GET_ERROR_MESSAGE = 2
_CREATE_ENV = 3
_CREATE_SESSION = 7
_RUN = 9
_CREATE_SESSION_OPTIONS = 10
_SET_LOG_SEVERITY = 22
_SET_OPTIMIZATION_LEVEL = 23
_SET_INTRA_OP_THREADS = 24
_SET_INTER_OP_THREADS = 25
_CREATE_TENSOR_WITH_DATA = 49
_GET_TENSOR_MUTABLE_DATA = 51
_GET_DIMENSIONS_COUNT = 61
_GET_DIMENSIONS = 62
_GET_TENSOR_TYPE_AND_SHAPE = 65
_CREATE_CPU_MEMORY_INFO = 69
_RELEASE_ENV = 92
_RELEASE_STATUS = 93
_RELEASE_MEMORY_INFO = 94
_RELEASE_SESSION = 95
_RELEASE_VALUE = 96
_RELEASE_TENSOR_INFO = 99
_RELEASE_SESSION_OPTIONS = 100
_ADD_SESSION_CONFIG_ENTRY = 130
_TABLE_SIZE = 131
_INT64 = 7  # ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
_LOG_ERROR = 3
_ARENA_ALLOCATOR, _MEM_TYPE_DEFAULT = 1, 0


class Unavailable(Exception):
    """The C library cannot be used here (the caller falls back to the Python binding)."""


def library() -> Path:
    """onnxruntime's C library in its installed package (found without importing it)."""
    import importlib.util

    if os.name != "posix":  # (the C API takes wide-character paths on Windows)
        raise Unavailable("not a POSIX system")
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("onnxruntime is not installed")
    capi = Path(next(iter(spec.submodule_search_locations))) / "capi"
    try:
        names = sorted(
            n
            for n in os.listdir(capi)
            if n.startswith("libonnxruntime.") and (".so" in n or n.endswith(".dylib"))
        )
    except OSError as e:
        raise Unavailable(str(e)) from e
    if not names:
        raise Unavailable(f"no C library in {capi}")
    return capi / names[-1]


def library_version(path: Path) -> str | None:
    """The version in the C library's file name (libonnxruntime.so.1.32.0,
    libonnxruntime.1.32.0.dylib), or None."""
    name = path.name
    tail = name.split(".so.", 1)[1] if ".so." in name else name[len("libonnxruntime.") : -6]
    parts = tail.split(".")
    return tail if len(parts) == 3 and all(p.isdigit() for p in parts) else None


_Status = c_void_p


class _Api:
    """The C library loaded once per process, and its function table."""

    def __init__(self, path: Path) -> None:
        try:
            lib = ctypes.CDLL(str(path))
            get_base = lib.OrtGetApiBase
        except (OSError, AttributeError) as e:
            raise Unavailable(f"cannot load {path}: {e}") from e
        get_base.restype = POINTER(c_void_p * 2)
        base = get_base().contents
        get_api = ctypes.CFUNCTYPE(c_void_p, c_uint32)(base[0])
        self.version = ctypes.CFUNCTYPE(c_char_p)(base[1])().decode()
        table = get_api(ORT_API_VERSION)
        if not table:
            raise Unavailable(f"onnxruntime {self.version} does not serve API {ORT_API_VERSION}")
        self._table = (c_void_p * _TABLE_SIZE).from_address(table)
        self._lib = lib  # (kept loaded)
        self._get_message = self._fn(_GET_ERROR_MESSAGE, c_char_p, c_void_p)
        self._release_status = self._fn(_RELEASE_STATUS, None, c_void_p)

    def _address(self, index: int) -> int:
        address = self._table[index]
        if not address:
            raise Unavailable(f"onnxruntime {self.version} has no function {index}")
        return address

    def _fn(self, index: int, restype, *argtypes):
        return ctypes.CFUNCTYPE(restype, *argtypes)(self._address(index))

    def call(self, index: int, *args) -> None:
        """A function that returns an OrtStatus (NULL: done); its arguments as ctypes values."""
        status = ctypes.CFUNCTYPE(_Status)(self._address(index))(*args)  # (each a ctypes value)
        if status:
            message = (self._get_message(status) or b"").decode("utf-8", "replace")
            self._release_status(status)
            raise Unavailable(message)

    def release(self, index: int, handle: c_void_p) -> None:
        if handle:
            self._fn(index, None, c_void_p)(handle)


_api: _Api | None = None


def api() -> _Api:
    global _api
    if _api is None:
        _api = _Api(library())
    return _api


class Session:
    """One onnxruntime session on ``graph`` as kbase.embed.onnx_graph.session(graph, threads=1,
    prepack=False) makes it; ``run`` gives the first output of int64 inputs of one row."""

    def __init__(self, graph: Path, inputs: tuple[str, ...], output: str) -> None:
        self.api = a = api()
        self.env, self.session, self.memory = c_void_p(), c_void_p(), c_void_p()
        self.inputs, self.output = inputs, output
        options = c_void_p()
        try:
            a.call(_CREATE_ENV, c_int(_LOG_ERROR), c_char_p(b"kbase"), byref(self.env))
            a.call(_CREATE_SESSION_OPTIONS, byref(options))
            a.call(_SET_OPTIMIZATION_LEVEL, options, c_int(0))  # ORT_DISABLE_ALL: optimised already
            a.call(_SET_INTRA_OP_THREADS, options, c_int(1))
            a.call(_SET_INTER_OP_THREADS, options, c_int(1))
            a.call(_SET_LOG_SEVERITY, options, c_int(_LOG_ERROR))
            for key, value in (
                (b"session.disable_prepacking", b"1"),
                (b"session.intra_op.allow_spinning", b"0"),
            ):
                a.call(_ADD_SESSION_CONFIG_ENTRY, options, c_char_p(key), c_char_p(value))
            a.call(
                _CREATE_SESSION,
                self.env,
                c_char_p(os.fsencode(graph)),
                options,
                byref(self.session),
            )
            a.call(
                _CREATE_CPU_MEMORY_INFO,
                c_int(_ARENA_ALLOCATOR),
                c_int(_MEM_TYPE_DEFAULT),
                byref(self.memory),
            )
        except Unavailable:
            self.close()
            raise
        finally:
            a.release(_RELEASE_SESSION_OPTIONS, options)

    def run(self, feeds: dict[str, list[int]]) -> tuple[list[int], Any]:
        """(the output's shape, its float32 values as a flat memoryview, copied): each input a
        row of int64 values (shape (1, len))."""
        a = self.api
        n = len(next(iter(feeds.values())))
        shape = (c_int64 * 2)(1, n)
        buffers = [(c_int64 * n)(*feeds[name]) for name in self.inputs]
        values = [c_void_p() for _ in self.inputs]
        out = c_void_p()
        info = c_void_p()
        try:
            for buf, value in zip(buffers, values):
                a.call(
                    _CREATE_TENSOR_WITH_DATA,
                    self.memory,
                    ctypes.cast(buf, c_void_p),
                    c_size_t(8 * n),
                    ctypes.cast(shape, POINTER(c_int64)),
                    c_size_t(2),
                    c_int(_INT64),
                    byref(value),
                )
            names = (c_char_p * len(self.inputs))(*(s.encode() for s in self.inputs))
            a.call(
                _RUN,
                self.session,
                c_void_p(),
                names,
                (c_void_p * len(values))(*(v.value for v in values)),
                c_size_t(len(values)),
                (c_char_p * 1)(self.output.encode()),
                c_size_t(1),
                byref(out),
            )
            a.call(_GET_TENSOR_TYPE_AND_SHAPE, out, byref(info))
            count = c_size_t()
            a.call(_GET_DIMENSIONS_COUNT, info, byref(count))
            dims = (c_int64 * count.value)()
            a.call(_GET_DIMENSIONS, info, ctypes.cast(dims, POINTER(c_int64)), count)
            size = 1
            for d in dims:
                size *= d
            data = c_void_p()
            a.call(_GET_TENSOR_MUTABLE_DATA, out, byref(data))
            floats = memoryview(ctypes.string_at(data, 4 * size)).cast("f")
            return list(dims), floats
        finally:
            a.release(_RELEASE_TENSOR_INFO, info)
            a.release(_RELEASE_VALUE, out)
            for value in values:
                a.release(_RELEASE_VALUE, value)

    def close(self) -> None:
        a = self.api
        a.release(_RELEASE_MEMORY_INFO, self.memory)
        a.release(_RELEASE_SESSION, self.session)
        a.release(_RELEASE_ENV, self.env)
        self.env, self.session, self.memory = c_void_p(), c_void_p(), c_void_p()


def mean_pooled(dims: list[int], hidden: Any) -> bytes:
    """The unit mean of the rows of a (1, tokens, dim) output as float32 little-endian bytes,
    computed as kbase.embed.embedder._vectors computes it for one text (a float64 sum over the
    tokens in order, divided by their count, divided by its norm, then float32)."""
    import math
    import struct

    _, tokens, dim = dims
    sums = [0.0] * dim
    for t in range(tokens):
        row = hidden[t * dim : (t + 1) * dim]
        sums = [s + x for s, x in zip(sums, row)]
    mean = [s / tokens for s in sums]
    norm = max(math.sqrt(math.fsum(v * v for v in mean)), 1e-12)
    return struct.pack(f"<{dim}f", *(v / norm for v in mean))
