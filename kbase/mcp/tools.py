"""The tools as plain functions over ``KB``: arguments in, a ``Reply`` out (the structured result
and its text). No protocol here: kbase.mcp.server registers them as MCP tools, and tests and
benchmarks can call them directly."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel

from kbase.api import KB
from kbase.mcp import render
from kbase.mcp import schemas as s


@dataclass
class Reply:
    """A tool's result: structured (the output schema's shape) and as text, plus messages for
    the client's log, (level, message)."""

    structured: BaseModel | dict
    text: str
    log: list[tuple[str, str]] = field(default_factory=list)

    def data(self) -> dict:
        if isinstance(self.structured, BaseModel):
            return self.structured.model_dump(mode="json")
        return self.structured


def search(
    kb: KB,
    query: str,
    *,
    mode: str | None = None,
    limit: int = 10,
    path: str | None = None,
    tags: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    exclude: Sequence[str] = (),
) -> Reply:
    used = mode or kb.default_mode()
    hits = kb.search(
        query,
        mode=used,
        limit=limit,
        path=path,
        tags=tuple(tags),
        since=since,
        until=until,
        exclude=tuple(exclude),
    )
    out = s.SearchResult(
        query=query,
        mode=used,
        hits=[
            s.SearchHit(
                rank=i,
                title=h.title,
                path=h.path,
                abspath=h.abspath,
                line=h.line,
                heading_path=h.heading_path,
                snippet=h.snippet,
                score=round(h.score, 6),
                stale=h.stale,
                tags=list(h.tags),
                matched_chunks=h.matched_chunks,
            )
            for i, h in enumerate(hits, 1)
        ],
    )
    return Reply(out, render.search_text(out))


def read(kb: KB, note: str, *, start_line: int | None = None, end_line: int | None = None) -> Reply:
    r = kb.read(note, start_line, end_line)
    out = s.ReadResult(
        path=r.path,
        abspath=r.abspath,
        title=r.title,
        kind=r.kind,
        tags=list(r.tags),
        aliases=list(r.aliases),
        date=r.date,
        modified=r.modified,
        indexed_at=r.indexed_at,
        stale=r.stale,
        total_lines=r.total_lines,
        first_line=r.first_line,
        last_line=r.last_line,
        truncated=r.truncated,
        text="\n".join(r.lines),
    )
    return Reply(out, render.read_text(out, r.numbered()))


def links(kb: KB, note: str, *, direction: str = "both") -> Reply:
    target = kb.note(note)
    out_links = kb.links(target.path) if direction != "backlinks" else []
    back = kb.backlinks(target.path) if direction != "outgoing" else []
    out = s.LinksResult(
        path=target.path,
        title=target.title,
        outgoing=[
            s.LinkItem(
                line=lk.line,
                context=lk.context,
                target=lk.target,
                anchor=lk.anchor,
                path=lk.target_path,
                title=lk.target_title,
                resolved=lk.target_path is not None,
            )
            for lk in out_links
        ],
        backlinks=[
            s.LinkItem(
                line=lk.line,
                context=lk.context,
                target=lk.target,
                anchor=lk.anchor,
                path=lk.source_path,
                title=lk.source_title,
                resolved=True,
            )
            for lk in back
        ],
    )
    return Reply(out, render.links_text(out))


def related(kb: KB, note: str, *, limit: int = 10, include_linked: bool = False) -> Reply:
    r = kb.related(note, limit=limit, include_linked=include_linked)
    out = s.RelatedResult(
        path=r.path,
        title=r.title,
        method="semantic" if r.method == "semantic" else "keyword",
        terms=list(r.terms),
        notes=[
            s.RelatedNote(
                rank=i,
                title=h.title,
                path=h.path,
                line=h.line,
                heading_path=h.heading_path,
                snippet=h.snippet,
                score=round(h.score, 6),
                linked=h.doc_id in r.links_to,
                links_here=h.doc_id in r.linked_from,
            )
            for i, h in enumerate(r.hits, 1)
        ],
    )
    return Reply(out, render.related_text(out))


def _jsonable(value: Any) -> Any:
    """Blobs (vectors) as base64 text for JSON."""
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value


def sql(kb: KB, query: str, *, max_rows: int = s.SQL_ROWS_DEFAULT, timeout: float = 10.0) -> Reply:
    res = kb.sql(query, timeout=timeout, max_rows=max_rows + 1)
    rows = [[_jsonable(v) for v in row] for row in res.rows[:max_rows]]
    out = s.SqlResult(columns=res.columns, rows=rows, truncated=len(res.rows) > max_rows)
    return Reply(out, render.sql_text(out))


def status(kb: KB, server: dict | None = None) -> Reply:
    st = kb.status()
    data = asdict(st)
    data["embedding_coverage"] = (
        None if st.embedding_coverage is None else round(st.embedding_coverage, 4)
    )
    if server is not None:
        data["server"] = server
    return Reply(data, json.dumps(data, indent=1, ensure_ascii=False))
