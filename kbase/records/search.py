"""A search's results: Hit, HIT_FIELDS, Hits (see kbase.records)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hit:
    """One search result: a document with its best-matching chunk."""

    doc_id: int
    path: str  # relative to its root
    abspath: str
    title: str
    score: float  # higher is better
    chunk_id: int
    line: int  # 1-based line of the first match (or of the chunk)
    heading_path: str
    snippet: str  # one line of text around the match
    highlights: tuple[tuple[int, int], ...] = ()  # [start, end) of matched terms in ``snippet``
    matched_chunks: int = 1  # how many chunks of the document matched
    tags: tuple[str, ...] = ()
    stale: bool = False  # the file changed on disk (or is gone) since it was indexed
    explain: dict = field(default_factory=dict)
    rank: int = 0  # 1-based position in the results (KB.search numbers them; 0: not ranked)
    missing: bool = False  # the file is gone from disk (stale too): moved or deleted
    page: int | None = None  # a PDF's 1-based page of the first match (or of the chunk)
    card: str | None = None  # a canvas's card (its id in the file) holding the first match
    # The query as KB.search searched it when it corrected a word no note holds ('publsh' ->
    # 'publish'; the same on every hit of the search), else None.
    corrected_query: str | None = None

    def record(self, explain: bool = False) -> dict:
        """The hit as the machine formats print it (JSON, CSV, MCP): HIT_FIELDS in their order,
        lists for tuples, ``explain`` only when asked for."""
        rec = {k: getattr(self, k) for k in HIT_FIELDS}
        rec["score"] = round(self.score, 6)
        rec["highlights"] = [list(h) for h in self.highlights]
        rec["tags"] = list(self.tags)
        if explain and self.explain:
            rec["explain"] = self.explain
        return rec


# A hit's fields in the machine formats, in this order (stable across versions; docs/cli.md "Output
# formats"). Every field of Hit but ``explain``, which is printed only with --explain.
HIT_FIELDS = (
    "rank",
    "score",
    "title",
    "path",
    "abspath",
    "line",
    "page",
    "card",
    "heading_path",
    "snippet",
    "highlights",
    "matched_chunks",
    "tags",
    "stale",
    "missing",
    "doc_id",
    "chunk_id",
    "corrected_query",
)


class Hits(list):
    """``KB.search``'s results: a list of ``Hit``, best first, with ``notice``: one line saying
    what of the query was left out (repeated terms, terms past the maximum, text past the
    length cap; see ``kbase.search.query.bound_query``), or None; ``corrected``: the query as
    kbase searched it when it corrected a word that no note holds ('publsh' -> 'publish'), else
    None, and ``corrections``: each such word as typed and as searched."""

    notice: str | None = None
    corrected: str | None = None
    corrections: tuple[tuple[str, str], ...] = ()
