"""Levers beside kbase's fusion, measured leave-one-collection-out (issue 32 item 3):

    python -m bench.fusion_levers collect             # feedback lists, title vectors (indexes)
    python -m bench.fusion_levers loco prf title strength overlap confidence

Each lever is a grid over kbase.search.fusion.fuse's evidence (the shipped fusion is the
grid's first setting), fused offline from bench/eval.py's cached candidate lists (bench.loco
.load): for each held-out collection the setting best on the others (mean of their main
measures) is scored on it, and its margin (top-1 and MRR@10 / nDCG@10 less the best of
keyword, semantic and naive RRF k=60 on the same lists) is reported; the headline is the worst
held-out margin of each.

- ``prf``: semantic-side pseudo-relevance feedback. The words of the top ``k`` semantic
  passages (weighted by similarity x tf / length x idf, the query's own stems left out), the
  best ``m`` as an any-word FTS5 query; its bm25 per note, scaled as the keyword list's, is a
  third list weighing ``beta`` (x the share of the query the model reads); ``new``: notes in
  neither list may enter.
- ``title``: a note's title vector (its title embedded alone) as evidence beside its passages,
  weighing ``gt`` (a title vector per note would be new vectors in the index).
- ``strength``: the semantic weight scaled by how far the list's best similarity clears the
  floor, ``alpha x clip((best - floor) / width, 0, 1)``.
- ``overlap`` / ``confidence``: alpha moved by ``g`` with the two lists' agreement (the share of
  the keyword top 10 in the semantic top 10, less ``c``) or with their relative confidence (the
  spread of each list's top 5).

``collect`` keeps the feedback lists and title similarities in ../cache/eval/levers (keyed as
the lists are); the CJK and Thai collections (no query read by the English model) need none.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import re
import statistics
import sys
from collections import Counter
from dataclasses import replace

from bench import eval as ev
from bench import loco

LEVERS_DIR = ev.CACHE / "levers"
FEEDBACK_K = (3, 5, 10)
FEEDBACK_M = (5, 10, 20)
_WORD = re.compile(r"[^\W\d_]{3,}")


# --- what the levers need beyond the cached lists --------------------------------------------
def _stemmer():
    """Surface word -> the index's porter stem (a scratch FTS5 table, chunks_fts's tokenizer)."""
    from kbase.store.db import scratch_connection

    con = scratch_connection()
    con.execute(
        "CREATE VIRTUAL TABLE w USING fts5(word, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, instance)")
    memo: dict[str, str] = {}

    def stems(words: list[str]) -> dict[str, str]:
        new = [w for w in set(words) if w not in memo]
        if new:
            con.execute("DELETE FROM w")
            con.executemany("INSERT INTO w (rowid, word) VALUES (?, ?)", list(enumerate(new)))
            for term, doc in con.execute("SELECT term, doc FROM v"):
                memo[new[doc]] = term
        return {w: memo.get(w, w) for w in words}

    return stems


def feedback(con, lists: ev.Lists, stems, df: dict[str, int], total: int) -> dict:
    """{(k, m): [(doc id, bm25)]} for one query: the any-word query of the m best words of its
    top k semantic passages, run through kbase's own keyword ranking."""
    from kbase.search.keyword import _ranked_docs
    from kbase.search.query import STOPWORDS

    own = set(stems([w.casefold() for w in _WORD.findall(lists.text)]).values())
    sem = [r for r in lists.semantic if r[5]["similarity"] >= 0.3]
    out: dict = {}
    for k in FEEDBACK_K:
        weights: Counter = Counter()
        surface: dict[str, Counter] = {}
        for r in sem[:k]:
            (text,) = con.execute(
                "SELECT substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
                " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.id = ?",
                (r[1],),
            ).fetchone()
            words = [w.casefold() for w in _WORD.findall(text)]
            words = [w for w in words if w not in STOPWORDS]
            stem = stems(words)
            for w in words:
                surface.setdefault(stem[w], Counter())[w] += 1
            for t, n in Counter(stem[w] for w in words).items():
                if t not in own:
                    weights[t] += r[5]["similarity"] * n / len(words)
        scored = []
        for t, w in weights.items():
            if t not in df:
                row = con.execute("SELECT doc FROM temp.vocab WHERE term = ?", (t,)).fetchone()
                df[t] = row[0] if row else 0
            if df[t] > 1:
                scored.append((w * math.log(1 + (total - df[t] + 0.5) / (df[t] + 0.5)), t))
        scored.sort(reverse=True)
        for m in FEEDBACK_M:
            terms = [surface[t].most_common(1)[0][0] for _, t in scored[:m]]
            expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
            rows = _ranked_docs(con, expr, "1", [], 120) if terms else []
            out[(k, m)] = [(d, -b) for d, _c, b, _n, _m in rows]
    return out


def collect(scored: list[loco.Scored], model: str | None) -> None:
    """Feedback lists and title similarities for every query the model reads."""
    import numpy as np

    from kbase.search.query import parse_query

    LEVERS_DIR.mkdir(parents=True, exist_ok=True)
    for s in scored:
        coll = next(c for c in ev.collections() if c.name == s.name)
        path = LEVERS_DIR / f"{coll.material}-{ev.lists_key(coll, model)}.pickle"
        kept = pickle.loads(path.read_bytes()) if path.exists() else {}
        todo = [li for li in s.lists if li.reads and li.text not in kept]
        if not todo:
            continue
        kb = ev.open_index(coll, model, rebuild=False)
        import apsw

        con = apsw.Connection(str(kb.path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            con.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, chunks_fts, row)")
            total = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
            docs = con.execute("SELECT id, title, path FROM documents").fetchall()
            index = {d: i for i, (d, _, _) in enumerate(docs)}
            titles = [t or p.rsplit("/", 1)[-1].rsplit(".", 1)[0] for _, t, p in docs]
            vectors = kb.embedder.embed_batch(titles)
            tvec = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(docs), -1)
            stems, df = _stemmer(), {}
            for li in todo:
                q = np.frombuffer(kb.query_vector(parse_query(li.text).text), dtype=np.float32)
                cands = sorted({r[0] for r in li.keyword} | {r[0] for r in li.semantic})
                sims = tvec[[index[d] for d in cands]] @ q
                kept[li.text] = {
                    "feedback": feedback(con, li, stems, df, total),
                    "title": {d: float(x) for d, x in zip(cands, sims, strict=True)},
                }
        finally:
            con.close()
            kb.close()
        path.write_bytes(pickle.dumps(kept))
        print(f"{s.name}: {len(todo)} queries collected", file=sys.stderr)


# --- the levers ---------------------------------------------------------------------------------
def _fuse(lists: ev.Lists, params, extra=None, beta=0.0, title=None, gt=0.0) -> list[int]:
    """kbase.search.fusion.fuse with a third list ``extra`` [(doc, bm25)] weighing ``beta`` and
    title similarities weighing ``gt`` in the semantic evidence."""
    from kbase.search import fusion
    from kbase.search.keyword import TIER_SOME

    kw, sem = loco._ranked(lists.keyword), loco._ranked(lists.fused())
    if not (beta and extra) and not (gt and title):
        return [f.key for f in fusion.fuse(kw, sem, params)]
    in_kw = {r.doc_id for r in kw}
    sem = [r for r in sem if r.explain["similarity"] >= params.min_similarity or r.doc_id in in_kw]
    meaning = {r.doc_id: fusion.note_meaning(r, params) for r in sem}
    if gt and title and sem:
        meaning = {d: v + gt * title.get(d, 0.0) for d, v in meaning.items()}
    steps = {
        r.doc_id: params.step(r.explain.get("tier")) if sem else float(int(r.score) - TIER_SOME)
        for r in kw
    }
    words = fusion.spanned({r.doc_id: r.score % 1 for r in kw}, params.keyword_span)
    parts = {
        "keyword": [(r.doc_id, steps[r.doc_id] + words[r.doc_id]) for r in kw],
        "semantic": sorted(fusion.spanned(meaning, params.semantic_span).items(), key=_second),
    }
    weights = {"keyword": 1 - params.alpha, "semantic": params.alpha}
    if beta and extra and sem:
        scaled = fusion.spanned({d: b / (b + 10.0) for d, b in extra}, params.keyword_span)
        parts["extra"] = sorted(scaled.items(), key=_second)
        weights["extra"] = beta
    return [f.key for f in fusion.convex(parts, weights)]


def _second(kv: tuple) -> float:
    return -kv[1]


def lever_order(name: str, setting: dict, kept: dict):
    """The order function of one setting of one lever."""
    from kbase.search import fusion

    def order(lists: ev.Lists) -> list[int]:
        params = fusion.reading(fusion.PARAMS, lists.share)
        extra = kept.get(lists.text, {})
        if name == "prf":
            fb = extra.get("feedback", {}).get((setting["k"], setting["m"]), [])
            if not setting["new"]:  # only notes one of the two lists holds
                known = {r[0] for r in lists.keyword} | {r[0] for r in lists.fused()}
                fb = [x for x in fb if x[0] in known]
            return _fuse(lists, params, fb, setting["beta"] * min(1.0, lists.share))
        if name == "title":
            return _fuse(lists, params, title=extra.get("title"), gt=setting["gt"])
        sem = lists.fused()
        if name == "strength" and setting["width"] and sem:
            top = max(r[5]["similarity"] for r in sem)
            f = min(1.0, max(0.0, (top - params.min_similarity) / setting["width"]))
            params = replace(params, alpha=params.alpha * f)
        if name in ("overlap", "confidence") and setting["g"] and sem and lists.keyword:
            if name == "overlap":
                kw10, sem10 = {r[0] for r in lists.keyword[:10]}, {r[0] for r in sem[:10]}
                x = len(kw10 & sem10) / 10 - setting["c"]
            else:
                ranked = loco._ranked(sem)
                m = sorted((fusion.note_meaning(r, params) for r in ranked), reverse=True)
                w = sorted((r[2] % 1 for r in lists.keyword), reverse=True)
                x = (m[0] - m[min(4, len(m) - 1)]) / max(m[0], 1e-9) - (
                    w[0] - w[min(4, len(w) - 1)]
                ) / max(w[0], 1e-9)
            params = replace(params, alpha=min(0.9, max(0.1, params.alpha + setting["g"] * x)))
        return _fuse(lists, params)

    return order


GRIDS: dict[str, dict[str, tuple]] = {
    "prf": {"beta": (0.0, 0.05, 0.1, 0.2), "k": FEEDBACK_K, "m": FEEDBACK_M, "new": (True, False)},
    "title": {"gt": (0.0, 0.05, 0.1, 0.2)},
    "strength": {"width": (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)},
    "overlap": {"g": (0.0, -0.4, -0.2, 0.2, 0.4), "c": (0.3, 0.5)},
    "confidence": {"g": (0.0, -1.0, -0.5, -0.25, 0.25, 0.5, 1.0)},
}


def held_out(name: str, scored: list[loco.Scored], kept: dict[str, dict]) -> list[tuple]:
    """(collection, chosen setting, held-out top-1 and main, margins, shipped margins) each."""
    keys = list(GRIDS[name])
    cands = [dict(zip(keys, v, strict=True)) for v in itertools.product(*GRIDS[name].values())]
    table: dict[str, list[dict]] = {}
    refs: dict[str, dict] = {}
    for s in scored:
        refs[s.name] = {
            "keyword": loco.measure(s, lambda li: [r[0] for r in li.keyword]),
            "semantic": loco.measure(s, lambda li: [r[0] for r in li.semantic]),
            "naive rrf": loco.measure(s, ev.naive_rrf),
        }
        if any(li.reads for li in s.lists):
            table[s.name] = [loco.measure(s, lever_order(name, c, kept[s.name])) for c in cands]
        else:  # the keyword list alone, whatever the setting
            table[s.name] = [loco.measure(s, lever_order(name, cands[0], {}))] * len(cands)

    def margin(n: str, score: dict) -> tuple[float, float]:
        best = {k: max(r[k] for r in refs[n].values()) for k in ("top1", "main")}
        return score["top1"] - best["top1"], score["main"] - best["main"]

    best_sci = table.get("scifact")
    if best_sci:
        i = max(range(len(cands)), key=lambda i: best_sci[i]["main"])
        print(f"  (fitted on SciFact itself: {best_sci[i]['main']:.4f} at {cands[i]})")
    rows = []
    for n in table:
        others = [o for o in table if o != n]
        i = max(
            range(len(cands)), key=lambda i: statistics.mean(table[o][i]["main"] for o in others)
        )
        rows.append((n, cands[i], table[n][i], margin(n, table[n][i]), margin(n, table[n][0])))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("what", choices=("collect", "loco"))
    ap.add_argument("levers", nargs="*", help=f"of {', '.join(GRIDS)} (default: all)")
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--model", help="embedding model of the indexes (default: kbase's default)")
    args = ap.parse_args(argv)
    if unknown := [n for n in args.levers if n not in GRIDS]:
        sys.exit(f"error: no lever {', '.join(unknown)} (the levers: {', '.join(GRIDS)})")
    found = [c for c in ev.collections() if not args.only or any(map(c.name.startswith, args.only))]
    scored = [loco.load(c, c.queries, args.model) for c in found]
    if args.what == "collect":
        collect(scored, args.model)
        return 0
    kept = {}
    for c in found:
        path = LEVERS_DIR / f"{c.material}-{ev.lists_key(c, args.model)}.pickle"
        kept[c.name] = pickle.loads(path.read_bytes()) if path.exists() else {}
    for name in args.levers or list(GRIDS):
        print(f"\n{name}: held out, top-1 / main, margin (shipped margin), setting chosen")
        rows = held_out(name, scored, kept)
        first = {k: v[0] for k, v in GRIDS[name].items()}  # the shipped fusion
        for n, setting, score, m, ship in sorted(rows, key=lambda r: r[3][1]):
            if m != ship or n == "scifact" or setting != first:
                print(
                    f"  {n}: {score['top1']:.3f} / {score['main']:.4f}, {m[0]:+.3f} / {m[1]:+.4f}"
                    f" ({ship[0]:+.3f} / {ship[1]:+.4f}), {setting}"
                )
        chosen = Counter(str(r[1]) for r in rows)
        print("  chosen: " + "; ".join(f"{s} in {k} of {len(rows)}" for s, k in chosen.items()))
        worst = (min(r[3][0] for r in rows), min(r[3][1] for r in rows))
        shipped = (min(r[4][0] for r in rows), min(r[4][1] for r in rows))
        print(
            f"  worst held-out {worst[0]:+.4f} / {worst[1]:+.4f}; shipped {shipped[0]:+.4f} /"
            f" {shipped[1]:+.4f}"
        )
    return 0


if __name__ == "__main__":
    # (as bench.eval: the cached lists are pickled with bench.eval's Lists)
    from bench.fusion_levers import main as _main

    sys.exit(_main())
