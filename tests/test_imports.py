"""What a command imports as it starts: `--version` neither click nor the engine, `--help` the
commands only, a keyword search (and a re-check of an unchanged folder) no vector search, model
nor parser. tests/test_keyword_imports.py reads a keyword search's imports with -X importtime."""

from __future__ import annotations

import subprocess
import sys

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
        "kbase.cli.common",  # (stdlib only: what the quick search shares with click's)
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


def test_python_dash_m_and_light_imports(tmp_path, vault):
    """`python -m kbase` works, and keyword search does not import the heavy parts."""
    db = tmp_path / "m.db"
    subprocess.run(
        [sys.executable, "-m", "kbase", "--db", db, "index", "-q", "--no-embed", vault], check=True
    )
    code = (
        "import sys; from kbase.cli.app import cli\n"
        f"try: cli(['--db', {str(db)!r}, 'search', 'tomatoes'])\n"
        "except SystemExit: pass\n"
        "heavy = sorted(m for m in ('yaml', 'markdown_it', 'rich', 'charset_normalizer', "
        "'fastembed', 'onnxruntime', 'textual') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "Garden.md" in out
    assert out.strip().endswith("HEAVY []")
    # Nor does re-checking an unchanged folder: nothing to parse, so no parser is loaded.
    code = code.replace("'search', 'tomatoes'", f"'index', '-q', '--no-embed', {str(vault)!r}")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().endswith("HEAVY []"), out
