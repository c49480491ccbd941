"""Fusion levers measured leave-one-collection-out (issue 32 item 3), over bench/eval.py's
collections and cached indexes:

    python -m bench.levers lists   # each collection's candidate lists (hybrid.candidates)
    python -m bench.levers table   # keyword / semantic / naive RRF (k=60) / default
    python -m bench.levers loco    # held-out: the FusionParams grid, a learned linear model

Only collections whose index bench.eval has built are used (``lists`` builds none); only those
where the model reads the queries take part in ``loco`` (elsewhere hybrid is the keyword list).
The margin of a variant on a collection is its measure less the best of keyword, semantic and
naive RRF there (MRR@10, nDCG@10 for SciFact; top-1 likewise). For each held-out collection the
grid's pick is the FusionParams with the largest worst margin over the other collections; the
learned model (``features``: each list's normalised evidence and reciprocal rank, tier, the
similarity gap to the list's best, both lists, and the evidence times the query's length,
question words, script and the two lists' top-10 agreement) is a pairwise logistic fit on the
other collections, each weighing the same. BENCHMARKS.md section 18 has the table.
"""

from __future__ import annotations

import math
import pickle
import sys
from dataclasses import replace

import numpy as np

from bench.common import CACHE
from kbase.search import fusion
from kbase.search.fusion import PARAMS, fuse, rrf

LISTS = CACHE / "eval" / "levers"
QWORDS = ("how", "what", "why", "when", "where", "which", "who", "can", "does", "do", "is")


def make_lists(only: list[str]) -> None:
    import re

    import kbase
    from bench import eval as ev
    from kbase.embed.embedder import reader
    from kbase.search import hybrid, spell
    from kbase.search.fusion import params_for
    from kbase.search.query import bound_query, parse_query

    LISTS.mkdir(parents=True, exist_ok=True)
    for coll in ev.collections():
        out = LISTS / f"{coll.name.replace('/', '_')}.pickle"
        if (only and not any(coll.name.startswith(o) for o in only)) or out.exists():
            continue
        pattern = re.escape(coll.material) + r"-[0-9a-f]{10}\.db"
        found = [p for p in (ev.CACHE / "index").glob("*.db") if re.fullmatch(pattern, p.name)]
        kbs = [kbase.open(p) for p in found]
        embedded = [k for k in kbs if k.coverage()[0] == k.coverage()[1] > 0]
        if not embedded:
            print(f"{coll.name}: no embedded index yet", file=sys.stderr)
            continue
        kb = embedded[0]
        con, emb = kb.reader, kb.embedder
        params = params_for(emb)
        rows = []
        for q in coll.queries:
            text, _ = bound_query(q.text)
            if parse_query(text).empty:
                rows.append(((q.id, q.text, q.gains), text, [], [], False))
                continue
            with con:
                c = spell.correct(con, text)
            text = c.text if c else text
            meaning = parse_query(text).text
            can = hybrid.read_share(text, reader(emb)) >= params.min_read
            with con:
                kw, sem = hybrid.candidates(
                    con, text, emb.embed_query(meaning), 10, params=params,
                    cache=kb.vector_cache, reads=reader(emb),
                )  # fmt: skip
            rows.append(((q.id, q.text, q.gains), text, kw, sem, can))
        path_of = dict(con.execute("SELECT id, path FROM documents").fetchall())
        data = {
            "name": coll.name,
            "metric": coll.metric,
            "spaceless": coll.spaceless,
            "path_of": path_of,
            "min_similarity": params.min_similarity,
            "rows": rows,
        }
        out.write_bytes(pickle.dumps(data))
        print(coll.name, len(rows), file=sys.stderr)


def load() -> dict:
    return {
        d["name"]: d for d in (pickle.loads(f.read_bytes()) for f in sorted(LISTS.glob("*.pickle")))
    }


def ndcg10(paths: list[str], gains: dict[str, int]) -> float:
    dcg = sum(gains.get(p, 0) / math.log2(i + 2) for i, p in enumerate(paths[:10]))
    ideal = sorted(gains.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def evaluate(data: dict, variant) -> dict:
    """{collection: (top-1 per query, main measure per query)}"""
    out = {}
    for name, d in data.items():
        t1, mn = [], []
        for (_, _, gains), text, kw, sem, can in d["rows"]:
            paths = [d["path_of"][i] for i in variant(kw, sem if can else [], d, text)]
            r = next((i for i, p in enumerate(paths[:10], 1) if p in gains), None)
            t1.append(float(r == 1))
            mn.append(ndcg10(paths, gains) if d["metric"] == "ndcg10" else (1 / r if r else 0.0))
        out[name] = (np.array(t1), np.array(mn))
    return out


def v_keyword(kw, sem, d, text):
    return [r.doc_id for r in kw]


def v_semantic(kw, sem, d, text):
    return [r.doc_id for r in sem] or [r.doc_id for r in kw]


def v_rrf60(kw, sem, d, text):
    lists = {"keyword": [r.doc_id for r in kw], "semantic": [r.doc_id for r in sem]}
    return [f.key for f in rrf(lists, k=60)]


def v_params(p: fusion.FusionParams):
    def variant(kw, sem, d, text):
        pp = replace(p, min_similarity=d["min_similarity"])
        return [f.key for f in fuse(kw, sem, pp)]

    return variant


def features(kw, sem, d, text) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(doc ids, one row of features each, name steps) for one query's candidates."""
    in_kw = {r.doc_id for r in kw}
    floor = d["min_similarity"]
    sem = [r for r in sem if r.explain["similarity"] >= floor or r.doc_id in in_kw]
    p = PARAMS
    words = fusion.spanned({r.doc_id: r.score % 1 for r in kw}, p.keyword_span)
    meaning = fusion.spanned(
        {
            r.doc_id: r.score + p.second_passage * r.explain.get("second", r.explain["similarity"])
            for r in sem
        },
        p.semantic_span,
    )
    kr = {r.doc_id: i for i, r in enumerate(kw, 1)}
    sr = {r.doc_id: i for i, r in enumerate(sem, 1)}
    tier = {r.doc_id: r.explain.get("tier") for r in kw}
    sim = {r.doc_id: r.explain["similarity"] for r in sem}
    top = max(sim.values(), default=0.0)
    ids = list(dict.fromkeys([r.doc_id for r in kw] + [r.doc_id for r in sem]))
    toks = text.split()
    qlen = math.log1p(len(toks))
    question = float(bool(toks) and (toks[0].lower() in QWORDS or text.rstrip().endswith("?")))
    agree = len({r.doc_id for r in kw[:10]} & {r.doc_id for r in sem[:10]}) / 10
    spaceless, alone = float(d["spaceless"]), float(not sem)
    every = float(any(t not in (None, "some words") for t in tier.values()))
    rows = []
    for i in ids:
        ke, se = words.get(i, 0.0), meaning.get(i, 0.0)
        rows.append(
            [ke, se, 1 / (1 + kr[i]) if i in kr else 0.0, 1 / (1 + sr[i]) if i in sr else 0.0,
             float(tier.get(i) in ("all words", "all words, apart")),
             sim[i] - top if i in sim else -1.0, float(i in kr and i in sr),
             se * question, ke * question, se * qlen, ke * qlen, se * agree, ke * agree,
             se * spaceless, ke * spaceless, ke * alone, ke * every]
        )  # fmt: skip
    return ids, np.array(rows, dtype=float), np.array([p.step(tier.get(i)) for i in ids])


def train(data: dict, names: list[str], iters: int = 300, l2: float = 1e-3) -> np.ndarray:
    """Pairwise logistic regression (each answer against up to 60 other candidates of its
    query), each collection weighing the same; starts from the even convex fusion."""
    diffs, weights = [], []
    for n in names:
        d = data[n]
        rows = [r for r in d["rows"] if r[2] or r[3]]
        for (_, _, gains), text, kw, sem, can in rows:
            ids, x, _ = features(kw, sem if can else [], d, text)
            if not ids:
                continue
            g = np.array([gains.get(d["path_of"][i], 0) for i in ids])
            pos, neg = np.where(g > 0)[0], np.where(g == 0)[0][:60]
            if len(pos) and len(neg):
                pair = (x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, x.shape[1])
                diffs.append(pair)
                weights.append(np.full(len(pair), 1 / len(rows) / len(pair)))
    x, w = np.vstack(diffs), np.concatenate(weights)
    w /= w.sum()
    theta = np.zeros(x.shape[1])
    theta[:2] = 0.5
    for _ in range(iters):
        p = 1 / (1 + np.exp(np.clip(x @ theta, -30, 30)))
        theta -= 5.0 * (-(x * (w * p)[:, None]).sum(axis=0) + l2 * theta)
    return theta


def v_learned(theta: np.ndarray):
    def variant(kw, sem, d, text):
        ids, x, steps = features(kw, sem, d, text)
        s = x @ theta if ids else []
        return [ids[j] for j in sorted(range(len(ids)), key=lambda j: (-steps[j], -s[j]))]

    return variant


BASE = {"keyword": v_keyword, "semantic": v_semantic, "naive rrf": v_rrf60}


def margins(res: dict, base: dict) -> dict:
    return {
        n: tuple(t.mean() - max(base[k][n][j].mean() for k in BASE) for j, t in enumerate(v))
        for n, v in res.items()
    }


def grid() -> dict[str, fusion.FusionParams]:
    return {
        f"alpha {a} second {s} spans {k}/{m}": replace(
            PARAMS, alpha=a, second_passage=s, keyword_span=k, semantic_span=m
        )
        for a in (0.3, 0.4, 0.5, 0.6, 0.7)
        for s in (0.0, 0.3, 0.6)
        for k, m in ((50, 20), (20, 20), (50, 50), (100, 10))
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["lists"]:
        make_lists(argv[1:])
        return
    data = load()
    base = {k: evaluate(data, v) for k, v in {**BASE, "default": v_params(PARAMS)}.items()}
    if argv[:1] == ["table"]:
        print("collection | queries | " + " | ".join(base) + "  (top-1 / MRR@10 or nDCG@10)")
        for n in data:
            cells = [f"{base[k][n][0].mean():.3f} / {base[k][n][1].mean():.3f}" for k in base]
            print(f"{n} | {len(data[n]['rows'])} | " + " | ".join(cells))
        return
    data = {n: d for n, d in data.items() if any(r[4] for r in d["rows"])}
    base = {k: {n: v[n] for n in data} for k, v in base.items()}
    gm = {k: margins(evaluate(data, v_params(p)), base) for k, p in grid().items()}
    dm = margins(base["default"], base)
    print("held-out | default (top-1, main) | grid's pick | its margins | learned")
    worst = {"default": [], "grid": [], "learned": []}
    for held in data:
        rest = [n for n in data if n != held]
        pick = max(gm, key=lambda k: (min(min(gm[k][n][1], gm[k][n][0]) for n in rest),
                                      np.mean([gm[k][n][1] for n in rest])))  # fmt: skip
        lm = margins(evaluate({held: data[held]}, v_learned(train(data, rest))), base)[held]
        for label, m in (("default", dm[held]), ("grid", gm[pick][held]), ("learned", lm)):
            worst[label].append(m)
        f = lambda m: f"{m[0]:+.3f}, {m[1]:+.3f}"  # noqa: E731
        print(f"{held} | {f(dm[held])} | {pick} | {f(gm[pick][held])} | {f(lm)}")
    for label, ms in worst.items():
        print(f"worst held-out {label}: top-1 {min(m[0] for m in ms):+.3f},"
              f" main {min(m[1] for m in ms):+.3f}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
