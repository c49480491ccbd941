"""Errors the library raises. Each one names the object at fault and, in ``hint``, the fix."""

from __future__ import annotations


class KbaseError(Exception):
    """A failure a user can act on: ``message`` says what is wrong, ``hint`` how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class DatabaseError(KbaseError):
    """The index file is missing, locked, damaged or not a kbase index."""


class IndexBusyError(DatabaseError):
    """Another process is writing to the same index."""


class ModelUnavailable(KbaseError):
    """The embedding model cannot run here (the cache its graph is built in cannot be written):
    keyword search still works, and a search in the default mode falls back to it."""


class InputError(KbaseError):
    """A path, query or option given by the user cannot be used."""
