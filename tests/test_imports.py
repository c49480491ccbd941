"""What a command imports as it starts: `--version` neither click nor the engine, `--help` the
commands only, a keyword search no vector search nor model."""

from __future__ import annotations

import kbase


def _modules_after(*args: str, cwd=None) -> set[str]:
    """The modules loaded once ``kbase ARGS`` has run, as the console script starts it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"sys.argv = ['kbase', *{list(args)!r}]\n"
        "from kbase.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return set(out.stderr.split())


def test_version_imports_neither_click_nor_the_engine():
    loaded = _modules_after("--version")
    assert "click" not in loaded
    assert {m for m in loaded if m.startswith("kbase")} == {"kbase", "kbase.cli"}


def test_help_imports_click_and_the_commands_only():
    loaded = _modules_after("--help")
    assert {m for m in loaded if m.startswith("kbase")} == {
        "kbase",
        "kbase.cli",
        "kbase.cli.admin",
        "kbase.cli.app",
        "kbase.cli.indexing",
        "kbase.cli.notes",
        "kbase.cli.progress",
        "kbase.errors",
    }
    assert not loaded & {"json", "csv", "dataclasses", "apsw", "rich", "numpy"}


def test_a_keyword_search_imports_no_vector_search_nor_the_model(tmp_path, vault):
    kbase.open(tmp_path / "k.db").index([vault], embed=False)
    loaded = _modules_after("--db", str(tmp_path / "k.db"), "search", "-m", "keyword", "garden")
    assert "kbase.search.keyword" in loaded
    unneeded = {
        "kbase.search.hybrid",
        "kbase.search.semantic",
        "kbase.search.segment",  # ICU, for queries in scripts without spaces
        "kbase.embed.embedder",
        "numpy",
        "onnxruntime",
        "importlib.resources",  # schema.sql, to create an index
        "rapidfuzz",  # typo correction, for a word no note holds
        "json",
        "csv",
        "rich",
    }
    assert not loaded & unneeded, loaded & unneeded
