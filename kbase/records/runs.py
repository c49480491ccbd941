"""What an index run returns (kbase.records): its report, the embedding run's, the roots it
looks at (RootInfo) and found moved. Apart from the other calls' reports (kbase.records.reports),
whose dozen dataclasses cost an index run's start-up some 5 ms to define."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EmbedReport:
    """What one embedding run did."""

    embedded: int = 0  # chunks the model embedded
    reused: int = 0  # chunks given the vector of a chunk with the same embedder input
    seconds: float = 0.0
    model_seconds: float = 0.0  # of which inside the model
    remaining: int = 0  # chunks still without a vector (limited or stopped run), plus a switch's
    # A switch to another model (kbase.embed.vectors.embed_switch): what this run did of it, its
    # ``remaining`` the chunks still without the new model's vector (0: the switch is done).
    switch: EmbedReport | None = None
    switching_to: str | None = None  # the model switched to (as --model takes it)


@dataclass
class IndexReport:
    """What one index run did."""

    new: int = 0
    updated: int = 0
    unchanged: int = 0
    renamed: int = 0
    removed: int = 0
    # (what, path) of each document the run added, changed, renamed or removed, in order; what is
    # 'new', 'updated', 'renamed' (path: the new one) or 'removed'; path as documents.path
    # (inside its root; a file root's own name).
    changed: list[tuple[str, str]] = field(default_factory=list)
    rechunked: int = 0  # documents chunked again from their stored text (chunker settings changed)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (path, message)
    seconds: float = 0.0
    interrupted: bool = False
    embedding: EmbedReport | None = None  # what the embedding step did
    moved_roots: list[RootMove] = field(
        default_factory=list
    )  # roots found moved along with the index


@dataclass(frozen=True)
class RootMove:
    """A root re-pointed after its notes moved (``kbase roots move``, or found moved by index)."""

    old: str
    new: str


@dataclass(frozen=True)
class RootInfo:
    """An indexed root (folder or file): whether it is still there, and where it would be if
    it moved along with the index file."""

    id: int
    path: str
    documents: int
    exists: bool
    moved_with_index: str | None  # the root's place relative to the index now, if not ``path``
    last_indexed_at: str | None
