"""The Python API: ``kb = kbase.open(path)``. The CLI and the TUI use it too."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import apsw

from kbase import db
from kbase.models import Hit, IndexReport


class KB:
    """An open kbase index. Reads use a read-only connection; ``index`` opens a writer on demand.

    >>> kb = kbase.open("notes.db")
    >>> kb.index(["~/notes"])
    >>> for hit in kb.search("sqlite wal", limit=5): print(hit.path, hit.line, hit.snippet)
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else db.default_db_path()
        self._reader: apsw.Connection | None = None

    # connections -------------------------------------------------------------------------------
    @property
    def reader(self) -> apsw.Connection:
        """A read-only connection (opened on first use; the index must exist)."""
        if self._reader is None:
            self._reader = db.connect(self.path, readonly=True)
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing -----------------------------------------------------------------------------------
    def index(self, paths: Sequence[str | os.PathLike[str]] = (), **options) -> IndexReport:
        """Index folders or files (all known roots when ``paths`` is empty); see ``ingest.index``."""
        from kbase import ingest

        con = db.connect(self.path, create=True)
        try:
            with db.writer_lock(self.path):
                return ingest.index(con, paths, **options)
        except apsw.Error as e:
            raise db.translate_error(e, self.path) from e
        finally:
            con.close()

    # reading -----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        path: str | None = None,
        tags: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
    ) -> list[Hit]:
        """Keyword search; one hit per document, best first."""
        from kbase.search import Filters, keyword_search

        filters = Filters(path=path, tags=tuple(tags), since=since, until=until)
        return self._read(keyword_search, query, limit=limit, filters=filters)

    def document(self, target: str):
        """A document by path (see ``search.find_document``)."""
        from kbase.search import find_document

        return self._read(find_document, target)

    def status(self) -> dict:
        from kbase.search import status

        return self._read(status, self.path)

    def _read(self, fn, *args, **kwargs):
        try:
            return fn(self.reader, *args, **kwargs)
        except apsw.Error as e:
            raise db.translate_error(e, self.path) from e


def open(path: str | os.PathLike[str] | None = None) -> KB:  # noqa: A001 - mirrors sqlite3.connect/open
    """Open the index at ``path`` (default: ``$KBASE_DB`` or the per-user data folder)."""
    return KB(path)
