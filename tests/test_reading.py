"""KB.read (the MCP read tool): regions with line numbers and metadata; exact-path lookup for
kbase://note/ resources; find_document's suffix rule."""

import json
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbase
from kbase.errors import InputError
from kbase.notes.reading import MAX_LINES
from kbase.notes.resolve import _stem as _without_suffix
from tests.conftest import write

SQLITE_LINE_3 = "Write-ahead logging lets readers and writers work at once."


def test_read_regions_and_metadata(kb):
    r = kb.read("Welcome")
    assert (r.path, r.title, r.first_line, r.total_lines, r.truncated) == (
        "Welcome.md",
        "Welcome",  # the file name, as Obsidian shows it (not the front matter title)
        1,
        8,
        False,
    )
    assert set(r.tags) >= {"start", "meta", "inbox"} and r.date == "2024-05-01" and not r.stale
    r = kb.read("tech/SQLite.md", 3, 3)
    assert r.lines == (SQLITE_LINE_3,)
    assert r.numbered() == "3 | Write-ahead logging lets readers and writers work at once."
    with pytest.raises(InputError, match="has 8 lines, not 9"):
        kb.read("Welcome", 9)
    with pytest.raises(InputError, match="no lines 5-2"):
        kb.read("Welcome", 5, 2)
    # a hit's place (PATH:LINE) with a range asked: that note, the range asked (it said "did
    # you mean", taking 'tech/SQLite.md:1' for a name)
    r = kb.read("tech/SQLite.md:1", 3, 3)
    assert (r.path, r.first_line, r.lines) == ("tech/SQLite.md", 3, (SQLITE_LINE_3,))


def test_a_long_note_is_cut_and_says_so(tmp_path):
    vault = write(tmp_path / "v", {"long.md": "".join(f"l{i}\n" for i in range(1, 1001))})
    k = kbase.open(tmp_path / "i.db")
    k.index([vault], embed=False)
    r = k.read("long")
    assert r.truncated and r.last_line == MAX_LINES and r.lines[-1] == f"l{MAX_LINES}"
    r = k.read("long", 990)
    assert not r.truncated and (r.first_line, r.last_line) == (990, 1000)


def test_document_at_is_exact(kb):
    assert kb.document_at("tech/SQLite.md").title == "SQLite"
    with pytest.raises(InputError, match="no indexed note at 'SQLite.md'"):
        kb.document_at("SQLite.md")  # no suffix matching for resource URIs


def test_a_file_root_does_not_break_name_matching(tmp_path):
    vault = write(tmp_path / "v", {"a/Note.md": "# Note\n", "single.md": "# Single\n"})
    k = kbase.open(tmp_path / "i.db")
    k.index([vault / "a", vault / "single.md"], embed=False)  # a file root: its path is ''
    assert k.document("Note").title == "Note"


@given(
    st.lists(st.sampled_from(["a", "b", ".", "x.y", "md", ".."]), min_size=1, max_size=4).map(
        "/".join
    )
)
def test_without_suffix_is_pathlibs_rule(path):
    if str(PurePosixPath(path)) != path or PurePosixPath(path).name in ("", ".."):
        return  # stored paths are normalised
    assert _without_suffix(path) == PurePosixPath(path).with_suffix("").as_posix()


SETTINGS = (
    "# Settings\n\nIntro.\n\n## Editor\n\nFont and size.\n\n### Spellcheck\n\n"
    "Spellcheck looks at every word.\nIt knows 40 languages. ^langs\n\n"
    "- first item\n- second item ^item\n\n## Sync\n\nSync settings.\n"
)


@pytest.fixture
def settings(run, tmp_path):
    v = tmp_path / "settings"
    v.mkdir()
    (v / "Settings.md").write_text(SETTINGS)
    (v / "Other.md").write_text("# Other\n\nSee [[Settings#Spellcheck|spell]].\n")
    run("index", "--no-embed", v)
    return v


@pytest.mark.parametrize(
    "name",
    ["Settings#Spellcheck", "[[Settings#Spellcheck|spell]]", "[[Settings#Editor#Spellcheck]]"],
)
def test_show_opens_at_a_heading(run, settings, name):
    r = run("show", name)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == ">  9 | ### Spellcheck"  # the heading's line, marked
    assert lines[-1].endswith("- second item ^item")  # its section, to the next heading
    assert not any("Sync" in line or "Intro" in line for line in lines)


def test_show_opens_a_block_and_a_section_of_a_higher_level(run, settings):
    r = run("show", "Settings#^langs")
    assert r.stdout.splitlines() == [
        "> 11 | Spellcheck looks at every word.",
        "  12 | It knows 40 languages. ^langs",
    ]
    assert run("show", "[[Settings#^item]]").stdout.splitlines() == ["> 15 | - second item ^item"]
    editor = run("show", "Settings#editor", "--json")
    got = json.loads(editor.stdout)
    assert (got["first_line"], got["last_line"]) == (5, 15)  # Editor holds Spellcheck


def test_a_missing_heading_is_one_line_naming_the_headings(run, settings):
    r = run("show", "Settings#Spelling")
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        "Error: Settings.md has no heading 'Spelling'",
        "  hint: its headings: Settings, Editor, Spellcheck, Sync",
    ]


def test_read_and_the_tui_location_open_at_the_heading(settings, db_path):
    k = kbase.open(db_path)
    text = k.read("[[Settings#Spellcheck|spell]]")  # what the MCP read tool calls
    assert (text.first_line, text.last_line) == (9, 15) and text.lines[0] == "### Spellcheck"
    assert k.read("Settings#Spellcheck", 1, 2).lines == ("# Settings", "")  # a range wins
    assert k.document("Settings#^langs").path == "Settings.md"
    assert k.region("Other").whole  # a plain name is the whole note still


def test_the_mcp_read_tool_opens_at_the_heading(settings, db_path):
    from kbase.mcp import tools

    reply = tools.read(kbase.open(db_path), "[[Settings#Spellcheck|spell]]")
    data = reply.data()
    assert (data["first_line"], data["last_line"]) == (9, 15)
    assert "### Spellcheck" in reply.text and "Sync settings" not in reply.text


def test_links_of_a_name_with_a_heading_are_the_notes(run, settings):
    assert run("links", "Other#Other").exit_code == 0
    r = run("backlinks", "[[Settings#Spellcheck|spell]]")
    assert r.exit_code == 0 and "Other.md" in r.stdout
