"""Rendering for people (a compact, coloured listing) and for scripts (JSON, JSON Lines, CSV).

Field names in the machine formats are stable; see the README's "Output formats" section.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterable, Sequence

import click

from kbase.models import Hit

FORMATS = ("table", "json", "jsonl", "csv")
HIT_FIELDS = (
    "rank", "score", "title", "path", "abspath", "line", "heading_path", "snippet", "highlights",
    "matched_chunks", "tags", "stale", "doc_id", "chunk_id",
)


def hit_record(rank: int, hit: Hit) -> dict:
    d = dataclasses.asdict(hit)
    d["rank"] = rank
    d["score"] = round(hit.score, 6)
    d["highlights"] = [list(h) for h in hit.highlights]
    d["tags"] = list(hit.tags)
    rec = {k: d[k] for k in HIT_FIELDS}
    if hit.explain:
        rec["explain"] = hit.explain
    return rec


def render_records(records: Sequence[dict], fmt: str, fields: Sequence[str]) -> str:
    """JSON (an array), JSON Lines or CSV of ``records``."""
    if fmt == "json":
        return json.dumps(list(records), ensure_ascii=False, indent=2)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in records:
            w.writerow({k: (" ".join(map(str, v)) if k == "tags" else json.dumps(v) if isinstance(v, list) else v)
                        for k, v in r.items()})
        return buf.getvalue().rstrip("\n")
    raise ValueError(fmt)


def render_hits(hits: Sequence[Hit], fmt: str, color: bool) -> str:
    if fmt != "table":
        return render_records([hit_record(i, h) for i, h in enumerate(hits, 1)], fmt, HIT_FIELDS)
    out = []
    width = len(str(len(hits)))
    for i, h in enumerate(hits, 1):
        loc = f"{h.path}:{h.line}"
        title = click.style(h.title, bold=True) if color else h.title
        flag = (click.style(" [changed on disk]", fg="yellow") if color else " [changed on disk]") if h.stale else ""
        head = f"{i:>{width}}. {title}  {click.style(loc, fg='cyan') if color else loc}  {h.score:.2f}{flag}"
        out.append(head)
        if h.heading_path:
            out.append(" " * (width + 2) + (click.style(h.heading_path, dim=True) if color else h.heading_path))
        out.append(" " * (width + 2) + highlight(h.snippet, h.highlights, color))
    return "\n".join(out)


def highlight(text: str, ranges: Iterable[tuple[int, int]], color: bool) -> str:
    if not color:
        return text
    parts, pos = [], 0
    for a, b in ranges:
        parts.append(text[pos:a])
        parts.append(click.style(text[a:b], fg="yellow", bold=True))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def render_status(st: dict) -> str:
    lines = [f"index      {st['db']}"]
    for r in st["roots"]:
        lines.append(f"root       {r['path']}  ({r['documents']} documents, indexed {r['last_indexed_at'] or 'never'})")
    lines.append(f"documents  {st['documents']:,}")
    lines.append(f"chunks     {st['chunks']:,}" + (f"  ({st['oversized_chunks']} oversized)" if st["oversized_chunks"] else ""))
    lines.append(f"tags       {st['tags']:,}")
    enc = ", ".join(f"{k} {v}" for k, v in st["encodings"].items())
    if enc:
        lines.append(f"encodings  {enc}")
    ratio = f"  ({st['db_to_text']}x the text)" if st["db_to_text"] else ""
    lines.append(f"size       {human_bytes(st['db_bytes'])} on disk, {human_bytes(st['text_bytes'])} of text{ratio}")
    lines.append(f"last index {st['last_index_at'] or 'never'}")
    return "\n".join(lines)
