"""Quantised nearest-neighbour search (binary codes, int8, exact rescoring) and the stored codes,
on a real SQLite file with the real sqlite-vec; the cut-offs are scaled down so a small index
exercises the large-index paths."""

import numpy as np
import pytest

import kbase
from kbase.embed import embedder, nearest, vectors
from kbase.indexer import maintenance
from kbase.search import semantic
from kbase.store import db
from tests.conftest import bump_mtime, write

N_NOTES, CENTERS, DIM = 600, 30, 384


class ClusterModel:
    """Stands in for the model's dimension and fingerprint: these tests store vectors directly."""

    dimension = DIM
    fingerprint = embedder.MINILM_FINGERPRINT
    batch_size = 8


def _unit(m):
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype("<f4")


@pytest.fixture
def clustered(tmp_path):
    """An index of N_NOTES one-chunk notes whose vectors form CENTERS clusters (as real
    embeddings do), stored through kbase.embed.vectors in small batches; and 20 queries near
    centres."""
    rng = np.random.default_rng(3)
    write(tmp_path / "v", {f"n{i:04d}.md": f"Note number {i}.\n" for i in range(N_NOTES)})
    path = tmp_path / "c.db"
    with kbase.open(path) as kb:
        kb.index([tmp_path / "v"], embed=False)
    con = db.connect(path)
    vectors.ensure_vector_table(con, ClusterModel())
    ids = [r for (r,) in con.execute("SELECT id FROM chunks ORDER BY id")]
    centers = _unit(rng.standard_normal((CENTERS, DIM)) + 0.3)  # a common offset, like MiniLM's
    matrix = _unit(
        centers[rng.integers(0, CENTERS, len(ids))] + rng.standard_normal((len(ids), DIM)) * 0.05
    )
    for s in range(0, len(ids), 50):
        vectors._store(con, {i: v.tobytes() for i, v in zip(ids[s : s + 50], matrix[s : s + 50])})
    queries = _unit(centers[rng.integers(0, CENTERS, 20)] + rng.standard_normal((20, DIM)) * 0.06)
    yield con, np.array(ids), matrix, queries
    con.close()


def _recall(found, ids, matrix, queries, k=10):
    hits = 0
    for got, q in zip(found, queries):
        truth = set(ids[np.argsort(-(matrix @ q))[:k]].tolist())
        hits += len(truth & {c for c, _ in got[:k]})
    return hits / (k * len(queries))


def test_quantised_cache_finds_the_exact_neighbours(clustered, monkeypatch):
    con, ids, matrix, queries = clustered
    monkeypatch.setattr(nearest, "SHORTLIST", 40)  # 80 of 600 (8 x k) pass the Hamming cut
    cache = nearest.VectorCache(quantize_from=1)
    found = [cache.nearest(con, q.tobytes(), 10) for q in queries]
    assert cache.quantized
    assert _recall(found, ids, matrix, queries) >= 0.95
    exact = dict(zip(ids.tolist(), (1 - matrix @ queries[0]).tolist()))
    assert all(abs(d - exact[c]) < 1e-5 for c, d in found[0])  # the best are rescored exactly
    assert [d for _, d in found[0]] == sorted(d for _, d in found[0])
    # a filter is honoured: only allowed chunks come back
    allowed = set(ids[::3].tolist())
    assert {c for c, _ in cache.nearest(con, queries[0].tobytes(), 10, allowed)} <= allowed


def test_small_indexes_keep_the_exact_matrix(clustered):
    con, ids, matrix, queries = clustered
    cache = nearest.VectorCache()
    got = cache.nearest(con, queries[0].tobytes(), 10)
    assert not cache.quantized
    assert [c for c, _ in got] == ids[
        np.argsort(-(matrix @ queries[0]), kind="stable")[:10]
    ].tolist()


def test_one_shot_search_reads_the_codes_above_the_threshold(clustered, monkeypatch):
    con, ids, matrix, queries = clustered
    assert nearest.nearest_oneshot(con, queries[0].tobytes(), 10) is None  # below QUANTIZE_FROM
    monkeypatch.setattr(nearest, "QUANTIZE_FROM", 1)
    monkeypatch.setattr(nearest, "ONESHOT_CANDIDATES", 150)
    monkeypatch.setattr(nearest, "ONESHOT_SHORTLIST", 40)
    found = [nearest.nearest_oneshot(con, q.tobytes(), 10) for q in queries]
    assert _recall(found, ids, matrix, queries) >= 0.95
    # the CLI's semantic search takes this path, and agrees with sqlite-vec's exact k-NN
    coded = semantic.semantic_search(con, queries[1].tobytes(), limit=5)
    monkeypatch.setattr(nearest, "QUANTIZE_FROM", 10**9)
    assert [h.path for h in coded] == [
        h.path for h in semantic.semantic_search(con, queries[1].tobytes(), limit=5)
    ]


def test_codes_stay_in_step_with_inserts_and_deletes(tmp_path, monkeypatch):
    model = embedder.default_embedder()
    vault = write(
        tmp_path / "v",
        {
            "Bread.md": "# Bread\n\nKnead the dough for ten minutes.\n\n## Baking\n\n"
            "Bake at 230 degrees.\n",
            "Soup.md": "# Soup\n\nSimmer onions and lentils in stock.\n",
            "Backups.md": "# Backups\n\nKeep three copies of your data.\n",
        },
    )
    path = tmp_path / "s.db"
    kb = kbase.open(path, embedder=model)
    kb.index([vault])
    con = db.connect(path)
    assert vectors.codes_in_step(con) == (0, 0)
    assert (
        con.execute("SELECT count(*) FROM chunks_codes").fetchone()[0] == 1
    )  # small blocks merged
    # a changed note keeps its unchanged chunk's vector (copied) and embeds the new one
    p = vault / "Bread.md"
    p.write_text(
        p.read_text()
        + "\n## Watering\n\n"
        + "Water deeply twice a week in the morning. " * 30
        + "\n"
    )
    bump_mtime(p, 20)
    (vault / "Soup.md").unlink()
    report = kb.index([vault])
    assert (
        report.embedding.embedded > 0
        and con.execute(
            "SELECT count(*) FROM chunks c JOIN documents d"
            " ON d.id = c.doc_id WHERE d.path = 'Bread.md'"
        ).fetchone()[0]
        > 1
    )
    missing, stale = vectors.codes_in_step(con)
    assert missing == 0 and stale > 0  # the deleted chunks' codes wait for a rebuild
    monkeypatch.setattr(nearest, "QUANTIZE_FROM", 1)
    live = {r for (r,) in con.execute("SELECT id FROM chunks")}
    got = nearest.nearest_oneshot(con, model.embed_query("lentil soup"), 10)
    assert got and {c for c, _ in got} <= live  # a deleted chunk is never a hit
    assert not [p for p in maintenance.check(con) if p.kind == "vector_codes"]
    kb.compact()
    assert vectors.codes_in_step(con) == (0, 0)
    kb.close()
    con.close()


def test_an_index_without_codes_gets_them_from_its_vectors(clustered):
    con, _, _, queries = clustered
    with con:
        con.execute("DROP TABLE chunks_codes")  # as an older kbase left it
    assert nearest.nearest_oneshot(con, queries[0].tobytes(), 10) is None  # exact search instead
    assert maintenance.check(con) == []
    vectors.ensure_vector_table(con, ClusterModel())  # what kbase embed / kbase index do first
    assert vectors.codes_in_step(con) == (0, 0)


def test_check_finds_vectors_without_codes_and_fix_makes_them(clustered):
    con, *_ = clustered
    with con:  # vectors stored by a kbase that did not know the codes
        con.execute("DELETE FROM chunks_codes WHERE id = (SELECT min(id) FROM chunks_codes)")
    problems = maintenance.check(con)
    assert [p.kind for p in problems] == ["vector_codes"] and problems[0].count > 0
    assert "made the vectors' binary codes again" in maintenance.fix(con)
    assert vectors.codes_in_step(con) == (0, 0)
    assert maintenance.check(con) == []


def test_related_notes_work_from_the_quantised_vectors(clustered):
    con, ids, matrix, _ = clustered
    from kbase.notes import graph, related

    note = graph.find_note(con, "n0007")
    exact = related.related(con, note, limit=5, cache=nearest.VectorCache())
    quantised = related.related(con, note, limit=5, cache=nearest.VectorCache(quantize_from=1))
    assert exact.method == quantised.method == "semantic"
    # the note's cluster-mates either way (int8 estimates may swap near ties)
    assert len({h.path for h in exact.hits} & {h.path for h in quantised.hits}) >= 4


def test_codes_of_any_dimension():
    # a model whose dimension is not a multiple of 64 (the codes are padded to whole words)
    rng = np.random.default_rng(5)
    m = _unit(rng.standard_normal((300, 100)))
    codes = nearest.sign_codes(m)
    assert codes.shape == (300, 16)
    columns = nearest.code_columns(codes)
    q = m[7]
    assert nearest.hamming(columns, nearest.sign_codes(q[None, :])[0])[7] == 0
    scores = nearest.sign_scores(columns, np.arange(300), q)
    assert np.allclose(scores, np.where(m > 0, 1, -1) @ q, atol=1e-4)
