"""Hybrid search: the keyword and semantic lists fused by their scores."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import apsw

from kbase.embed.nearest import VectorCache
from kbase.records import Hit
from kbase.search import cjk
from kbase.search.filters import Filters
from kbase.search.fusion import PARAMS, FusionParams, fuse, passage_meaning, reading
from kbase.search.hits import Ranked, definitions_alone, highlighted, hit, readable_first
from kbase.search.keyword import keyword_ranked, range_bm25
from kbase.search.query import parse_query
from kbase.search.semantic import note_similarities, semantic_ranked
from kbase.text import latin_share

FTS = "chunks_fts"


def hybrid_search(
    con: apsw.Connection,
    text: str,
    query_vector: bytes | Callable[[], bytes],
    *,
    limit: int = 10,
    filters: Filters = Filters(),
    params: FusionParams = PARAMS,
    cache: VectorCache | None = None,
    reads: Callable[[str], float] | None = latin_share,
) -> list[Hit]:
    """The keyword and semantic candidates (``candidates``) fused (kbase.search.fusion.fuse,
    with ``params``), the first ``limit`` of them as hits. Semantic hits below the similarity
    floor are not matches unless the keyword list holds the note too, so a page may hold fewer
    notes than asked. Each hit shows its passage that answers (passage_chunks, then the sentence
    with the most query words), highlighted with the query's words; ``explain`` gives each
    list's rank, raw and normalised score and contribution.

    ``reads``: how much of a text the index's model reads (kbase.embed.embedder.reader; None:
    all of every text): the semantic list is left out for a query it reads less than
    ``params.min_read`` of, and weighs by the share it reads (fusion.reading).

    ``query_vector``: the vector, or a function that gives it (called when it is needed, after
    the keyword list: a one-shot search loads its model meanwhile; called again, the same).
    """
    kw, sem = candidates(con, text, query_vector, limit, filters, params, cache, reads)
    params = reading(params, read_share(text, reads))
    fused = fuse(kw, sem, params)
    by_list = {"keyword": {r.doc_id: r for r in kw}, "semantic": {r.doc_id: r for r in sem}}
    highlight = parse_query(text).to_fts(match_any=True) or None
    page = fused[:limit]
    # A note the query names (or names with a typo) shows its beginning, as in keyword mode: the
    # person asked for the note, not for a passage of it.
    named = {r.doc_id for r in kw if r.explain.get("tier") in ("name", "near name")}
    read = any("semantic" in f.explain for f in fused)
    tier = {r.doc_id: r.explain.get("tier") for r in kw}
    chunks = passage_chunks(
        con,
        [f.key for f in page if f.key not in named],
        highlight,
        _vector(query_vector) if read else None,
        {f.key: passage_meaning(f, params, tier.get(f.key)) for f in page},
        {r.doc_id: r.match for r in kw if r.match and cjk.is_pair_match(r.match)},
    )
    shown = []  # (the page's hits: document, its ranked row, chunk, expression to highlight)
    for f in page:
        r = by_list["keyword"].get(f.key) or by_list["semantic"][f.key]
        match = by_list["keyword"][f.key].match if f.key in by_list["keyword"] else None
        shown.append((f, r, chunks.get(f.key, r.chunk_id), match or highlight))
    marks = highlighted(con, [(match, chunk) for _, _, chunk, match in shown])
    hits = []
    for f, r, chunk, match in shown:
        explain = {
            name: {**part, **by_list[name][f.key].explain} for name, part in f.explain.items()
        }
        hits.append(hit(con, f.key, chunk, f.score, r.matched, match, explain, marks))
    return hits


def candidates(
    con: apsw.Connection,
    text: str,
    query_vector: bytes | Callable[[], bytes],
    limit: int = 10,
    filters: Filters = Filters(),
    params: FusionParams = PARAMS,
    cache: VectorCache | None = None,
    reads: Callable[[str], float] | None = latin_share,
) -> tuple[list[Ranked], list[Ranked]]:
    """The two lists hybrid search fuses, ``max(limit, params.depth)`` deep: keyword_ranked's
    (its "some words" pass when fewer than ``params.depth`` notes hold every word, whatever the
    limit) and semantic_ranked's (empty when the model reads less than ``params.min_read`` of
    the query; see hybrid_search), before the similarity floor, each of its notes with its
    similarity as a whole note (``explain["note"]``: semantic.note_similarities). What an
    evaluation caches to fuse again."""
    n = max(limit, params.depth)
    kw = keyword_ranked(con, text, n, filters, fill_to=params.depth)
    sem: list[Ranked] = []
    if read_share(text, reads) >= params.min_read:
        vector = _vector(query_vector)
        sem = semantic_ranked(con, vector, n, filters, cache)
        notes = note_similarities(con, vector, [r.doc_id for r in sem], cache)
        sem = [
            replace(r, explain={**r.explain, "note": round(notes[r.doc_id], 4)})
            if r.doc_id in notes
            else r
            for r in sem
        ]
    return kw, sem


def _vector(query_vector: bytes | Callable[[], bytes]) -> bytes:
    return query_vector() if callable(query_vector) else query_vector


def read_share(text: str, reads: Callable[[str], float] | None) -> float:
    """The share of the query's words (not its operators) the model reads: 1 when ``reads`` is
    None (a multilingual model)."""
    return 1.0 if reads is None else reads(parse_query(text).text)


def passage_chunks(
    con: apsw.Connection,
    doc_ids: list[int],
    match: str | None,
    query_vector: bytes | None,
    meaning_weight: float | Mapping[int, float] = 0.5,
    pair_matches: Mapping[int, str] | None = None,
) -> dict[int, int]:
    """For each document, its chunk that best answers the query, meaning weighing
    ``meaning_weight`` beside words (one for all, or per document: fusion.passage_meaning): two
    queries for the whole page, one for the words, one for the meaning. The words are ``match``
    in chunks_fts, or for a document in ``pair_matches`` (the keyword list found it by the
    character pairs of words without spaces: kbase.search.cjk) that expression in chunks_cjk,
    as keyword mode scores its chunks (chunks_fts cannot see a word inside such a run)."""
    if not doc_ids:
        return {}
    marks = ",".join("?" * len(doc_ids))
    # Each note's range of chunk ids: only those rows are scored (bm25() with a rowid IN (...)
    # list scored every match in the index first: 34 ms against 0.8); bm25's statistics are
    # the whole index's either way (range_bm25: worked out once, the ranges in one statement);
    # rows of other notes in a range are ignored below.
    pair_matches = pair_matches or {}
    scored_by: dict[int, tuple[str, str]] = {}  # document -> (expression, table) of its words
    ranges: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for doc_id, lo, hi in con.execute(
        f"SELECT doc_id, min(id), max(id) FROM chunks WHERE doc_id IN ({marks}) GROUP BY doc_id",
        doc_ids,
    ):
        if doc_id in pair_matches:
            key = (pair_matches[doc_id], cjk.TABLE)
        elif match:
            key = (match, FTS)
        else:
            continue
        scored_by[doc_id] = key
        ranges.setdefault(key, []).append((lo, hi))
    scored = {key: range_bm25(con, key[0], spans, key[1]) for key, spans in ranges.items()}
    meaning: dict[int, float] = {}
    if (
        query_vector
        and con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone()
    ):
        meaning = dict(
            con.execute(
                "SELECT c.id, 1 - vec_distance_cosine(v.embedding, ?) FROM chunks AS c"
                f" JOIN chunks_vec AS v ON v.rowid = c.id WHERE c.doc_id IN ({marks})",
                [query_vector, *doc_ids],
            ).fetchall()
        )
    per_doc: dict[int, list[int]] = {}
    words: dict[int, float] = {}
    for cid, doc_id in con.execute(
        f"SELECT id, doc_id FROM chunks WHERE doc_id IN ({marks}) ORDER BY doc_id, seq", doc_ids
    ):
        if doc_id in scored_by and cid in scored[scored_by[doc_id]]:
            words[cid] = scored[scored_by[doc_id]][cid]
        if cid in words or cid in meaning:
            per_doc.setdefault(doc_id, []).append(cid)
    out: dict[int, int] = {}
    rankings: dict[int, tuple[list[int], dict[int, float]]] = {}
    for doc_id, cids in per_doc.items():
        top = max((words.get(c, 0.0) for c in cids), default=0.0) or 1.0
        sims = [meaning[c] for c in cids if c in meaning]
        hi, lo = (max(sims), min(sims)) if sims else (1.0, 0.0)
        m = meaning_weight if isinstance(meaning_weight, float) else meaning_weight[doc_id]
        scores = {
            c: m * _scaled(meaning.get(c), hi, lo) + (1 - m) * words.get(c, 0.0) / top for c in cids
        }
        rankings[doc_id] = (cids, scores)
        out[doc_id] = max(cids, key=scores.__getitem__)  # the first of equals: the earliest
    unread = definitions_alone(con, out.values())  # link definitions alone: the next readable
    for doc_id in [d for d, c in out.items() if c in unread]:
        cids, scores = rankings[doc_id]
        ranked = sorted(cids, key=lambda c: -scores[c])  # (stable: the earliest of equals)
        out[doc_id] = readable_first(con, ranked) or out[doc_id]
    return out


def _scaled(value: float | None, hi: float, lo: float) -> float:
    """``value`` min-max between ``lo`` and ``hi`` (1 when they are equal; 0 for no value)."""
    if value is None:
        return 0.0
    return (value - lo) / (hi - lo) if hi > lo else 1.0
