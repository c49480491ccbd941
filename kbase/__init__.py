"""kbase: a personal knowledge index in one SQLite file.

>>> import kbase
>>> kb = kbase.open("notes.db")
>>> kb.index(["~/notes"])
>>> kb.search("how do I rotate keys", limit=5)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (6 ms of `kbase --version`)

# The one place the version is written (pyproject.toml reads it: tool.hatch.version), so that
# `kbase --version` needs no package metadata (importlib.metadata costs more than kbase's start).
__version__ = "0.1.0"

if TYPE_CHECKING:
    import os

    from kbase.api import KB
    from kbase.embed.embedder import Embedder
    from kbase.errors import DatabaseError, InputError, KbaseError
    from kbase.records import Chunk, Hit, IndexReport

__all__ = ["open", "KB", "KbaseError", "DatabaseError", "InputError", "Hit", "Chunk", "IndexReport"]


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | None = None,
    cache_vectors: bool = True,
) -> KB:
    """Open the index at ``path`` (default: ``$KBASE_DB`` or the per-user data folder);
    see ``KB``."""
    from kbase.api import KB

    return KB(path, embedder=embedder, cache_vectors=cache_vectors)


# Imported when first asked for (PEP 562), so that importing kbase (every command does) costs
# nothing: a face or a script takes what it needs.
_LAZY = {
    "KB": "kbase.api",
    "KbaseError": "kbase.errors",
    "DatabaseError": "kbase.errors",
    "InputError": "kbase.errors",
    "Hit": "kbase.records",
    "Chunk": "kbase.records",
    "IndexReport": "kbase.records",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kbase' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
