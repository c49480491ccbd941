"""Records that cross layers (ingest, store, search, CLI, TUI). Frozen dataclasses; and the
chunker's defaults (kbase.records.defaults), which the CLI's --help shows.

``from kbase.records import X`` for any of them. A search's (``Hit``, ``HIT_FIELDS``, ``Hits``:
kbase.records.search) load with this package; the ingest steps' (kbase.records.ingest) and the
other calls' reports (kbase.records.reports) on first use: each dataclass compiles its methods
when it is defined, about a millisecond apiece, and a search from the shell needs none of them
(BENCHMARKS.md section 23).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kbase.records.search import HIT_FIELDS, Hit, Hits

if TYPE_CHECKING:
    from kbase.records.ingest import Block, Chunk, Diagnostic, Heading, ParsedDoc
    from kbase.records.reports import (
        CheckReport,
        CompactReport,
        DocRef,
        EmbedReport,
        FrontmatterWarning,
        IndexReport,
        ModelHint,
        ModelInfo,
        NoteEntry,
        Problem,
        RelatedResult,
        RootInfo,
        RootMove,
        RootRemoval,
        SqlResult,
        Status,
    )

_WHERE = {
    "Heading": "ingest",
    "Block": "ingest",
    "ParsedDoc": "ingest",
    "Chunk": "ingest",
    "Diagnostic": "ingest",
    "EmbedReport": "reports",
    "ModelInfo": "reports",
    "IndexReport": "reports",
    "ModelHint": "reports",
    "RootMove": "reports",
    "RootRemoval": "reports",
    "RootInfo": "reports",
    "Problem": "reports",
    "FrontmatterWarning": "reports",
    "CheckReport": "reports",
    "CompactReport": "reports",
    "Status": "reports",
    "RelatedResult": "reports",
    "NoteEntry": "reports",
    "DocRef": "reports",
    "SqlResult": "reports",
}

__all__ = [
    "HIT_FIELDS",
    "Hit",
    "Hits",
    "Heading",
    "Block",
    "ParsedDoc",
    "Chunk",
    "Diagnostic",
    "EmbedReport",
    "ModelInfo",
    "IndexReport",
    "ModelHint",
    "RootMove",
    "RootRemoval",
    "RootInfo",
    "Problem",
    "FrontmatterWarning",
    "CheckReport",
    "CompactReport",
    "Status",
    "RelatedResult",
    "NoteEntry",
    "DocRef",
    "SqlResult",
]


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'kbase.records' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kbase.records.{where}"), name)
    globals()[name] = value
    return value
