"""The tools as plain functions over ``KB``: arguments in, a ``Reply`` out (the structured
result, its text, and messages for the client's log). No protocol here: kbase.mcp.server
registers them as MCP tools; tests and benchmarks call them directly.

Every reply fits its budget (kbase.mcp.budget), in its text and in its structured content
alike: a list stops at the item that would pass the budget and says how to go on (``offset``),
``read`` stops at a line (``start_line``) or inside a very long one (``start_char``), and long
fields (a title, a link's line, an SQL cell) are cut the same way in both forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel

from kbase.api import KB
from kbase.errors import InputError
from kbase.mcp import render
from kbase.mcp import schemas as s
from kbase.mcp.budget import (
    DEFAULT_BUDGET,
    FIELD_CHARS,
    RESERVE,
    clip,
    fit,
    json_tokens,
    longest_prefix,
    tokens,
)
from kbase.text import printable

CONTEXT_CHARS = 300  # a link's line is cut to this many characters around the link
SNIPPET_CHARS = 600
LIST_CHARS = 200  # a tag or an alias
PASSAGES = 3  # the first hits that come with their passage, by default
PASSAGE_CHARS = 2_400  # a passage's text at most (about 600 tokens), its lines whole
PASSAGE_LINES = 40  # a passage's lines at most
PASSAGE_BEFORE = 3  # lines kept before the match when a long passage is cut to fit


@dataclass
class Reply:
    """A tool's result: structured (the output schema's shape) and as text, plus messages for
    the client's log as (level, message)."""

    structured: BaseModel | dict
    text: str
    log: list[tuple[str, str]] = field(default_factory=list)

    def data(self) -> dict:
        if isinstance(self.structured, BaseModel):
            return _dump(self.structured)
        return self.structured


def _rooms(budget: int, head: str, shell: BaseModel) -> tuple[int, int]:
    """Tokens left for a list's items in the text and in the JSON, after the parts around it."""
    room = budget - RESERVE
    return room - tokens(head), room - json_tokens(_dump(shell))


def _dump(m: BaseModel) -> dict:
    """The structured form: a field at its default (no page, no tags, not stale) left out, so
    that it is no larger than the text."""
    return m.model_dump(mode="json", exclude_defaults=True)


# --- search ------------------------------------------------------------------------------------
def search(
    kb: KB,
    query: str,
    *,
    mode: str | None = None,
    limit: int = 10,
    offset: int = 0,
    path: str | None = None,
    tags: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    exclude: Sequence[str] = (),
    budget: int = DEFAULT_BUDGET,
    passages: int = PASSAGES,
) -> Reply:
    if offset >= s.SEARCH_RANKED_MAX:  # (KB.search would blame a limit the caller never gave)
        raise InputError(
            f"offset {offset:,} is past the last hit search ranks ({s.SEARCH_RANKED_MAX:,})",
            f"give an offset below {s.SEARCH_RANKED_MAX:,}, or narrow the query (path, tags)",
        )
    used = mode or kb.default_mode()
    wanted = min(offset + limit, s.SEARCH_RANKED_MAX)  # the last page may be short
    hits = kb.search(
        query,
        mode=used,
        limit=wanted,  # not one more to know whether more follow: it costs (hybrid)
        path=path,
        tags=tuple(tags),
        since=since,
        until=until,
        exclude=tuple(exclude),
    )
    # perhaps: a full page (none follows the last hit search ranks)
    more = len(hits) >= wanted and wanted < s.SEARCH_RANKED_MAX
    shown = hits[offset : offset + limit]
    page = [
        s.SearchHit(
            rank=h.rank,
            title=clip(h.title),
            path=h.path,
            line=h.line,
            page=h.page,
            card=h.card,
            heading_path="" if h.heading_path == h.title else clip(h.heading_path),
            snippet=clip(h.snippet, SNIPPET_CHARS),
            score=float(f"{h.score:.4g}"),  # (the text shows 3 digits)
            stale=h.stale,
            missing=h.missing,
            tags=[clip(t, LIST_CHARS) for t in h.tags[:50]],
        )
        for h in shown
    ]
    with_passage = min(passages, len(page))
    if with_passage:  # each takes its share of what the snippets of the page leave
        rest = sum(tokens(render.search_hit(h)) + 2 for h in page)
        share = (budget - RESERVE - 100 - rest) // with_passage  # in tokens
        for item, h in zip(page[:with_passage], shown, strict=False):
            _add_passage(kb, item, h, share)
    out = s.SearchResult(
        query=clip(query, 500),  # (the text's; the structured form leaves the request's out)
        mode=used,
        mode_given=mode is not None,
        offset=offset,
        next_offset=None,
        left_out=None,
        hits=[],
        notice=hits.notice,
        corrected_query=hits.corrected,
    )
    note = f"\nNote: {hits.notice}." if hits.notice else ""  # what of the query was left out
    text_room, json_room = _rooms(budget, render.search_head(out, len(page)), out)
    f = fit(
        page,
        text_room=text_room,
        json_room=json_room,
        text_of=render.search_hit,
        json_of=_dump,
        at_least=1,
    )
    out.hits = page[: f.count]
    if out.hits and (f.count < len(page) or more):
        out.next_offset = offset + f.count
        out.left_out = render.left_out(
            "search",
            "hits",
            cut=len(page) - f.count,
            more=more,
            next_offset=out.next_offset,
            budget=budget,
            known=False,
        )
    if not out.hits:
        why = [] if offset else kb.filters_that_keep_nothing(path=path, tags=tags)
        return Reply(out, render.search_empty(out, why) + note)
    text = (
        render.page(
            render.search_head(out, len(out.hits)),
            [render.search_hit(h) for h in out.hits],
            out.left_out,
        )
        + note
    )
    log = []
    stale = sum(h.stale for h in out.hits)
    if stale:
        log.append(("info", f"{stale} of the notes found changed on disk since they were indexed"))
    return Reply(out, text, log)


def _add_passage(kb: KB, item: s.SearchHit, hit: Any, room: int) -> None:
    """The hit's passage (its chunk's lines, from its beginning or, when cut to ``room`` tokens,
    PASSAGE_CHARS or ``PASSAGE_LINES``, from a few lines before the match) in place of its
    snippet. Measured in tokens as the budget counts them: a CJK character is one, not a
    quarter (a Japanese passage cut to characters took 2,425 tokens of a 2,000 budget)."""
    if room < 50:
        return
    chars = min(PASSAGE_CHARS, 4 * room)
    try:
        c = kb.chunk(hit.chunk_id)
        first, last = c.line, min(c.end_line, c.line + 4 * PASSAGE_LINES)
        lines = list(kb.read(hit.path, first, last).lines)
    except InputError:  # the index changed under the search: the snippet it is
        return
    start, end = 0, len(lines)  # lines[start:end] are shown

    def fits(text: str) -> bool:
        return len(text) <= chars and tokens(text) <= room

    match = min(max(hit.line - first, 0), len(lines) - 1) if lines else 0
    while end - start > PASSAGE_LINES or not fits("\n".join(lines[start:end])):
        if match - start > PASSAGE_BEFORE:  # what comes before the match goes first
            start += 1
        elif end - 1 > match:
            end -= 1
        else:
            break
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # (no trailing blank lines)
    text = "\n".join(lines[start:end])
    if not text.strip():
        return
    item.passage = text if fits(text) else longest_prefix(text, lambda t: fits(t + "…")) + "…"
    item.lines = [first + start, first + end - 1]
    item.snippet = ""


# --- read --------------------------------------------------------------------------------------
def read(
    kb: KB,
    note: str,
    *,
    start_line: int | None = None,
    end_line: int | None = None,
    start_char: int = 1,
    budget: int = DEFAULT_BUDGET,
    page: int | None = None,
) -> Reply:
    if start_char > 1 and start_line is None:
        raise InputError("start_char needs start_line", "pass the start_line it continues")
    asked_end = end_line
    if end_line is not None:  # never more lines than the budget could show (a token each)
        end_line = min(end_line, (start_line or 1) + budget)
    r = kb.read(note, start_line, end_line, page=page)
    lines = list(r.lines)
    skipped = start_char - 1  # characters of the first line not shown (start_char)
    if skipped and lines:
        if skipped > len(lines[0]):
            raise InputError(
                f"start_char={start_char} is past the end of line {r.first_line} "
                f"({len(lines[0]):,} characters)",
                "start_char counts the characters of start_line from 1",
            )
        lines[0] = lines[0][skipped:]
    out = s.ReadResult(
        path=r.path,
        abspath=r.abspath,
        title=clip(r.title),
        kind=r.kind,
        tags=[clip(t, LIST_CHARS) for t in r.tags[:50]],
        aliases=[clip(a, LIST_CHARS) for a in r.aliases[:50]],
        date=r.date,
        modified=r.modified,
        indexed_at=r.indexed_at,
        stale=r.stale,
        missing=r.missing,
        total_lines=r.total_lines,
        first_line=r.first_line,
        last_line=r.last_line,
        truncated=False,
        next_start_line=None,
        next_start_char=None,
        left_out=None,
        page=r.page,
        pages=r.pages or None,
        text="",
        corrected_from=r.corrected_from,
    )
    width = len(str(r.last_line))
    text_room, json_room = _rooms(budget, render.read_head(out), out)
    shown: list[str] = []
    t = j = 0
    cut = False  # the last line shown is only its beginning
    for i, line in enumerate(lines):
        n = r.first_line + i
        dt = tokens(render.numbered_line(n, line, width)) + 1
        dj = json_tokens(line) + 1
        if t + dt > text_room or j + dj > json_room:
            if not shown:  # not even the first line: as much of it as fits

                def fits(part: str, n: int = n) -> bool:
                    return (
                        tokens(render.numbered_line(n, part, width)) <= text_room
                        and json_tokens(part) <= json_room
                    )

                shown.append(longest_prefix(line, fits))
                cut = True
            break
        shown.append(line)
        t, j = t + dt, j + dj
    last = r.first_line + len(shown) - 1
    out.last_line, out.text = last, "\n".join(shown)
    wanted = None if asked_end is None else min(asked_end, r.total_lines)
    if cut:
        upto = skipped + len(shown[0])
        out.next_start_line, out.next_start_char = last, upto + 1
        out.left_out = (
            f"Line {last} has {skipped + len(lines[0]):,} characters; shown up to character "
            f"{upto:,} to keep within the {budget:,}-token budget: read again with "
            f"start_line={last}, start_char={upto + 1}."
        )
    elif wanted is not None and last < wanted:
        out.next_start_line = last + 1
        out.left_out = (
            f"Lines {last + 1}-{wanted} left out to keep within the {budget:,}-token budget: "
            f"read again with start_line={last + 1}, end_line={asked_end}."
        )
    elif wanted is None and last < r.total_lines:
        out.next_start_line = last + 1
        why = (
            f"left out to keep within the {budget:,}-token budget"
            if len(shown) < len(lines)
            else f"follow (without end_line, read returns {s.READ_LINES} lines at most)"
            if len(lines) >= s.READ_LINES
            else "follow the part read (the section or lines asked for end there)"
        )
        out.left_out = (
            f"{r.total_lines - last:,} more lines {why}: read again with start_line={last + 1}."
        )
    out.truncated = out.next_start_line is not None
    body = [render.numbered_line(n, line, width) for n, line in enumerate(shown, r.first_line)]
    if skipped and body:
        body[0] = body[0].replace(" | ", f" | …(from character {start_char:,}) ", 1)
    text = "\n".join([render.read_head(out), *body, *([out.left_out] if out.left_out else [])])
    changed = f"{printable(r.path)} {render.disk_change(out)} since it was indexed"
    log = [("info", changed)] if r.stale else []
    return Reply(out, text, log)


# --- links -------------------------------------------------------------------------------------
def _context(text: str, target: str) -> str:
    """The link's line, cut around the link when long."""
    if len(text) <= CONTEXT_CHARS:
        return text
    start = max(0, text.find(target) - CONTEXT_CHARS // 3)
    piece = text[start : start + CONTEXT_CHARS - 2]
    return ("…" if start else "") + piece + ("…" if start + len(piece) < len(text) else "")


def _link_item(lk: Any, incoming: bool) -> s.LinkItem:
    path = lk.source_path if incoming else lk.target_path
    return s.LinkItem(
        line=lk.line,
        context=_context(lk.context, lk.target),
        target=None if path is not None else clip(lk.target, 300),
        anchor=clip(lk.anchor, 300) if lk.anchor and not incoming else None,  # (as the text)
        path=path,
        title=clip(lk.source_title) or None if incoming else None,
        incoming=incoming,
    )


def links(
    kb: KB,
    note: str,
    *,
    direction: str = "both",
    limit: int = s.LINKS_LIMIT_DEFAULT,
    offset: int = 0,
    budget: int = DEFAULT_BUDGET,
) -> Reply:
    target = kb.note(note)
    outgoing = kb.links(target.path) if direction != "backlinks" else []
    back = kb.backlinks(target.path) if direction != "outgoing" else []
    out_page = [_link_item(lk, False) for lk in outgoing[offset : offset + limit]]
    back_page = [_link_item(lk, True) for lk in back[offset : offset + limit]]
    out = s.LinksResult(
        path=target.path,
        title=clip(target.title),
        offset=offset,
        next_offset=None,
        left_out=None,
        outgoing_total=len(outgoing),
        backlinks_total=len(back),
        outgoing=[],
        backlinks=[],
    )
    text_room, json_room = _rooms(budget, render.links_text(out, direction), out)
    # Both lists share the budget: each may take half, and what one leaves the other may use.
    share = 2 if out_page and back_page else 1
    fo = fit(
        out_page,
        text_room=text_room // share,
        json_room=json_room // share,
        text_of=render.outgoing_link,
        json_of=_dump,
    )
    fb = fit(
        back_page,
        text_room=text_room - fo.text_tokens,
        json_room=json_room - fo.json_tokens,
        text_of=render.backlink,
        json_of=_dump,
    )
    if fo.count < len(out_page):  # the backlinks may have left room
        fo = fit(
            out_page,
            text_room=text_room - fb.text_tokens,
            json_room=json_room - fb.json_tokens,
            text_of=render.outgoing_link,
            json_of=_dump,
        )
    out.outgoing, out.backlinks = out_page[: fo.count], back_page[: fb.count]
    out_more = fo.count < len(out_page) or len(outgoing) > offset + limit
    back_more = fb.count < len(back_page) or len(back) > offset + limit
    if out_more or back_more:
        if out_more and back_more:
            nxt, extra = offset + min(fo.count, fb.count), ""
        elif out_more:
            nxt, extra = offset + fo.count, ", direction='outgoing'"
        else:
            nxt, extra = offset + fb.count, ", direction='backlinks'"
        out.next_offset = nxt
        cut = (len(out_page) - fo.count) + (len(back_page) - fb.count)
        out.limit_cut = not cut
        out.left_out = render.left_out(
            "links",
            "links",
            cut=cut,
            more=True,
            next_offset=nxt,
            budget=budget,
            extra=extra,
        )
    if not out.outgoing and not out.backlinks:
        return Reply(out, render.links_empty(out, direction))
    return Reply(out, render.links_text(out, direction))


# --- related -----------------------------------------------------------------------------------
def related(
    kb: KB,
    note: str,
    *,
    limit: int = 10,
    offset: int = 0,
    include_linked: bool = False,
    budget: int = DEFAULT_BUDGET,
) -> Reply:
    r = kb.related(note, limit=offset + limit + 1, include_linked=include_linked)
    more = len(r.hits) > offset + limit
    page = [
        s.RelatedNote(
            rank=i,
            title=clip(h.title),
            path=h.path,
            line=h.line,
            page=h.page,
            heading_path=clip(h.heading_path),
            snippet=clip(h.snippet, SNIPPET_CHARS),
            score=round(h.score, 6),
            linked=h.doc_id in r.links_to,
            links_here=h.doc_id in r.linked_from,
        )
        for i, h in enumerate(r.hits[offset : offset + limit], offset + 1)
    ]
    out = s.RelatedResult(
        path=r.path,
        title=clip(r.title),
        method="semantic" if r.method == "semantic" else "keyword",
        terms=[clip(t, 100) for t in r.terms[:50]],
        notes=[],
        offset=offset,
        next_offset=None,
        left_out=None,
    )
    head = render.related_head(out)
    text_room, json_room = _rooms(budget, head, out)
    f = fit(
        page,
        text_room=text_room,
        json_room=json_room,
        text_of=render.related_note,
        json_of=_dump,
        at_least=1,
    )
    out.notes = page[: f.count]
    if out.notes and (f.count < len(page) or more):
        out.next_offset = offset + f.count
        out.limit_cut = f.count == len(page)
        out.left_out = render.left_out(
            "related",
            "notes",
            cut=len(page) - f.count,
            more=more,
            next_offset=out.next_offset,
            budget=budget,
        )
    if not out.notes:
        return Reply(out, render.related_empty(out))
    return Reply(out, render.page(head, [render.related_note(n) for n in out.notes], out.left_out))


# --- sql ---------------------------------------------------------------------------------------
def _value(v: Any) -> Any:
    """A cell as both forms show it: a long text cut, a blob by its size."""
    if isinstance(v, bytes):
        return f"<blob {len(v)} bytes>"
    if isinstance(v, str):
        return clip(v, FIELD_CHARS)
    return v


def sql(
    kb: KB,
    query: str,
    *,
    max_rows: int = s.SQL_ROWS_DEFAULT,
    offset: int = 0,
    timeout: float = s.SQL_TIMEOUT_DEFAULT,
    budget: int = DEFAULT_BUDGET,
) -> Reply:
    res = kb.sql(query, timeout=timeout, max_rows=offset + max_rows + 1)
    more = len(res.rows) > offset + max_rows
    rows = [[_value(v) for v in row] for row in res.rows[offset : offset + max_rows]]
    columns = [clip(c, LIST_CHARS) for c in res.columns[:500]]
    out = s.SqlResult(
        columns=columns, rows=[], truncated=False, offset=offset, next_offset=None, left_out=None
    )
    head = render.sql_head(columns)
    text_room, json_room = _rooms(budget, head + "\n" + render.sql_count(len(rows), offset), out)
    f = fit(rows, text_room=text_room, json_room=json_room, text_of=render.sql_row, json_of=list)
    out.rows = rows[: f.count]
    if out.rows and (f.count < len(rows) or more):
        out.next_offset = offset + f.count
        cut = len(rows) - f.count
        at_least = False
        if cut and more:  # rows beyond max_rows too: count them all, or say "at least"
            after = _rows_after(kb, query, out.next_offset, timeout)
            cut, at_least = (after, False) if after is not None else (cut + 1, True)
        out.left_out = render.left_out(
            "sql",
            "rows",
            cut=cut,
            more=more,
            next_offset=out.next_offset,
            budget=budget,
            at_least=at_least,
        )
        if out.left_out and f.count == len(rows):
            out.left_out = out.left_out[:-1] + " (or raise max_rows)."
    out.truncated = out.next_offset is not None
    if not out.rows:
        if rows:  # not even one row fits: its cells are too many
            raise InputError(
                f"one row of this query is more than the {budget:,}-token budget",
                "select fewer or shorter columns (substr(x, 1, 200)), or raise budget",
            )
        return Reply(out, render.sql_empty(columns, offset))
    lines = [head, *(render.sql_row(r) for r in out.rows), render.sql_count(len(out.rows), offset)]
    return Reply(out, "\n".join(lines + ([out.left_out] if out.left_out else [])))


def _rows_after(kb: KB, query: str, shown_until: int, timeout: float) -> int | None:
    """How many rows ``query`` gives after its first ``shown_until``, by counting them in
    SQLite (a second run, at most a second or ``timeout``); None if the query cannot be counted so
    (a PRAGMA, several statements) or counting takes too long."""
    body = query.strip().rstrip(";").strip()
    if ";" in body:
        return None
    try:
        res = kb.sql(f"SELECT count(*) FROM (\n{body}\n)", timeout=min(timeout, 1.0), max_rows=1)
    except InputError:
        return None
    if not res.rows or not isinstance(res.rows[0][0], int):
        return None
    return max(0, res.rows[0][0] - shown_until)


def schema_names(kb: KB) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The tables and the views a query may want, each with its columns, from the index itself
    (the full-text and vector tables and meta left out)."""
    internal = ("sqlite_", "chunks_fts", "chunks_cjk", "chunks_vec", "chunks_codes", "meta")
    res = kb.sql(
        "SELECT s.type, s.name, group_concat(c.name, ', ') FROM sqlite_schema AS s, "
        "pragma_table_info(s.name) AS c WHERE s.type IN ('table', 'view') "
        "GROUP BY s.name ORDER BY s.type, s.name"
    )
    found: dict[str, dict[str, list[str]]] = {"table": {}, "view": {}}
    for kind, name, cols in res.rows:
        if not name.startswith(internal):
            found[kind][name] = cols.split(", ")
    return found["table"], found["view"]


# --- status ------------------------------------------------------------------------------------
def status(kb: KB, server: dict | None = None, budget: int = DEFAULT_BUDGET) -> Reply:
    st = kb.status()
    data = asdict(st)
    data["embedding_coverage"] = (
        None if st.embedding_coverage is None else round(st.embedding_coverage, 4)
    )
    if server is not None:
        data["server"] = server
    roots = data.get("roots") or []
    while len(roots) > 1 and tokens(render.status_text(data)) > budget - RESERVE:
        roots = roots[: len(roots) // 2]  # thousands of roots: the first ones
        data["roots"], data["roots_left_out"] = roots, len(st.roots) - len(roots)
    return Reply(data, render.status_text(data))
