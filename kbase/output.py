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


def hit_record(rank: int, hit: Hit, explain: bool = True) -> dict:
    d = dataclasses.asdict(hit)
    d["rank"] = rank
    d["score"] = round(hit.score, 6)
    d["highlights"] = [list(h) for h in hit.highlights]
    d["tags"] = list(hit.tags)
    rec = {k: d[k] for k in HIT_FIELDS}
    if explain and hit.explain:
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


def render_hits(hits: Sequence[Hit], fmt: str, color: bool, explain: bool = False) -> str:
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
        if explain and h.explain:
            parts = []
            for name in ("keyword", "semantic"):
                e = h.explain.get(name)
                if e is None:
                    parts.append(f"{name}: -")
                else:
                    raw = f"bm25 {e['score']:.2f}" if "score" in e else f"cos {e['similarity']:.3f}"
                    parts.append(f"{name}: #{e['rank']} ({raw}) +{e['contribution']:.4f}")
            line = " " * (width + 2) + "  ".join(parts)
            out.append(click.style(line, dim=True) if color else line)
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


CHUNK_FIELDS = ("seq", "start", "end", "line", "end_line", "tokens", "kind", "flags", "heading_path", "text")


def render_chunks(text: str, chunks, diagnostics, fmt: str, color: bool) -> str:
    """``kbase chunks``: one line a chunk for people, every field and the text for scripts."""
    if fmt != "table":
        records = [{**{k: getattr(c, k) for k in CHUNK_FIELDS[:-1]}, "text": text[c.start:c.end]} for c in chunks]
        if fmt == "json":
            diags = [dataclasses.asdict(d) for d in diagnostics]
            return json.dumps({"chunks": records, "diagnostics": diags}, ensure_ascii=False, indent=2)
        return render_records(records, fmt, CHUNK_FIELDS)
    out = [f"{'seq':>4} {'lines':>11} {'offsets':>15} {'tokens':>6}  {'kind':<6} heading path"]
    for c in chunks:
        flag = " OVERSIZED" if c.flags & 1 else ""
        row = (f"{c.seq:>4} {f'{c.line}-{c.end_line}':>11} {f'{c.start}-{c.end}':>15} {c.tokens:>6}  "
               f"{c.kind:<6} {c.heading_path}{flag}")
        out.append(click.style(row, fg="yellow") if color and flag else row)
        first = text[c.start:c.end].strip().splitlines()[0] if text[c.start:c.end].strip() else ""
        out.append(" " * 6 + (click.style(first[:90], dim=True) if color else first[:90]))
    for d in diagnostics:
        out.append(f"diagnostic: {d.kind} at offsets {d.start}-{d.end}: {d.detail}")
    return "\n".join(out)


def render_status(st: dict) -> str:
    lines = [f"index      {st['db']}"]
    for r in st["roots"]:
        lines.append(f"root       {r['path']}  ({r['documents']} documents, indexed {r['last_indexed_at'] or 'never'})")
    lines.append(f"documents  {st['documents']:,}")
    lines.append(f"chunks     {st['chunks']:,}" + (f"  ({st['oversized_chunks']} oversized)" if st["oversized_chunks"] else ""))
    if st["chunks"]:
        pct = st["embedded_chunks"] / st["chunks"]
        lines.append(f"embedded   {st['embedded_chunks']:,} chunks ({pct:.0%})"
                     + ("" if pct == 1 else "  (kbase embed fills in the rest)"))
    lines.append(f"links      {st['links']:,}" + (f"  ({st['unresolved_links']} unresolved)" if st["unresolved_links"] else ""))
    lines.append(f"tags       {st['tags']:,}")
    if st.get("diagnostics"):
        lines.append("chunking   " + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in st["diagnostics"].items())
                     + "  (SELECT * FROM diagnostics)")
    if st.get("chunker"):
        c = st["chunker"]
        lines.append(f"chunker    {c['max_tokens']} tokens max, {c['overlap_ratio']:.0%} overlap, "
                     f"{c['min_tokens']} min ({c['counter']})")
    enc = ", ".join(f"{k} {v}" for k, v in st["encodings"].items())
    if enc:
        lines.append(f"encodings  {enc}")
    ratio = f"  ({st['db_to_text']}x the text)" if st["db_to_text"] else ""
    lines.append(f"size       {human_bytes(st['db_bytes'])} on disk, {human_bytes(st['text_bytes'])} of text{ratio}")
    lines.append(f"last index {st['last_index_at'] or 'never'}")
    return "\n".join(lines)


LINK_FIELDS = ("source_path", "line", "context", "target", "anchor", "alias", "embed", "kind", "target_path",
               "target_title", "anchor_ok", "source_id", "target_id", "source_title")


def render_links(links, fmt: str, color: bool, show: str = "target") -> str:
    """Links for ``kbase links`` (show the target), ``backlinks`` (the source) or ``unresolved``."""
    if fmt != "table":
        return render_records([{k: getattr(lk, k) for k in LINK_FIELDS} for lk in links], fmt, LINK_FIELDS)
    out = []
    for lk in links:
        anchor = f"#{lk.anchor}" if lk.anchor else ""
        if show == "source":
            head = f"{lk.source_path}:{lk.line}"
        else:
            dest = lk.target_path or f"{lk.target or '(this note)'} (unresolved)"
            head = f"{lk.source_path}:{lk.line} -> {dest}{anchor}" if show == "both" else f"{lk.line:>4} -> {dest}{anchor}"
            if lk.anchor_ok is False:
                head += " (no such heading or block)"
        if color:
            head = click.style(head, fg="cyan" if lk.target_path or show == "source" else "red")
        out.append(head)
        out.append("     " + lk.context[:160])
    return "\n".join(out)


RELATED_FIELDS = ("rank", "score", "title", "path", "abspath", "line", "heading_path", "snippet", "tags", "stale",
                  "linked", "links_here", "method", "doc_id", "chunk_id")


def related_records(result) -> list[dict]:
    """``kbase related`` rows: the hit fields, whether NOTE links to the note or it to NOTE, and the
    method (semantic, or keyword when NOTE has no vectors)."""
    return [{**{k: v for k, v in hit_record(i, h).items() if k in RELATED_FIELDS},
             "linked": h.doc_id in result.links_to, "links_here": h.doc_id in result.linked_from,
             "method": result.method} for i, h in enumerate(result.hits, 1)]


def render_related(result, fmt: str, color: bool) -> str:
    if fmt != "table":
        return render_records(related_records(result), fmt, RELATED_FIELDS)
    out = []
    width = len(str(len(result.hits)))
    for i, rec in enumerate(related_records(result), 1):
        marks = "".join(m for m, on in ((" [linked]", rec["linked"]), (" [links here]", rec["links_here"])) if on)
        loc = f"{rec['path']}:{rec['line']}"
        title = click.style(rec["title"], bold=True) if color else rec["title"]
        out.append(f"{i:>{width}}. {title}  {click.style(loc, fg='cyan') if color else loc}  {rec['score']:.2f}{marks}")
        out.append(" " * (width + 2) + rec["snippet"])
    return "\n".join(out)


NOTE_FIELDS = ("id", "path", "title", "distance")


def render_notes(notes, fmt: str, with_distance: bool = False) -> str:
    if fmt != "table":
        fields = NOTE_FIELDS if with_distance else NOTE_FIELDS[:3]
        return render_records([{k: getattr(n, k) for k in fields} for n in notes], fmt, fields)
    if with_distance:
        return "\n".join(f"{n.distance}  {n.path}  ({n.title})" for n in notes)
    return "\n".join(f"{n.path}  ({n.title})" for n in notes)


def render_sql(result, fmt: str) -> str:
    """Rows of ``kbase sql``: an aligned table, or JSON/JSON Lines/CSV (blobs as base64)."""
    from kbase.sqlapi import cell, rows_as_dicts

    if fmt != "table":
        return render_records(list(rows_as_dicts(result)), fmt, result.columns)
    if not result.columns:
        return ""
    cells = [[cell(v) for v in row] for row in result.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(result.columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(result.columns, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)
