"""The readable text of each tool result: what an agent reads first."""

from __future__ import annotations

from kbase.mcp.schemas import LinksResult, ReadResult, RelatedResult, SearchResult, SqlResult
from kbase.text import excerpt


def cell(value, width: int = 80) -> str:
    """A value as one table cell (on one line, at most ``width`` characters)."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"<blob {len(value)} bytes>"
    text = str(value).replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return excerpt(text, (0, 0), width)


def search_text(r: SearchResult) -> str:
    if not r.hits:
        return f"No notes match {r.query!r} ({r.mode})."
    out = [f"{len(r.hits)} notes for {r.query!r} ({r.mode}):"]
    for h in r.hits:
        out.append(
            f"{h.rank}. {h.title} — {h.path}:{h.line} (score {h.score:.3g})"
            + (" [changed on disk since indexed]" if h.stale else "")
        )
        if h.heading_path:
            out.append(f"   {h.heading_path}")
        out.append(f"   {h.snippet}")
    return "\n".join(out)


def read_text(r: ReadResult, numbered: str) -> str:
    meta = [f"{r.title} — {r.path}", f"lines {r.first_line}-{r.last_line} of {r.total_lines}"]
    if r.tags:
        meta.append("tags: " + ", ".join(r.tags))
    if r.aliases:
        meta.append("aliases: " + ", ".join(r.aliases))
    if r.date:
        meta.append(f"date: {r.date}")
    meta.append(f"modified: {r.modified}")
    if r.stale:
        meta.append("changed on disk since indexed")
    tail = (
        f"\n… {r.total_lines - r.last_line} more lines: read with start_line={r.last_line + 1}"
        if r.truncated
        else ""
    )
    return " · ".join(meta) + "\n" + numbered + tail


def links_text(r: LinksResult) -> str:
    out = [f"{r.title} — {r.path}", f"outgoing links ({len(r.outgoing)}):"]
    out += [
        f"  line {lk.line} -> {lk.path or lk.target + ' (unresolved)'}"
        + (f"#{lk.anchor}" if lk.anchor else "")
        + f": {lk.context}"
        for lk in r.outgoing
    ]
    out.append(f"backlinks ({len(r.backlinks)}):")
    out += [f"  {lk.path}:{lk.line} ({lk.title}): {lk.context}" for lk in r.backlinks]
    return "\n".join(out)


def related_text(r: RelatedResult) -> str:
    how = (
        "by meaning"
        if r.method == "semantic"
        else f"by keywords, as the note has no embeddings (terms: {', '.join(r.terms) or 'none'})"
    )
    out = (
        [f"Notes related to {r.title} — {r.path} ({how}):"]
        if r.notes
        else [f"No notes related to {r.path}."]
    )
    for n in r.notes:
        marks = "".join(
            m for m, on in ((" [linked]", n.linked), (" [links here]", n.links_here)) if on
        )
        out.append(f"{n.rank}. {n.title} — {n.path}:{n.line} (score {n.score:.3g}){marks}")
        out.append(f"   {n.snippet}")
    return "\n".join(out)


def sql_text(r: SqlResult) -> str:
    lines = [" | ".join(r.columns)] + [" | ".join(cell(v, 80) for v in row) for row in r.rows]
    lines.append(
        f"({len(r.rows)} rows" + (", more not shown: raise max_rows)" if r.truncated else ")")
    )
    return "\n".join(lines)
