"""One evaluation over every labelled collection in reach (issue 32): one command, one table.

    python -m bench.eval                   # every collection, modes keyword / semantic / hybrid
    python -m bench.eval --quick           # the first QUICK queries of each collection (minutes)
    python -m bench.eval --jobs 2          # two indexes at once (one per core)
    python -m bench.eval --only xquad-zh --only scifact    # some collections (prefix match)
    python -m bench.eval --model multilingual-e5-small     # the indexes of another model
    python -m bench.eval --list            # the collections found, and their sizes
    python -m bench.eval --loco            # + leave-one-collection-out choice of the constants

Collections (each built into its own index once, cached; see CACHE below):

- ``scifact``: BEIR SciFact (../shared/data/retrieval/scifact-beir), each abstract a note; the 300
  test queries, graded qrels: nDCG@10.
- every question set in bench/questions/ and its folders (``blind/foam-docs.json``: the collection
  ``blind/foam-docs``; bench/questions.py's format): its notes are the
  folder named by ``"material"`` (relative to the repository) or else by ``"vault"`` (a folder of
  ../shared/data/vaults, or of bench/material); a new set file is picked up as it is added.
- ``ko``, ``th``: the Korean and Thai fixtures of tests/data/cjk-notes (13 questions each).
- ``typos-<vault>``: bench/questions/typos.tsv's name rows (a note's name with a typo; the note,
  or a note of the intended name, is the answer). Its word rows have no labelled note: the table
  under the main one gives, per mode, how often the misspelt query's first hit is the intended
  query's (bench/typos.py).
- ``xquad-en``, ``xquad-zh``, ``xquad-th``: XQuAD-R (../shared/data/retrieval/xquad-r), each
  paragraph a note, each question's answer the note of its paragraph.

Per collection and mode: top-1, top-3 and MRR@10 (nDCG@10 for SciFact), the main measure with a
bootstrap 95% interval (BOOTSTRAP resamples of the queries); beside them, the same measure for
naive document-level RRF (k=60) of kbase's own keyword and semantic lists (kbase.search.fusion.rrf
over keyword_ranked / semantic_ranked, FUSION_DEPTH deep), and for a plain BM25 of the same notes
(k1 0.9, b 0.4, Lucene's idf; bm25s): character bigrams for a collection in a script without
spaces (each run of kbase.search.cjk_table.RUN as its overlapping pairs, other words whole), plain
casefolded words for the others. "snippet": for sets with answer lines, of the questions whose
best answer is in the top 10, how many show the answer in its snippet (bench/questions.py's
``shows_answer``). "limit": the queries whose first three hits differ between ``limit`` 3, 10
and 50 (every query of every collection, each mode).

Indexes and material live outside the repository, in ``CACHE`` (../cache/eval; the environment
variable KBASE_BENCH_CACHE moves ../cache): ``index/<material>-<key>.db``, the key hashing the
model and (for collections in scripts without spaces) what the pair index writes for a sample
text; a reused index is brought up to date with ``kb.index`` first (kbase migrates it and, after
a chunker change, re-chunks it keeping the vectors of unchanged chunks), ``--rebuild`` starts
afresh. An index migrated by a newer kbase cannot be opened by an older one: to evaluate an older
revision (``bench.common.export_revision``), give it its own KBASE_BENCH_CACHE. Each query's raw
keyword and semantic lists are kept in ``lists/`` (keyed by the index and the source of
kbase/search/), for --loco to fuse again offline. Results: ``--out`` (default
../cache/eval/results/<date>-<revision>[-quick]) gets eval.json and eval.md, and one JSON per
collection as it is done (``--resume`` keeps them).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import pickle
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

import kbase
from bench import questions as qbench
from bench.common import CACHE as CACHE_ROOT
from bench.common import QUESTIONS, REPO, RETRIEVAL, VAULTS, git_revision
from bench.retrieval import ndcg10

CACHE = CACHE_ROOT / "eval"
FIXTURES = REPO / "tests" / "data" / "cjk-notes"
MATERIAL = REPO / "bench" / "material"
MODES = ("keyword", "semantic", "hybrid")
DEPTH = 10  # hits asked per query: top-1, top-3, MRR@10, nDCG@10
LIST_DEPTH = 100  # the raw lists' depth (hybrid fuses this deep: hybrid.FUSION_DEPTH)
LIMITS = (3, 10, 50)  # the limit-stability check: the first three hits of each must agree
NAIVE_RRF_K = 60
BM25_K1, BM25_B = 0.9, 0.4
BOOTSTRAP = 1000
QUICK = 40  # queries per collection with --quick
SEED = 32
LISTS_VERSION = 2  # what raw_lists makes: 2, the query within its bounds (bound_query)


# --- collections --------------------------------------------------------------------------------
@dataclass
class Query:
    id: str
    text: str
    gains: dict[str, int]  # answer path -> graded relevance (1 for question sets)
    best: str | None = None  # the answer whose snippet is checked (answers[0])
    line: int | None = None  # the answer line of ``best`` and its text
    answer: str | None = None


@dataclass
class Collection:
    name: str
    material: str  # the index's name: collections on the same notes share it
    folder: Path
    queries: list[Query]
    metric: str = "mrr10"  # or "ndcg10"
    spaceless: bool = False  # a script without spaces (bigram baseline, CJK key)
    about: str = ""
    prepare: Callable[[Path], None] | None = None  # writes the notes into ``folder`` first
    answers_by_name: dict[str, str] = field(default_factory=dict)  # query id -> intended name


def _spaceless(texts: Iterator[str]) -> bool:
    """Most of the texts hold a run of a script without spaces."""
    from kbase.store import cjk_table

    seen = [cjk_table.has_runs(t) for t in texts]
    return bool(seen) and sum(seen) > len(seen) / 2


def scifact() -> Collection | None:
    data = RETRIEVAL / "scifact-beir"
    if not data.is_dir():
        return None
    from bench.retrieval import load_qrels

    texts = {
        q["_id"]: q["text"]
        for q in map(json.loads, (data / "queries.jsonl").open(encoding="utf-8"))
    }
    queries = [
        Query(qid, texts[qid], {f"{d}.md": g for d, g in rel.items()})
        for qid, rel in load_qrels().items()
        if qid in texts
    ]

    def prepare(folder: Path) -> None:
        for line in (data / "corpus.jsonl").open(encoding="utf-8"):
            d = json.loads(line)
            (folder / f"{d['_id']}.md").write_text(
                f"# {d['title'].strip()}\n\n{d['text'].strip()}\n", encoding="utf-8"
            )

    return Collection(
        "scifact",
        "scifact",
        CACHE / "material" / "scifact",
        queries,
        metric="ndcg10",
        about="BEIR SciFact test: 5,183 abstracts, 300 queries",
        prepare=prepare,
    )


def question_folder(qset: dict) -> Path | None:
    """The notes a question set is about: "material" (a folder, relative to the repository),
    else "vault" (a folder of ../shared/data/vaults, or of bench/material)."""
    if qset.get("material"):
        folder = REPO / qset["material"]
        return folder if folder.is_dir() else None
    for base in (VAULTS, MATERIAL):
        if (base / qset["vault"]).is_dir():
            return base / qset["vault"]
    return None


def question_sets() -> list[Collection]:
    out = []
    for path in sorted(QUESTIONS.rglob("*.json")):
        qset = qbench.load_questions(path)
        folder = question_folder(qset)
        if folder is None:
            print(f"skipped {path.name}: its notes ({qset['vault']}) are absent", file=sys.stderr)
            continue
        qbench.check_answer_lines(qset, folder)
        queries = [
            Query(
                q["id"],
                q["question"],
                dict.fromkeys(q["answers"], 1),
                q["answers"][0],
                q.get("line"),
                q.get("answer"),
            )
            for q in qset["questions"]
        ]
        out.append(
            Collection(
                path.relative_to(QUESTIONS).with_suffix("").as_posix(),
                _material_name(folder),
                folder,
                queries,
                spaceless=_spaceless(q.text for q in queries),
                about=qset.get("about", ""),
            )
        )
    return out


def _material_name(folder: Path) -> str:
    """An index name for a folder of notes: its name, with its parent's where that is not one of
    the usual homes (two folders named alike get two indexes)."""
    if folder.parent in (VAULTS, MATERIAL, FIXTURES):
        return folder.name
    return f"{folder.parent.name}-{folder.name}"


def fixtures() -> list[Collection]:
    out = []
    for lang in ("ko", "th"):
        qfile = FIXTURES / f"{lang}.json"
        if not qfile.is_file():
            continue
        qset = json.loads(qfile.read_text(encoding="utf-8"))
        queries = [
            Query(q["id"], q["question"], dict.fromkeys(q["answers"], 1), q["answers"][0])
            for q in qset["questions"]
        ]
        out.append(
            Collection(
                lang,
                f"fixture-{lang}",
                FIXTURES / lang,
                queries,
                spaceless=True,
                about=f"tests/data/cjk-notes/{lang}: 8 notes written for the tests",
            )
        )
    return out


def typo_sets() -> list[Collection]:
    from bench.typos import load_typos

    rows = load_typos()
    out = []
    for vault in dict.fromkeys(r.vault for r in rows):
        names = [r for r in rows if r.vault == vault and r.kind == "name"]
        if not names or not (VAULTS / vault).is_dir():
            continue
        out.append(
            Collection(
                f"typos-{vault}",
                vault,
                VAULTS / vault,
                [Query(f"n{i:03d}", r.typo, {r.answer: 1}) for i, r in enumerate(names, 1)],
                about="bench/questions/typos.tsv: a note's name with one typo",
                answers_by_name={f"n{i:03d}": r.intended for i, r in enumerate(names, 1)},
            )
        )
    return out


def xquad() -> list[Collection]:
    out = []
    for lang in ("en", "zh", "th"):
        src = RETRIEVAL / "xquad-r" / f"{lang}.json"
        if not src.is_file():
            continue
        data = json.loads(src.read_text(encoding="utf-8"))
        paragraphs = [p for article in data["data"] for p in article["paragraphs"]]
        queries = [
            Query(qa["id"], qa["question"], {f"p{i:03d}.md": 1})
            for i, p in enumerate(paragraphs, 1)
            for qa in p["qas"]
        ]

        def prepare(folder: Path, paragraphs: list = paragraphs) -> None:
            for i, p in enumerate(paragraphs, 1):
                (folder / f"p{i:03d}.md").write_text(p["context"].strip() + "\n", encoding="utf-8")

        out.append(
            Collection(
                f"xquad-{lang}",
                f"xquad-{lang}",
                CACHE / "material" / f"xquad-{lang}",
                queries,
                spaceless=lang != "en",
                about=f"XQuAD-R {lang}: 240 paragraphs, 1,190 questions",
                prepare=prepare,
            )
        )
    return out


def collections() -> list[Collection]:
    """Every labelled collection in reach, in the table's order."""
    found = question_sets() + fixtures() + typo_sets() + xquad()
    return found + [c for c in [scifact()] if c]  # the largest (12,488 chunks to embed) last


def sample(queries: list[Query], n: int) -> list[Query]:
    """``n`` queries spread evenly over the collection (the same ones every run)."""
    if n >= len(queries):
        return queries
    step = len(queries) / n
    return [queries[int(i * step)] for i in range(n)]


# --- indexes ------------------------------------------------------------------------------------
# What the pair index writes (kbase.store.cjk_table.index_text) for this text: a change to it
# makes new indexes of the collections in scripts without spaces, and only of those.
_PAIR_SAMPLE = "所有权的规则 エラーを処理する 소유권의 การติดตั้งปลั๊กอิน mixed English 42"


def index_key(coll: Collection, model: str | None) -> str:
    """The cached index's key: the model and, for a collection in a script without spaces, what
    the pair index writes. Not the chunker or schema version: kbase brings an index made by an
    older one up to date itself when it is opened and indexed again (migrations; every note
    re-chunked, each chunk's vector kept when its text is unchanged: chunks.embed_hash), as it
    does for its users, so a change of the chunker costs a re-chunk, not hours of embedding.
    ``fingerprint`` records both versions in the results."""
    parts = [f"model {model or ''}"]
    if coll.spaceless:
        from kbase.store import cjk_table

        parts.append(cjk_table.index_text(_PAIR_SAMPLE))
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:10]


def fingerprint() -> dict:
    """What made the indexes: the chunker's and the schema's versions."""
    from kbase.ingest.chunk import CHUNKER_VERSION
    from kbase.store.migrations import SCHEMA_VERSION

    return {"chunker_version": CHUNKER_VERSION, "schema_version": SCHEMA_VERSION}


NO_EMBED = "none"  # as the model: an index without vectors (keyword mode and the baselines)


def open_index(coll: Collection, model: str | None, rebuild: bool) -> kbase.KB:
    """The collection's index, built (with embeddings, unless ``model`` is NO_EMBED) or brought
    up to date."""
    if coll.prepare is not None and not (coll.folder / ".complete").exists():
        coll.folder.mkdir(parents=True, exist_ok=True)
        coll.prepare(coll.folder)
        (coll.folder / ".complete").write_text("")
    db = CACHE / "index" / f"{coll.material}-{index_key(coll, model)}.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    if rebuild and coll.material not in _rebuilt:
        for f in db.parent.glob(db.name + "*"):
            f.unlink()
        _rebuilt.add(coll.material)
    fresh = not db.exists()
    kb = kbase.open(db)
    t0 = time.perf_counter()
    # The collection's folder is its index's one root. Material in the repository has another
    # path in each worktree: a second root would hold every note twice (react-docs-th: 146 for
    # 73 notes), so the old root moves to this folder (its vectors kept) or, if both are there,
    # is forgotten.
    folder = str(coll.folder.resolve())
    others = [] if fresh else [r.path for r in kb.roots() if r.path != folder]
    for old in others:
        if folder in {r.path for r in kb.roots()}:
            kb.remove_root(old)
        else:
            kb.move_root(old, folder)

    def progress(done: int, total: int) -> None:
        if done == total or done % 256 < 32:
            print(f"\r  embedding {coll.material}: {done}/{total}", end="", file=sys.stderr)

    if model == NO_EMBED:
        report = kb.index([coll.folder], embed=False)
    else:
        report = kb.index([coll.folder], embed_progress=progress, model=model)
    changed = report.new + report.updated + report.removed + (report.rechunked or 0)
    if fresh or changed:
        print(
            f"\r{'built' if fresh else 'updated'} {db.name}: {changed} notes"
            f" ({time.perf_counter() - t0:.0f} s)".ljust(70),
            file=sys.stderr,
        )
    return kb


_rebuilt: set[str] = set()


# --- measures -----------------------------------------------------------------------------------
def first_rank(paths: list[str], gains: dict[str, int]) -> int | None:
    return next((i for i, p in enumerate(paths, 1) if p in gains), None)


def query_scores(paths: list[str], q: Query, metric: str) -> dict[str, float]:
    """top-1, top-3 and the collection's main measure for one ranked list of paths."""
    r = first_rank(paths[:DEPTH], q.gains)
    main = ndcg10(paths, q.gains) if metric == "ndcg10" else (1 / r if r and r <= DEPTH else 0.0)
    return {"top1": float(r == 1), "top3": float(r is not None and r <= 3), "main": main}


def interval(values: list[float], seed: int = SEED) -> tuple[float, float]:
    """A bootstrap 95% interval of the mean of ``values`` (queries resampled with replacement)."""
    if not values:
        return (0.0, 0.0)
    a = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, len(a), size=(BOOTSTRAP, len(a)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (round(float(lo), 4), round(float(hi), 4))


def summarise(per_query: list[dict[str, float]]) -> dict:
    n = len(per_query)
    out: dict = {"n": n}
    for k in ("top1", "top3", "main"):
        out[k] = round(sum(s[k] for s in per_query) / n, 4) if n else 0.0
    out["ci"] = interval([s["main"] for s in per_query])
    return out


# --- the lists kbase makes ----------------------------------------------------------------------
@dataclass
class Lists:
    """One query's raw candidate lists, as hybrid search receives them: (doc_id, chunk_id,
    score, matched, match, explain) per document, best first; ``reads``: whether the index's
    model reads enough of the query for hybrid search to fuse the semantic list; ``share``: how
    much of it it reads (kbase.search.fusion.reading weighs the list by it)."""

    text: str  # the query as searched (after kbase's spelling correction)
    keyword: list[tuple]
    semantic: list[tuple]
    reads: bool = True
    # The semantic list hybrid search fused at 7885b08-fd2bff0 (kbase.search.hybrid.read_passages:
    # the notes whose passage the model reads); None since: ``semantic`` if ``reads``
    fused_semantic: list[tuple] | None = None
    share: float = 1.0

    def fused(self) -> list[tuple]:
        if self.fused_semantic is not None:
            return self.fused_semantic
        return self.semantic if self.reads else []


def raw_lists(kb: kbase.KB, text: str, corrected: str | None) -> Lists:
    """The lists hybrid search fuses for ``text`` (kbase.search.hybrid.candidates where it
    exists), the semantic one whether or not the model reads the query (semantic mode shows it)."""
    from kbase.embed.embedder import reader
    from kbase.search import hybrid
    from kbase.search.keyword import keyword_ranked
    from kbase.search.query import bound_query, parse_query

    # What the search itself searches: the query within its bounds (repeated terms once:
    # kbase.search.query.bound_query), corrected. The model reads that too: without the bound,
    # "... can't see the child's variables" was embedded with its second "the", and the
    # offline fusion of blind/vue-docs-en scored 0.856 against the live run's 0.860.
    searched = corrected or bound_query(text)[0]
    con = kb.reader
    vector = b""
    if kb.coverage()[0]:
        vector = kb.query_vector(parse_query(searched).text)
    if hasattr(hybrid, "read_share"):
        kw, sem = hybrid.candidates(con, searched, vector, DEPTH, cache=kb.vector_cache, reads=None)
        share = hybrid.read_share(searched, reader(kb.embedder))
        understood = bool(vector) and share >= hybrid.PARAMS.min_read
        return Lists(searched, _rows(kw), _rows(sem) if vector else [], understood, None, share)
    if hasattr(hybrid, "candidates"):  # 7327339 and before
        kw, sem = hybrid.candidates(
            con, searched, vector, DEPTH, cache=kb.vector_cache, semantic_reads=bool(vector)
        )
    else:  # before the fusion's constants became kbase.search.fusion.FusionParams
        from kbase.search.semantic import semantic_ranked

        kw = keyword_ranked(con, searched, LIST_DEPTH, fill_to=DEPTH)
        sem = semantic_ranked(con, vector, LIST_DEPTH, cache=kb.vector_cache) if vector else []
    return Lists(searched, _rows(kw), _rows(sem), bool(vector))


def _rows(ranked: list) -> list[tuple]:
    return [(r.doc_id, r.chunk_id, r.score, r.matched, r.match, r.explain) for r in ranked]


def naive_rrf(lists: Lists) -> list[int]:
    """Document-level RRF (k=60) of the two lists, weights 1: the baseline fusion must beat."""
    from kbase.search.fusion import rrf

    fused = rrf(
        {"keyword": [r[0] for r in lists.keyword], "semantic": [r[0] for r in lists.semantic]},
        k=NAIVE_RRF_K,
    )
    return [f.key for f in fused]


def lists_key(coll: Collection, model: str | None) -> str:
    """The raw lists' cache key: the index and the source of the code that makes them (the
    search; the vectors' side, kbase.embed: the k-NN, the note similarities, the model's reader;
    kbase.text: the share of a query the model reads)."""
    h = hashlib.sha1(f"{index_key(coll, model)} lists {LISTS_VERSION}".encode())
    kbase_dir = REPO / "kbase"
    sources = [*(kbase_dir / "search").glob("*.py"), *(kbase_dir / "embed").glob("*.py")]
    for f in sorted([*sources, kbase_dir / "text.py"]):
        h.update(f.relative_to(kbase_dir).as_posix().encode() + f.read_bytes())
    return h.hexdigest()[:10]


# --- the plain BM25 baseline --------------------------------------------------------------------
_WORDS = re.compile(r"(?:\w|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff])+")


def baseline_tokens(text: str, bigrams: bool) -> list[str]:
    """Casefolded words; with ``bigrams``, each run of a script without spaces (in a word) as
    its overlapping character pairs (a single character as itself)."""
    from kbase.store import cjk_table

    out: list[str] = []
    for word in _WORDS.findall(text.casefold()):
        if not bigrams or not cjk_table.has_runs(word):
            out.append(word)
            continue
        for piece in re.split(f"({cjk_table.RUN.pattern})", word):
            if cjk_table.RUN.fullmatch(piece):
                out.extend(cjk_table.pairs(piece))
            elif piece:
                out.append(piece)
    return out


class Baseline:
    """Plain BM25 (bm25s, Lucene's variant, k1 0.9, b 0.4) over whole notes."""

    def __init__(self, docs: dict[str, str], bigrams: bool) -> None:
        import bm25s

        self.paths = list(docs)
        self.bigrams = bigrams
        self.bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        self.bm25.index([baseline_tokens(t, bigrams) for t in docs.values()], show_progress=False)

    def ranked(self, text: str, k: int = DEPTH) -> list[str]:
        scores = self.bm25.get_scores(baseline_tokens(text, self.bigrams))
        top = np.argsort(-scores, kind="stable")[:k]
        return [self.paths[i] for i in top if scores[i] > 0]


def add_named_answers(kb: kbase.KB, coll: Collection, queries: list[Query]) -> None:
    """Typo rows: a note of the intended name (file name or title) is an answer too."""
    if not coll.answers_by_name:
        return
    names: dict[str, set[str]] = {}
    for p, title in kb.sql("SELECT path, title FROM documents").rows:
        for n in {PurePosixPath(p).stem.casefold(), (title or "").casefold()}:
            names.setdefault(n, set()).add(p)
    for q in queries:
        for p in names.get(coll.answers_by_name[q.id].casefold(), ()):
            q.gains.setdefault(p, 1)


# --- one collection -----------------------------------------------------------------------------
def run_collection(
    coll: Collection, queries: list[Query], model: str | None, rebuild: bool, stability: bool
) -> dict:
    kb = open_index(coll, model, rebuild)
    try:
        return _run(kb, coll, queries, model, stability)
    finally:
        kb.close()


def _run(
    kb: kbase.KB, coll: Collection, queries: list[Query], model: str | None, stability: bool
) -> dict:
    from kbase.errors import InputError

    t0, cpu0 = time.perf_counter(), time.process_time()
    docs = dict(kb.sql("SELECT path, body FROM documents").rows)
    path_of = {d: p for d, p in kb.sql("SELECT id, path FROM documents").rows}
    add_named_answers(kb, coll, queries)
    has_vectors = kb.coverage()[0] > 0
    modes = MODES if has_vectors else ("keyword",)
    cache_file = CACHE / "lists" / f"{coll.material}-{lists_key(coll, model)}.pickle"
    cached: dict[str, Lists] = {}
    if cache_file.exists():
        cached = pickle.loads(cache_file.read_bytes())
    baseline = Baseline(docs, coll.spaceless)

    scored: dict[str, list[dict]] = {m: [] for m in (*modes, "naive rrf", "bm25")}
    snippets = {m: [0, 0] for m in modes}  # shows the answer, answer note in the top 10
    unstable = {m: 0 for m in modes}
    examples: dict[str, list] = {m: [] for m in modes}
    rows = []
    for q in queries:
        row: dict = {"id": q.id, "query": q.text, "answers": list(q.gains)[:5]}
        corrected = None
        for mode in modes:
            try:
                hits = kb.search(q.text, mode=mode, limit=DEPTH)
            except InputError as e:  # a query kbase refuses (punctuation alone): no hits
                row[f"{mode}_error"] = str(e)
                hits = []
            paths = [h.path for h in hits]
            if mode == "keyword":
                corrected = getattr(hits, "corrected", None)
            scored[mode].append(query_scores(paths, q, coll.metric))
            row[mode] = paths
            if q.line is not None:
                best = next((h for h in hits if h.path == q.best), None)
                if best is not None:
                    snippets[mode][1] += 1
                    snippets[mode][0] += qbench.shows_answer(best.snippet, q.answer or "")
            if stability and hits:
                firsts = {DEPTH: paths[:3]}
                for limit in LIMITS:
                    if limit != DEPTH:
                        firsts[limit] = [
                            h.path for h in kb.search(q.text, mode=mode, limit=limit)[:3]
                        ]
                if len({tuple(v) for v in firsts.values()}) > 1:
                    unstable[mode] += 1
                    if len(examples[mode]) < 5:
                        examples[mode].append(
                            {"query": q.text, **{str(k): v for k, v in firsts.items()}}
                        )
        lists = cached.get(q.text)
        if lists is None:
            lists = cached[q.text] = raw_lists(kb, q.text, corrected)
        if has_vectors:
            fused = [path_of[d] for d in naive_rrf(lists)]
            scored["naive rrf"].append(query_scores(fused, q, coll.metric))
        scored["bm25"].append(query_scores(baseline.ranked(q.text), q, coll.metric))
        rows.append(row)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    cache_file.write_bytes(pickle.dumps(cached))
    result = {
        "collection": coll.name,
        "about": coll.about,
        "notes": len(docs),
        "queries": len(queries),
        "metric": "nDCG@10" if coll.metric == "ndcg10" else "MRR@10",
        "baseline": "bigram BM25" if coll.spaceless else "word BM25",
        "modes": {m: summarise(v) for m, v in scored.items() if v},
        "snippet": {m: {"shows": s, "of": n} for m, (s, n) in snippets.items() if n},
        "limit_unstable": unstable if stability else None,
        "limit_examples": examples if stability else None,
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "rows": rows,
    }
    return result


def typo_words(model: str | None, rebuild: bool) -> dict:
    """bench/typos.py's word rows per vault and mode: corrected, and the same first hit."""
    from bench import typos

    rows = typos.load_typos()
    out = {}
    for coll in typo_sets():
        vault = coll.material
        these = [r for r in rows if r.vault == vault and r.kind == "word"]
        if not these:
            continue
        kb = open_index(coll, model, rebuild)
        try:
            modes = ("keyword",) if model == NO_EMBED else ("keyword", "hybrid")
            out[vault] = {m: typos.run(kb, these, m, False) for m in modes}
        finally:
            kb.close()
    return out


# --- reports ------------------------------------------------------------------------------------
def table(results: list[dict]) -> str:
    """The Markdown table: one row per collection and mode."""
    lines = [
        "| collection | n | mode | top-1 | top-3 | MRR@10 / nDCG@10 (95% CI) | naive RRF"
        " | plain BM25 | snippet | limit |",
        "|---|---:|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        modes = r["modes"]
        for mode in MODES:
            if mode not in modes:
                continue
            s = modes[mode]
            main = f"{s['main']:.3f} ({s['ci'][0]:.3f}-{s['ci'][1]:.3f})"
            first = mode == MODES[0]
            rrf = f"{modes['naive rrf']['main']:.3f}" if first and "naive rrf" in modes else ""
            bm = f"{modes['bm25']['main']:.3f} ({r['baseline'][:6]})" if first else ""
            snip = r["snippet"].get(mode)
            snip_s = f"{snip['shows']}/{snip['of']}" if snip else ""
            lim = r["limit_unstable"]
            lim_s = str(lim[mode]) if lim else ""
            name = f"{r['collection']} ({r['metric']})" if first else ""
            n = str(r["queries"]) if first else ""
            lines.append(
                f"| {name} | {n} | {mode} | {s['top1']:.2f} | {s['top3']:.2f} | {main} | {rrf}"
                f" | {bm} | {snip_s} | {lim_s} |"
            )
    return "\n".join(lines)


def words_table(words: dict) -> str:
    lines = [
        "| vault | mode | misspelt words corrected | same first hit as the intended words |",
        "|---|---|---:|---:|",
    ]
    for vault, per in words.items():
        for mode, m in per.items():
            lines.append(
                f"| {vault} | {mode} | {m['words_corrected']}/{m['words']}"
                f" | {m['words_same_first']}/{m['words']} |"
            )
    return "\n".join(lines)


def _run_group(names: list[str], job: tuple) -> list[dict]:
    """Run the collections ``names`` (one index), each result kept in the results folder."""
    quick, model, rebuild, limits, done_dir, resume = job
    out = []
    for coll in [c for c in collections() if c.name in names]:
        queries = sample(coll.queries, QUICK) if quick else coll.queries
        kept = Path(done_dir) / (coll.name.replace("/", "--") + ".json")
        if resume and kept.exists():
            out.append(json.loads(kept.read_text()))
            print(f"{coll.name}: kept from an earlier run ({kept})", file=sys.stderr)
            continue
        print(f"{coll.name}: {len(queries)} queries", file=sys.stderr)
        r = run_collection(coll, queries, model, rebuild, limits)
        kept.write_text(json.dumps(r, ensure_ascii=False))
        out.append(r)
        print(
            f"  {coll.name}: {r['seconds']} s (cpu {r['cpu_seconds']} s): "
            + ", ".join(f"{m} {s['main']:.3f}" for m, s in r["modes"].items()),
            file=sys.stderr,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=f"the first {QUICK} queries of each")
    ap.add_argument("--only", action="append", help="collections whose name starts with this")
    ap.add_argument("--model", help="embedding model of the indexes (default: kbase's default)")
    ap.add_argument(
        "--no-embed",
        action="store_true",
        help="indexes without vectors: keyword mode and the BM25 baseline only (quick to build)",
    )
    ap.add_argument("--rebuild", action="store_true", help="build the indexes afresh")
    ap.add_argument("--no-limits", action="store_true", help="skip the limit-stability check")
    ap.add_argument("--list", action="store_true", help="list the collections and stop")
    ap.add_argument(
        "--jobs", type=int, default=1, help="indexes searched at once (2 on 2 cores; default 1)"
    )
    ap.add_argument(
        "--resume", action="store_true", help="keep the collections --out already holds"
    )
    ap.add_argument(
        "--loco", action="store_true", help="also leave-one-collection-out (bench.loco)"
    )
    ap.add_argument("--out", type=Path, help="folder for eval.json and eval.md")
    args = ap.parse_args(argv)
    if args.no_embed:
        args.model = NO_EMBED

    found = collections()
    if args.only:
        found = [c for c in found if any(c.name.startswith(o) for o in args.only)]
        if not found:
            sys.exit(f"error: no collection starts with {', '.join(args.only)} (see --list)")
    if args.list:
        for c in found:
            print(f"{c.name:<24}{len(c.queries):>6} queries  {c.material:<22} {c.about[:60]}")
        return 0
    started = time.perf_counter()
    revision = git_revision()
    out = args.out or CACHE / "results" / (
        f"{datetime.date.today().isoformat()}-{revision}{'-quick' if args.quick else ''}"
    )
    # Each collection's result is kept as it is done: a run stopped half way goes on with
    # --resume from the next collection.
    done_dir = out / "collections"
    done_dir.mkdir(parents=True, exist_ok=True)
    # One job per index (collections on the same notes share it, and one index takes one
    # writer): --jobs N runs N indexes at once.
    groups: dict[str, list[str]] = {}
    for coll in found:
        groups.setdefault(coll.material, []).append(coll.name)
    job = (args.quick, args.model, args.rebuild, not args.no_limits, str(done_dir), args.resume)
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as pool:
            done = list(pool.map(_run_group, groups.values(), [job] * len(groups)))
    else:
        done = [_run_group(names, job) for names in groups.values()]
    by_name = {r["collection"]: r for group in done for r in group}
    results = [by_name[c.name] for c in found]
    words = {} if args.only or args.quick else typo_words(args.model, False)  # built above
    report = {
        "revision": revision,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "model": args.model or "default",
        "index": fingerprint(),
        "quick": args.quick,
        "seconds": round(time.perf_counter() - started, 1),
        "collections": results,
        "typo_words": words,
    }
    md = (
        f"kbase {revision}, {report['date']}, model {report['model']},"
        f" {'quick: ' + str(QUICK) + ' queries per collection, ' if args.quick else ''}"
        f"{report['seconds']:.0f} s\n\n{table(results)}\n"
    )
    if words:
        md += f"\n{words_table(words)}\n"
    print(md)
    (out / "eval.json").write_text(json.dumps(report, ensure_ascii=False, indent=1))
    (out / "eval.md").write_text(md)
    print(f"written: {out}/eval.json, eval.md", file=sys.stderr)
    if args.loco:
        from bench import loco

        loco.main(["--model", args.model] if args.model else [])
    return 0


if __name__ == "__main__":
    # Run as bench.eval, not as __main__: the candidate lists it caches are pickled with their
    # class's module name, and bench.loco (its own __main__) must find Lists there.
    from bench.eval import main as _main

    sys.exit(_main())
