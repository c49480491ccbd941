"""The README's quick start stays true: CI runs its test command, and the sample vault it
indexes answers its example query."""

import re

from click.testing import CliRunner

from kbase.cli.app import cli
from tests.conftest import REPO


def quick_start_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, re.S)


def test_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert commands[1] in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_sample_vault_answers_the_quick_start_query(tmp_path):
    main = quick_start_commands()[0]
    query = re.search(r'search "([^"]+)"', main).group(1)
    db = str(tmp_path / "demo.db")
    r = CliRunner().invoke(cli, ["--db", db, "index", str(REPO / "examples" / "notes")])
    assert r.exit_code == 0 and "0 skipped" in r.stdout
    r = CliRunner().invoke(cli, ["--db", db, "search", query])
    assert r.stdout.startswith("1. SQLite WAL mode  SQLite WAL mode.md:")
    # the .kbaseignore of the sample keeps drafts/ out
    r = CliRunner().invoke(cli, ["--db", db, "search", "--mode", "keyword", "Draft", "--json"])
    assert r.stdout.strip() == "[]"
