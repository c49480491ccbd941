import csv
import io
import json

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.records import HIT_FIELDS
from tests.conftest import bump_mtime, write


@pytest.fixture
def indexed(run, vault):
    r = run("index", "--no-embed", vault)
    assert r.exit_code == 0, r.output
    return vault


def test_index_prints_a_one_line_summary(run, vault):
    r = run("index", "--no-embed", vault)
    assert r.exit_code == 0
    assert r.stdout.startswith("indexed in ")
    assert r.stdout.rstrip().endswith(
        "4 new, 0 updated, 0 unchanged, 0 renamed, 0 removed, 0 skipped"
    )
    r = run("index", "--no-embed")
    assert "0 new, 0 updated, 4 unchanged" in r.stdout


def test_index_reports_skipped_files_on_stderr(run, tmp_path):
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "bin.md").write_bytes(b"\x00\x01\x02\x03" * 100)
    (tmp_path / "v" / "ok.md").write_text("# ok\n")
    r = run("index", "--no-embed", tmp_path / "v")
    assert r.exit_code == 0
    assert f"skipped {tmp_path / 'v' / 'bin.md'}: binary file" in r.stderr
    assert "1 new" in r.stdout and "1 skipped" in r.stdout


def test_index_json_report(run, vault):
    report = json.loads(run("index", "--json", "--no-embed", vault).stdout)
    assert report["new"] == 4 and report["skipped"] == [] and not report["interrupted"]


def test_search_table(run, indexed):
    r = run("search", "raised", "beds")
    assert r.exit_code == 0
    assert (
        r.stdout
        == "1. Garden  Garden.md:7  " + r.stdout.split("Garden.md:7  ")[1].split("\n")[0]
        + "\n"
        "   Garden\n   …Raised beds drain well.\n"
    )  # the snippet and line of the passage that holds both words (issue 23)


def test_search_json_jsonl_csv_have_stable_fields(run, indexed):
    hits = json.loads(run("search", "tomatoes", "--json").stdout)
    assert sorted(h["path"] for h in hits) == ["Garden.md", "tech/notes.txt"]
    hits = [h for h in hits if h["path"] == "Garden.md"]
    assert [list(h) for h in hits] == [list(HIT_FIELDS)] * len(hits)
    assert hits[0]["rank"] in (1, 2) and hits[0]["title"] == "Garden" and hits[0]["stale"] is False
    lines = run("search", "tomatoes", "--jsonl").stdout.splitlines()
    assert sorted(json.loads(x)["path"] for x in lines) == ["Garden.md", "tech/notes.txt"]
    rows = list(csv.DictReader(io.StringIO(run("search", "tomatoes", "--format", "csv").stdout)))
    assert list(rows[0]) == list(HIT_FIELDS) and {r["path"] for r in rows} == {
        "Garden.md",
        "tech/notes.txt",
    }
    assert json.loads(run("search", "zzzz", "--json").stdout) == []


def test_search_no_match_and_bad_date(run, indexed):
    r = run("search", "zzzz")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "No matches.\n"
    # a filter that keeps no note at all (a typo in it) is said to be why
    r = run("search", "tomatoes", "--tag", "startt", "--tag", "meta", "--path", "tehc")
    assert (
        r.exit_code == 0
        and r.stdout == ""
        and r.stderr
        == (
            "No matches: no note's path matches 'tehc'; no note has the tag 'startt' (or one under"
            " it).\n"
        )
    )
    assert run("search", "zzzz", "--tag", "db", "--path", "tech").stderr == "No matches.\n"
    for query in (
        "",
        ":",
        "!!!",
        "-tomatoes",
    ):  # nothing to search for: the same error for every query
        r = run("search", "--", query)
        assert (r.exit_code, r.stdout) == (1, "")
        assert r.stderr.splitlines() == [
            f"Error: no words to search for in {query!r}",
            "  hint: search for a word or a number; punctuation alone is ignored,"
            " and -word only excludes",
        ]
    assert run("search").exit_code == 2  # no QUERY at all: a usage error
    r = run("search", "x", "--since", "yesterday-ish")
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == "Error: --since 'yesterday-ish' is not a date"


def test_an_excluded_word_outside_the_quotes_is_part_of_the_query(run, indexed):
    """`kbase search garden -tomatoes` (as a user writes it, and as the sample vault once said):
    a -word that is not one of search's option spellings is an exclusion, wherever it stands;
    -n, --limit=5, -n5 and -mkeyword stay options; -nothing is 'nothing' left out."""

    def found(*args):
        r = run("search", "--json", *args)
        assert r.exit_code == 0, r.output
        return sorted(h["path"] for h in json.loads(r.stdout))

    assert found("tomatoes") == ["Garden.md", "tech/notes.txt"]
    for args in [
        ("tomatoes", "-sun"),
        ("tomatoes -sun",),
        ("--", "tomatoes", "-sun"),
        ("-sun", "tomatoes", "-n", "3"),
        ("-n3", "tomatoes", "-sun", "--limit=3"),
        ("tomatoes", "-mkeyword", "-sun"),
        ("tomatoes", "-nothing", "-sun"),  # not -n othing
    ]:
        assert found(*args) == ["tech/notes.txt"], args
    assert len(found("tomatoes", "-n1")) == 1  # -n1: an option with its value
    assert found("tomatoes", "-nothing") == ["Garden.md", "tech/notes.txt"]
    assert found("tomatoes", "-mfoo") == ["Garden.md", "tech/notes.txt"]  # no such mode: a word
    assert found("--", "-n", "1") == []  # after --, all query: the word 1, minus n
    assert run("search", "tomatoes", "--bogus").stderr.splitlines()[-1] == (
        "Error: No such option '--bogus'."  # a long option is never a word: click's own message
    )
    assert run("search", "tomatoes", "-n").stderr.splitlines()[-1] == (
        "Error: Option '-n' requires an argument."
    )
    for args, example in [
        (("tomatoes", "-n", "othing"), "tomatoes -nothing"),
        (("tomatoes", "--limit=x"), "tomatoes -word"),
    ]:
        r = run("search", *args)
        assert r.exit_code == 2 and r.stdout == ""
        assert r.stderr.splitlines()[-1].endswith(
            "is not a valid integer. -n N is how many notes to list; to leave out a word, write"
            f" -word with no space: kbase search '{example}'"
        )


def test_a_folder_with_nothing_to_index_is_said(run, tmp_path):
    """The wrong folder, or notes in a format kbase does not read by default: a warning naming
    the folder and the extensions in force, not a silent '0 new'."""
    write(tmp_path / "org", {"a.org": "* hi\n"})
    (tmp_path / "empty").mkdir()
    r = run("index", "--no-embed", tmp_path / "empty", tmp_path / "org")
    assert r.exit_code == 0 and r.stdout.startswith("indexed in ")
    assert r.stderr.splitlines() == [
        f"warning {tmp_path / folder}: no file to index there; kbase reads .md .markdown .txt"
        " .pdf .canvas files (--ext adds others)"
        for folder in ("empty", "org")
    ]
    r = run("index", "--no-embed", "--ext", ".org", tmp_path / "org")
    assert r.exit_code == 0 and "1 new" in r.stdout and r.stderr == ""
    assert run("index", "-q", tmp_path / "empty").stderr == ""


def test_status(run, indexed, db_path):
    out = run("status").stdout
    assert f"index      {db_path}" in out and "documents  4" in out
    st = json.loads(run("status", "--json").stdout)
    assert st["documents"] == 4 and st["roots"][0]["path"] == str(indexed)


def test_show_document_and_region(run, indexed):
    assert run("show", "Garden.md").stdout == (indexed / "Garden.md").read_text()
    assert (
        run("show", "garden").stdout == (indexed / "Garden.md").read_text()
    )  # like a link: no extension, any case
    assert run("show", indexed / "tech" / "SQLite.md").exit_code == 0
    out = run("show", "Garden.md:3", "-C", "1").stdout
    assert out == "  2 | \n> 3 | Tomatoes need sun and water.\n  4 | \n"
    assert run("show", "Garden.md:5-7").stdout == "5 | ## Beds\n6 | \n7 | Raised beds drain well.\n"
    assert json.loads(run("show", "Garden.md:1-1", "--json").stdout)["text"] == "# Garden"
    assert (
        run("show", "Garden.md:6-99").stdout == "6 | \n7 | Raised beds drain well.\n"
    )  # END past the end: to the end
    assert (
        run("show", "Garden.md:2", "-C", "99").stdout.splitlines()[1] == "> 2 | "
    )  # the line stays marked


@pytest.mark.parametrize(
    "target,message,hint",
    [
        ("Garden.md:999", "Garden.md has lines 1-7, not 999", "give a line from 1 to 7"),
        ("Garden:0", "Garden.md has lines 1-7, not 0", "give a line from 1 to 7"),
        ("Garden:8-9", "Garden.md has lines 1-7, not 8", "give a line from 1 to 7"),
        (
            "Garden:5-3",
            "Garden.md:5-3 is reversed; Garden.md has lines 1-7",
            "give START-END with START <= END, e.g. Garden.md:3-5",
        ),
        (
            "tech/notes:2-0",
            "tech/notes.txt:2-0 is reversed; tech/notes.txt has lines 1-3",
            "give START-END with START <= END, e.g. tech/notes.txt:1-2",
        ),
        # a line part that is no number: about the line, not a typo of the whole name
        *(
            (
                target,
                f"{target!r}: the part after ':' must be a line number, not {line!r}",
                "write PATH:LINE or PATH:START-END, e.g. Garden.md:3 or Garden.md:3-5"
                " (or Garden.md for the whole note)",
            )
            for target, line in [
                ("Garden.md:abc", "abc"),
                ("Garden.md:12x", "12x"),
                ("Garden:3-x", "3-x"),
                ("Gardn.md:abc", "abc"),  # the note a typo away is the one the hint names
            ]
        ),
        (
            "Garden.md:",
            "'Garden.md:': a line number must follow ':'",
            "write PATH:LINE or PATH:START-END, e.g. Garden.md:3 or Garden.md:3-5"
            " (or Garden.md for the whole note)",
        ),
    ],
)
def test_show_a_region_out_of_range_is_one_error_line_with_the_valid_range(
    run, indexed, target, message, hint
):
    r = run("show", target)
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.splitlines() == [f"Error: {message}", f"  hint: {hint}"]


def test_region_api_and_a_colon_in_a_file_name(kb, vault):
    r = kb.region("Garden:3", context=1)
    assert (r.first, r.last, r.line, r.lines, r.total, r.whole) == (
        2,
        4,
        3,
        ("", "Tomatoes need sun and water.", ""),
        7,
        False,
    )
    assert kb.region("Garden").whole and kb.region("Garden").lines[-1] == "Raised beds drain well."
    (vault / "Meeting 10:30.md").write_text("# Meeting\n\nAgenda.\n")
    kb.index([vault], embed=False)
    assert kb.region("Meeting 10:30").whole  # the name itself, not line 30 of 'Meeting 10'
    assert kb.region("Meeting 10:30:3", context=0).lines == ("Agenda.",)
    (vault / "Garden: notes.md").write_text("# Garden notes\n")
    kb.index([vault], embed=False)
    assert kb.region("Garden: notes").lines == ("# Garden notes",)  # a name with ': ' in it
    assert kb.region("Garden: note").lines == ("# Garden notes",)  # and a typo of it


@pytest.mark.parametrize(
    "args,message",
    [
        (("show", "nothing-like-it"), "Error: no indexed document matches 'nothing-like-it'"),
        (("index", "/definitely/not/here"), "Error: no such file or folder: /definitely/not/here"),
    ],
)
def test_errors_are_one_line_with_a_hint(run, indexed, args, message):
    r = run(*args)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == message
    assert r.stderr.splitlines()[1].startswith("  hint: ")


def test_not_a_kbase_file(tmp_path):
    f = tmp_path / "precious.txt"
    f.write_text("do not overwrite me")
    r = CliRunner().invoke(cli, ["--db", str(f), "index", str(tmp_path)])
    assert r.exit_code == 1 and "is not a SQLite database" in r.stderr
    assert f.read_text() == "do not overwrite me"


def test_no_index_yet(tmp_path):
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "none.db"), "search", "x"])
    assert r.exit_code == 1 and r.stderr.startswith(f"Error: no index at {tmp_path / 'none.db'}")


def test_env_var_selects_the_index(tmp_path, vault, monkeypatch):
    monkeypatch.setenv("KBASE_DB", str(tmp_path / "env.db"))
    assert CliRunner().invoke(cli, ["index", "--no-embed", str(vault)]).exit_code == 0
    assert (tmp_path / "env.db").exists()


def test_chunks_command(run, vault):
    out = run("chunks", vault / "tech" / "SQLite.md").stdout.splitlines()
    assert out[0].split() == ["seq", "lines", "offsets", "tokens", "kind", "heading", "path"]
    assert out[1].split()[:2] == ["0", "1-9"] and out[1].split()[-1] == "SQLite"
    data = json.loads(run("chunks", vault / "tech" / "SQLite.md", "--json").stdout)
    text = (vault / "tech" / "SQLite.md").read_text()
    assert [text[c["start"] : c["end"]] for c in data["chunks"]] == [
        c["text"] for c in data["chunks"]
    ]
    assert data["diagnostics"] == []
    small = json.loads(
        run("chunks", vault / "tech" / "SQLite.md", "--json", "--max-tokens", "8").stdout
    )
    assert len(small["chunks"]) > len(data["chunks"])
    r = run("chunks", vault / "missing.md")
    assert r.exit_code == 1 and r.stderr.startswith("Error: cannot read")


def test_index_chunk_options_are_kept(run, vault, db_path):
    run("index", "--no-embed", vault)
    r = run("index", "--no-embed", vault, "--max-tokens", "8")
    assert "4 re-chunked" in r.stdout
    assert "8 tokens max" in run("status").stdout
    assert "re-chunked" not in run("index", "--no-embed", vault).stdout


def test_show_flags_a_file_changed_on_disk(run, indexed):
    r = run("show", "Garden:3-3")
    assert (r.stdout, r.stderr) == ("3 | Tomatoes need sun and water.\n", "")
    assert json.loads(run("show", "Garden", "--json").stdout)["stale"] is False
    (indexed / "Garden.md").write_text("# Garden\n\nRewritten after indexing.\n")
    bump_mtime(indexed / "Garden.md")
    r = run("show", "Garden:3-3")
    assert r.exit_code == 0 and r.stdout == "3 | Tomatoes need sun and water.\n"  # the indexed text
    assert r.stderr == (
        "warning: Garden.md changed on disk since it was indexed; this is the indexed text"
        " (kbase index updates it)\n"
    )
    assert json.loads(run("show", "Garden", "--json").stdout)["stale"] is True
    (indexed / "Garden.md").unlink()  # a vanished file too
    assert run("show", "Garden").stderr.startswith("warning: Garden.md is missing on disk")


def test_link_context_is_cut_with_an_ellipsis_around_the_link(run, vault):
    before, after = "word " * 60, " more" * 60
    (vault / "Long.md").write_text(f"# Long\n\n   {before}see [[Garden]] here{after}\n")
    run("index", "--no-embed", vault)
    lines = run("links", "Long").stdout.splitlines()
    assert lines[0] == "   3 -> Garden.md"
    context = lines[1][5:]
    assert len(context) == 160 and context.startswith("…") and context.endswith("…")
    assert "see [[Garden]] here" in context
    (back,) = [
        line for line in run("backlinks", "Garden").stdout.splitlines() if "see [[Garden]]" in line
    ]
    assert back[5:] == context
    assert (
        run("links", "Welcome").stdout.splitlines()[1]
        == "     Start with the [[Garden]] note. #inbox"
    )  # short: whole


def test_a_failed_first_index_run_leaves_no_file(tmp_path, vault):
    db = tmp_path / "new" / "bad.db"
    for args in (["index", "/no/such/folder"], ["index", str(vault), "/no/such/folder"], ["index"]):
        r = CliRunner().invoke(cli, ["--db", str(db), *args])
        assert r.exit_code == 1 and r.stderr.startswith("Error: "), r.output
        assert not (tmp_path / "new").exists(), args  # neither the file nor its folder
    assert (
        "no such file or folder: /no/such/folder" in r.stderr or "nothing to index yet" in r.stderr
    )


def test_an_existing_index_survives_a_failed_run(run, indexed, db_path):
    before = run("sql", "SELECT count(*) AS n FROM documents", "--csv").stdout
    r = run("index", "/no/such/folder")
    assert r.exit_code == 1 and r.stderr.startswith(
        "Error: no such file or folder: /no/such/folder"
    )
    assert run("sql", "SELECT count(*) AS n FROM documents", "--csv").stdout == before == "n\n4\n"


@pytest.mark.parametrize("existing", [False, True])
def test_a_first_run_failing_midway_removes_only_the_file_it_created(
    tmp_path, vault, monkeypatch, existing
):
    import apsw

    import kbase
    from kbase.errors import DatabaseError
    from kbase.indexer import pipeline

    db = tmp_path / "i.db"
    if existing:
        with kbase.open(db) as k:
            k.index([vault], embed=False)

    def full(*args, **kwargs):
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(pipeline, "index", full)
    with pytest.raises(DatabaseError):
        kbase.open(db).index([vault], embed=False)
    if existing:
        with kbase.open(db) as k:
            assert k.status().documents == 4
    else:
        assert list(tmp_path.glob("i.db*")) == []  # nor its -wal and -shm files


def test_chunk_settings_out_of_range_are_one_line_and_change_nothing(tmp_path, vault):
    db = tmp_path / "c.db"
    run = lambda *a: CliRunner().invoke(cli, ["--db", str(db), *a])  # noqa: E731
    assert run("index", "--no-embed", "-q", str(vault)).exit_code == 0
    before = kbase.open(db).status()
    r = run("index", "--no-embed", str(vault), "--max-tokens", "8", "--min-tokens", "50")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        "Error: chunk settings: min_tokens must be between 0 and max_tokens, not 50",
        "  hint: --max-tokens is at least 4, --overlap between 0 and 0.5, --min-tokens at most"
        " --max-tokens",
    ]
    after = kbase.open(db).status()
    assert (after.documents, after.chunks, after.chunker) == (
        before.documents,
        before.chunks,
        before.chunker,
    )


def test_search_limit_is_checked_once_with_one_bound_and_one_exit_code(run, indexed, kb):
    from kbase.search.run import MAX_SEARCH_LIMIT

    assert f"1 to {MAX_SEARCH_LIMIT:,}" in run("search", "--help").stdout
    for bad, says in [(0, "at least 1"), (-3, "at least 1"), (MAX_SEARCH_LIMIT + 1, "at most")]:
        r = run("search", "water", "-n", bad)
        assert r.exit_code == 1, (bad, r.output)
        assert r.stderr.startswith("Error: limit ") and says in r.stderr  # (and a hint line)
        with pytest.raises(kbase.InputError, match=says):
            kb.search("water", limit=bad)
    assert run("search", "water", "-n", MAX_SEARCH_LIMIT).exit_code == 0
    assert run("search", "water", "-n", "x").exit_code == 2  # not a number: a usage error


def test_skips_are_told_when_keyword_search_is_ready_before_embedding(
    tmp_path, db_path, fake_model
):
    vault = write(
        tmp_path / "v",
        {"fake.pdf": "not a pdf", **{f"n{i}.md": f"# Note {i}\n\nwords {i}\n" for i in range(5)}},
    )
    events: list[str] = []

    def ready(report):
        events.append("ready: " + ", ".join(r for _, r in report.skipped))

    with kbase.open(db_path) as kb:
        report = kb.index(
            [vault],
            embed=True,
            on_keyword_ready=ready,
            embed_progress=lambda d, t: events.append("embed"),
        )
    assert events[0] == "ready: not a PDF (no %PDF- header)" and "embed" in events[1:]
    assert report.embedding is not None and fake_model.embedded >= 5

    (vault / "other.pdf").write_text("not one either", encoding="utf-8")
    (vault / "n9.md").write_text("# Note 9\n\nnew words\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["--db", str(db_path), "index", str(vault)])
    assert res.exit_code == 0, res.output
    err = res.stderr.splitlines()
    skip = next(
        i for i, line in enumerate(err) if line.startswith("skipped ") and "other.pdf" in line
    )
    ready_line = next(i for i, line in enumerate(err) if line.startswith("keyword search is ready"))
    assert skip < ready_line, err  # told before embedding starts, not after it ends
    assert sum("other.pdf" in line for line in err) == 1  # once, not again at the end
    assert "indexed in" in res.stdout


def test_sigterm_stops_kbase_index_as_ctrl_c_does(tmp_path, monkeypatch):
    """kill, timeout, docker stop: kbase index ended without a word (exit 143, the index
    consistent but nothing said so); now it says so, as for Ctrl-C, and the next run finishes."""
    import os
    import signal

    from kbase.api import KB

    v = write(tmp_path / "v", {f"n{i:03}.md": f"# Note {i}\n\nword{i} text\n" for i in range(50)})
    db = tmp_path / "i.db"
    index = KB.index

    def terminated_midway(self, *args, progress=None, **kwargs):
        def tell(done, total, path):
            if done == 20:
                os.kill(os.getpid(), signal.SIGTERM)
            if progress is not None:
                progress(done, total, path)

        return index(self, *args, progress=tell, **kwargs)

    def ends(signum, frame):  # as the default action does, but not this test's process
        raise SystemExit(143)

    monkeypatch.setattr(KB, "index", terminated_midway)
    before = signal.signal(signal.SIGTERM, ends)
    try:
        r = CliRunner().invoke(cli, ["--db", str(db), "index", "--no-embed", str(v)])
        assert signal.getsignal(signal.SIGTERM) is ends  # (the handler put back)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert r.exit_code == 143, r.output
    assert r.stdout.startswith("interrupted after")
    assert "Interrupted: the index is consistent; run kbase index again to finish." in r.stderr
    monkeypatch.setattr(KB, "index", index)
    r = CliRunner().invoke(cli, ["--db", str(db), "index", "--no-embed", str(v)])
    assert r.exit_code == 0 and ", 20 unchanged," in r.stdout and "30 new" in r.stdout


def test_the_index_summary_counts_one_warning_in_the_singular(tmp_path):
    v = write(tmp_path / "v", {"bad.md": "---\ntags: [a\n---\n# Bad\n", "ok.md": "# Ok\n"})
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "i.db"), "index", "--no-embed", str(v)])
    assert r.exit_code == 0 and r.stdout.rstrip().endswith(", 0 skipped, 1 warning"), r.stdout
