"""A keyword ``kbase search`` from the shell loads what a keyword search needs and nothing else
(issue 36 part 2): no model, no numerical library, no Markdown parser, no writer, no other face.
What a process imported is read from ``python -X importtime``, as one would measure it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write

REPO = Path(__file__).parents[1]

# Libraries a keyword search must not load (click and the commands, the model and its tools, the
# terminal UI and MCP faces, Markdown and YAML parsers, encoding detection) and kbase's own
# modules for embedding, parsing and writing.
NOT_FOR_KEYWORD = (
    "click",  # kbase.cli.quick reads a plain search without it, and the command definitions:
    "kbase.cli.app",
    "kbase.cli.notes",
    "numpy",
    "onnxruntime",
    "tokenizers",
    "fastembed",
    "onnx",
    "rich",
    "textual",
    "mcp",
    "markdown_it",
    "yaml",
    "charset_normalizer",
    "kbase.embed.embedder",
    "kbase.embed.onnx_graph",
    "kbase.embed.catalog",
    "kbase.ingest.parse",
    "kbase.ingest.chunk",
    "kbase.ingest.embed_text",
    "kbase.indexer",
    "kbase.notes.resolve",
    "kbase.search.semantic",
    "kbase.search.hybrid",
    "kbase.records.ingest",  # the records of the ingest steps and of the other calls (reports):
    "kbase.records.reports",  # their dataclasses cost ~1 ms each to define
    "kbase.records.runs",
)


def imported(*args: str) -> tuple[set[str], str]:
    """The modules ``python -m kbase ARGS`` imported, and its output."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kbase", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return names, r.stdout


def heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == m or n.startswith(m + ".") for m in NOT_FOR_KEYWORD))


@pytest.fixture
def vault(tmp_path) -> Path:
    return write(
        tmp_path / "vault",
        {
            "Garden.md": "# Garden\n\nTomatoes need sun and water.\n\n## Beds\n\nRaised beds.\n",
            "SQLite.md": "# SQLite\n\nWrite-ahead logging lets readers and writers work.\n",
        },
    )


def test_keyword_search_imports_only_what_it_needs(tmp_path, vault):
    db = str(tmp_path / "k.db")
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", db, "index", "-q", "--no-embed", str(vault)],
        check=True,
        cwd=REPO,
    )
    names, out = imported("--db", db, "search", "tomatoes")  # the default mode: keyword here
    assert "Garden.md" in out
    assert "kbase.search.keyword" in names  # (the measurement sees the modules it should)
    assert heavy(names) == []
    names, out = imported(
        "--db", db, "search", "--json", "tomatos"
    )  # corrected: a word no note has
    assert "Garden.md" in out
    assert heavy(names) == []
    # an English word no note holds: the correction reads the model's vocabulary (kbase.paths)
    names, out = imported("--db", db, "search", "--json", "bicycle")
    assert "kbase.search.spell" in names and out.strip() == "[]"
    assert heavy(names) == []


def test_keyword_mode_on_an_embedded_index_loads_no_model(tmp_path, vault):
    """An index with vectors searches in hybrid mode by default; ``-m keyword`` must not pay for
    the model, numpy or the vectors."""
    import kbase
    from kbase.embed import vectors
    from kbase.embed.embedder import MINILM_FINGERPRINT
    from kbase.store import db as store_db

    path = tmp_path / "e.db"
    kbase.open(path).index([vault], embed=False)

    class Recorded:  # the default model's fingerprint, without loading it
        fingerprint, dimension = MINILM_FINGERPRINT, 384

    con = store_db.connect(path)
    vectors.ensure_vector_table(con, Recorded())  # type: ignore[arg-type]
    with con:
        (first,) = con.execute("SELECT min(id) FROM chunks").fetchone()
        con.execute(
            "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
            (first, bytes(4 * 383) + b"\x00\x00\x80\x3f"),
        )
        con.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (first,))
    con.close()
    assert kbase.open(path).default_mode() == "hybrid"
    names, out = imported("--db", str(path), "search", "-m", "keyword", "tomatoes")
    assert "Garden.md" in out
    assert heavy(names) == []
    # (without -m keyword the search is first offered to a running kbase: kbase.handoff)
    assert "kbase.handoff" not in names


def test_a_hybrid_search_of_a_small_index_loads_no_numpy(tmp_path, vault):
    """A one-shot hybrid search embeds its query through onnxruntime's C library and ranks a
    small index's vectors in SQLite: numpy (100 ms of CPU to import, its BLAS threads) is not
    needed, the whole-note similarities of the fusion included (kbase.search.semantic)."""
    import kbase

    path = tmp_path / "h.db"
    assert kbase.open(path).index([vault]).embedding.embedded > 0  # the real model
    names, out = imported("--db", str(path), "search", "--json", "what grows in the garden")
    assert "Garden.md" in out and "kbase.search.hybrid" in names
    assert "numpy" not in names
