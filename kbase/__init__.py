"""kbase: a personal knowledge index in one SQLite file.

>>> import kbase
>>> kb = kbase.open("notes.db")
>>> kb.index(["~/notes"])
>>> kb.search("how do I rotate keys", limit=5)
"""

from __future__ import annotations

from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.models import Chunk, Hit, IndexReport

__all__ = ["open", "KB", "KbaseError", "DatabaseError", "InputError", "Hit", "Chunk", "IndexReport"]


def open(path=None, **options):  # noqa: A001
    """Open the index at ``path`` (default: ``$KBASE_DB`` or the per-user data folder)."""
    from kbase.api import KB

    return KB(path, **options)


def __getattr__(name: str):
    if name == "KB":
        from kbase.api import KB

        return KB
    if name == "__version__":
        from importlib.metadata import version

        return version("kbase")
    raise AttributeError(name)
