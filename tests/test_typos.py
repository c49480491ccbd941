"""Typos (issue 23 part 3): a misspelt word is corrected to the nearest frequent word of the
index and the output says so; a note name with one typo still finds the note first; show,
links, backlinks, related, neighbors and the MCP read tool accept a name a typo away, with "did
you mean"."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

import kbase
from kbase.errors import InputError
from kbase.search import spell
from tests.conftest import kbase_cli, shared, write


@pytest.fixture(scope="module")
def notes(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("typos")
    vault = write(
        root / "vault",
        {
            "Quick Switcher.md": "# Quick Switcher\n\nJump to notes. See [[Graph view]].\n",
            "Graph view.md": "# Graph view\n\nThe graph shows how notes link. [[Quick Switcher]]\n",
            "Publish.md": "# Publish\n\nPublish your notes to the web. Publishing is paid.\n",
            "Calendar.md": "Meet and plan and talk and write and read, and a calendar.\n",
            "Borrowing.md": "Borrowing rules: borrow a value, borrowing ends at scope end.\n",
            "Recurring Tasks.md": "# Recurring Tasks\n\nA task that repeats every week.\n",
            "Recurring Meetings.md": "Meetings that repeat.\n",
            "Other.md": "Notes about switching jobs, graphs of growth and tasks.\n",
            "Plan A.md": "The first plan.\n",
            "Plan B.md": "The second plan.\n",
        },
    )
    db = root / "typos.db"
    kb = kbase.open(db)
    kb.index([vault], embed=False)
    kb.close()
    return db


@pytest.fixture
def kb(notes):
    k = kbase.open(notes)
    yield k
    k.close()


def run(notes: Path, *args: str):
    return kbase_cli(notes, *args, catch_exceptions=True)


# --- words ------------------------------------------------------------------------------------
def test_a_word_no_note_holds_is_corrected_and_the_result_says_so(kb):
    hits = kb.search("publsh", mode="keyword")
    assert hits.corrected == "publish" and hits.corrections == (("publsh", "publish"),)
    assert hits[0].path == "Publish.md"
    as_typed = kb.search("publsh", mode="keyword", correct=False)
    # as typed, only the name a typo away finds it (the quick switcher's tolerance)
    assert [h.explain["tier"] for h in as_typed] == ["near name"] and as_typed.corrected is None
    assert kb.search("piad", mode="keyword").corrected == "paid"
    assert list(kb.search("piad", mode="keyword", correct=False)) == []


def test_the_correction_keeps_the_rest_of_the_query_and_the_typed_case(kb):
    hits = kb.search('Publsh "your notes" -paid', mode="keyword")
    assert hits.corrected == 'Publish "your notes" -paid'
    assert kb.search("borowing rules", mode="keyword").corrected == "borrowing rules"  # the ending


def test_the_correction_is_the_nearest_word_not_the_most_popular_one(kb):
    # 'and' is in every chunk of Calendar.md, 'calendar' once: the nearest wins (apsw's
    # query_suggest picks 'and' here).
    assert kb.search("calender", mode="keyword").corrected == "calendar"


@pytest.mark.parametrize(
    "query",
    [
        "kubernetes",  # nothing near: searched as typed (no 'benefits' for it)
        "loaf",  # an English word no note holds: what was meant ('bake' is one edit away)
        "pblsh",  # too far (two edits in five letters)
        "teh",  # three letters: never corrected
        '"publsh"',  # a phrase is exact
        "-publsh publish",  # an exclusion
        "publs*",  # a prefix
        "publish",  # a word the notes hold
        "x2publsh",  # digits
    ],
)
def test_what_is_never_corrected(kb, query):
    assert kb.search(query, mode="keyword").corrected is None


def test_correction_works_on_a_read_only_file(tmp_path, notes):
    import shutil

    db = tmp_path / "ro.db"
    shutil.copy(notes, db)
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        k = kbase.open(db)
        assert k.search("publsh", mode="keyword").corrected == "publish"
        k.close()
    finally:
        tmp_path.chmod(0o755)
        db.chmod(0o644)


def test_cli_says_what_it_searched_for_and_json_has_corrected_query(notes):
    r = run(notes, "search", "-m", "keyword", "publsh")
    assert r.exit_code == 0 and "Publish.md" in r.stdout
    assert 'showing results for "publish"' in r.stderr and '"publsh"' in r.stderr
    rows = json.loads(run(notes, "search", "-m", "keyword", "--json", "publsh").stdout)
    assert rows and all(row["corrected_query"] == "publish" for row in rows)
    rows = json.loads(run(notes, "search", "-m", "keyword", "--json", "publish").stdout)
    assert rows and all(row["corrected_query"] is None for row in rows)
    r = run(notes, "search", "-m", "keyword", "--no-correct", "piad")
    assert r.exit_code == 0 and "No matches." in r.stderr and "showing" not in r.stderr


# --- names ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query, first",
    [
        ("quick swicher", "Quick Switcher.md"),  # a letter dropped
        ("qiuck switcher", "Quick Switcher.md"),  # two swapped
        ("grap view", "Graph view.md"),
        ("recuring tasks", "Recurring Tasks.md"),  # porter finds 'recur' anyway: the name tier
        ("Reccurring Tasks", "Recurring Tasks.md"),  # a letter doubled
    ],
)
def test_a_name_with_one_typo_still_puts_the_note_first(kb, query, first):
    assert kb.search(query, mode="keyword")[0].path == first


def test_near_names_are_a_tier_of_their_own_and_exact_names_stay_above(kb):
    hits = kb.search("recuring tasks", mode="keyword", correct=False)
    assert hits[0].path == "Recurring Tasks.md" and hits[0].explain["tier"] == "near name"
    assert kb.search("recurring tasks", mode="keyword")[0].explain["tier"] == "name"


def test_a_name_with_a_typo_shows_the_note_from_its_beginning(tmp_path):
    """As the name itself does: the person asked for the note, not for the passage that repeats
    its words most (here a long note's last section)."""
    filler = "".join(
        f"Paragraph {i} is about soil, light and water for beds.\n\n" for i in range(60)
    )
    write(
        tmp_path / "v",
        {
            "Garden Planning.md": "# Garden Planning\n\nWhat to sow when.\n\n"
            + filler
            + "## Late\n\ngarden planning garden planning, planning the garden.\n",
            "Other.md": "Nothing here.\n",
        },
    )
    from tests.helpers import WordsEmbedder  # deterministic vectors: about the chunk shown

    k = kbase.open(tmp_path / "g.db", embedder=WordsEmbedder())
    k.index([tmp_path / "v"])
    for mode in ("keyword", "hybrid"):
        exact, near = (
            k.search(q, mode=mode, correct=False)[0] for q in ("garden planning", "garden planing")
        )
        assert near.explain.get("tier", near.explain.get("keyword", {}).get("tier")) == "near name"
        assert near.path == exact.path == "Garden Planning.md", mode
        assert near.line == exact.line == 1, mode
    k.close()


def test_edit_budget():
    assert [spell.edit_budget(w) for w in ("abc", "abcd", "abcdefg", "abcdefgh")] == [0, 1, 1, 2]


# --- did you mean -------------------------------------------------------------------------------
def test_a_name_a_typo_away_is_accepted_and_says_so(kb):
    doc = kb.document("quick swicher")
    assert doc.path == "Quick Switcher.md" and doc.corrected_from == "quick swicher"
    assert kb.document("Quick Switcher").corrected_from is None
    note = kb.note("Grpah view")
    assert note.path == "Graph view.md" and note.corrected_from == "Grpah view"
    assert [link.target for link in kb.links(note)] == ["Quick Switcher"]
    assert kb.read("qiuck switcher", 1, 1).corrected_from == "qiuck switcher"


def test_no_near_name_is_an_error_that_suggests_the_most_similar(kb):
    with pytest.raises(InputError) as e:
        kb.document("switcher quick notes")
    assert e.value.message == "no indexed document matches 'switcher quick notes'"
    assert e.value.hint.startswith("did you mean 'Quick Switcher' (Quick Switcher.md)")


def test_did_you_mean_leaves_out_a_name_that_only_resembles_a_piece_of_the_name(tmp_path):
    """'nonexist' holds 'xist', a letter from 'list': no reason to suggest the note 'list' (as
    foam-docs' user/tools/cli/list.md was); a name held whole, or sharing its words, still is."""
    write(tmp_path / "v", {"cli/list.md": "# list\n", "Graph view.md": "# Graph view\n"})
    with kbase.open(tmp_path / "d.db") as k:
        k.index([tmp_path / "v"], embed=False)
        with pytest.raises(InputError) as e:
            k.document("nonexist")
        assert e.value.hint == "see kbase status for the roots, or kbase search"
        with pytest.raises(InputError) as e:
            k.document("graph")
        assert e.value.hint == "did you mean 'Graph view' (Graph view.md)?"
        with pytest.raises(InputError) as e:
            k.document("the list of commands")
        assert e.value.hint == "did you mean 'list' (cli/list.md)?"


def test_two_names_equally_near_are_not_guessed(kb):
    with pytest.raises(InputError) as e:
        kb.document("Plan C")
    assert e.value.message == "no indexed document matches 'Plan C'"
    assert e.value.hint == "did you mean 'Plan A' (Plan A.md), 'Plan B' (Plan B.md)?"


@pytest.mark.parametrize("command", ["show", "links", "backlinks", "neighbors"])
def test_cli_commands_take_a_near_name(notes, command):
    r = run(notes, command, "quick swicher")
    assert r.exit_code == 0, r.output
    assert "did you mean 'Quick Switcher'? showing Quick Switcher.md" in r.stderr


def test_a_notes_title_is_not_a_typo_of_itself(tmp_path):
    """A note asked for by its title (not a name: a link names it by its file) is shown, saying
    so; 'did you mean' it, when that is what was typed, read as a contradiction."""
    from kbase.mcp import tools

    write(tmp_path / "v", {"ch16-03-shared-state.md": "# Shared-State Concurrency\n\nMutexes.\n"})
    db = tmp_path / "t.db"
    with kbase.open(db) as k:
        k.index([tmp_path / "v"], embed=False)
        said = "showing ch16-03-shared-state.md, titled 'Shared-State Concurrency'"
        assert tools.read(k, "shared state concurrency").text.startswith(said)
    r = kbase_cli(db, "show", "Shared-State Concurrency", catch_exceptions=True)
    assert r.exit_code == 0 and r.stderr == said + " (a link names it [[ch16-03-shared-state]])\n"


def test_cli_related_takes_a_near_name(notes):
    r = run(notes, "related", "grap view")
    assert r.exit_code == 0, r.output
    assert "did you mean 'Graph view'? showing Graph view.md" in r.stderr


def test_show_path_line_with_a_typo(kb):
    region = kb.region("Quick Swicher.md:3", 0)
    assert region.doc.path == "Quick Switcher.md" and region.lines == (
        region.doc.body.splitlines()[2],
    )


def test_mcp_read_and_search_say_so(kb):
    from kbase.mcp import tools

    reply = tools.read(kb, "quick swicher")
    assert reply.structured.corrected_from == "quick swicher"
    assert reply.structured.path == "Quick Switcher.md"
    assert reply.text.startswith("did you mean 'Quick Switcher'?")
    reply = tools.search(kb, "publsh", mode="keyword")
    assert reply.structured.corrected_query == "publish"
    assert 'showing results for "publish"' in reply.text


# --- the typo set ---------------------------------------------------------------------------------
def test_the_typo_set_is_there_and_well_formed():
    from bench.typos import load_typos

    rows = load_typos()
    names = [r for r in rows if r.kind == "name"]
    words = [r for r in rows if r.kind == "word"]
    assert len(words) >= 50 and len(names) >= 100
    assert all(r.typo != r.intended for r in rows)
    assert all(r.answer for r in names)


@pytest.mark.slow
def test_names_of_the_documentation_vault_with_one_typo_come_first(tmp_path):
    """The issue's measure on a shared Obsidian vault: >= 90% of its names with one typo (a
    letter dropped or two neighbours swapped) bring the note first (keyword mode; bench/typos.py
    measures hybrid too)."""
    vault = shared("vaults", "obsidian-tasks-docs")
    from bench.typos import load_typos

    k = kbase.open(tmp_path / "t.db")
    k.index([vault], embed=False)
    rows = [r for r in load_typos() if r.vault == "obsidian-tasks-docs" and r.kind == "name"]
    first = 0
    for r in rows:
        hits = k.search(r.typo, mode="keyword", limit=1)
        first += bool(hits) and (
            hits[0].path == r.answer
            or PurePosixPath(hits[0].path).stem.casefold() == r.intended.casefold()
        )
    assert first / len(rows) >= 0.9, f"{first} of {len(rows)}"


@pytest.mark.asyncio
async def test_tui_says_what_it_searched_for(notes):
    from tests.test_tui import main, make_app, type_query

    app = make_app(notes)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "publsh")
        screen = main(app)
        assert screen.results.hits[0].path == "Publish.md"
        assert 'showing results for "publish"' in str(screen.results.border_title)


@pytest.mark.slow
def test_a_name_with_one_typo_comes_first_in_hybrid_mode_too(tmp_path, notes):
    """The default mode once the index has vectors (the real model): the near-name tier must
    survive the fusion."""
    import shutil

    from kbase.embed import embedder

    db = tmp_path / "h.db"
    shutil.copy(notes, db)
    k = kbase.open(db, embedder=embedder.default_embedder())
    k.embed()
    assert k.default_mode() == "hybrid"
    for query, first in (
        ("quick swicher", "Quick Switcher.md"),
        ("grap view", "Graph view.md"),
        ("publsh", "Publish.md"),
    ):
        assert k.search(query)[0].path == first, query
    k.close()


@pytest.mark.parametrize(
    "path",
    ["a/b.md", "Note.MD", ".hidden", "a/.hidden", "a/b.", "a/b..", "x/..", "a/b/", "a/.", "a//b.md",
     "./a.md", "a/./b.md", "/", ".", "..", ".a.", "dir.d/file", "a/b.tar.gz", "ü/é.md", "a\\b.md"],
)  # fmt: skip
def test_the_file_name_of_a_note_is_read_as_pathlib_reads_it(path: str) -> None:
    # (the name table reads every note's file name without pathlib, for a cold search's speed)
    assert spell._file_stem(path) == PurePosixPath(path).stem


@pytest.mark.parametrize("name", ["Tasks-API", "Straße  ΣΊΣΥΦΟΣ", "İstanbul’s ﬃ_x", "", "--"])
def test_a_name_is_compared_by_its_words_each_casefolded(name: str) -> None:
    assert spell.name_key(name) == " ".join(w.casefold() for w in spell._WORD.findall(name))
