"""The model run through onnxruntime directly: the same vectors as fastembed gave, the derived
graph built once, checked and rebuilt when damaged, nothing else imported for a query."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kbase.embed import embedder
from kbase.embed import onnx_graph as model_graph

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


def cosine(a: bytes, b: list[float]) -> float:
    return sum(x * y for x, y in zip(struct.unpack("<384f", a), b))


@pytest.fixture(scope="module")
def model():
    return embedder.default_embedder()


@pytest.mark.slow
def test_vectors_are_fastembeds(model):
    texts, want = REFERENCE["texts"], REFERENCE["vectors"]
    batch = model.embed_batch(texts)  # sorted by length inside, returned in the order given
    assert min(cosine(v, w) for v, w in zip(batch, want)) >= 0.9999
    assert min(cosine(model.embed_query(t), w) for t, w in zip(texts, want)) >= 0.9999
    # the batch path and the query path agree with each other as well
    assert (
        min(cosine(a, struct.unpack("<384f", model.embed_query(t))) for a, t in zip(batch, texts))
        >= 0.9999
    )


def test_the_derived_graph_is_cached_fused_and_checksummed(tmp_path, monkeypatch):
    # a model of its own: the process's (the module's fixture, made before conftest isolates the
    # test) may have been made by another module with the user's model folder
    model = embedder.MiniLMEmbedder()
    folder = model.graph.parent
    assert folder.parent == embedder.model_cache_dir()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["source_sha256"] == embedder.MODEL_SHA256
    assert (
        manifest["attention_fused"] is True
        and manifest["probe_min_cosine"] >= model_graph.MIN_PROBE_COSINE
    )
    assert set(manifest["files"]) == {"model.onnx", "model.onnx.data"}
    monkeypatch.setattr(model_graph, "_build", lambda *a: pytest.fail("rebuilt an intact graph"))
    assert embedder.MiniLMEmbedder().graph == model.graph
    assert (
        model_graph.derived_graph(embedder.MODEL_SHA256, embedder.model_cache_dir(), verify=True)
        == model.graph
    )


def test_each_gelu_is_one_operator(model):
    import onnx

    graph = onnx.load(str(model.graph), load_external_data=False).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("BiasGelu") == 6 and "Erf" not in ops  # one per layer, nothing left over


def test_batches_run_a_core_each_give_the_same_vectors_in_the_order_given(model):
    texts = REFERENCE["texts"] * 3 + ["a longer text about write-ahead logs " * 9, "b"]
    one = embedder.MiniLMEmbedder(threads=1, batch_size=2)
    two = embedder.MiniLMEmbedder(threads=2, batch_size=2)
    assert two.embed_batch(texts) == one.embed_batch(texts)  # the same batches, bit for bit
    vecs = two.embed_batch(texts)
    assert all(cosine(v, w) >= 0.9999 for v, w in zip(vecs, REFERENCE["vectors"] * 3))


def test_a_batch_that_fails_fails_the_call():
    class Enc:
        attention_mask = [1]

    def run(part):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        embedder.run_sorted([Enc()] * 5, 1, 2, run)


def test_a_stream_of_steps_gives_each_steps_vectors_in_order(model):
    texts = REFERENCE["texts"] * 2 + ["a longer text about write-ahead logs " * 9, "b"]
    steps = [texts[:3], texts[3:4], [], texts[4:]]
    two = embedder.MiniLMEmbedder(threads=2, batch_size=2)
    streamed = list(two.embed_stream(iter(steps)))
    assert [len(s) for s in streamed] == [len(s) for s in steps]
    # bit for bit what a call a step gives: the same batches, only queued ahead
    assert [v for s in streamed for v in s] == two.embed_batch(texts)


def test_a_stream_closed_early_drops_the_steps_queued_ahead():
    import threading

    class Enc:
        attention_mask = [1]

    ran: list[int] = []
    never = threading.Event()

    def run(part):
        if len(ran) >= 4:  # past the first step: each batch takes a while
            never.wait(1)
        ran.append(len(part))
        return [_Row()] * len(part)

    stream = embedder.stream_sorted(
        iter([[1] * 4] * 50), lambda texts: [Enc()] * len(texts), 1, 2, run, ahead=3
    )
    assert next(stream) == [b"v"] * 4
    stream.close()  # three steps (12 batches) were queued: the two running end, no other starts
    assert 4 <= len(ran) <= 8


class _Row:
    def tobytes(self) -> bytes:
        return b"v"


def test_a_failing_batch_in_a_stream_fails_it():
    class Enc:
        attention_mask = [1]

    def run(part):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        list(embedder.stream_sorted(iter([["a", "b"]] * 3), lambda t: [Enc()] * len(t), 1, 2, run))


@pytest.mark.slow
def test_a_damaged_graph_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("KBASE_MODEL_CACHE", str(tmp_path / "cache"))
    graph = embedder.MiniLMEmbedder().graph
    data = graph.with_name("model.onnx.data")
    st = data.stat()
    data.chmod(0o644)
    with open(
        data, "r+b"
    ) as f:  # one flipped byte, same size, same time: only the checksum sees it
        f.seek(st.st_size // 2)
        byte = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (
        model_graph.derived_graph(embedder.MODEL_SHA256, embedder.model_cache_dir()) == graph
    )  # the quick check passes
    built = []
    real_build = model_graph._build
    monkeypatch.setattr(model_graph, "_build", lambda *a: built.append(1) or real_build(*a))
    e = embedder.MiniLMEmbedder()
    v = e.embed_batch(REFERENCE["texts"][:2])  # storing vectors: the sha256 is checked first
    assert built == [1]
    assert cosine(v[1], REFERENCE["vectors"][1]) >= 0.9999
    data.chmod(0o644)
    with open(data, "r+b") as f:  # a truncated file is caught by the quick check
        f.truncate(st.st_size - 10)
    e = embedder.MiniLMEmbedder()
    assert built == [1, 1] and cosine(e.embed_query("hello"), REFERENCE["vectors"][0]) >= 0.9999
    left = [p.name for p in (tmp_path / "cache").iterdir() if "query-tokens" not in p.name]
    assert left == [graph.parent.name]  # no leftovers (beside kbase.embed.wordpiece's tables)


@pytest.mark.slow
def test_without_onnx_the_graph_is_only_optimised(tmp_path, monkeypatch):
    monkeypatch.setenv("KBASE_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    e = embedder.MiniLMEmbedder()
    assert json.loads(e.graph.with_name("manifest.json").read_text())["attention_fused"] is False
    assert cosine(e.embed_batch(["hello", "bye"])[0], REFERENCE["vectors"][0]) >= 0.9999


def test_a_query_imports_neither_fastembed_nor_the_graph_tools(model, tmp_path):
    script = (
        "import sys\n"
        "from kbase.embed import embedder\n"
        "embedder.MiniLMEmbedder().embed_query('hello')\n"
        "print(sorted(m for m in ('fastembed', 'onnx', 'huggingface_hub') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert out.stdout.strip() == "[]"
