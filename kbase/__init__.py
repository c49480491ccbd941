"""kbase: a personal knowledge index in one SQLite file.

>>> import kbase
>>> kb = kbase.open("notes.db")
>>> kb.index(["~/notes"])
>>> kb.search("how do I rotate keys", limit=5)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.models import Chunk, Hit, IndexReport

if TYPE_CHECKING:
    from kbase.api import KB
    from kbase.embed.embedder import Embedder

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


def __getattr__(name: str):
    if name == "KB":
        from kbase.api import KB

        return KB
    if name == "__version__":
        from importlib.metadata import version

        return version("kbase")
    raise AttributeError(name)
