"""Records that cross layers (ingest, store, search, CLI, TUI). Frozen dataclasses; and the
chunker's defaults (kbase.records.defaults), which the CLI's --help shows.

``from kbase.records import X`` for any of them. A search's (``Hit``, ``HIT_FIELDS``, ``Hits``:
kbase.records.search) load with this package; the ingest steps' (kbase.records.ingest), an index
run's reports (kbase.records.runs) and the other calls' (kbase.records.reports) on first use:
each dataclass compiles its methods when it is defined, about a millisecond apiece, and a search
from the shell needs none of them (BENCHMARKS.md section 23), an index run few.
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
        FrontmatterWarning,
        ModelHint,
        ModelInfo,
        NoteEntry,
        Problem,
        RelatedResult,
        RootRemoval,
        SqlResult,
        Status,
    )
    from kbase.records.runs import EmbedReport, IndexReport, RootInfo, RootMove

_WHERE = {
    "Heading": "ingest",
    "Block": "ingest",
    "ParsedDoc": "ingest",
    "Chunk": "ingest",
    "Diagnostic": "ingest",
    "EmbedReport": "runs",
    "ModelInfo": "reports",
    "IndexReport": "runs",
    "ModelHint": "reports",
    "RootMove": "runs",
    "RootRemoval": "reports",
    "RootInfo": "runs",
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
