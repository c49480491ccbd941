"""Related notes: the notes nearest in meaning to a note.

With embeddings, a note is compared with every other note through its chunk vectors (no model is
needed: the stored vectors are compared with each other). Without them (an index built with
``--no-embed``, or a note not embedded yet), the note's most distinctive terms (tf-idf over the
keyword index, through the same tokenizer) become an any-word query ranked by bm25, and the result
says so.

A note is compared as the mean of its chunk vectors against every chunk of every other note, each
note scored by its closest chunk: of four ways measured on the shared vaults, with the notes each
note links to as the relevant set, this found linked notes best and costs one matrix product
(bench/related.py; BENCHMARKS.md "Related notes" has the numbers of the other three).
"""

from __future__ import annotations

import math
import re
from collections import Counter

import apsw

from kbase.embed.nearest import VectorCache
from kbase.records import RelatedResult

# Keyword fallback: how many of the note's terms make the query. More terms match more notes
# for the wrong reasons; fewer miss the note's subject when its title words are common.
KEYWORD_TERMS = 12
# Terms considered at all (the most frequent of the note's words): bounds the per-term
# document-frequency lookups for a long note.
KEYWORD_CANDIDATES = 200
_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)


def related(
    con: apsw.Connection,
    note,
    *,
    limit: int = 10,
    include_linked: bool = False,
    cache: VectorCache | None = None,
) -> RelatedResult:
    """Notes related to ``note`` (a kbase.notes.graph.Note), best first, leaving out the notes it
    links to unless ``include_linked``. ``cache``: the in-memory vectors (a temporary one if
    None)."""
    links_to = {
        t
        for (t,) in con.execute(
            "SELECT DISTINCT target_id FROM links WHERE doc_id = ? AND target_id IS NOT NULL",
            (note.id,),
        )
    }
    linked_from = {
        s
        for (s,) in con.execute(
            "SELECT DISTINCT doc_id FROM links WHERE target_id = ? AND doc_id <> ?",
            (note.id, note.id),
        )
    }
    skip = {note.id} | (set() if include_linked else links_to)
    result = RelatedResult(
        note.id,
        note.path,
        note.title,
        "semantic",
        (),
        [],
        frozenset(links_to),
        frozenset(linked_from),
    )
    if limit <= 0:
        return result
    ranked = (
        by_vectors(con, note.id, cache or VectorCache(), skip, limit) if _has_vectors(con) else None
    )
    if ranked is None:
        terms, ranked = by_keywords(con, note.id, skip, limit)
        result.method, result.terms = "keyword", terms

    from kbase.search.hits import hit

    result.hits = [
        hit(con, doc_id, cid, score, n, match) for doc_id, cid, score, n, match in ranked
    ]
    return result


def _has_vectors(con: apsw.Connection) -> bool:
    return (
        con.execute("SELECT 1 FROM sqlite_schema WHERE name = 'chunks_vec'").fetchone() is not None
    )


def by_vectors(
    con: apsw.Connection, note_id: int, cache: VectorCache, skip: set[int], limit: int
) -> list[tuple] | None:
    """[(doc_id, best chunk id, score, 1, None)], or None when the note has no vectors."""
    import numpy as np

    ids, _, docs = cache.arrays(con)
    own = docs == note_id
    if not own.any():
        return None
    note_vectors = cache.vectors_at(con, own)
    order = np.argsort(docs, kind="stable")
    sorted_docs = docs[order]
    starts = np.flatnonzero(np.r_[True, sorted_docs[1:] != sorted_docs[:-1]])
    doc_ids = sorted_docs[starts]
    mean = note_vectors.mean(axis=0)
    mean /= np.linalg.norm(mean) or 1.0
    per_chunk = cache.matmul(con, mean)
    scores = np.maximum.reduceat(per_chunk[order], starts)  # each note's closest chunk
    keep = ~np.isin(doc_ids, np.fromiter(skip | {-1}, dtype=np.int64))
    candidates = np.flatnonzero(keep)
    top = candidates[np.argsort(-scores[candidates], kind="stable")[:limit]]
    ends = np.r_[starts[1:], len(order)]
    out = []
    for g in top:
        rows = order[starts[g] : ends[g]]
        best = rows[int(np.argmax(per_chunk[rows]))]
        out.append((int(doc_ids[g]), int(ids[best]), float(scores[g]), 1, None))
    return out


def by_keywords(
    con: apsw.Connection, note_id: int, skip: set[int], limit: int
) -> tuple[tuple[str, ...], list]:
    """(the note's most distinctive terms,
    [(doc_id, chunk id, bm25 score, matched chunks, match)])."""
    from kbase.search.keyword import keyword_ranked

    terms = distinctive_terms(con, note_id)
    if not terms:
        return (), []
    text = " OR ".join('"' + t + '"' for t in terms)
    ranked = keyword_ranked(con, text, limit + len(skip))
    return terms, [
        (r.doc_id, r.chunk_id, r.score, r.matched, r.match) for r in ranked if r.doc_id not in skip
    ][:limit]


def distinctive_terms(
    con: apsw.Connection, note_id: int, k: int = KEYWORD_TERMS
) -> tuple[str, ...]:
    """The words of a note that best tell it apart (tf-idf over the keyword index's chunks), in the
    keyword index's own terms: each word is run through the index's tokenizer (stemming included)
    in a scratch FTS5 table, and words sharing a stem count together."""
    from kbase.search.query import STOPWORDS
    from kbase.store.db import scratch_connection

    row = con.execute("SELECT body FROM documents WHERE id = ?", (note_id,)).fetchone()
    words = Counter(w.lower() for w in re.findall(r"\w+", row[0] if row else ""))
    words = Counter(
        {w: n for w, n in words.items() if w not in STOPWORDS and not w.isdigit() and len(w) > 1}
    )
    if not words:
        return ()
    sql = con.execute("SELECT sql FROM sqlite_schema WHERE name = 'chunks_fts'").fetchone()[0]
    m = _TOKENIZE.search(sql)
    tokenize = m.group(1).replace("''", "'") if m else "unicode61"
    scratch = scratch_connection()
    try:
        scratch.execute(
            "CREATE VIRTUAL TABLE w USING fts5(word,"
            f" tokenize = '{tokenize.replace(chr(39), chr(39) * 2)}')"
        )
        scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, instance)")
        vocab = list(words)
        scratch.executemany("INSERT INTO w (rowid, word) VALUES (?, ?)", list(enumerate(vocab)))
        stems: dict[str, list[str]] = {}
        for term, doc in scratch.execute("SELECT term, doc FROM v ORDER BY doc"):
            stems.setdefault(term, []).append(vocab[doc])
    finally:
        scratch.close()
    # Each stem is looked up by its most frequent word, which the index's tokenizer turns back
    # into it.
    tf = {
        stem: (sum(words[w] for w in ws), max(ws, key=lambda w: (words[w], w)))
        for stem, ws in stems.items()
    }
    candidates = sorted(tf.items(), key=lambda kv: -kv[1][0])[:KEYWORD_CANDIDATES]
    own = [cid for (cid,) in con.execute("SELECT id FROM chunks WHERE doc_id = ?", (note_id,))]
    total = con.execute("SELECT count(*) FROM chunks").fetchone()[0] - len(own)
    own_marks = ",".join("?" * len(own))
    scored = []
    for _stem, (count, word) in candidates:
        match = '"' + word.replace('"', '""') + '"'
        df = con.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)
        ).fetchone()[0]
        if own:
            df -= con.execute(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"
                f" AND rowid IN ({own_marks})",
                (match, *own),
            ).fetchone()[0]
        if df <= 0:
            continue  # only in this note: it cannot find another one
        idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
        scored.append(((1 + math.log(count)) * idf, word))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return tuple(w for _, w in scored[:k])
