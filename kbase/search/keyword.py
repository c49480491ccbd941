"""Keyword search: FTS5 bm25 in tiers (name, name prefix, all words, some words), CJK runs."""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import replace

import apsw

from kbase.records import Hit
from kbase.search import cjk, spell
from kbase.search.filters import Filters
from kbase.search.hits import (
    CANDIDATES,
    RERANK_SLACK,
    Ranked,
    chunk_counts,
    definitions_alone,
    highlighted,
    hit,
    length_units,
    one_pass,
    readable_first,
)
from kbase.search.query import Query, parse_query

# bm25 column weights in chunks_fts's column order: body, title + aliases, heading path. Measured
# on SciFact (bench/retrieval.py, BENCHMARKS.md section 4), nDCG@10 as (body, title, headings):
# (1, 10, 4) 0.670, (1, 5, 1) 0.677, (1, 2, 1) 0.678, (1, 1, 1) 0.682. The title column is short,
# so bm25's length normalisation already makes a title match count for much; extra weight only
# helped when the title was indexed twice (also as the first heading of the heading path, which
# chunks_fts_content no longer does) and hurts once it is not.
BM25_WEIGHTS = (1.0, 1.0, 1.0)


def keyword_search(
    con: apsw.Connection, text: str, *, limit: int = 10, filters: Filters = Filters()
) -> list[Hit]:
    """Documents matching ``text`` (see kbase.search.query for the syntax), best first, one hit
    each.

    A note whose name (title, file name or alias) is the query comes first, then notes whose name
    starts with it, then notes matching all words; if those are fewer than ``limit`` and the
    query has several words (and no explicit OR), documents matching only some words follow.
    """
    n = max(limit, CANDIDATES)  # the same candidates whatever the limit (hits.CANDIDATES)
    page = _body_passages(con, parse_query(text), keyword_ranked(con, text, n, filters)[:limit])
    marks = highlighted(con, [(r.match, r.chunk_id) for r in page])
    return [
        hit(con, r.doc_id, r.chunk_id, r.score, r.matched, r.match, r.explain, marks) for r in page
    ]


def _body_passages(con: apsw.Connection, query: Query, page: list[Ranked]) -> list[Ranked]:
    """``page`` with each note's passage in a chunk whose text holds a word of the query. bm25
    counts a word of the title or the heading path in every chunk under it, and favours the
    shortest of those: a query of a section's heading showed its last chunk, a '</div>' between
    two code samples. Such a note shows its best chunk whose body matches a word, or, when none
    does, its first matching chunk (where the section begins); and of those, one that is not
    link definitions alone (hits.readable_first). The notes' order is unchanged."""
    words = [r for r in page if r.explain.get("tier") in _BM25_TIERS and r.match]
    if not words or cjk.applies(query):
        return page
    body = f"body : ({query.to_fts(match_any=True)})"
    speaking = {
        rowid
        for (rowid,) in con.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?"
            " AND rowid IN (SELECT value FROM json_each(?))",
            (body, f"[{','.join(str(r.chunk_id) for r in words)}]"),
        )
    }
    unread = definitions_alone(con, [r.chunk_id for r in words])
    moved = {}
    for r in words:
        if r.chunk_id in speaking and r.chunk_id not in unread:
            continue
        ids = {cid for (cid,) in con.execute("SELECT id FROM chunks WHERE doc_id = ?", (r.doc_id,))}
        scores = range_bm25(con, f"({r.match}) AND {body}", [(min(ids), max(ids))])
        ranked = sorted((cid for cid in scores if cid in ids), key=lambda cid: (-scores[cid], cid))
        if ranked:
            readable = readable_first(con, ranked)
            if readable is not None or r.chunk_id not in speaking:
                moved[r.doc_id] = readable if readable is not None else ranked[0]
            continue
        first = con.execute(
            "SELECT id FROM chunks WHERE doc_id = ? AND id IN"
            " (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?) ORDER BY seq LIMIT 1",
            (r.doc_id, r.match),
        ).fetchone()
        if first is not None:  # (none: a name that starts so, no chunk with the words)
            moved[r.doc_id] = first[0]
    return [replace(r, chunk_id=moved.get(r.doc_id, r.chunk_id)) for r in page]


# Keyword tiers: the integer part of a keyword score. A note named by the query is what the person
# meant; one whose name starts with the query is what they are typing; then all words, then some.
# (TIER_ACROSS, for scripts without spaces: all words, but apart: the words of a sentence typed
# without spaces, each somewhere in one chunk; or the words typed, in different chunks of a note.)
TIER_NAME, TIER_NAME_PREFIX, TIER_ALL, TIER_ACROSS, TIER_SOME = 5, 4, 3, 2, 1


TIER_LABELS = {
    TIER_NAME: "name",
    TIER_NAME_PREFIX: "name prefix",  # or "near name": a typo away from a note's name
    TIER_ALL: "all words",
    TIER_ACROSS: "all words, apart",
    TIER_SOME: "some words",
}
_BM25_TIERS = {TIER_LABELS[t] for t in (TIER_NAME_PREFIX, TIER_ALL, TIER_SOME)}  # bm25's chunk


# Within a tier, bm25 maps onto [0, 1) as s / (s + BM25_HALF): a chunk scoring BM25_HALF shows .50.
BM25_HALF = 10.0


# A long note has many chunks, so many chances that one of them matches well by accident: past
# LENGTH_FREE_CHUNKS chunks (a long chapter), its best chunk's bm25 pays LENGTH_PRIOR per
# natural-log unit of its chunk count over that (a 320-chunk list note: ln 10 x LENGTH_PRIOR).
# Measured with bench/long_note.py (BENCHMARKS.md, "Long notes").
LENGTH_PRIOR = 0.5


def keyword_ranked(
    con: apsw.Connection,
    text: str,
    n: int,
    filters: Filters = Filters(),
    fill_to: int | None = None,
) -> list[Ranked]:
    """Up to ``n`` documents for ``text``, best first (see keyword_search for the order).

    Documents matching only some of the words are added when fewer than ``fill_to`` (default
    ``n``) match all of them."""
    query = parse_query(text)
    if query.empty or n <= 0:
        return []
    where, args = without_excluded(filters, query).sql()
    depth = n + RERANK_SLACK
    if cjk.applies(query):
        found = _cjk_found(con, query, depth, where, args, fill_to or n)
    else:
        found = [(TIER_ALL, r) for r in _ranked_docs(con, query.to_fts(), where, args, depth)]
        if len(found) < (fill_to or n) and len(query.clauses) > 1 and not query.explicit_or:
            have = {r[0] for _, r in found}
            found += [
                (TIER_SOME, r)
                for r in _ranked_docs(con, query.to_fts(match_any=True), where, args, depth)
                if r[0] not in have
            ]
    names = _name_tiers(con, query, where, args)
    near = _near_names(con, query, where, args) if TIER_NAME not in names.values() else set()
    for doc_id in near:
        names.setdefault(doc_id, TIER_NAME_PREFIX)
    position = {r[0]: i for i, (_, r) in enumerate(found)}
    # (each note's first chunk, in one statement: a prefix names hundreds of notes)
    firsts = _first_chunks(
        con,
        [d for d, tier in names.items() if tier == TIER_NAME or d in near or d not in position],
    )
    for doc_id, tier in names.items():
        # A note asked for by name, or by its name with a typo, shows its beginning; one whose
        # name merely starts with the query keeps its best chunk, if its words match one.
        old = found[position[doc_id]][1] if doc_id in position else None
        if tier == TIER_NAME or doc_id in near or old is None:
            first = firsts.get(doc_id)
            if first is None:
                continue
            bm25, count = (old[2], old[3]) if old else (0.0, 1)
            row = (doc_id, first, bm25, count, query.to_fts(match_any=True))
        else:
            row = old
        if doc_id in position:
            found[position[doc_id]] = (tier, row)
        else:
            found.append((tier, row))
    sizes = chunk_counts(con, [r[0] for _, r in found])
    out = []
    for tier, (doc_id, cid, bm25, count, match) in found:
        raw = -bm25
        adjusted = max(0.0, raw - LENGTH_PRIOR * length_units(sizes.get(doc_id, 1)))
        score = tier + adjusted / (adjusted + BM25_HALF)
        out.append(
            Ranked(
                doc_id,
                cid,
                score,
                count,
                match,
                {
                    "tier": "near name"
                    if tier == TIER_NAME_PREFIX and doc_id in near
                    else TIER_LABELS[tier],
                    "bm25": round(raw, 4),
                    "chunks": sizes.get(doc_id, 1),
                },
            )
        )
    out.sort(key=lambda r: -r.score)
    return out[:n]


def _first_chunks(con: apsw.Connection, doc_ids: list[int]) -> dict[int, int]:
    """doc id -> its first chunk (lowest seq) of each of ``doc_ids`` that has one."""
    if not doc_ids:
        return {}
    return {
        doc_id: cid
        for doc_id, cid, _ in con.execute(
            "SELECT doc_id, id, min(seq) FROM chunks"
            " WHERE doc_id IN (SELECT value FROM json_each(?)) GROUP BY doc_id",
            (f"[{','.join(map(str, doc_ids))}]",),  # a JSON array of ints, without json
        )
    }


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


_WORD = re.compile(r"\w+")


def _name_tiers(con: apsw.Connection, query, where: str, args: list) -> dict[int, int]:
    """Documents whose name (title, file name, alias) is the query (TIER_NAME) or starts with it
    (TIER_NAME_PREFIX: the query's last word may be unfinished; a single finished word is not a
    prefix, or every note named 'Tasks ...' would jump ahead for 'tasks'). A title that is not the
    note's file name (a slug's opening heading) names it only when no other note has that title:
    a heading that opens many notes ('Overview') is not the name of any of them."""
    if query.explicit_or or query.excluded:
        return {}
    words = [w.casefold() for w in query.words]
    if not words or len(words) > 12:
        return {}
    # The last word as a prefix, unless it is too short to narrow anything down.
    prefix = "*" if len(words[-1]) >= 3 else ""
    expr = (
        "{title} : (" + " AND ".join('"' + w.replace('"', '""') + '"' for w in words) + prefix + ")"
    )
    rows = con.execute(
        f"""SELECT d.id, d.title, d.path,
                   (SELECT group_concat(alias, char(31)) FROM aliases WHERE doc_id = d.id)
            FROM documents AS d WHERE d.id IN (
                SELECT c.doc_id FROM chunks AS c WHERE c.id IN (
                    SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 5000))
            AND {where}""",
        [expr, *args],
    ).fetchall()
    tiers = {}
    for doc_id, title, path, aliases in rows:
        stem = _stem(path)
        names = [stem, *((aliases or "").split("\x1f"))]
        if _words(title) == _words(stem) or not _shared_title(con, title):
            names.insert(0, title)
        best = 0
        for name in names:
            nw = _words(name)
            if nw == words:
                best = TIER_NAME
                break
            if (
                len(words) <= len(nw)
                and nw[: len(words) - 1] == words[:-1]
                and nw[len(words) - 1].startswith(words[-1])
                and (len(words) > 1 or nw[0] != words[0])
            ):
                best = TIER_NAME_PREFIX
        if best:
            tiers[doc_id] = best
    return tiers


def _stem(path: str) -> str:
    """``PurePosixPath(path).stem`` of an indexed note's path (a normalised relative path),
    without making a path object for each of the thousands of names a prefix matches."""
    name = path.rpartition("/")[2]
    i = name.rfind(".")
    return name[:i] if 0 < i < len(name) - 1 else name


def _shared_title(con: apsw.Connection, title: str) -> bool:
    """Do several documents have this title (any case)?"""
    return (
        con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM documents WHERE title = ? COLLATE NOCASE LIMIT 2)",
            (title,),
        ).fetchone()[0]
        > 1
    )


def _near_names(con: apsw.Connection, query: Query, where: str, args: list) -> set[int]:
    """Notes whose name is a typo away from the whole query (kbase.search.spell.near_names: the
    quick switcher's tolerance), among those the filters keep; none for a query with OR, an
    exclusion or a prefix*, or of more than 12 words."""
    if query.explicit_or or query.excluded or not query.words or len(query.words) > 12:
        return set()
    if any(t.prefix for clause in query.clauses for t in clause):
        return set()
    found = {n.doc_id for n in spell.near_names(con, " ".join(query.words)) if n.distance > 0}
    if not found or where == "1":
        return found
    marks = ",".join("?" * len(found))
    return {
        doc_id
        for (doc_id,) in con.execute(
            f"SELECT d.id FROM documents AS d WHERE d.id IN ({marks}) AND {where}",
            [*found, *args],
        )
    }


def listed(
    con: apsw.Connection, query: Query, *, limit: int = 10, filters: Filters = Filters()
) -> list[Hit]:
    """The notes a query of operators alone keeps (``tag:#x``, ``path:journal -draft``), by path,
    each shown by its first chunk; -excluded words leave out the notes that hold them."""
    where, args = without_excluded(filters, query).sql()
    rows = con.execute(
        f"""SELECT d.id, (SELECT id FROM chunks WHERE doc_id = d.id ORDER BY seq LIMIT 1) AS cid
            FROM documents AS d WHERE {where} AND cid IS NOT NULL
            ORDER BY d.path COLLATE NOCASE, d.id LIMIT ?""",
        [*args, limit],
    ).fetchall()
    return [hit(con, doc_id, cid, 1.0, 1) for doc_id, cid in rows]


def _cjk_found(
    con: apsw.Connection, query: Query, n: int, where: str, args: list, fill_to: int
) -> list[tuple]:
    """keyword_ranked's (tier, row) list for a query with words in scripts without spaces
    (kbase.search.cjk), from chunks_cjk: every word as typed in one chunk (TIER_ALL); then
    TIER_ACROSS: for a query whose runs are sentences, every word they are made of in one chunk,
    else every word typed across a note's chunks; then some of the words; then notes whose chunks
    hold none of these scripts but some of the other words (from chunks_fts); and when nothing
    holds a word, the notes that hold some of the query's character pairs, the most first. Rows
    are _ranked_docs's."""
    pq = cjk.pair_query(query)
    found = [(TIER_ALL, r) for r in _ranked_docs(con, pq.to_fts(), where, args, n, cjk.TABLE)]
    if len(found) >= fill_to or query.explicit_or:
        return found

    def more(tier: int, rows: list[tuple]) -> None:
        have = {r[0] for _, r in found}
        found.extend((tier, r) for r in rows if r[0] not in have)

    seg = cjk.segmented(query)
    if seg is not None:
        seg = cjk.recut(con, seg)
    words = pq if seg is None else cjk.pair_query(seg)
    if seg is not None:
        # A sentence typed without spaces: its words, anywhere in one chunk. (Not across chunks:
        # a long note holds four or five common words somewhere; measured, it ranks worse.)
        required = cjk.required(words)
        more(TIER_ACROSS, _ranked_docs(con, required.to_fts(), where, args, n, cjk.TABLE))
    if len(query.clauses) > 1 and len(found) < fill_to:
        # Notes that hold every word, but not in one chunk (a chunk is a few paragraphs; words
        # without spaces are short and a note is what the user looks for): next, by their best
        # chunk.
        across = set.intersection(*(_docs_matching(con, c) for c in pq.clauses)) - {
            r[0] for _, r in found
        }
        if across:
            marks = ",".join("?" * len(across))
            more(
                TIER_ACROSS,
                _ranked_docs(
                    con,
                    pq.to_fts(match_any=True),
                    f"{where} AND d.id IN ({marks})",
                    [*args, *across],
                    n,
                    cjk.TABLE,
                ),
            )
    if len(words.clauses) > 1 and len(found) < fill_to:
        # Some of the words; one character alone only when fewer than two longer words remain
        # (it matches every pair it starts: most chunks, for little evidence).
        some = cjk.required(words).to_fts(match_any=True)
        more(TIER_SOME, _ranked_docs(con, some, where, args, n, cjk.TABLE))
    latin = cjk.latin_query(query)
    if len(found) < fill_to and not latin.empty:
        more(TIER_SOME, _ranked_docs(con, latin.to_fts(match_any=True), where, args, n))
    if not found:
        # No word of the query is in any note (a word the segmenter cut wrongly, or one spelled
        # differently): the notes that share its character pairs, the most first.
        chars = cjk.pairs_query(query)
        if not chars.empty:
            more(
                TIER_SOME,
                _ranked_docs(con, chars.to_fts(match_any=True), where, args, n, cjk.TABLE),
            )
    elif PAIR_WEIGHT:
        chars = cjk.pairs_query(query, OTHER_WORD_PAIRS)
        if not chars.empty:
            found = _with_pairs(con, found, chars.to_fts(match_any=True))
    return found


# Below the all-words tier, a note's evidence is its words' bm25 (its best chunk's, for the words
# the query is cut into) mixed with a bigram count: the bm25 of its best chunk for the query's
# character pairs (each run as its overlapping pairs, with the first OTHER_WORD_PAIRS other words
# whole), each divided by the best of its kind, weighing 1 and PAIR_WEIGHT. A word cut wrongly,
# or written a little differently in the note (旭烈兀汗 for 旭烈兀可汗), and words that stand side
# by side in the note as in the question still count, and the tiers stay as they are (all words
# in one chunk, each word already a phrase of its pairs, stay ranked by their bm25). Measured on
# the CJK and Thai collections of bench.eval (BENCHMARKS.md, "Keyword mode and a bigram count"),
# chosen leave-one-collection-out over all ten: 0.5 is the pick of every fold but one (the mean
# of the others' MRR@10), the worst held-out collection XQuAD-R zh at 0.955 (bigram BM25 0.959,
# inside its interval). 1.5, chosen before on XQuAD-R zh, held there alone: it cost the question
# sets people wrote 0.01-0.03 each (vue-docs-ko 0.869 -> 0.835, rust-book-zh 0.860 -> 0.829).
# The other words: 0 against 2, 4 or 8 matters (XQuAD-R zh 0.953 -> 0.955), 2, 4 and 8 do not.
PAIR_WEIGHT = 0.5
OTHER_WORD_PAIRS = 4


def _with_pairs(con: apsw.Connection, found: list[tuple], pairs_match: str) -> list[tuple]:
    """``found`` with the bm25 of each row below TIER_ALL mixed with its note's best chunk's bm25
    for ``pairs_match`` (the query's pairs, any of them): each divided by the best of its kind
    (the list's best words, the best pairs of the rows mixed), weights 1 and PAIR_WEIGHT, and
    brought back to the words' scale."""
    ids = [r[0] for tier, r in found if tier < TIER_ALL]
    if not ids:
        return found
    marks = ",".join("?" * len(ids))
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    # bm25 for the chunks of these notes only: ``+rowid`` keeps the filter out of FTS5 (which
    # would run the query again for each rowid), so FTS5 walks the matches once and scores the
    # rows the filter keeps (the pairs match much of the index, the notes are a hundred at most).
    bag = dict(
        con.execute(
            f"""WITH m AS MATERIALIZED (
                SELECT rowid AS cid, bm25({cjk.TABLE}, {w}) AS s FROM {cjk.TABLE}
                WHERE {cjk.TABLE} MATCH ? AND +rowid IN (
                    SELECT id FROM chunks WHERE doc_id IN ({marks})))
            SELECT c.doc_id, min(m.s) FROM m JOIN chunks AS c ON c.id = m.cid GROUP BY c.doc_id""",
            [pairs_match, *ids],
        ).fetchall()
    )
    words_best = min(r[2] for _, r in found) or -1.0  # (bm25 is negative: the least is best)
    pairs_best = min(bag.values(), default=0.0) or -1.0
    share = PAIR_WEIGHT / (1 + PAIR_WEIGHT)
    scale = words_best / pairs_best
    return [
        (tier, (r[0], r[1], (1 - share) * r[2] + share * scale * bag.get(r[0], 0.0), *r[3:]))
        if tier < TIER_ALL
        else (tier, r)
        for tier, r in found
    ]


def _docs_matching(con: apsw.Connection, clause: tuple) -> set[int]:
    """The notes with a chunk that matches a clause of a chunks_cjk query (a clause without runs
    also in chunks_fts, which alone holds the chunks without runs)."""
    expr = " OR ".join(t.fts() for t in clause)
    tables = [cjk.TABLE] + (["chunks_fts"] if not cjk.is_pair_match(expr) else [])
    return {
        doc_id
        for table in tables
        for (doc_id,) in con.execute(
            "SELECT DISTINCT doc_id FROM chunks"
            f" WHERE id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)",
            (expr,),
        )
    }


def without_excluded(filters: Filters, query: Query) -> Filters:
    """``filters`` leaving out the notes that hold one of the query's -excluded terms anywhere
    (kbase.search.run builds them so; a caller of keyword_ranked may pass its own)."""
    if not query.excluded or filters.without:
        return filters
    return replace(filters, without=query.excluded)


def _ranked_docs(
    con: apsw.Connection, match: str, where: str, args: list, limit: int, table: str = "chunks_fts"
) -> list[tuple]:
    """(doc_id, best chunk id, bm25, matching chunks, match) per document, best first.

    The bm25 scores are materialised first (FTS5 computes them only in its own query), then
    grouped: with min(), SQLite takes the other bare columns from the row holding the minimum,
    so ``cid`` is the best chunk (a third faster than ranking with window functions)."""
    if where == "1":
        return _ranked_docs_from_best_chunks(con, match, limit, table)
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    sql = f"""
        WITH m AS MATERIALIZED (
            SELECT rowid AS cid, bm25({table}, {w}) AS s FROM {table} WHERE {table} MATCH ?
        )
        SELECT c.doc_id, m.cid, min(m.s) AS s, count(*) AS n, ? AS match
        FROM m JOIN chunks AS c ON c.id = m.cid JOIN documents AS d ON d.id = c.doc_id
        WHERE {where} GROUP BY c.doc_id ORDER BY s LIMIT ?"""
    return con.execute(sql, [match, match, *args, limit]).fetchall()


def _ranked_docs_from_best_chunks(
    con: apsw.Connection, match: str, limit: int, table: str = "chunks_fts"
) -> list[tuple]:
    """What _ranked_docs gives without filters, from FTS5's own ordering: the best chunks in
    order (FTS5 still scores every match, but nothing else is done with the rest), widened until
    they hold ``limit`` documents; then one count of matching chunks for those documents. A
    query whose words are common (an any-word query, say) matches much of the index: this way
    it costs a quarter less (any-word queries of titles, 10k notes: p95 39 -> 29 ms)."""
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    k = max(4 * limit, 64)
    while True:
        # (bm25() ordered by SQLite's sorter, ties by rowid: the order FTS5's own ``ORDER BY
        # rank`` gives, without its second pass that seeks every returned row again: 3.5 -> 1.7
        # ms a pass at 10,000 notes)
        rows = con.execute(
            f"WITH top AS (SELECT rowid AS cid, bm25({table}, {w}) AS s FROM {table}"
            f" WHERE {table} MATCH ?1 ORDER BY s, rowid LIMIT ?2)"
            " SELECT c.doc_id, top.cid, top.s FROM top"
            " JOIN chunks AS c ON c.id = top.cid ORDER BY top.s, top.cid",
            (match, k),
        ).fetchall()
        best: dict[int, tuple] = {}
        for doc_id, cid, score in rows:  # best first: a document's first row is its best chunk
            if doc_id not in best:
                best[doc_id] = (doc_id, cid, score)
                if len(best) == limit:
                    break
        if len(best) == limit or len(rows) < k:
            break
        k *= 4  # a few documents hold all of the best chunks: look further
    if not best:
        return []
    marks = ",".join("?" * len(best))
    counts = dict(
        con.execute(
            f"SELECT doc_id, count(*) FROM chunks WHERE doc_id IN ({marks})"
            f" AND id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?) GROUP BY doc_id",
            [*best, match],
        ).fetchall()
    )
    return [
        (doc_id, cid, score, counts.get(doc_id, 1), match) for doc_id, cid, score in best.values()
    ]


# ---- bm25 of a few chunks ----------------------------------------------------------------------
# FTS5's bm25() works out each phrase's inverse document frequency (a pass over the phrase's whole
# list of rows) again in every statement: hybrid's passages ask one statement per note of a page
# (ten of them, each over its note's range of chunk ids, so FTS5 scores those rows only), and those
# passes were most of their time. ``range_bm25`` scores with kbase_bm25(), FTS5's bm25 in Python
# (the formula and order of sqlite's fts5_aux.c) whose row counts per phrase are kept per
# connection until the index changes.
_BM25_K1, _BM25_B = 1.2, 0.75
_PHRASE = re.compile(r'"(?:[^"]|"")*"\*?')  # a phrase of a MATCH expression (Term.fts)
_ONLY_PHRASES = re.compile(r"(?:\s|\(|\)|AND|OR|NOT)*")  # what may join them


class _Bm25:
    """kbase_bm25(chunks_fts, weights...) on one connection, with its cache of row counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # (one statement's state at a time)
        self.stamp: tuple[int, int] | None = None
        self.hits: dict[tuple[str, str], int] = {}  # (table, phrase) -> rows that match it
        self.phrases: list[str] = []  # the phrases of the statement running, in FTS5's order
        self.counted: dict[int, float] = {}  # phrase number -> its idf, for this statement
        self.con: apsw.Connection | None = None
        self.table = "chunks_fts"  # the table of the statement running

    def __call__(self, api: apsw.FTS5ExtensionApi, *weights: apsw.SQLiteValue) -> float:
        n_row = api.row_count
        avgdl = api.column_total_size(-1) / n_row
        d = api.column_size(-1)
        score = 0.0
        for i in range(api.phrase_count):
            freq = 0.0
            for column, offsets in enumerate(api.phrase_locations(i)):
                if offsets:
                    w = weights[column] if column < len(weights) else 1.0
                    freq += float(w) * len(offsets)
            if freq:  # (a phrase this row lacks adds nothing: its idf is not needed)
                score += self.idf(api, i, n_row) * (
                    (freq * (_BM25_K1 + 1.0))
                    / (freq + _BM25_K1 * (1 - _BM25_B + _BM25_B * d / avgdl))
                )
        return -1.0 * score

    def idf(self, api: apsw.FTS5ExtensionApi, i: int, n_row: int) -> float:
        """Phrase ``i``'s idf, as fts5_aux.c's fts5Bm25GetData has it."""
        idf = self.counted.get(i)
        if idf is None:
            if len(self.phrases) == api.phrase_count and self.con is not None:
                key = (self.table, self.phrases[i])
                hits = self.hits.get(key)
                if hits is None:
                    (hits,) = self.con.execute(
                        f"SELECT count(*) FROM {self.table} WHERE {self.table} MATCH ?", (key[1],)
                    ).fetchone()
                    self.hits[key] = hits
            else:  # (phrases this module did not read: FTS5 counts them, as bm25 does)
                rows = [0]
                api.query_phrase(i, lambda _api, n: n.__setitem__(0, n[0] + 1), rows)
                hits = rows[0]
            idf = math.log((n_row - hits + 0.5) / (hits + 0.5))
            self.counted[i] = idf = idf if idf > 0.0 else 1e-6
        return idf


_bm25: weakref.WeakKeyDictionary[apsw.Connection, _Bm25] = weakref.WeakKeyDictionary()
_RANGES = 16  # ranges in one statement of range_bm25 (each row is tested against every one)


def range_bm25(
    con: apsw.Connection,
    match: str,
    ranges: Iterable[tuple[int, int]],
    table: str = "chunks_fts",
) -> dict[int, float]:
    """-bm25 (BM25_WEIGHTS) of the ``table`` rows (chunks_fts, or cjk.TABLE for a pair match)
    that ``match`` finds with a rowid in one of ``ranges`` ((lo, hi), inclusive): what
    ``-bm25(table, ...)`` gives them, within float rounding (tests/test_range_bm25.py compares),
    at the cost of one pass per phrase for all the ranges, and none while the index is
    unchanged. The ranges go in one statement (``+rowid BETWEEN`` each: FTS5 walks the matches
    once, and only the rows in a range are scored) unless the expression holds a phrase of
    several words (hits.one_pass: then one statement a range, FTS5 reading those rows alone).
    An expression with more than phrases joined by AND, OR, NOT and brackets (a column filter,
    NEAR, ^) is scored by FTS5's own bm25."""
    ranges = list(ranges)
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    if not ranges:
        return {}
    if not _ONLY_PHRASES.fullmatch(_PHRASE.sub("", match)):
        return {
            rowid: score
            for lo, hi in ranges
            for rowid, score in con.execute(
                f"SELECT rowid, -bm25({table}, {w}) FROM {table}"
                f" WHERE {table} MATCH ? AND rowid BETWEEN ? AND ?",
                (match, lo, hi),
            )
        }
    scorer = _bm25.get(con)
    if scorer is None:
        scorer = _bm25[con] = _Bm25()
        con.register_fts5_function("kbase_bm25", scorer)
    out: dict[int, float] = {}
    with scorer.lock:
        stamp = (con.execute("PRAGMA data_version").fetchone()[0], con.total_changes())
        if scorer.stamp != stamp:
            scorer.stamp, scorer.hits = stamp, {}
        scorer.con, scorer.phrases, scorer.counted = con, _PHRASE.findall(match), {}
        scorer.table = table
        if one_pass(match):  # (a page's ranges in one statement, up to _RANGES at a time)
            for at in range(0, len(ranges), _RANGES):
                part = ranges[at : at + _RANGES]
                within = " OR ".join(["+rowid BETWEEN ? AND ?"] * len(part))
                out.update(
                    con.execute(
                        f"SELECT rowid, -kbase_bm25({table}, {w}) FROM {table}"
                        f" WHERE {table} MATCH ? AND ({within})",
                        [match, *(x for span in part for x in span)],
                    ).fetchall()
                )
        else:  # (a phrase of several words: one statement a range, each over its rows alone)
            for lo, hi in ranges:
                out.update(
                    con.execute(
                        f"SELECT rowid, -kbase_bm25({table}, {w}) FROM {table}"
                        f" WHERE {table} MATCH ? AND rowid BETWEEN ? AND ?",
                        (match, lo, hi),
                    ).fetchall()
                )
        scorer.con, scorer.phrases = None, []
    return out
