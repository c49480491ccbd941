"""The command line with the tools people reach for (issue 35): shell completion of note names,
the config file, `kbase open` and `search --open`, filters and --json events, messages that say
what they mean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from kbase.cli.app import cli
from tests.conftest import REPO, write

NOTES = {
    "Welcome.md": "# Welcome\n\nStart at [[SQLite WAL mode]] and [[Backups]].\n",
    "SQLite WAL mode.md": "---\naliases: [WAL]\ntags: [sqlite]\n---\n# SQLite WAL mode\n\n"
    "Readers keep reading while a writer appends.\n\nA checkpoint copies pages back.\n",
    "Backups.md": "# Backups\n\nKeep three copies. See [[Missing note]].\n",
    "projects/Sqlite tuning.md": "# Tuning\n\n#sqlite\n\nPragmas. [[Nowhere]]\n",
    "journal/2026-03-14.md": "# Journal\n\nRead about [[SQLite WAL mode]]. [[Gone]]\n",
}


@pytest.fixture
def vault(tmp_path):
    return write(tmp_path / "notes", NOTES)


@pytest.fixture
def db(tmp_path, vault):
    path = tmp_path / "kb.db"
    r = CliRunner().invoke(cli, ["--db", str(path), "index", "--no-embed", "-q", str(vault)])
    assert r.exit_code == 0, r.output
    return path


def completions(args: list[str], incomplete: str) -> list[str]:
    shell = ShellComplete(cli, {}, "kbase", "_KBASE_COMPLETE")
    return [c.value for c in shell.get_completions(args, incomplete)]


# ---- completion -----------------------------------------------------------------------------

NOTE_COMMANDS = ["show", "links", "backlinks", "related", "neighbors", "graph", "open"]


def test_every_command_that_takes_a_note_completes_its_name():
    ctx = click.Context(cli)
    commands = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    takes_note = sorted(
        name
        for name, command in commands.items()
        for p in (command.params if command else ())
        if isinstance(p, click.Argument) and p.name in ("note", "target")
    )
    assert takes_note == sorted(NOTE_COMMANDS)
    for name in takes_note:
        command = commands[name]
        assert command is not None
        arg = next(p for p in command.params if isinstance(p, click.Argument))
        assert arg._custom_shell_complete is not None, name


@pytest.mark.parametrize("command", NOTE_COMMANDS)
def test_note_names_complete_from_the_index(db, command):
    assert completions(["--db", str(db), command], "sq") == [
        "SQLite WAL mode.md",
        "projects/Sqlite tuning.md",  # its file name starts with it
    ]
    assert completions(["--db", str(db), command], "journal/") == ["journal/2026-03-14.md"]
    assert completions(["--db", str(db), command], "Welcome.md:") == []  # PATH:LINE


def test_completion_without_an_index_offers_nothing(tmp_path):
    assert completions(["--db", str(tmp_path / "none.db"), "show"], "W") == []
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    assert completions(["--db", str(tmp_path / "junk.db"), "show"], "W") == []


def test_bash_completion_end_to_end(db):
    """What bash runs at each Tab (click's protocol): the program itself, in completion mode."""
    env = dict(
        os.environ,
        _KBASE_COMPLETE="bash_complete",
        COMP_WORDS=f"kbase --db {db} backlinks Back",
        COMP_CWORD="4",
        PYTHONPATH=str(REPO),
    )
    out = subprocess.run(
        [sys.executable, "-m", "kbase"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.split("\n")[:2] == ["plain,Backups.md", ""]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_inserts_a_name_with_spaces_as_one_argument(tmp_path, db):
    """README's bash line, then a Tab after `kbase show sq`, in a real bash: each completion is
    one word when the shell reads the command line ('SQLite WAL mode.md' was three)."""
    program = tmp_path / "bin" / "kbase"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m kbase "$@"\n')
    program.chmod(0o755)
    script = (
        'eval "$(_KBASE_COMPLETE=bash_source kbase)"\n'
        "COMP_WORDS=(kbase show sq); COMP_CWORD=2; _kbase_completion kbase\n"
        'for word in "${COMPREPLY[@]}"; do eval "set -- $word"; echo "$#:$1"; done\n'
    )
    env = dict(
        os.environ,
        PATH=f"{program.parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(REPO),
        KBASE_DB=str(db),
    )
    out = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.splitlines() == ["1:SQLite WAL mode.md", "1:projects/Sqlite tuning.md"], (
        out.stderr
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_as_the_readme_says(shell):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"_KBASE_COMPLETE={shell}_source kbase" in readme
    env = dict(os.environ, _KBASE_COMPLETE=f"{shell}_source", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-m", "kbase"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "_KBASE_COMPLETE" in out.stdout


# ---- kbase open, search --open --------------------------------------------------------------


@pytest.fixture
def editor(tmp_path):
    """An editor that writes the arguments it was started with to a file (a real process)."""
    log = tmp_path / "editor.log"
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, json\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(3 if 'Backups' in sys.argv[-1] else 0)\n"
    )

    def calls() -> list[list[str]]:
        import json

        return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    return f"{sys.executable} {script}", calls


def run_with(db, env: dict, *args: str):
    base = {"VISUAL": None, "EDITOR": None}
    return CliRunner().invoke(cli, ["--db", str(db), *args], env={**base, **env})


def test_open_starts_the_editor_at_the_line(db, vault, editor):
    command, calls = editor
    wal = str(vault / "SQLite WAL mode.md")
    assert run_with(db, {"EDITOR": command}, "open", "SQLite WAL mode.md:7").exit_code == 0
    assert run_with(db, {"EDITOR": command}, "open", "WAL").exit_code == 0  # an alias: no line
    # $VISUAL first, as in the TUI
    r = run_with(db, {"VISUAL": command, "EDITOR": "false"}, "open", "Welcome")
    assert r.exit_code == 0
    assert calls() == [["+7", wal], [wal], [str(vault / "Welcome.md")]]


def test_open_exits_with_the_editors_status(db, editor):
    command, calls = editor
    assert run_with(db, {"EDITOR": command}, "open", "Backups").exit_code == 3


def test_search_open_n_opens_that_hit_at_its_line(db, vault, editor):
    command, calls = editor
    hits = run_with(db, {}, "search", "--json", "checkpoint copies")
    first = __import__("json").loads(hits.stdout)[0]
    r = run_with(db, {"EDITOR": command}, "search", "--open", "1", "checkpoint copies")
    assert r.exit_code == 0 and r.stdout == ""
    assert calls() == [[f"+{first['line']}", first["abspath"]]]
    r = run_with(db, {"EDITOR": command}, "search", "--open", "9", "checkpoint copies")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: --open 9: the search found 2 hits\n")


def test_no_editor_is_one_clear_line(db):
    r = run_with(db, {}, "open", "Welcome.md:3")
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("Error: no editor to open ") and lines[0].endswith(
        "Welcome.md:3: $VISUAL and $EDITOR are not set"
    )
    assert "export EDITOR=" in lines[1] and len(lines) == 2
    r = run_with(db, {"EDITOR": "/no/such/editor"}, "open", "Welcome")
    assert r.exit_code == 1 and "cannot run the editor '/no/such/editor'" in r.stderr
    # a command the shell could not read either: one line naming the variable (a traceback)
    r = run_with(db, {"EDITOR": 'code "--wait'}, "open", "Welcome")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        "Error: $EDITOR 'code \"--wait' is not a command: no closing quotation",
        "  hint: quote as in the shell, e.g. export EDITOR='code --wait'",
    ]


# ---- orphans and unresolved take the note filters; --json events ----------------------------


def test_orphans_and_unresolved_take_path_exclude_and_tag(db):
    def listed(*args: str) -> list[str]:
        import json

        r = run_with(db, {}, *args, "--json")
        assert r.exit_code == 0, r.output
        return [x.get("source_path") or x["path"] for x in json.loads(r.stdout)]

    assert listed("orphans") == ["Welcome.md", "journal/2026-03-14.md", "projects/Sqlite tuning.md"]
    assert listed("orphans", "--path", "journal") == ["journal/2026-03-14.md"]
    assert listed("orphans", "--exclude", "journal", "--exclude", "Welcome.md") == [
        "projects/Sqlite tuning.md"
    ]
    assert listed("orphans", "--tag", "sqlite") == ["projects/Sqlite tuning.md"]
    every = listed("unresolved")
    assert sorted(every) == ["Backups.md", "journal/2026-03-14.md", "projects/Sqlite tuning.md"]
    assert listed("unresolved", "--path", "projects/*.md") == ["projects/Sqlite tuning.md"]
    assert listed("unresolved", "--exclude", "projects", "--exclude", "journal") == ["Backups.md"]
    assert listed("unresolved", "--tag", "sqlite") == ["projects/Sqlite tuning.md"]
    assert listed("unresolved", "--anchors", "--path", "journal") == []


@pytest.mark.slow
def test_embed_json_is_one_event_a_line(db):
    import json

    r = run_with(db, {}, "embed", "--json")
    assert r.exit_code == 0, r.output
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["event"] for e in events][0] == "start" and events[-1]["event"] == "done"
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"]
    assert events[-1]["embedded"] == progress[-1]["total"] > 0 and events[-1]["remaining"] == 0
    assert all(e["time"][:4].isdigit() and "T" in e["time"] for e in events)


@pytest.mark.slow
def test_watch_json_events(db, vault):
    """kbase watch --json in its own process: watching, then a changed event for a new note,
    then stopped on Ctrl-C (SIGINT)."""
    import json
    import select
    import signal
    import time

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbase", "--db", str(db), "watch", "--no-embed", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    events: list[dict] = []

    def until(kind: str, seconds: float = 60) -> dict:
        deadline = time.monotonic() + seconds
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                events.append(json.loads(line))
                if events[-1]["event"] == kind:
                    return events[-1]
        raise AssertionError(f"no {kind} event in {seconds} s: {events}")

    try:
        assert until("watching")["embed"] is False
        time.sleep(1)  # the watcher is set up once the catch-up run is done
        (vault / "New idea.md").write_text("# New idea\n\nLinks to [[Welcome]].\n")
        changed = until("changed")
        assert {"kind": "new", "path": "New idea.md"} in changed["changes"]
        proc.send_signal(signal.SIGINT)
        until("stopped")
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- messages that said what they did not mean ----------------------------------------------


def test_repeated_function_words_are_no_news(db):
    r = run_with(db, {}, "search", "what is the difference between the copies and a checkpoint")
    assert r.exit_code == 0 and "repeated" not in r.stderr
    r = run_with(db, {}, "search", "checkpoint copies checkpoint")
    assert "note: query 1 repeated term counted once" in r.stderr
    from kbase.search.query import bound_query

    assert bound_query("the " * 3000) == ("the", "query 2,999 repeated terms counted once")


def test_a_nul_byte_is_no_bad_front_matter(tmp_path):
    """NUL padding after the text (an interrupted sync) is what decoding repaired: a diagnostic
    of kind 'decode', not a front matter warning (kbase check, frontmatter_warnings); an index
    that kept it as one migrates (schema 14)."""
    import json

    import kbase
    from kbase.store import db as store_db
    from kbase.store import migrations

    vault = write(
        tmp_path / "v",
        {"a.md": b"---\ntags: [x]\n---\n# A\n\ntext\n\x00\x00\x00", "b.md": "---\n: [\n---\nb\n"},
    )
    k = kbase.open(tmp_path / "kb.db")
    report = k.index([vault], embed=False)
    assert any("NUL bytes after the text" in w for _, w in report.warnings)
    rows = k.reader.execute("SELECT kind, detail FROM diagnostics ORDER BY kind").fetchall()
    assert [r[0] for r in rows] == ["decode", "frontmatter"] and "NUL" in rows[0][1]
    k.close()
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "kb.db"), "check", "--json"])
    assert "NUL" not in r.stdout and "malformed front matter" in r.stdout
    assert json.loads(r.stdout)  # still one JSON document
    con = store_db.connect(tmp_path / "kb.db")
    with con:  # as schema 13 left it
        con.execute("UPDATE diagnostics SET kind = 'frontmatter'")
        con.execute(migrations.MIGRATIONS[14])  # type: ignore[arg-type]
    kinds = con.execute("SELECT kind FROM diagnostics ORDER BY kind").fetchall()
    con.close()
    assert kinds == [("decode",), ("frontmatter",)]


def test_limit_help_says_what_the_command_takes(db):
    from kbase.search.run import MAX_SEARCH_LIMIT

    help_text = " ".join(run_with(db, {}, "search", "--help").stdout.split())
    assert f"(1 to {MAX_SEARCH_LIMIT:,})" in help_text
    assert run_with(db, {}, "search", "-n", str(MAX_SEARCH_LIMIT), "checkpoint").exit_code == 0
    r = run_with(db, {}, "search", "-n", str(MAX_SEARCH_LIMIT + 1), "checkpoint")
    assert r.exit_code == 1 and r.stderr.count("\n") <= 2


def test_a_hybrid_hit_past_the_scaling_shows_what_found_it():
    from kbase.cli.render import score_text
    from kbase.records import Hit

    def hit(score, explain):
        return Hit(1, "a.md", "/n/a.md", "A", score, 1, 3, "", "text", explain=explain)

    fused = {"keyword": {"rank": 57, "contribution": 0.0}, "semantic": {"rank": 31}}
    assert score_text(hit(0.0, fused)) == "kw #57 sem #31"
    assert score_text(hit(0.0, {"keyword": {"rank": 8}})) == "kw #8"
    assert score_text(hit(0.42, fused)) == "0.42"
    assert score_text(hit(0.0, {"tier": "all", "bm25": 1.2})) == "0.00"  # keyword mode's own


@pytest.mark.slow
def test_the_test_run_says_once_why_it_skips(tmp_path):
    """Without the shared material, its tests skip with one reason, said once with the count."""
    env = dict(os.environ, KBASE_SHARED_DATA=str(tmp_path / "absent"), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_cjk.py", "-k", "book", "-q", "-ra"]
        + ["-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:]
    said = [line for line in out.stdout.splitlines() if "needs the shared test material" in line]
    assert len(said) == 1 and said[0].lstrip("- ").split(" tests skipped: ")[0].isdigit()
    assert "skipped, no shared material" in out.stdout.splitlines()[-1]


# ---- the config files -----------------------------------------------------------------------


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    home = tmp_path / "config"
    (home / "kbase").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("KBASE_CONFIG", raising=False)
    return home / "kbase" / "config.toml"


def kbase_cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.mark.parametrize("command", ["index", "embed"])
def test_an_unknown_model_in_the_config_file_names_the_file(tmp_path, vault, config_home, command):
    """'Error: unknown embedding model 'nope'' did not say where the name came from."""
    config_home.write_text('model = "nope"\n')
    db_path = str(tmp_path / "m.db")
    args = [str(vault)] if command == "index" else []
    if command == "embed":
        assert kbase_cli("--db", db_path, "index", "--no-embed", "--model", "all-MiniLM-L6-v2",
                         "-q", str(vault)).exit_code == 0  # fmt: skip
    r = kbase_cli("--db", db_path, command, *args)
    assert r.exit_code == 1
    first = r.stderr.splitlines()[0]
    assert str(config_home) in first and "unknown embedding model 'nope'" in first, r.stderr


def test_flags_beat_the_environment_beat_the_config_file(tmp_path, vault, config_home):
    import json

    config_home.write_text('index = "from-config.db"\n')
    assert kbase_cli("index", "--no-embed", "-q", str(vault)).exit_code == 0
    assert (config_home.parent / "from-config.db").exists()  # relative to the config's folder

    def shown(*args: str, env: dict | None = None) -> dict:
        r = kbase_cli(*args, "config", "--json", str(vault), env=env)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["index"]

    assert shown() == {
        "value": str(config_home.parent / "from-config.db"),
        "from": str(config_home),
    }
    env_db = str(tmp_path / "env.db")
    assert shown(env={"KBASE_DB": env_db}) == {"value": env_db, "from": "KBASE_DB"}
    flag_db = str(tmp_path / "flag.db")
    assert shown("--db", flag_db, env={"KBASE_DB": env_db}) == {"value": flag_db, "from": "--db"}
    r = kbase_cli("config", str(vault))
    assert r.exit_code == 0 and r.stdout.startswith(f"config file  {config_home}  (found)")


def test_a_vault_file_and_the_config_choose_what_index_reads(tmp_path, vault, config_home):
    import json

    config_home.write_text('exclude = ["journal/"]\nextensions = [".md", ".txt"]\n')
    (vault / ".kbase.toml").write_text('extensions = ["md"]\nexclude = ["projects/"]\n')
    (vault / "notes.txt").write_text("plain text\n")
    db = tmp_path / "v.db"

    def paths() -> list[str]:
        r = kbase_cli("--db", str(db), "sql", "--json", "SELECT path FROM notes ORDER BY path")
        return [row["path"] for row in json.loads(r.stdout)]

    assert kbase_cli("--db", str(db), "index", "--no-embed", "-q", str(vault)).exit_code == 0
    assert paths() == ["Backups.md", "SQLite WAL mode.md", "Welcome.md"]  # .md only; excludes add
    # --ext beats the vault's file, which beats the user's
    r = kbase_cli("--db", str(db), "index", "--no-embed", "-q", "--ext", ".txt", str(vault))
    assert r.exit_code == 0 and paths() == ["notes.txt"]
    shown = json.loads(kbase_cli("config", "--json", str(vault)).stdout)
    assert shown["extensions"] == {"value": ".md", "from": str(vault / ".kbase.toml")}
    assert shown["exclude"]["value"] == "journal/ projects/"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("colour = 3\n", "unknown key 'colour'"),
        ("extensions = 3\n", "extensions must be a list of strings"),
        ("extensions = []\n", "extensions is empty"),
        ("index = [1]\n", "index must be a non-empty string"),
        ("model = \n", "is not valid TOML"),
        ('exclude = ["drafts/", "!"]\n', "exclude pattern '!' is not a gitignore pattern"),
    ],
)
def test_a_bad_config_is_one_line_naming_file_key_and_fix(vault, config_home, text, needle):
    config_home.write_text(text)
    r = kbase_cli("index", "--no-embed", str(vault))
    assert r.exit_code == 1
    first, hint = r.stderr.splitlines()[:2]
    assert first.startswith(f"Error: config {config_home}") and needle in first
    assert hint.startswith("  hint: ") and len(r.stderr.splitlines()) == 2
    (vault / ".kbase.toml").write_text(text)  # a vault's file: the same, nothing indexed
    config_home.unlink()
    r = kbase_cli("--db", str(vault.parent / "x.db"), "index", "--no-embed", str(vault))
    assert r.exit_code == 1 and str(vault / ".kbase.toml") in r.stderr.splitlines()[0]
    assert not (vault.parent / "x.db").exists()


def test_help_shows_the_default_the_config_file_sets(config_home):
    """`kbase index --help` gives the extensions (and `index`/`embed` the model) in force: the
    config file's, saying so, else kbase's own; a bad config file does not stop --help."""
    from kbase.cli.app import BUILTIN_EXTENSIONS
    from kbase.ingest.discover import DEFAULT_EXTENSIONS

    assert BUILTIN_EXTENSIONS == " ".join(DEFAULT_EXTENSIONS)

    def help_of(command: str) -> str:
        r = CliRunner().invoke(cli, [command, "--help"], terminal_width=1000)
        assert r.exit_code == 0, r.output
        return r.stdout

    ext = "File extension to index (repeatable; a vault's .kbase.toml beats the default)."
    assert f"{ext} Default: {BUILTIN_EXTENSIONS}.\n" in help_of("index")
    config_home.write_text('extensions = ["md", ".txt"]\nmodel = "multilingual-e5-small"\n')
    assert (
        f"{ext} Default: .md .txt (from {config_home}; without it: {BUILTIN_EXTENSIONS}).\n"
        in help_of("index")
    )
    for command in ("index", "embed"):
        assert (
            f"Default: multilingual-e5-small (from {config_home}; without it: the index's model,"
            " all-MiniLM-L6-v2 for a new index).\n" in help_of(command)
        )
    config_home.write_text("colour = 3\n")
    assert (
        f"{ext} Default: {BUILTIN_EXTENSIONS} (the config file {config_home} cannot be read:"
        " kbase config says why).\n" in help_of("index")
    )
    assert kbase_cli("index", "--no-embed").stderr.startswith(f"Error: config {config_home}")
