"""``kbase search`` run without click (kbase.cli.quick) says exactly what the click command says:
the same bytes on stdout and stderr and the same exit status, over many queries and options;
what it does not read is left to click."""

import subprocess
import sys
from pathlib import Path

import click
import pytest

from kbase.cli import common, quick
from kbase.cli.app import FORMATS, cli
from kbase.cli.notes import search

REPO = Path(__file__).parents[1]

# argv after ``--db DB``: (arguments, whether the quick way runs them)
CASES = [
    (["search", "tomatoes"], True),
    (["search", "tomatoes", "sun"], True),
    (["search", "tomatos"], True),  # corrected
    (["search", "--no-correct", "tomatos"], True),
    (["search", "tomatoes", "-sun"], True),  # an exclusion
    (["search", "-nothing", "tomatoes"], True),  # the word 'nothing' left out, not -n othing
    (["search", "-mx", "garden"], True),  # the word 'mx' left out
    (["search", "garden", "-n", "1"], True),
    (["search", "garden", "--limit", "2"], True),
    (["search", "garden", "--limit=2"], True),
    (["search", "-n", "0", "garden"], True),  # the engine's error: one line, exit 1
    (["search", "-n", "5000", "garden"], True),
    (["search", "-m", "keyword", "garden"], True),
    (["search", "--mode", "keyword", "--json", "garden"], True),
    (["search", "--mode=keyword", "garden"], True),
    (["search", "garden", "--json"], True),
    (["search", "garden", "--jsonl", "--explain"], True),
    (["search", "garden", "--csv"], True),
    (["search", "garden", "--format", "csv", "--explain"], True),
    (["search", "garden", "--json", "--format", "table"], True),  # the last one wins
    (["search", "garden", "--explain"], True),
    (["search", "tomatoes", "--path", "tech"], True),
    (["search", "tomatoes", "--path", "nowhere"], True),  # why nothing: the filter
    (["search", "tomatoes", "--exclude", "tech", "--exclude", "Garden.md"], True),
    (["search", "start", "--tag", "meta"], True),
    (["search", "start", "--tag", "nosuchtag"], True),
    (["search", "start", "--since", "2024-01-01", "--until", "2025-01-01"], True),
    (["search", "start", "--since", "yesterday-ish"], True),  # the engine's error
    (["search", "tag:#inbox"], True),
    (["search", "path:tech"], True),
    (["search", "garden OR sqlite"], True),
    (["search", '"raised beds"'], True),
    (["search", "writ*"], True),
    (["search", "zzzzqqq"], True),  # no match: on stderr
    (["search", "zzzzqqq", "--json"], True),  # no match: []
    (["search", "!!!"], True),  # nothing to search for: the engine's error
    (["search", "--", "-n", "garden"], True),
    (["search", "garden", "--"], True),
    (["search", "所有权"], True),
    (["search", "-m", "semantic", "garden"], True),  # no vectors: the engine says so
    # left to click: help, an editor, its own errors, the rare forms
    (["search", "--help"], False),
    (["search", "-h"], False),
    (["search", "garden", "--open", "1"], False),
    (["search"], False),
    (["search", "garden", "-n"], False),
    (["search", "garden", "-n", "x"], False),
    (["search", "garden", "-n5"], False),
    (["search", "-mkeyword", "garden"], False),
    (["search", "garden", "-m", "fuzzy"], False),
    (["search", "garden", "--format", "xml"], False),
    (["search", "garden", "--unknown"], False),
    (["search", "garden", "--json=1"], False),
    (["search", "garden", "--path", "-x"], False),
]


def click_run(argv: list[str]) -> int:
    try:
        cli.main(args=argv, prog_name="kbase", standalone_mode=True)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


@pytest.mark.parametrize(("args", "quick_runs"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_the_quick_way_says_what_click_says(kb, db_path, capsys, args, quick_runs):
    argv = ["--db", str(db_path), *args]
    code = quick.main(argv)
    mine = capsys.readouterr()
    assert (code is not None) == quick_runs, (code, mine)
    if code is None:
        assert mine.out == mine.err == ""  # left to click untouched
        return
    theirs_code = click_run(argv)
    theirs = capsys.readouterr()
    assert (mine.out, mine.err, code) == (theirs.out, theirs.err, theirs_code)
    assert mine.out or mine.err


def test_the_index_from_the_environment_and_errors(kb, db_path, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KBASE_DB", str(db_path))
    assert quick.main(["search", "garden"]) == 0
    assert "Garden.md" in capsys.readouterr().out
    missing = ["--db", str(tmp_path / "none.db"), "search", "garden"]
    assert quick.main(missing) == 1
    mine = capsys.readouterr()
    assert click_run(missing) == 1
    assert mine == capsys.readouterr() and mine.err.startswith("Error: ")
    monkeypatch.setenv("KBASE_DB", str(tmp_path))  # a folder: click's own message
    assert quick.main(["search", "garden"]) is None
    monkeypatch.setenv("_KBASE_COMPLETE", "bash_complete")
    assert quick.main(["--db", str(db_path), "search", "garden"]) is None


def test_it_knows_every_spelling_of_the_command():
    """An option added to the click command and not here would be read as a word of the query."""
    params = search.get_params(click.Context(search, info_name="search"))  # with --help
    spellings = {
        opt for p in params if isinstance(p, click.Option) for opt in (*p.opts, *p.secondary_opts)
    }
    assert spellings == set(quick.OPTIONS) | set(quick.CLICK_ONLY)
    assert quick.FORMATS == FORMATS
    mode = next(p for p in search.params if p.name == "mode")
    assert tuple(mode.type.choices) == quick.MODES  # type: ignore[attr-defined]
    parsed = search.make_context("search", ["garden"]).params  # what click fills in
    assert {**quick.defaults(), "query": ("garden",)} == parsed


@pytest.mark.parametrize(
    "styles",
    [{"bold": True}, {"dim": True}, {"fg": "cyan"}, {"fg": "red"}, {"fg": "yellow", "bold": True}],
)
def test_its_styles_are_clicks(styles):
    assert common.style("x ü", **styles) == click.style("x ü", **styles)


def test_the_executable_takes_the_quick_way(kb, db_path):
    """``python -m kbase search`` prints what click prints, without importing click."""
    args = ["--db", str(db_path), "search", "tomatoes", "--explain"]
    quick_run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kbase", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    click_path = subprocess.run(
        [sys.executable, "-c", "from kbase.cli.app import cli; cli(prog_name='kbase')", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert quick_run.returncode == click_path.returncode == 0
    assert quick_run.stdout == click_path.stdout and "Garden.md" in quick_run.stdout
    assert "| click" not in quick_run.stderr and "| kbase.cli.app" not in quick_run.stderr
