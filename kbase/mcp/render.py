"""The readable text of each tool result (what an agent reads first), one line that says what a
cut result left out, and errors in the words of the tools' arguments.

What comes from a file (a path, title, heading, tag, snippet, line, SQL value) is shown as the
CLI shows it (``kbase.text.printable``, here ``_p``): a newline in a file name cannot split a
line of the result, nor an escape sequence reach a client that prints the text on a terminal.
The structured form keeps the values as they are (JSON escapes on its own)."""

from __future__ import annotations

import re

from kbase.mcp import schemas as s
from kbase.text import cell as text_cell
from kbase.text import json_text, printable, shown_instead

_p = printable  # what comes from a file, fit to print

# --- errors ------------------------------------------------------------------------------------
# The engine's messages name the command-line options; an agent calling a tool knows arguments.
_FLAGS = {
    "--since": "since",
    "--until": "until",
    "--path": "path",
    "--tag": "tags",
    "--exclude": "exclude",
    "--limit": "limit",
    "--mode": "mode",
    "--timeout": "timeout",
    "--max-rows": "max_rows",
    "--include-linked": "include_linked",
}
_FLAG = re.compile(r"(?<![\w-])(" + "|".join(re.escape(f) for f in _FLAGS) + r")(?![\w-])")


# ... and the commands, and the notation of kbase show: each phrase as a tool's caller acts on it.
_PHRASES = [
    # a page of a note that is no PDF: read takes its lines
    (
        re.compile(r"show a line instead: .*?:LINE\b"),
        "leave page out and give start_line, end_line",
    ),
    (re.compile(r"name a line instead: PATH:LINE\b"), "give start_line, end_line instead"),
    (
        re.compile(re.escape("see kbase status for the roots, or kbase search")),
        "call status for the roots, or search",
    ),
    (re.compile(r"run: kbase embed$"), "search with mode='keyword'"),
    (
        re.compile(re.escape("change the index with kbase commands (index, embed, check --fix);")),
        "the tools only read the index:",
    ),
    (re.compile(r"\bkbase sql\b"), "sql"),  # 'kbase sql is read-only', 'runs one statement'
    (re.compile(r"\bkbase index (skipped|reads)\b"), r"the index run \1"),
]


def agent_words(text: str) -> str:
    """``text`` with the command-line options it names given as the tools' arguments
    ('raise --timeout' -> 'raise timeout'), and the CLI's commands and notation as the tools'
    ('show a line instead: a.md:LINE' -> 'leave page out and give start_line, end_line')."""
    for phrase, words in _PHRASES:
        text = phrase.sub(words, text)
    return _FLAG.sub(lambda m: _FLAGS[m.group(1)], text)


def error_text(message: str, hint: str | None = None) -> str:
    """One line: the message and hint may name a file (its newline is shown as \\n)."""
    return agent_words(_p(message)) + (f" (hint: {agent_words(_p(hint))})" if hint else "")


# --- what a cut result left out ----------------------------------------------------------------
def left_out(
    tool: str,
    noun: str,
    *,
    cut: int,
    more: bool,
    next_offset: int,
    budget: int,
    extra: str = "",
    known: bool = True,
    at_least: bool = False,
) -> str | None:
    """``cut``: items of the page asked for that the budget left out; ``more``: items beyond
    the page exist (``known`` false: may exist, the page was full). None when nothing was left
    out; ``at_least``: ``cut`` is a lower bound (more may follow)."""
    call = f"call {tool} again with offset={next_offset}{extra}"
    if cut:
        return (
            f"{'at least ' if at_least else ''}{cut:,} more {noun} left out to keep within the"
            f" {budget:,}-token budget: {call}, or raise budget."
        )
    if more:
        return f"More {noun} {'follow' if known else 'may follow'}: {call}."
    return None


def page(head: str, items: list[str], tail: str | None) -> str:
    return "\n".join([head, *items, *([tail] if tail else [])])


# --- search ------------------------------------------------------------------------------------
def _asked(r: s.SearchResult) -> str:
    fixed = f' (showing results for "{_p(r.corrected_query)}")' if r.corrected_query else ""
    return f"{r.query!r}{fixed}"


def search_head(r: s.SearchResult, shown: int) -> str:
    return f"Hits {r.offset + 1}-{r.offset + shown} for {_asked(r)} ({r.mode}):"


def disk_change(note: s.SearchHit | s.ReadResult) -> str:
    """What became of a stale note's file: an agent re-reads a changed one, not a gone one."""
    return "gone from disk (moved or deleted)" if note.missing else "changed on disk"


def search_hit(h: s.SearchHit) -> str:
    where = _p(f"{h.path}:{h.line}") + (
        f", page {h.page}" if h.page else f", card {_p(h.card)}" if h.card else ""
    )
    lines = [
        f"{h.rank}. {_p(h.title)} — {where} (score {h.score:.3g})"
        + (f" [{disk_change(h)} since indexed]" if h.stale else "")
    ]
    if h.heading_path:
        lines.append(f"   {_p(h.heading_path)}")
    if h.passage is not None and h.lines:
        width = len(str(h.lines[1]))
        lines += [
            "   " + numbered_line(n, line, width)
            for n, line in enumerate(h.passage.split("\n"), h.lines[0])
        ]
    else:
        lines.append(f"   {_p(h.snippet)}")
    if h.tags:
        lines.append("   tags: " + _p(", ".join(h.tags)))
    return "\n".join(lines)


def search_empty(r: s.SearchResult, why: list[str]) -> str:
    """``why``: the filters that keep no note at all (KB.filters_that_keep_nothing)."""
    if r.offset:
        return f"No more notes match {_asked(r)} ({r.mode}) after the first {r.offset}."
    return f"No notes match {_asked(r)} ({r.mode})" + (f": {'; '.join(why)}." if why else ".")


# --- read --------------------------------------------------------------------------------------
def read_head(r: s.ReadResult) -> str:
    meta = [_p(f"{r.title} — {r.path}"), f"lines {r.first_line}-{r.last_line} of {r.total_lines}"]
    if r.pages:
        meta.insert(1, f"page {r.page} of {r.pages}" if r.page else f"{r.pages} pages")
    if r.tags:
        meta.append("tags: " + _p(", ".join(r.tags)))
    if r.aliases:
        meta.append("aliases: " + _p(", ".join(r.aliases)))
    if r.date:
        meta.append(f"date: {_p(r.date)}")
    meta.append(f"modified: {r.modified}")
    if r.stale:
        meta.append(f"{disk_change(r)} since indexed")
    if r.corrected_from:
        meta.insert(0, _p(shown_instead(r.corrected_from, r.path, r.title)))
    return " · ".join(meta)


def numbered_line(n: int, line: str, width: int) -> str:
    return f"{n:>{width}} | {_p(line)}"


# --- links -------------------------------------------------------------------------------------
def outgoing_link(lk: s.LinkItem) -> str:
    target = lk.path or f"{lk.target} (unresolved)"  # (target: set when unresolved)
    anchor = f"#{lk.anchor}" if lk.anchor else ""
    return _p(f"  line {lk.line} -> {target}{anchor}: {lk.context}")


def backlink(lk: s.LinkItem) -> str:
    return _p(f"  {lk.path}:{lk.line} ({lk.title}): {lk.context}")


def links_count(label: str, total: int, shown: int, offset: int) -> str:
    if offset == 0 and shown == total:
        return f"{label} ({total}):"
    if not shown:
        return f"{label} ({total}; none from {offset + 1}):"
    return f"{label} ({offset + 1}-{offset + shown} of {total}):"


def links_text(r: s.LinksResult, direction: str) -> str:
    out = [_p(f"{r.title} — {r.path}")]
    if direction != "backlinks":
        out.append(links_count("outgoing links", r.outgoing_total, len(r.outgoing), r.offset))
        out += [outgoing_link(lk) for lk in r.outgoing]
    if direction != "outgoing":
        out.append(links_count("backlinks", r.backlinks_total, len(r.backlinks), r.offset))
        out += [backlink(lk) for lk in r.backlinks]
    if r.left_out:
        out.append(r.left_out)
    return "\n".join(out)


def links_empty(r: s.LinksResult, direction: str) -> str:
    if r.offset and (r.outgoing_total or r.backlinks_total):
        return f"{_p(r.path)}: no links after the first {r.offset}."
    what = {
        "both": "no outgoing links and no backlinks",
        "outgoing": "no outgoing links",
        "backlinks": "no backlinks",
    }[direction]
    return f"{_p(r.title)} — {_p(r.path)} has {what}."


# --- related -----------------------------------------------------------------------------------
def _how(r: s.RelatedResult) -> str:
    if r.method == "semantic":
        return "by meaning"
    terms = _p(", ".join(r.terms)) or "none"
    return f"by keywords, as the note has no embeddings (terms: {terms})"


def related_head(r: s.RelatedResult) -> str:
    return f"Notes related to {_p(r.title)} — {_p(r.path)} ({_how(r)}):"


def related_note(n: s.RelatedNote) -> str:
    marks = "".join(m for m, on in ((" [linked]", n.linked), (" [links here]", n.links_here)) if on)
    where = _p(f"{n.path}:{n.line}") + (f", page {n.page}" if n.page else "")
    head = f"{n.rank}. {_p(n.title)} — {where} (score {n.score:.3g}){marks}"
    return f"{head}\n   {_p(n.snippet)}"


def related_empty(r: s.RelatedResult) -> str:
    after = f" after the first {r.offset}" if r.offset else ""
    return f"No notes related to {_p(r.title)} — {_p(r.path)}{after} ({_how(r)})."


# --- sql ---------------------------------------------------------------------------------------
def cell(v: object) -> str:
    """A value as the CLI's table shows it (line breaks as ⏎, other controls escaped), whole."""
    return text_cell(v, None)


def sql_head(columns: list[str]) -> str:
    return " | ".join(_p(c, tab=False) for c in columns)


def sql_row(row: list) -> str:
    return " | ".join(cell(v) for v in row)


def sql_count(shown: int, offset: int) -> str:
    return f"({shown} rows" + (f", from row {offset + 1})" if offset else ")")


def sql_empty(columns: list[str], offset: int) -> str:
    after = f" after the first {offset}" if offset else ""
    return f"The query returned no rows{after} (columns: {_p(', '.join(columns)) or 'none'})."


# --- status ------------------------------------------------------------------------------------
def status_text(st: dict) -> str:
    return json_text(st, indent=1, ensure_ascii=False, default=str)
