"""Rendering for people (a compact, coloured listing) and for scripts (JSON, JSON Lines, CSV).

Field names in the machine formats are stable; see docs/cli.md, "Output formats".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kbase.cli.common import dumps, style
from kbase.records import HIT_FIELDS, Hit
from kbase.text import excerpt, location, printable

if TYPE_CHECKING:
    from kbase.records import Status


def render_records(records: Sequence[dict], fmt: str, fields: Sequence[str]) -> str:
    """JSON (an array), JSON Lines or CSV of ``records``. CSV is read by people too: its text
    keeps its line breaks (quoted) but no other control character (see ``printable``)."""
    import csv
    import io

    if fmt == "json":
        return dumps(list(records), ensure_ascii=False, indent=2)
    if fmt == "jsonl":
        return "\n".join(dumps(r, ensure_ascii=False) for r in records)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in records:
            w.writerow(
                {
                    k: (
                        printable(" ".join(map(str, v)))
                        if k == "tags"
                        else dumps(v, ensure_ascii=False)  # controls escaped
                        if isinstance(v, (list, dict))
                        else printable(v, lines=True)
                        if isinstance(v, str)
                        else v
                    )
                    for k, v in r.items()
                }
            )
        return buf.getvalue().rstrip("\n")
    raise ValueError(fmt)


def render_hits(hits: Sequence[Hit], fmt: str, color: bool, explain: bool = False) -> str:
    if fmt != "table":
        fields = (
            HIT_FIELDS + ("explain",) if explain else HIT_FIELDS
        )  # CSV: the explanation as JSON text
        return render_records(
            [dataclasses.replace(h, rank=i).record(explain) for i, h in enumerate(hits, 1)],
            fmt,
            fields,
        )
    out = []
    width = len(str(len(hits)))
    for i, h in enumerate(hits, 1):
        loc = printable(location(h.path, h.line, h.page, h.card))
        title = style(printable(h.title), bold=True) if color else printable(h.title)
        state = " [missing]" if h.missing else " [changed on disk]" if h.stale else ""
        flag = style(state, fg="yellow") if color and state else state
        head = (
            f"{i:>{width}}. {title}  {style(loc, fg='cyan') if color else loc}"
            f"  {score_text(h)}{flag}"
        )
        out.append(head)
        if h.heading_path:
            heading = printable(h.heading_path)
            out.append(" " * (width + 2) + (style(heading, dim=True) if color else heading))
        out.append(" " * (width + 2) + highlight(h.snippet, h.highlights, color))
        if explain and h.explain:
            line = " " * (width + 2) + explain_text(h.explain)
            out.append(style(line, dim=True) if color else line)
    return "\n".join(out)


def score_text(h) -> str:
    """A hit's score as the table shows it: two decimals, except a fused (hybrid) score too small
    to show in them: hybrid scales each list's evidence between its best note and a note some
    way down (kbase.search.fusion), so a note further down scores 0 though it matches. Such a hit
    says which list found it, at which rank ('kw #57', 'sem #31'): '0.00' read as no match."""
    if h.score >= 0.005 or not h.explain or not ({"keyword", "semantic"} & set(h.explain)):
        return f"{h.score:.2f}"
    found = [
        f"{short} #{h.explain[name]['rank']}"
        for name, short in (("keyword", "kw"), ("semantic", "sem"))
        if h.explain.get(name)
    ]
    return " ".join(found) or f"{h.score:.2f}"


def explain_text(explain: dict) -> str:
    """One line saying how a hit's score was made (see search.keyword_ranked, hybrid_search)."""

    def raw(e: dict) -> str:
        parts = []
        if "tier" in e:
            parts.append(f"{e['tier']}, bm25 {e['bm25']:.2f}")
        if "similarity" in e:
            parts.append(f"cos {e['similarity']:.3f}")
        if e.get("chunks", 1) > 1:
            parts.append(f"{e['chunks']} chunks")
        return ", ".join(parts)

    if "keyword" not in explain and "semantic" not in explain:
        return raw(explain)
    parts = []
    for name in ("keyword", "semantic"):
        e = explain.get(name)
        parts.append(
            f"{name}: -"
            if e is None
            else f"{name}: #{e['rank']} ({raw(e)}) +{e['contribution']:.4f}"
        )
    return "  ".join(parts)


def highlight(text: str, ranges: Iterable[tuple[int, int]], color: bool) -> str:
    """A snippet fit to print, its matches (offsets into ``text``) in colour."""
    if not color:
        return printable(text)
    parts, pos = [], 0
    for a, b in ranges:
        parts.append(printable(text[pos:a]))
        parts.append(style(printable(text[a:b]), fg="yellow", bold=True))
        pos = b
    parts.append(printable(text[pos:]))
    return "".join(parts)


def human_bytes(n: float) -> str:
    """A size in binary units, labelled as such: 1 KiB = 1024 bytes (as ls -h and du -h count)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


CHUNK_FIELDS = (
    "seq",
    "start",
    "end",
    "line",
    "end_line",
    "tokens",
    "kind",
    "flags",
    "heading_path",
    "text",
)


CHANGE_NAMES = 3  # files named per kind of change in a watch line; more are counted


def render_changes(changed: Sequence[tuple[str, str]], names: int = CHANGE_NAMES) -> str:
    """``IndexReport.changed`` in one line: '2 new (a.md, b.md), 5 updated (c.md, d.md, e.md and
    2 more)'; only the kinds that occurred, in the order new, updated, renamed, removed."""
    by_kind: dict[str, list[str]] = {}
    for kind, path in changed:
        by_kind.setdefault(kind, []).append(path)
    parts = []
    for kind in ("new", "updated", "renamed", "removed"):
        paths = by_kind.get(kind)
        if paths:
            shown = ", ".join(printable(p) for p in paths[:names])
            more = f" and {len(paths) - names} more" if len(paths) > names else ""
            parts.append(f"{len(paths)} {kind} ({shown}{more})")
    return ", ".join(parts)


def render_chunks(text: str, chunks, diagnostics, fmt: str, color: bool) -> str:
    """``kbase chunks``: one line a chunk for people, every field and the text for scripts."""
    import json

    if fmt != "table":
        records = [
            {**{k: getattr(c, k) for k in CHUNK_FIELDS[:-1]}, "text": text[c.start : c.end]}
            for c in chunks
        ]
        if fmt == "json":
            diags = [dataclasses.asdict(d) for d in diagnostics]
            return json.dumps(
                {"chunks": records, "diagnostics": diags}, ensure_ascii=False, indent=2
            )
        return render_records(records, fmt, CHUNK_FIELDS)
    out = [f"{'seq':>4} {'lines':>11} {'offsets':>15} {'tokens':>6}  {'kind':<6} heading path"]
    for c in chunks:
        flag = " OVERSIZED" if c.flags & 1 else ""
        row = (
            f"{c.seq:>4} {f'{c.line}-{c.end_line}':>11} {f'{c.start}-{c.end}':>15} {c.tokens:>6}  "
            f"{c.kind:<6} {printable(c.heading_path)}{flag}"
        )
        out.append(style(row, fg="yellow") if color and flag else row)
        first = (
            text[c.start : c.end].strip().splitlines()[0] if text[c.start : c.end].strip() else ""
        )
        first = printable(excerpt(first, (0, 0), 90))
        out.append(" " * 6 + (style(first, dim=True) if color else first))
    for d in diagnostics:
        out.append(printable(f"diagnostic: {d.kind} at offsets {d.start}-{d.end}: {d.detail}"))
    return "\n".join(out)


def _model_id(fingerprint: str) -> str:
    """The fingerprint as read: 'sha256 8199be6f6994, 384 dimensions'."""
    import json

    try:
        fp = json.loads(fingerprint)
    except ValueError:
        return ""
    sha = fp.get("sha256") or ""
    return (
        f"(sha256 {sha[:12]}, {fp.get('dim')} dimensions)"
        if sha
        else f"({fp.get('dim')} dimensions)"
    )


def render_status(st: Status) -> str:
    lines = [f"index      {printable(str(st.db))}"]
    for r in st.roots:
        lines.append(
            f"root       {printable(r.path)}  ({r.documents:,} document{'s' * (r.documents != 1)},"
            f" indexed {r.last_indexed_at or 'never'})"
        )
    lines.append(f"documents  {st.documents:,}")
    lines.append(
        f"chunks     {st.chunks:,}"
        + (f"  ({st.oversized_chunks} oversized)" if st.oversized_chunks else "")
    )
    if st.embedding_coverage is not None:
        lines.append(
            f"embedded   {st.embedded_chunks:,} chunks ({st.embedding_coverage:.0%})"
            + ("" if st.embedding_coverage == 1 else "  (kbase embed fills in the rest)")
        )
    if st.model is not None:
        m = st.model
        lines.append(
            f"model      {m.name}" + (f"  {_model_id(m.fingerprint)}" if m.fingerprint else "")
        )
        if m.switching_to:
            share = m.switch_done / m.switch_total if m.switch_total else 0
            lines.append(
                f"switching  to {m.switching_to}: {m.switch_done:,} of {m.switch_total:,} chunks"
                f" ({share:.0%}); search uses {m.name} until done (kbase embed goes on)"
            )
    lines.append(
        "embedding  on: kbase index embeds new and changed chunks"
        if st.auto_embed
        else "embedding  off: keyword-only (kbase index --no-embed);"
        " kbase embed or kbase index --embed turns it on"
    )
    lines.append(
        f"links      {st.links:,}"
        + (f"  ({st.unresolved_links} unresolved)" if st.unresolved_links else "")
    )
    lines.append(f"tags       {st.tags:,}")
    if st.diagnostics:
        lines.append(
            "chunking   "
            + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in st.diagnostics.items())
            + "  (SELECT * FROM diagnostics)"
        )
    if st.frontmatter_warnings:
        n = st.frontmatter_warnings
        lines.append(
            f"warnings   {n} note{'s' * (n != 1)} indexed without front matter it could not read"
            "  (kbase check lists them)"
        )
    if st.pdfs:
        lines.append(
            f"pdfs       {st.pdfs:,} ({st.pdf_pages:,} pages"
            + (
                f", {st.pdf_pages - st.pdf_text_pages:,} without text"
                if st.pdf_text_pages < st.pdf_pages
                else ""
            )
            + ")"
        )
    if st.canvases:
        lines.append(f"canvases   {st.canvases:,}")
    if st.unreadable:
        n = st.unreadable
        lines.append(
            f"unreadable {n} file{'s' * (n != 1)} skipped for what they hold, until they change"
            "  (SELECT * FROM unreadable)"
        )
    if st.chunker:
        c = st.chunker
        lines.append(
            f"chunker    {c['max_tokens']} tokens max, {c['overlap_ratio']:.0%} overlap, "
            f"{c['min_tokens']} min ({c['counter']})"
        )
    enc = printable(", ".join(f"{k} {v}" for k, v in st.encodings.items()))
    if enc:
        lines.append(f"encodings  {enc}")
    ratio = f"  ({st.db_to_text}x the text)" if st.db_to_text else ""
    lines.append(
        f"size       {human_bytes(st.db_bytes)} on disk,"
        f" {human_bytes(st.text_bytes)} of text{ratio}"
    )
    if st.wal_bytes:
        lines.append(f"wal        {human_bytes(st.wal_bytes)}" + _wal_why(st.wal_waiting_bytes))
    lines.append(f"last index {st.last_index_at or 'never'}")
    return "\n".join(lines)


def _wal_why(waiting: int | None) -> str:
    """Why the -wal file is not empty (``Status.wal_waiting_bytes``)."""
    if waiting is None:
        return "  (changes not yet copied into the index: the next run that can write does it)"
    if not waiting:
        return "  (a writer is at work: it is truncated when the run ends)"
    return (
        f", {human_bytes(waiting)} of it growing: a reader holds an old snapshot (another"
        " program's open transaction, a long query), so no change can be copied into the index"
        " and the WAL grows with every write; it is truncated as soon as that read ends"
        " (by kbase watch, the next index run, or kbase status)"
    )


LINK_CONTEXT_WIDTH = 160  # characters of the link's line shown under it, the link kept in view
LINK_FIELDS = (
    "source_path",
    "line",
    "context",
    "target",
    "anchor",
    "alias",
    "embed",
    "kind",
    "target_path",
    "target_title",
    "anchor_ok",
    "source_id",
    "target_id",
    "source_title",
)


def render_links(links, fmt: str, color: bool, show: str = "target") -> str:
    """Links for ``kbase links`` (show the target), ``backlinks`` (the source) or ``unresolved``."""
    if fmt != "table":
        return render_records(
            [{k: getattr(lk, k) for k in LINK_FIELDS} for lk in links], fmt, LINK_FIELDS
        )
    out = []
    for lk in links:
        anchor = f"#{lk.anchor}" if lk.anchor else ""
        if show == "source":
            head = f"{lk.source_path}:{lk.line}"
        else:
            # An unresolved link reads 'Note#Heading (unresolved)', the remark after the anchor.
            dest = lk.target_path or lk.target or "(this note)"
            dest += anchor if lk.target_path else f"{anchor} (unresolved)"
            head = (
                f"{lk.source_path}:{lk.line} -> {dest}"
                if show == "both"
                else f"{lk.line:>4} -> {dest}"
            )
            if lk.anchor_ok is False:
                head += (
                    " (no such page)"
                    if (lk.anchor or "").startswith("page=")
                    else " (no such heading or block)"
                )
        head = printable(head)
        if color:
            head = style(head, fg="cyan" if lk.target_path or show == "source" else "red")
        out.append(head)
        out.append("     " + printable(excerpt(lk.context, lk.context_span, LINK_CONTEXT_WIDTH)))
    return "\n".join(out)


# kbase related's rows: a hit's fields but its highlights, match counts, missing flag and corrected
# query (related has no query), then whether NOTE links to the note or it to NOTE, and how it was
# found.
RELATED_HIT_FIELDS = tuple(
    f for f in HIT_FIELDS if f not in ("highlights", "matched_chunks", "missing", "corrected_query")
)
RELATED_FIELDS = RELATED_HIT_FIELDS + ("linked", "links_here", "method")


def related_records(result) -> list[dict]:
    """``kbase related`` rows: the hit fields, whether NOTE links to the note or it to NOTE, and the
    method (semantic, or keyword when NOTE has no vectors)."""
    return [
        {
            **{
                k: v
                for k, v in dataclasses.replace(h, rank=i).record().items()
                if k in RELATED_HIT_FIELDS
            },
            "linked": h.doc_id in result.links_to,
            "links_here": h.doc_id in result.linked_from,
            "method": result.method,
        }
        for i, h in enumerate(result.hits, 1)
    ]


def render_related(result, fmt: str, color: bool) -> str:
    if fmt != "table":
        return render_records(related_records(result), fmt, RELATED_FIELDS)
    out = []
    width = len(str(len(result.hits)))
    for i, rec in enumerate(related_records(result), 1):
        marks = "".join(
            m
            for m, on in ((" [linked]", rec["linked"]), (" [links here]", rec["links_here"]))
            if on
        )
        loc = printable(location(rec["path"], rec["line"], rec["page"], rec["card"]))
        title = style(printable(rec["title"]), bold=True) if color else printable(rec["title"])
        out.append(
            f"{i:>{width}}. {title}  {style(loc, fg='cyan') if color else loc}"
            f"  {rec['score']:.2f}{marks}"
        )
        out.append(" " * (width + 2) + printable(rec["snippet"]))
    return "\n".join(out)


NOTE_FIELDS = ("id", "path", "title", "distance", "direction", "via")


def render_notes(notes, fmt: str, with_distance: bool = False) -> str:
    """Notes (orphans), or with ``with_distance`` neighbours: distance, direction of the link to
    the note one hop nearer, path, title, and that note's path beyond the first hop."""
    if fmt != "table":
        fields = NOTE_FIELDS if with_distance else NOTE_FIELDS[:3]
        return render_records([{k: getattr(n, k) for k in fields} for n in notes], fmt, fields)
    if with_distance:
        return "\n".join(
            printable(
                f"{n.distance}  {n.direction:<4}  {n.path}  ({n.title})"
                + (f"  via {n.via}" if n.distance > 1 else "")
            )
            for n in notes
        )
    return "\n".join(printable(f"{n.path}  ({n.title})") for n in notes)


SQL_MIN_WIDTH = 12  # a column cut to fit the terminal keeps at least this many cells


def render_sql(result, fmt: str, width: int | None = None) -> tuple[str, bool]:
    """Rows of ``kbase sql`` and whether a value was cut: an aligned table, each column as wide
    as its longest value unless the table would pass ``width`` terminal cells (then the widest
    columns give way, their values cut with '…'); JSON, JSON Lines and CSV (blobs as base64)
    always hold every value whole."""
    from kbase.text import cell

    if fmt != "table":
        return render_records(list(result.dicts()), fmt, result.keys()), False
    if not result.columns:
        return "", False
    columns = [cell(c, None) for c in result.columns]
    cells = [[cell(v, None) for v in row] for row in result.rows]
    natural = [
        max([cell_width(c)] + [cell_width(r[i]) for r in cells]) for i, c in enumerate(columns)
    ]
    widths = fit_columns(natural, [cell_width(c) for c in columns], width)
    cut = widths != natural

    def line(values) -> str:
        return "  ".join(pad(clip(v, w), w) for v, w in zip(values, widths)).rstrip()

    lines = [line(columns), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in cells]
    return "\n".join(lines), cut


def fit_columns(natural: Sequence[int], headers: Sequence[int], width: int | None) -> list[int]:
    """Column widths that fit ``width`` cells with two between columns: the narrow columns
    keep their width, the wide ones share what is left (none below its header or
    ``SQL_MIN_WIDTH``, so a very narrow terminal may still overflow)."""
    n = len(natural)
    if width is None or sum(natural) + 2 * (n - 1) <= width:
        return list(natural)
    left = width - 2 * (n - 1)
    out = list(natural)
    for k, i in enumerate(sorted(range(n), key=lambda i: natural[i])):
        floor = min(natural[i], max(headers[i], SQL_MIN_WIDTH))
        out[i] = min(natural[i], max(left // (n - k), floor))
        left -= out[i]
    return out


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide (CJK) characters two, combining marks none."""
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, '…' in the last one when cut."""
    if cell_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cell_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - cell_width(text))


def to_dot(g: dict) -> str:
    """Graphviz DOT of ``graph()``."""

    def q(s: str) -> str:
        return '"' + printable(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph kbase {", "  node [shape=box];"]
    lines += [
        f"  n{n['id']} [label={q(n['title'])}, tooltip={q(n['path'])}"
        + (", penwidth=2" if n.get("distance") == 0 else "")
        + "];"
        for n in g["nodes"]
    ]
    lines += [
        f"  n{e['source']} -> n{e['target']}"
        + (
            " [style=dashed]"  # only a canvas arrow joins the two
            if not e["links"]
            else f" [label={e['links']}]"
            if e["links"] > 1
            else ""
        )
        + ";"
        for e in g["edges"]
    ]
    lines.append("}")
    return "\n".join(lines)
