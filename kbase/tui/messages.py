"""What the main screen's workers report back (Textual messages, as dataclasses).

Each request carries a generation number (``gen``: a query; ``request``: a note shown in the
preview) so that a result a newer request has superseded is dropped on arrival.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from kbase.records import DocRef, Hit, RelatedResult, Status
from kbase.tui.logic import Location


@dataclass
class StatusLoaded(Message):
    status: Status
    has_embeddings: bool
    read_only: bool = False  # the index is read as it is (a read-only folder or file system)


@dataclass
class SearchDone(Message):
    gen: int
    source: str  # 'keyword' (the quick list), or the mode whose list it is
    query: str
    hits: list[Hit]
    why: list[str] = field(default_factory=list)  # no hits: the filters that keep no note


@dataclass
class DocumentLoaded(Message):
    request: int
    location: Location
    doc: DocRef


@dataclass
class LinksLoaded(Message):
    request: int
    location: Location
    outlinks: list
    backlinks: list


@dataclass
class RelatedLoaded(Message):
    request: int
    location: Location
    related: RelatedResult


@dataclass
class NoteResolved(Message):
    location: Location


@dataclass
class ModelReady(Message):
    pass


@dataclass
class EmbedProgress(Message):
    """A background embedding step ended: ``remaining`` chunks still have no vector."""

    remaining: int


@dataclass
class WorkFailed(Message):
    """A worker's call raised: ``what`` says which (status, search, vector, document, links,
    related notes, resolve, model, embed); ``gen`` is the request it served (0: none)."""

    what: str
    error: BaseException
    gen: int = 0
