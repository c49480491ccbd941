"""Search in scripts written without spaces between words: Chinese, Japanese, Korean, Thai, Lao,
Khmer, Myanmar.

FTS5's unicode61 tokenizer makes a whole run of such characters (often a sentence) one token, so
chunks_fts cannot find a word inside it. Chunks that contain such a run get a second row, in
``chunks_cjk``, where every run is written as its overlapping character pairs ("同步设置" ->
"同步 步设 设置"), and everything else as it is. A query word in these scripts becomes the phrase
of its pairs, which matches exactly where the word occurs, inside any run; FTS5 ranks with bm25 as
for any other word. Korean gains too: its particles stick to the word ("서울은"), and the pairs
find "서울" in it. Chunks without these scripts get no row: English indexes are as before.

Chosen over FTS5's trigram tokenizer by measurement (BENCHMARKS.md): trigrams cannot match
two-character words, the most common length in Chinese, and index every character of the chunk,
code and English included; pairs index only the runs.
"""

from __future__ import annotations

import re
from dataclasses import replace

import apsw

from kbase.search.query import Query, Term
from kbase.store.cjk_table import CHARS, RUN, TABLE, has_runs, pairs

__all__ = ["RUN", "TABLE", "has_runs", "pairs"]  # the index half's names the query half reads

# ---- queries -------------------------------------------------------------------------------


def applies(query: Query) -> bool:
    """True when a positive term of the query has a run: the query goes to chunks_cjk."""
    return any(has_runs(w) for clause in query.clauses for t in clause for w in t.words)


def _term(term: Term) -> Term:
    tokens: list[str] = []
    for word in term.words:
        for piece in re.split(f"([{CHARS}]+)", word):
            if piece:
                tokens.extend(pairs(piece) if RUN.fullmatch(piece) else [piece])
    # One character alone: the pairs that start with it (a word of one character is rarely meant).
    single = len(tokens) == 1 and RUN.fullmatch(tokens[0]) is not None and len(tokens[0]) == 1
    return Term(tuple(tokens), term.prefix or single)


def pair_query(query: Query) -> Query:
    """The query for chunks_cjk: every word with a run written as its pairs."""
    return replace(
        query,
        clauses=tuple(tuple(_term(t) for t in clause) for clause in query.clauses),
        excluded=tuple(_term(t) for t in query.excluded),
    )


def segmented(query: Query) -> Query | None:
    """``query`` with each word typed without quotes that holds a run cut into the words it is
    made of (kbase.search.segment), one clause each: a question typed as one run
    (``所有权的规则是什么``) asks for its words (所有权, 规则), not for itself as a phrase.
    None when nothing changes (every run already one word) or the query has an explicit OR."""
    if query.explicit_or:
        return None
    clauses: list[tuple[Term, ...]] = []
    changed = False
    for clause in query.clauses:
        term = clause[0]
        if len(clause) > 1 or term.quoted or not any(has_runs(w) for w in term.words):
            clauses.append(clause)
            continue
        from kbase.search import segment  # ICU, for a query with such a run only

        parts: list[Term] = []
        for word in term.words:
            for piece in re.split(f"([{CHARS}]+)", word):
                if RUN.fullmatch(piece):
                    parts.extend(Term((w,)) for w in segment.words(piece))
                elif piece:
                    parts.append(Term((piece,)))
        if term.prefix and parts:
            parts[-1] = replace(parts[-1], prefix=True)
        new = [(t,) for t in parts]  # none for a word of function words (수, 什么是)
        changed = changed or new != [clause]
        clauses.extend(new)
    if not clauses:  # only function words: look for them after all
        return None
    return replace(query, clauses=tuple(clauses)) if changed else None


def occurs(con: apsw.Connection, run: str) -> bool:
    """Does some chunk hold ``run`` (a run of these scripts) as written?"""
    expr = Term(tuple(pairs(run))).fts()
    row = con.execute(f"SELECT 1 FROM {TABLE} WHERE {TABLE} MATCH ? LIMIT 1", (expr,)).fetchone()
    return row is not None


def cut_by_index(con: apsw.Connection, run: str) -> list[str]:
    """``run`` cut into the longest pieces of two characters or more that some chunk holds, left
    to right (a character no piece holds is left out): the index as the dictionary."""
    out, i = [], 0
    while i < len(run) - 1:
        j = next((j for j in range(len(run), i + 1, -1) if occurs(con, run[i:j])), None)
        if j is None:
            i += 1
        else:
            out.append(run[i:j])
            i = j
    return out


def recut(con: apsw.Connection, seg: Query) -> Query:
    """``seg`` (segmented's query) with each word of three characters or more that no chunk
    holds cut again by cut_by_index: a word the segmenter did not know (黑豹队擒杀: 黑豹队 and
    擒杀 are in the note), or spelt otherwise in the notes (分区赛 for the note's 分区轮: 分区),
    or with a particle it did not cut (라이브러리끼리: 라이브러리), is looked for as what the
    notes hold of it rather than not at all."""
    clauses: list[tuple[Term, ...]] = []
    for clause in seg.clauses:
        t = clause[0]
        word = t.words[0] if len(clause) == 1 and len(t.words) == 1 else ""
        if t.quoted or t.prefix or len(word) < 3 or not RUN.fullmatch(word) or occurs(con, word):
            clauses.append(clause)
            continue
        clauses.extend((Term((piece,)),) for piece in cut_by_index(con, word))
    return replace(seg, clauses=tuple(clauses)) if clauses else seg


def _weak(clause: tuple[Term, ...]) -> bool:
    """A clause of a pair query that is one character alone (every pair it starts)."""
    return (
        len(clause) == 1
        and len(clause[0].words) == 1
        and len(clause[0].words[0]) == 1
        and RUN.fullmatch(clause[0].words[0]) is not None
    )


def required(pq: Query) -> Query:
    """The clauses of a pair query that all must match: a word of one character matches every
    pair that starts with it, so it is left to the some-words tier (which ranks by it) when at
    least two longer words remain."""
    strong = tuple(c for c in pq.clauses if not _weak(c))
    return replace(pq, clauses=strong) if len(strong) >= 2 else pq


def pairs_query(query: Query, other_words: int = 0) -> Query:
    """Every character pair of the query's runs typed without quotes as a clause of its own (the
    any-word expression ranks chunks by how many of them they hold), and the first
    ``other_words`` of its other words (those without a run: ``Rust``, ``API``) whole, or an
    empty query."""
    seen = dict.fromkeys(
        p
        for clause in query.clauses
        for t in clause
        if not t.quoted
        for w in t.words
        for run in RUN.findall(w)
        for p in pairs(run)
    )
    if other_words:
        others = dict.fromkeys(
            piece.casefold()
            for clause in query.clauses
            for t in clause
            if not t.quoted
            for w in t.words
            for piece in RUN.split(w)
            if piece and not piece.isspace()
        )
        seen.update(dict.fromkeys(list(others)[:other_words]))
    return pair_query(Query(clauses=tuple((Term((p,)),) for p in seen), excluded=query.excluded))


def latin_query(query: Query) -> Query:
    """The clauses of ``query`` without runs (for chunks that have none), or an empty query."""
    return replace(
        query,
        clauses=tuple(c for c in query.clauses if not any(has_runs(w) for t in c for w in t.words)),
        excluded=tuple(t for t in query.excluded if not any(has_runs(w) for w in t.words)),
    )


def excluded_runs(terms: tuple[Term, ...]) -> str | None:
    """The chunks_cjk expression of the excluded ``terms`` that hold a run (chunks_fts cannot
    see them), or None."""
    found = [_term(t) for t in terms if any(has_runs(w) for w in t.words)]
    return " OR ".join(t.fts() for t in found) or None


def excluded_words(terms: tuple[Term, ...]) -> str | None:
    """The chunks_fts expression of the excluded ``terms`` without runs, or None."""
    found = [t for t in terms if not any(has_runs(w) for w in t.words)]
    return " OR ".join(t.fts() for t in found) or None


def is_pair_match(match: str) -> bool:
    """A MATCH expression for chunks_cjk (chunks_fts expressions never hold runs)."""
    return has_runs(match)


# ---- highlights ----------------------------------------------------------------------------

_PHRASE = re.compile(r'"((?:[^"]|"")*)"(\*?)')
_OPEN, _CLOSE = "\x02", "\x03"


def highlighted(con: apsw.Connection, chunk_id: int, text: str, match: str) -> str:
    """``text`` (the chunk) with highlight markers around what the chunks_cjk expression
    ``match`` found: every occurrence of its runs, and its other words as chunks_fts finds them
    (stemmed). The excluded part of the expression is not highlighted."""
    runs: set[str] = set()
    words: list[str] = []
    for phrase, star in _PHRASE.findall(match.split(" NOT ")[0]):
        run, prev = "", ""
        for tok in phrase.replace('""', '"').split(" "):
            if RUN.fullmatch(tok) is None:
                words.append(tok)
                tok = ""
            elif len(prev) == len(tok) == 2 and prev[1] == tok[0]:
                run += tok[1]  # the next pair of the same run
            else:
                runs.add(run)
                run = tok
            prev = tok
            if not tok:
                runs.add(run)
                run = ""
        runs.add(run)
        if star and words and RUN.fullmatch(phrase.split(" ")[-1]) is None:
            words[-1] += "*"
    runs.discard("")
    spans: list[tuple[int, int]] = []
    for run in runs:
        start = text.find(run)
        while start >= 0:
            spans.append((start, start + len(run)))
            start = text.find(run, start + len(run))
    if words:
        expr = " OR ".join(
            '"' + w.removesuffix("*").replace('"', '""') + '"' + "*" * w.endswith("*")
            for w in words
        )
        row = con.execute(
            "SELECT highlight(chunks_fts, 0, char(2), char(3)) FROM chunks_fts"
            " WHERE chunks_fts MATCH ? AND rowid = ?",
            (expr, chunk_id),
        ).fetchone()
        if row and row[0]:
            spans += _marked_spans(row[0])
    return _mark(text, spans)


def _marked_spans(marked: str) -> list[tuple[int, int]]:
    spans, pos, start = [], 0, 0
    for ch in marked:
        if ch == _OPEN:
            start = pos
        elif ch == _CLOSE:
            spans.append((start, pos))
        else:
            pos += 1
    return spans


def _mark(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, pos = [], 0
    for a, b in merged:
        out += [text[pos:a], _OPEN, text[a:b], _CLOSE]
        pos = b
    out.append(text[pos:])
    return "".join(out)


# ---- what the notes are written in ------------------------------------------------------

_LETTER = re.compile(r"[^\W\d_]")
_SCRIPTS = (  # checked in this order: kana makes Japanese of a chunk that also has Han
    ("Japanese", re.compile("[\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f]")),
    ("Korean", re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff]")),
    ("Thai", re.compile("[\u0e00-\u0e7f]")),
    ("Lao", re.compile("[\u0e80-\u0eff]")),
    ("Khmer", re.compile("[\u1780-\u17ff\u19e0-\u19ff]")),
    ("Burmese", re.compile("[\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff]")),
    ("Chinese", RUN),
)
SAMPLE = 400  # chunks read to tell what an index is written in (a few ms)


def languages(con: apsw.Connection, sample: int = SAMPLE) -> dict[str, float]:
    """The share of the index's chunks (a sample) written in each of these scripts: a
    chunk counts when a tenth of its letters or more are in runs (a Chinese character carries
    about a word; an English chunk that quotes a name in Chinese does not count). Most frequent
    first; {} for none."""
    (total,) = con.execute("SELECT count(*) FROM chunks").fetchone()
    rows = con.execute(  # every k-th chunk: the same answer every time
        "SELECT body FROM chunks_fts_content WHERE id IN"
        " (SELECT id FROM chunks WHERE id % ? = 0 LIMIT ?)",
        (max(1, total // sample), sample),
    ).fetchall()
    if not rows:
        return {}
    counts: dict[str, int] = {}
    for (body,) in rows:
        runs = "".join(RUN.findall(body or ""))
        if not runs or len(runs) < 0.1 * len(_LETTER.findall(body)):
            continue
        lang = next(name for name, script in _SCRIPTS if script.search(runs))
        counts[lang] = counts.get(lang, 0) + 1
    return {k: v / len(rows) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


# ---- hybrid --------------------------------------------------------------------------------
