"""A one-shot query's vector without numpy, tokenizers or onnxruntime's Python binding (issue 36
part 2): onnxruntime's C library through ctypes (kbase.embed.capi) and kbase's own WordPiece
(kbase.embed.wordpiece) give the very vector the usual way gives, and a hybrid ``kbase search``
from the shell imports none of those libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kbase.embed import capi, embedder, wordpiece
from kbase.embed.onnx_graph import load_tokenizer
from kbase.paths import TOKENIZER_DIR
from tests.conftest import REPO, kbase_cli, shared, write

TEXTS = [
    "what is a lifetime",
    "x",
    "How do I keep three copies of my data? " * 30,  # past the 256 tokens
    "Ünïcödé ÇAFÉ naïve résumé",
    "所有权的规则是什么 and borrowing",
    "tabs\tand\nnew lines,  double  spaces; punctuation!? (brackets) [x] #tag",
]


@pytest.fixture(scope="module")
def usual():
    """The model the usual way: onnxruntime's Python session and the tokenizers library."""
    model = embedder.MiniLMEmbedder()
    model._oneshot = False
    return model


@pytest.fixture(scope="module")
def words():
    return wordpiece.QueryWordPiece(
        embedder.model_cache_dir(), TOKENIZER_DIR / "tokenizer.json", load_tokenizer
    )


@pytest.mark.slow
def test_the_c_library_gives_the_python_sessions_vectors(usual):
    alone = embedder.MiniLMEmbedder()
    for text in TEXTS:
        assert alone.embed_query(text) == usual.embed_query(text), text  # bit for bit
    assert alone._oneshot and not alone._sessions  # (it did run the C way)


def test_prepared_on_a_thread_gives_the_same(usual):
    alone = embedder.MiniLMEmbedder()
    alone.prepare_query()
    assert alone._preparing is not None
    assert alone.embed_query(TEXTS[0]) == usual.embed_query(TEXTS[0])
    assert alone._preparing is None and alone._oneshot
    # the query embedded ahead, on the thread: taken when it is the one asked, else embedded
    for guess, asked in ((TEXTS[0], TEXTS[0]), (TEXTS[0], TEXTS[3])):
        ahead = embedder.MiniLMEmbedder()
        ahead.prepare_query(guess)
        ahead._preparing.join()
        assert ahead._ahead is not None and ahead._ahead[0] == guess
        assert ahead.embed_query(asked) == usual.embed_query(asked)
        assert ahead._ahead is None


def test_a_long_lived_process_uses_the_python_session():
    model = embedder.MiniLMEmbedder()
    model.many_queries = True  # (what KB sets for the MCP server and the TUI)
    model.prepare_query()
    model.embed_query("hello")
    assert model._oneshot is None and model._preparing is None and model._sessions


def test_without_the_c_library_the_usual_way(usual, monkeypatch):
    def missing():
        raise capi.Unavailable("no C library here")

    monkeypatch.setattr(capi, "library", missing)
    model = embedder.MiniLMEmbedder()
    assert model.embed_query(TEXTS[0]) == usual.embed_query(TEXTS[0])
    assert model._oneshot is False and model._sessions


def test_a_failing_session_falls_back(usual, monkeypatch):
    class Broken(capi.Session):
        def __init__(self, graph, inputs, output):
            super().__init__(graph, inputs, "no such output")

    monkeypatch.setattr(capi, "Session", Broken)
    model = embedder.MiniLMEmbedder()
    assert model.embed_query(TEXTS[0]) == usual.embed_query(TEXTS[0])  # (Run's status: an error)
    assert model._oneshot is False


@pytest.mark.slow
def test_wordpiece_is_the_models_tokenizer(words):
    """Every paragraph of four shared vaults (English, Chinese, Japanese) and the cases above:
    the model tokenizer's ids, truncation included."""
    tok = load_tokenizer()
    texts = list(TEXTS)
    for vault in ("rust-book", "rust-book-zh", "rust-book-ja", "foam-docs"):
        for path in sorted(shared("vaults", vault).rglob("*.md"))[:15]:
            texts += [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")]
    texts = [t for t in texts if t]
    taken = [t for t in texts if words.ids(t) is not None]
    assert len(taken) >= 0.97 * len(texts)
    for t in taken:
        assert words.ids(t) == tok.encode(t).ids, t


@pytest.mark.slow
def test_wordpiece_knows_every_character_of_the_bmp(words):
    """Each character of the Basic Multilingual Plane between words, alone and doubled: the
    tokenizer's ids, or left to it (a mark NFD could reorder)."""
    tok = load_tokenizer()
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"Ab{c}cd {c}{c} x{c}" for c in chars]
    left = 0
    for text, enc in zip(texts, tok.encode_batch(texts)):
        got = words.ids(text)
        if got is None:
            left += 1
            continue
        assert got == [i for i, m in zip(enc.ids, enc.attention_mask) if m], hex(ord(text[2]))
    assert left < 600  # (the combining marks the normaliser keeps)


def test_what_wordpiece_leaves_to_the_tokenizer(words):
    assert words.ids("what is [MASK] here") is None  # a special token's text
    assert words.ids("an emoji 🙂") is None  # beyond the BMP
    assert words.ids("[not special]") is not None


@pytest.mark.slow
def test_damaged_tables_are_written_again(tmp_path):
    made = wordpiece.QueryWordPiece(tmp_path, TOKENIZER_DIR / "tokenizer.json", load_tokenizer)
    want = made.ids("Hello there, wörld")
    (made.dir / "ascii.json").write_text("{not json", encoding="utf-8")
    (made.dir / "unicode.json").write_bytes(b"")
    again = wordpiece.QueryWordPiece(tmp_path, TOKENIZER_DIR / "tokenizer.json", load_tokenizer)
    assert again.ids("Hello there, wörld") == want
    assert json.loads((made.dir / "unicode.json").read_text(encoding="utf-8"))["keys"]


@pytest.mark.slow
def test_hybrid_search_from_the_shell_imports_no_numerical_library(tmp_path, monkeypatch):
    vault = write(
        tmp_path / "vault",
        {
            "Garden.md": "# Garden\n\nTomatoes need sun and water.\n\n## Beds\n\nRaised beds.\n",
            "SQLite.md": "# SQLite\n\nWrite-ahead logging lets readers and writers work.\n",
            "Cat.md": "# Cat\n\nThe cat sleeps all day on the warm windowsill.\n",
        },
    )
    db = tmp_path / "h.db"
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", str(db), "index", "-q", str(vault)],
        check=True,
        cwd=REPO,
    )
    for query in ("a pet that naps", "durable database logs"):
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "kbase", "--db", str(db), "search"]
            + ["--json", query],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        names = {
            line.rsplit("|", 1)[1].strip()
            for line in r.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "kbase.embed.capi" in names and "kbase.search.hybrid" in names
        assert not {"numpy", "onnxruntime", "tokenizers"} & names
        # the same answer as this process gives the usual way (numpy, the Python session)
        monkeypatch.setattr(embedder.MiniLMEmbedder, "_query_alone", lambda self, text: None)
        here = kbase_cli(db, "search", "--json", query)
        assert json.loads(r.stdout) == json.loads(here.output)
