"""Keyword mode's bigram count measured in other forms, offline, on every CJK and Thai collection
of bench/eval.py (issue 32 part 6: keyword mode against a plain bigram BM25):

    python -m bench.pair_windows                       # the default grid
    python -m bench.pair_windows --windows 1,2,4 --k1b 1.2/0.75,0.9/0.4 --weights 0.5,1

kbase.search.keyword._with_pairs mixes each note's words bm25 (below the all-words tier) with the
bm25 of its best chunk for the query's character pairs (FTS5's bm25: k1 1.2, b 0.75). Here that
pair score is replaced by a bigram BM25 of the best *window* of ``k`` adjacent chunks of the note
(a note of ``k`` chunks or fewer: the whole note), at the given k1 and b, mixed with weight
``PAIR_WEIGHT`` as kbase mixes it: every query of each collection is searched in keyword mode on
its cached index without vectors (bench.eval.open_index, built if missing: keyword mode
reads none), with the module's function replaced in place. The
window's BM25 sums each phrase's frequencies over its chunks (an FTS5 auxiliary function reads
them per matching chunk), its length is the chunks' token counts (chunks_cjk's docsize), the mean
length is that of every window of the index (starts 0 .. n-k in each note), and the idf is FTS5's
(rows that match the phrase; log((N - n + .5) / (n + .5)), at least 1e-6), or with ``--idf
note`` the same counting notes (as bigram BM25 does). Window 1 at 1.2/0.75
is kbase's own pair score (the same MRR@10 on every collection, checked).

Then leave-one-collection-out as bench.pairs does it (the setting best by the mean of the other
collections, scored on the one held out), and the worst held-out margin over bigram BM25.
Results: ``--out`` (default ../cache/eval/results/pair-windows-<date>) gets pair_windows.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
import weakref
from pathlib import Path

import apsw

from bench import eval as ev
from bench import pairs
from kbase.search import cjk, keyword

Setting = tuple[int, float, float, float, str]  # (window, k1, b, PAIR_WEIGHT, idf unit)


class _Frequencies:
    """An FTS5 auxiliary function that keeps each row's phrase frequencies (all columns: kbase's
    BM25_WEIGHTS are all 1) and returns 0."""

    def __init__(self) -> None:
        self.rows: dict[int, list[int]] = {}

    def __call__(self, api: apsw.FTS5ExtensionApi, *_args: apsw.SQLiteValue) -> float:
        self.rows[api.rowid] = [
            sum(len(offsets) for offsets in api.phrase_locations(i))
            for i in range(api.phrase_count)
        ]
        return 0.0


def _varints_total(blob: bytes) -> int:
    """The sum of an FTS5 docsize record's values (SQLite varints, one per column)."""
    total = value = 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            total, value = total + value, 0
    return total


class _Index:
    """One index's chunk sizes, row count, phrase row counts and mean window lengths."""

    def __init__(self, con: apsw.Connection) -> None:
        self.sizes: dict[int, dict[int, int]] = {}  # doc id -> seq -> tokens
        for doc_id, seq, blob in con.execute(
            f"SELECT c.doc_id, c.seq, z.sz FROM chunks AS c JOIN {cjk.TABLE}_docsize AS z"
            " ON z.id = c.id"
        ):
            self.sizes.setdefault(doc_id, {})[seq] = _varints_total(blob)
        self.rows = sum(len(s) for s in self.sizes.values())
        self.hits: dict[tuple[str, str], int] = {}
        self.means: dict[int, float] = {}
        self.freq = _Frequencies()
        con.register_fts5_function("bench_pair_frequencies", self.freq)

    def mean_window(self, k: int) -> float:
        if k not in self.means:
            lengths = []
            for sizes in self.sizes.values():
                seqs = sorted(sizes)
                for start in range(max(1, len(seqs) - k + 1)):
                    lengths.append(sum(sizes[s] for s in seqs[start : start + k]))
            self.means[k] = sum(lengths) / len(lengths)
        return self.means[k]

    def idf(self, con: apsw.Connection, phrase: str, unit: str) -> float:
        """FTS5's idf of ``phrase`` counting chunks (``unit`` "chunk") or notes ("note")."""
        hits = self.hits.get((unit, phrase))
        if hits is None:
            what = "count(*)" if unit == "chunk" else "count(DISTINCT doc_id)"
            (hits,) = con.execute(
                f"SELECT {what} FROM chunks WHERE id IN"
                f" (SELECT rowid FROM {cjk.TABLE} WHERE {cjk.TABLE} MATCH ?)",
                (phrase,),
            ).fetchone()
            self.hits[(unit, phrase)] = hits
        n = self.rows if unit == "chunk" else len(self.sizes)
        idf = math.log((n - hits + 0.5) / (hits + 0.5))
        return idf if idf > 0 else 1e-6


_indexes: weakref.WeakKeyDictionary[apsw.Connection, _Index] = weakref.WeakKeyDictionary()


def window_scores(
    con: apsw.Connection,
    doc_ids: list[int],
    match: str,
    k: int,
    k1: float,
    b: float,
    unit: str = "chunk",
) -> dict[int, float]:
    """doc id -> -BM25 of its best window of ``k`` adjacent chunks for ``match`` (an any-pair
    expression of chunks_cjk), for the notes of ``doc_ids`` with a chunk that matches; the idf
    counts chunks or (``unit`` "note") notes."""
    index = _indexes.get(con)
    if index is None:
        index = _indexes[con] = _Index(con)
    index.freq.rows = {}
    marks = ",".join("?" * len(doc_ids))
    rows = con.execute(
        f"""WITH m AS MATERIALIZED (
            SELECT rowid AS cid, bench_pair_frequencies({cjk.TABLE}) AS s FROM {cjk.TABLE}
            WHERE {cjk.TABLE} MATCH ? AND +rowid IN (
                SELECT id FROM chunks WHERE doc_id IN ({marks})))
        SELECT m.cid, c.doc_id, c.seq, m.s FROM m JOIN chunks AS c ON c.id = m.cid""",
        [match, *doc_ids],
    ).fetchall()
    idf = [index.idf(con, p, unit) for p in keyword._PHRASE.findall(match)]
    mean = index.mean_window(k)
    matched: dict[int, dict[int, list[int]]] = {}
    for cid, doc_id, seq, _ in rows:
        matched.setdefault(doc_id, {})[seq] = index.freq.rows[cid]
    out = {}
    for doc_id, by_seq in matched.items():
        sizes = index.sizes[doc_id]
        seqs = sorted(sizes)
        at = {s: i for i, s in enumerate(seqs)}
        last = max(0, len(seqs) - k)
        best = 0.0
        for start in {min(max(at[s] - j, 0), last) for s in by_seq for j in range(k)}:
            window = seqs[start : start + k]
            norm = k1 * (1 - b + b * sum(sizes[s] for s in window) / mean)
            freq = [sum(f) for f in zip(*(by_seq[s] for s in window if s in by_seq), strict=True)]
            score = sum(w * f * (k1 + 1) / (f + norm) for w, f in zip(idf, freq, strict=True) if f)
            best = max(best, score)
        out[doc_id] = -best
    return out


def mixer(k: int, k1: float, b: float, weight: float, unit: str = "chunk"):
    """A replacement for keyword._with_pairs scoring pairs by window_scores (its mix as kbase's)."""

    def with_pairs(con: apsw.Connection, found: list[tuple], pairs_match: str) -> list[tuple]:
        ids = [r[0] for tier, r in found if tier < keyword.TIER_ALL]
        if not ids:
            return found
        bag = window_scores(con, ids, pairs_match, k, k1, b, unit)
        words_best = min(r[2] for _, r in found) or -1.0
        pairs_best = min(bag.values(), default=0.0) or -1.0
        share, scale = weight / (1 + weight), words_best / pairs_best
        return [
            (tier, (r[0], r[1], (1 - share) * r[2] + share * scale * bag.get(r[0], 0.0), *r[3:]))
            if tier < keyword.TIER_ALL
            else (tier, r)
            for tier, r in found
        ]

    return with_pairs


def key(s: Setting) -> str:
    return f"w{s[0]} {s[1]:g}/{s[2]:g} x{s[3]:g}" + (" idf/note" if s[4] == "note" else "")


def measure(coll: ev.Collection, settings: list[Setting]) -> dict:
    kb = ev.open_index(coll, ev.NO_EMBED, False)  # (keyword mode reads no vectors)
    try:
        docs = dict(kb.sql("SELECT path, body FROM documents").rows)
        base = ev.Baseline(docs, bigrams=True)
        out: dict = {
            "bm25": [ev.query_scores(base.ranked(q.text), q, coll.metric) for q in coll.queries]
        }
        saved = keyword._with_pairs
        try:
            for s in settings:
                keyword._with_pairs = mixer(*s)
                t0 = time.process_time()
                out[key(s)] = per = pairs.keyword_scores(kb, coll)
                print(
                    f"  {coll.name:24} {key(s):22} {pairs._mean(per, 'main'):.4f}"
                    f"  ({time.process_time() - t0:.1f} s CPU)",
                    file=sys.stderr,
                )
        finally:
            keyword._with_pairs = saved
        return out
    finally:
        kb.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", default="1,2,4", help="chunks in a window")
    ap.add_argument("--k1b", default="1.2/0.75,0.9/0.4", help="k1/b pairs")
    ap.add_argument("--weights", default="0.5,1", help="PAIR_WEIGHT values")
    ap.add_argument("--idf", default="chunk", help="idf counts: chunk, note, chunk,note")
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    settings: list[Setting] = [
        (int(k), float(kb.split("/")[0]), float(kb.split("/")[1]), float(w), unit)
        for unit in args.idf.split(",")
        for w in args.weights.split(",")
        for kb in args.k1b.split(",")
        for k in args.windows.split(",")
    ]
    keys = [key(s) for s in settings]
    colls = [
        c
        for c in ev.collections()
        if c.spaceless and (not args.only or any(c.name.startswith(p) for p in args.only))
    ]
    if len(colls) < 2:
        raise SystemExit("bench.pair_windows: leave-one-collection-out needs two collections")
    results = {c.name: measure(c, settings) for c in colls}
    pairs.report(colls, results, keys, "mean")
    out = args.out or ev.CACHE / "results" / f"pair-windows-{datetime.date.today().isoformat()}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "pair_windows.json").write_text(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
