"""The index half of the keyword table for scripts written without spaces (Chinese, Japanese,
Korean, Thai, Lao, Khmer, Myanmar): ``chunks_cjk``, where every such run of a chunk is written as
its overlapping character pairs. The write path fills it, migrations and ``kbase check --fix``
rebuild it; the query half (turning a query into pairs, tiers, highlights) is kbase.search.cjk,
whose docstring says why pairs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from operator import add

import apsw

# Han (with radicals, extensions, compatibility ideographs, 々〆〇〻), kana (with ー and half-width
# kana), bopomofo, Hangul (syllables and jamo), Thai, Lao, Khmer, Myanmar. Punctuation such as
# 、。「」 is not part of a run.
CHARS = (
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff"
    "\u2e80-\u2fdf\u3005-\u3007\u303b\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f"
    "\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff"
)
RUN = re.compile(f"[{CHARS}]+")
# No character of CHARS is below U+0E00 or in U+2000-U+2E7F. Python's re searches a class of many
# ranges at some 70 ns a character (1.7 ms for a 25 KB English note), a plain negated class a
# thousand times faster: has_runs looks for the characters those ranges leave out first, and tries
# RUN only where one is (typographic quotes, dashes, arrows and symbols are skipped).
_PAST = re.compile("[^\x00-\u0dff\u2000-\u2e7f]")

TABLE = "chunks_cjk"
# The same columns and bm25 weights as chunks_fts (schema.sql creates it). Contentless: the pair
# text is made by kbase and never read back (highlights come from the chunk text). A row goes with
# FTS5's 'delete' command and the values it was written with, which schema.sql's triggers make
# again from the chunk's chunks_fts_content values through the SQL function PAIRS_FUNCTION
# (index_text; kbase.store.db registers it on every connection kbase opens). Not FTS5's
# contentless_delete option: SQLite before 3.43 (Debian 12's 3.40, Python's sqlite3 there,
# Datasette on it) cannot open a table that has it. So index_text() must stay as it wrote the
# rows: a change to it needs a migration that rebuilds this table (rebuild()). Mark characters
# (M*) are part of tokens, for Thai, Lao, Khmer and Myanmar vowel signs and tone marks (unicode61
# treats them as separators by default).
PAIRS_FUNCTION = "kbase_cjk_pairs"


def pairs_function(text: object) -> str | None:
    """PAIRS_FUNCTION: index_text() for SQL (NULL stays NULL). A chunk has a row exactly when this
    changes one of its three values (index_text adds spaces around each run)."""
    return None if text is None else index_text(str(text))


def has_runs(text: str) -> bool:
    if text.isascii():
        return False
    match, high = RUN.match, _PAST.search
    m = high(text)
    while m is not None:
        if match(text, m.start()):
            return True
        m = high(text, m.end())
    return False


def pairs(run: str) -> list[str]:
    """A run as its overlapping character pairs; a single character stays itself."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def index_text(text: str) -> str:
    """What chunks_cjk indexes for ``text``: each run replaced by its pairs, the rest kept."""
    return RUN.sub(_spaced_pairs, text)


def _spaced_pairs(m: re.Match[str]) -> str:
    """A run as index_text writes it: " " + " ".join(pairs(run)) + " ", its pairs made by adding
    each character to the next (in C; a fifth of the writer's time on rust-book-ja was here)."""
    run = m.group()
    return f" {' '.join(map(add, run, run[1:]))} " if len(run) > 1 else f" {run} "


def write_rows(con: apsw.Connection, rows: Iterable[tuple[int, str, str, str]]) -> None:
    """The chunks_cjk rows for (chunk id, title, headings, body) in the values chunks_fts gets:
    only for chunks with a run in any of the three."""
    con.executemany(
        "INSERT INTO chunks_cjk (rowid, body, title, headings) VALUES (?, ?, ?, ?)",
        _index_rows(rows),
    )


def _index_rows(rows: Iterable[tuple[int, str, str, str]]) -> Iterator[tuple[int, str, str, str]]:
    """write_rows' values. A title, or a chunk's headings, is the same for many chunks: each is
    made once (a fifth of the time on rust-book-ja went to making them again). A value has a run
    exactly when index_text changes it."""
    made: dict[str, str] = {}
    for cid, title, headings, body in rows:
        t = made.get(title)
        if t is None:
            t = made[title] = index_text(title)
        h = made.get(headings)
        if h is None:
            h = made[headings] = index_text(headings)
        if has_runs(body):
            yield cid, index_text(body), t, h
        elif t != title or h != headings:
            yield cid, body, t, h


def rebuild(con: apsw.Connection) -> None:
    """chunks_cjk again from chunks_fts_content (a migration, ``kbase check --fix``)."""
    con.execute("INSERT INTO chunks_cjk (chunks_cjk) VALUES ('delete-all')")
    write_rows(
        con,
        [tuple(r) for r in con.execute("SELECT id, title, headings, body FROM chunks_fts_content")],
    )
