"""kbase browse (kbase/tui): driven with Textual's pilot on real indexes built from
tests/data/tui/vault, plus snapshots of the main screen (pytest-textual-snapshot)."""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

import kbase
from kbase.api import KB
from kbase.errors import DatabaseError
from kbase.paths import editor_command
from kbase.records import Status
from kbase.tui.app import KbaseApp
from kbase.tui.logic import (
    BarFilters,
    KBPool,
    Location,
    clip_snippet,
    embedding_coverage,
    link_from_href,
    shorten_path,
    sibling_abspath,
    wikilinks_to_markdown,
)
from kbase.tui.messages import DocumentLoaded, EmbedProgress, LinksLoaded, SearchDone, WorkFailed
from kbase.tui.screens import HelpScreen, MainScreen, help_keys
from kbase.tui.widgets import FilterBar, LinksPane, PreviewScroll, ResultsList
from tests.conftest import write

VAULT = Path(__file__).parent / "data" / "tui" / "vault"
REPO = Path(__file__).resolve().parents[1]


# --- fixtures -------------------------------------------------------------------------------------
def build(root: Path, *, embedder=None) -> tuple[Path, Path]:
    vault = root / "vault"
    shutil.copytree(VAULT, vault)
    db = root / "index.db"
    if embedder is None:
        kbase.open(db).index([vault], embed=False)
    else:
        KB(db, embedder=embedder).index([vault])
    return db, vault


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """The test vault indexed without embeddings (shared: tests only read it)."""
    return build(tmp_path_factory.mktemp("tui"))[0]


SECURITY = "Knowledge/Computer Science/Information Security"
TOPICS = (
    "Public Key Cryptography",
    "Symmetric Ciphers",
    "Hash Functions",
    "Digital Signatures",
    "Key Exchange",
    "Certificate Authorities",
    "Threat Modelling",
    "Password Storage",
    "Side Channels",
    "Random Numbers",
    "Zero Knowledge Proofs",
    "Post-Quantum Schemes",
)


@pytest.fixture(scope="module")
def nested_index(tmp_path_factory) -> Path:
    """Twelve notes three folders deep, each mentioning 'cipher' (long paths, as in real vaults)."""
    root = tmp_path_factory.mktemp("nested")
    vault = write(
        root / "vault",
        {
            f"{SECURITY}/{t}.md": f"# {t}\n\nNotes on {t.lower()} and how the cipher keeps secrets"
            " safe in practice.\n"
            for t in TOPICS
        },
    )
    kbase.open(root / "index.db").index([vault], embed=False)
    return root / "index.db"


class FakeEmbedder:
    """Deterministic bag-of-words vectors (crc32 of each word into 32 buckets), optionally slow."""

    model_id = "fake-bow"
    dimension = 32
    max_tokens = 256
    batch_size = 8
    fingerprint = json.dumps({"model": "fake-bow", "dim": 32})

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.queries: list[str] = []

    def _vector(self, text: str) -> bytes:
        v = [0.0] * self.dimension
        for word in re.findall(r"\w+", text.lower()):
            v[zlib.crc32(word.encode()) % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return struct.pack(f"<{self.dimension}f", *(x / norm for x in v))

    def embed_batch(self, texts):
        return [self._vector(t) for t in texts]

    def embed_query(self, text):
        self.queries.append(text)
        time.sleep(self.delay)
        return self._vector(text)


def make_app(db: Path, **kwargs) -> KbaseApp:
    """The app with a shorter debounce than the interactive 150 ms (the tests type fast anyway)."""
    return KbaseApp(db, **{"debounce": 0.05, **kwargs})


def main(app: KbaseApp) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


async def settle(pilot, timeout: float = 10.0) -> None:
    """Wait until the main screen is up, no search is pending and every worker has finished."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    while not any(
        isinstance(s, MainScreen) and s.is_mounted and s.query(ResultsList)
        for s in app.screen_stack
    ):
        if time.monotonic() > deadline:
            raise AssertionError("the main screen never came up")
        await pilot.pause(0.01)
    quiet = 0
    while time.monotonic() < deadline:
        await pilot.pause(0.01)
        screen = main(app)
        if not screen.search_pending and all(w.is_finished for w in app.workers):
            quiet += 1
            if quiet >= 2:
                await pilot.pause()  # let the last updates reach the screen
                await pilot.wait_for_scheduled_animations()
                return
        else:
            quiet = 0
    raise AssertionError("the app did not settle")


async def wait_for(pilot, predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await pilot.pause(0.01)


def sent(posted: list, kind: type) -> list:
    """The messages of ``kind`` a ``run_test(message_hook=posted.append)`` saw, each once (the
    hook sees a bubbling message again at every pump it reaches)."""
    return list({id(m): m for m in posted if isinstance(m, kind)}.values())


async def type_query(pilot, text: str, *, keys: bool = False, timeout: float = 10.0) -> None:
    """Put ``text`` in the search box (key by key with ``keys``: slower, ~50 ms a key) and wait
    (at most ``timeout`` seconds each time) for the results. Either way the box's Changed event
    starts the debounced search."""
    await settle(pilot, timeout)
    screen = main(pilot.app)
    screen.search_input.focus()
    if keys:
        await pilot.press(*text)
    else:
        screen.search_input.value = text
    await settle(pilot, timeout)


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def notifications(app) -> list:
    return list(app._notifications)


# --- searching --------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_typing_shows_results_with_highlighted_matches(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert "7 notes · 7 chunks" in screen_text(app)
        await type_query(pilot, "tomatoes", keys=True)
        results = screen.results
        paths = [h.path for h in results.hits]
        assert paths[0] == "Garden.md" and set(paths) == {
            "Garden.md",
            "tech/notes.txt",
            "journal/2024-05-02.md",
            "Compost.md",
        }
        assert results.source == "keyword" and results.border_title == "4 results · keyword"
        # title, path:line and score on each entry; the matched words styled in the snippet
        first = results.get_option_at_index(0).prompt
        assert first.plain.startswith("Garden  ") and "Garden.md:3" in first.plain
        hit = results.hits[0]
        marked = [first.plain[s.start : s.end] for s in first.spans if "underline" in str(s.style)]
        assert marked and all(m.lower() == "tomatoes" for m in marked), marked
        assert hit.highlights
        text = screen_text(app)
        assert "Garden.md:3" in text and "Tomatoes need sun" in text
        # the preview shows the first hit, its line highlighted
        assert screen.preview.location.path == "Garden.md"
        assert screen.preview.hit_block is not None and screen.preview.hit_block.has_class("-hit")
        assert "Tomatoes need sun" in (screen.preview.hit_block.source or "")


@pytest.mark.asyncio
async def test_punctuation_alone_is_like_an_empty_box(index):
    """A query with no word to search for clears the results, as an empty box does, without an
    error notification for every key typed (KB.search refuses such a query)."""
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "tomatoes")
        screen = main(app)
        assert screen.results.hits
        for text in ("!", "!!!", "-tomatoes"):
            await type_query(pilot, text)
            assert not screen.results.hits
        assert notifications(app) == []


@pytest.mark.asyncio
async def test_a_query_with_nothing_to_find_clears_the_preview(index):
    """An emoji alone (no word) or a query without results leaves no note of an earlier query in
    the preview or the links pane, and that query typed again shows its hit again."""
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main(app)
        for nothing, message in (("🎉", "Type to search"), ("zzzqqq", "No results.")):
            await type_query(pilot, "tomatoes")
            assert screen.preview.location.path == "Garden.md" and screen.links.option_count
            await type_query(pilot, nothing)
            assert screen.preview.location is None and message in screen_text(app)
            assert "Garden" not in screen_text(app) and screen.links.option_count == 0
        await type_query(pilot, "tomatoes")
        assert screen.preview.location.path == "Garden.md"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_moving_through_results_moves_the_preview(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "tomatoes")
        screen = main(app)
        await pilot.press("enter")  # search box -> results
        assert app.focused is screen.results
        seen = [screen.preview.location.path]
        for key in ("j", "down", "down"):
            await pilot.press(key)
            await settle(pilot)
            hit = screen.results.current
            assert screen.preview.location.path == hit.path
            seen.append(hit.path)
            if hit.path.endswith(".md"):  # the block holding the hit's line is highlighted
                block = screen.preview.hit_block
                start, end = block.source_range
                assert start <= hit.line - 1 - screen.preview.line_offset < end
                assert block.has_class("-hit")
            else:  # plain text: the hit's line is selected in a line-numbered view
                view = app.query_one("#preview-text")
                # the hit's whole chunk is selected, and the hit's line is in it
                assert (
                    view.display
                    and view.selection.start[0] <= hit.line - 1 <= view.selection.end[0]
                )
                with screen.app.pool.kb() as kb:
                    chunk = kb.chunk(hit.chunk_id)
                assert (view.selection.start[0], view.selection.end[0]) == (
                    chunk.line - 1,
                    chunk.end_line - 1,
                )
        assert seen == [h.path for h in screen.results.hits]
        await pilot.press("k")
        await settle(pilot)
        assert screen.preview.location.path == screen.results.hits[2].path
        # the mouse: a click on the list's first row picks the first result
        await pilot.click(ResultsList, offset=(3, 1))
        await settle(pilot)
        assert screen.results.highlighted == 0 and screen.preview.location.path == "Garden.md"


@pytest.mark.slow
@pytest.mark.asyncio
async def test_filters_restrict_the_search(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "checkpoint")
        screen = main(app)
        assert {h.path for h in screen.results.hits} == {
            "tech/SQLite.md",
            "tech/Backups.md",
            "tech/notes.txt",
            "journal/2024-05-02.md",
        }
        await pilot.press("ctrl+f")
        bar = app.query_one(FilterBar)
        assert bar.display and app.focused.id == "filter-path"
        await pilot.press(*"tech/")
        await settle(pilot)
        assert {h.path for h in screen.results.hits} == {
            "tech/SQLite.md",
            "tech/Backups.md",
            "tech/notes.txt",
        }
        await pilot.press("tab")  # to the tags box
        await pilot.press(*"ops")
        await settle(pilot)
        assert [h.path for h in screen.results.hits] == ["tech/Backups.md"]
        assert "filter path:tech/ #ops" in screen_text(app)
        screen.set_filters("", "journal")
        await settle(pilot)
        assert [h.path for h in screen.results.hits] == ["journal/2024-05-02.md"]
        commands = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        assert {
            "Search mode: next",
            "Filters: edit",
            "Open note in $EDITOR",
            "Help: key bindings",
        } <= set(commands)
        commands["Filters: clear"]()  # the command palette's entry
        await settle(pilot)
        assert len(screen.results.hits) == 4 and not bar.display


@pytest.mark.asyncio
async def test_a_filter_that_keeps_no_note_is_named_when_nothing_is_found(index):
    """A tag or path in the filter bar that no note has (a typo) is said in the preview, as
    kbase search says it, not only '0 results'."""
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "tomatoes")
        screen = main(app)
        screen.set_filters("nowhere/", "gardn")
        await settle(pilot)
        said = screen.preview.query_one("#preview-empty").render
        assert not screen.results.hits and str(said()) == (
            "No results: no note's path matches 'nowhere/';"
            " no note has the tag 'gardn' (or one under it)."
        )
        screen.set_filters("tech/", "garden")  # each keeps notes, together none
        await settle(pilot)
        assert not screen.results.hits and str(said()) == "No results."


@pytest.mark.slow
@pytest.mark.asyncio
async def test_escape_from_the_filter_bar_leaves_the_query_alone(index, monkeypatch):
    app = make_app(index)
    opened = []
    monkeypatch.setattr(app, "open_in_editor", opened.append)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "checkpoint")
        screen = main(app)
        await pilot.press("ctrl+f", *"tech/", "escape")
        await settle(pilot)
        assert app.focused is screen.results  # not the search box, which would select its query
        await pilot.press("e")  # so a command key is a command, not the start of a new query
        assert screen.search_input.value == "checkpoint" and len(opened) == 1
        assert {h.path for h in screen.results.hits} == {
            "tech/SQLite.md",
            "tech/Backups.md",
            "tech/notes.txt",
        }
        await pilot.press("ctrl+f", "ctrl+f")  # the key that opened the bar closes it the same way
        assert app.focused is screen.results and screen.search_input.value == "checkpoint"


@pytest.mark.asyncio
async def test_each_hit_takes_three_lines_with_its_path_shortened_from_the_left(nested_index):
    app = make_app(nested_index)
    async with app.run_test(size=(100, 40)) as pilot:
        await type_query(pilot, "cipher")
        results = main(app).results
        assert len(results.hits) == 12
        width = results.scrollable_content_region.width
        lines = [
            results.get_option_at_index(i).prompt.plain.split("\n")
            for i in range(results.option_count)
        ]
        assert all(len(hit) == 3 and all(len(line) <= width for line in hit) for hit in lines)
        assert {hit[1] for hit in lines} >= {
            "…/Public Key Cryptography.md:3",
            "…/Symmetric Ciphers.md:3",  # the body line: no snippet starts at a heading (61ae219)
        }
        # On a 40-line terminal the list shows ten hits or more (it showed four: each path took
        # two or three lines, the snippet two, and a blank line followed).
        shown = [
            line for line in screen_text(app).splitlines() if re.search(r"│ …/[^│]*\.md:\d", line)
        ]
        assert len(shown) >= 10


# --- links and history ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.asyncio
async def test_follow_links_back_and_forward(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "pinch shoots")
        screen = main(app)
        assert screen.preview.location.path == "Garden.md"
        links = screen.links
        assert links.border_title == "Links 1 out · 3 in"
        options = [links.get_option_at_index(i).prompt.plain for i in range(links.option_count)]
        assert (
            options[1].startswith("Compost") and "Feed them with Compost in spring." in options[1]
        )
        assert any(
            "2024-05-02  journal/2024-05-02.md:6" in o for o in options
        )  # a backlink, with its line
        await pilot.press("escape", "3")  # leave the search box, go to the links pane
        assert app.focused is links
        await pilot.press("enter")  # follow the outlink
        await settle(pilot)
        assert screen.preview.location.path == "Compost.md"
        assert screen.links.border_title == "Links 1 out · 1 in"  # Compost's own links now
        # the outlink [[Garden#Beds|raised beds]] scrolls to the heading
        await pilot.press("enter")
        await settle(pilot)
        assert (
            screen.preview.location.path == "Garden.md" and screen.preview.location.anchor == "Beds"
        )
        assert (screen.preview.hit_block.source or "").startswith("## Beds")
        await pilot.press("alt+left")
        await settle(pilot)
        assert screen.preview.location.path == "Compost.md"
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert screen.preview.location.path == "Garden.md" and screen.history_pos == 0
        await pilot.press("alt+right", "right_square_bracket")
        await settle(pilot)
        assert screen.preview.location.path == "Garden.md" and screen.history_pos == 2
        # a backlink opens its source at the line of the link
        await pilot.press("alt+left", "alt+left")
        await settle(pilot)
        links.highlighted = next(
            i
            for i in range(links.option_count)
            if "journal/2024-05-02.md:6" in links.get_option_at_index(i).prompt.plain
        )
        await pilot.press("enter")
        await settle(pilot)
        assert screen.preview.location == Location(
            "journal/2024-05-02.md", screen.preview.location.abspath, 6, None, "2024-05-02"
        )
        assert "[Garden](kbase-note:Garden)" in screen.preview.hit_block.source


@pytest.mark.slow
@pytest.mark.asyncio
async def test_going_back_restores_the_link_that_was_followed(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "pinch shoots")
        screen = main(app)
        links = screen.links
        await pilot.press("escape", "3")
        row = next(
            i
            for i in range(links.option_count)
            if "journal/2024-05-02.md:6" in links.get_option_at_index(i).prompt.plain
        )
        assert row > 1  # a backlink, below the first selectable row
        links.highlighted = row
        await pilot.press("enter")
        await settle(pilot)
        assert screen.preview.location.path == "journal/2024-05-02.md"
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert screen.preview.location.path == "Garden.md"
        assert links.highlighted == row and app.focused is links  # enter again goes the same way
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.preview.location.path == "journal/2024-05-02.md"
        assert links.highlighted == 1  # as it was left


@pytest.mark.asyncio
async def test_links_pane_lists_related_notes_and_follows_one(index):
    app = make_app(index)
    async with app.run_test(size=(100, 40)) as pilot:
        await type_query(pilot, "pinch shoots")
        screen = main(app)
        links = screen.links
        prompts = [links.get_option_at_index(i).prompt.plain for i in range(links.option_count)]
        header = next(i for i, p in enumerate(prompts) if p.startswith("≈ related"))
        assert prompts[header].startswith(
            "≈ related by keywords"
        )  # the test index has no embeddings
        related = [k for k in links.entries if k.startswith("rel-")]
        assert related and all("Garden.md" not in links.entries[k].label for k in related)
        first = links.entries["rel-0"]
        links.highlighted = header + 1
        links.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert screen.preview.location.path == first.location.path != "Garden.md"


@pytest.mark.asyncio
async def test_links_pane_shows_each_links_line_as_it_reads(tmp_path):
    """A link's line reads as the note does ([[SQLite|the SQLite notes]] is 'the SQLite notes'),
    the row's own link underlined, and in view when the line is long."""
    vault = write(
        tmp_path / "vault",
        {
            "Welcome.md": (VAULT / "Welcome.md").read_text(),
            "SQLite.md": "# SQLite\n",
            "Long.md": "# Long\n\n" + "words " * 60 + "and at last [[SQLite|the end]].\n",
            "Table.md": "# Table\n\n| a | b |\n|---|---|\n| x | [[SQLite\\|cell]] |\n",
        },
    )
    kbase.open(tmp_path / "index.db").index([vault], embed=False)
    app = make_app(tmp_path / "index.db")
    async with app.run_test(size=(100, 40)) as pilot:
        screen = main(app)
        for query, row, line, link in (
            ("welcome", "SQLite", "read the SQLite notes.", "the SQLite notes"),
            ("Long", "SQLite", "words and at last the end.", "the end"),
            ("Table", "SQLite", "\nx  ·  cell", "cell"),  # (no cell padding in front)
        ):
            await type_query(pilot, query)
            links = screen.links
            prompt = next(
                links.get_option_at_index(i).prompt
                for i in range(links.option_count)
                if links.get_option_at_index(i).prompt.plain.startswith(row + "\n")
            )
            assert line in prompt.plain and "[[" not in prompt.plain
            assert len(prompt.plain) < 200
            marked = [
                prompt.plain[s.start : s.end] for s in prompt.spans if "underline" in str(s.style)
            ]
            assert marked == [link]


@pytest.mark.asyncio
async def test_an_unresolved_link_is_named_as_written(tmp_path):
    """Following a link that leads nowhere names it as the note writes it: a Markdown link's
    target was shown as a wikilink ('[[../gone.md]]')."""
    vault = write(tmp_path / "vault", {"A.md": "# A\n\nSee [[Gone]] and [old](../gone.md).\n"})
    kbase.open(tmp_path / "index.db").index([vault], embed=False)
    app = make_app(tmp_path / "index.db")
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "see")
        await pilot.press("escape", "3", "enter", "down", "enter")
        await settle(pilot)
        assert [n.message for n in notifications(app)] == [
            "[[Gone]] does not lead to a note in the index",
            "../gone.md does not lead to a note in the index",
        ]


@pytest.mark.asyncio
async def test_wikilink_clicked_in_the_preview_is_followed(index):
    from textual.widgets import Markdown

    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "welcome")
        screen = main(app)
        assert screen.preview.location.path == "Welcome.md"
        md = app.query_one("#preview-md", Markdown)
        assert "[the SQLite notes](kbase-note:SQLite)" in md.source  # wikilinks became links
        md.post_message(Markdown.LinkClicked(md, "kbase-note:SQLite"))
        await settle(pilot)
        assert screen.preview.location.path == "tech/SQLite.md"
        md.post_message(
            Markdown.LinkClicked(md, "kbase-note:Greenhouse")
        )  # unresolved: not in the index
        await settle(pilot)
        assert screen.preview.location.path == "tech/SQLite.md"
        assert any("Greenhouse" in m for m, _ in app.error_log)
        await pilot.press("escape", "alt+left")
        await settle(pilot)
        assert screen.preview.location.path == "Welcome.md"


# --- modes ------------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_mode_switch_without_embeddings_says_so(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert screen.mode == "keyword" and "no embeddings" in screen_text(app)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert screen.mode == "keyword"
        assert any(
            "need embeddings" in n.message and "kbase embed" in n.message
            for n in notifications(app)
        )
        await type_query(pilot, "tomatoes")
        assert screen.results.source == "keyword" and screen.results.hits


@pytest.mark.slow
@pytest.mark.asyncio
async def test_hybrid_shows_keyword_results_first_then_hybrid_and_modes_cycle(tmp_path):
    db, _ = build(tmp_path, embedder=FakeEmbedder())
    embedders: list[FakeEmbedder] = []

    def factory(path):
        embedders.append(FakeEmbedder(delay=0.25))  # a slow model: the keyword results come first
        return KB(path, embedder=embedders[-1])

    app = make_app(db, kb_factory=factory)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main(app)
        await wait_for(pilot, lambda: screen.index_ok)
        assert screen.mode == "hybrid"
        assert "hybrid" in str(app.query_one("#mode").render())
        await settle(pilot)  # the model "loads" in the background (a warm-up query)
        assert screen.model_ready and any("warm up" in e.queries for e in embedders)
        screen.search_input.focus()
        await pilot.press(*"tomatoes")
        await wait_for(pilot, lambda: screen.results.source == "keyword")
        assert screen.results.border_subtitle == "hybrid results coming…"
        assert any(w.group == "search-vector" and not w.is_finished for w in app.workers)
        keyword_paths = [h.path for h in screen.results.hits]
        await settle(pilot)
        assert screen.results.source == "hybrid" and screen.results.border_subtitle == ""
        hybrid = screen.results.hits
        assert {h.path for h in hybrid} >= set(keyword_paths)
        assert all("keyword" in h.explain or "semantic" in h.explain for h in hybrid)
        # ctrl+t cycles hybrid -> keyword -> semantic -> hybrid; each re-runs the query
        for expected in ("keyword", "semantic", "hybrid"):
            await pilot.press("ctrl+t")
            assert screen.mode == expected
            assert expected in str(app.query_one("#mode").render())
            await settle(pilot)
            assert screen.results.source == expected and screen.results.hits
        await pilot.press("escape", "m")  # m cycles too, when not typing
        assert screen.mode == "keyword"


@pytest.mark.asyncio
async def test_a_bad_query_in_hybrid_mode_is_not_a_model_failure(tmp_path):
    """The vector search refuses a query the keyword search refuses too (an operator kbase does
    not read): that is said once, and the mode stays hybrid (it fell back to keyword, and
    ctrl+t said 'The embedding model could not be loaded')."""
    db, _ = build(tmp_path, embedder=FakeEmbedder())
    app = make_app(db, kb_factory=lambda path: KB(path, embedder=FakeEmbedder()))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main(app)
        await type_query(pilot, "tomatoes task:x")
        assert not screen.results.hits and not screen.model_failed and screen.mode == "hybrid"
        assert [n.message.splitlines()[0] for n in notifications(app)] == [
            "kbase does not support Obsidian's task: operator"
        ]
        await type_query(pilot, "tomatoes")
        assert screen.results.source == "hybrid" and screen.results.hits


@pytest.mark.asyncio
async def test_model_failure_falls_back_to_keyword(tmp_path):
    db, _ = build(tmp_path, embedder=FakeEmbedder())

    class Broken(FakeEmbedder):
        fingerprint = json.dumps({"model": "other", "dim": 32})  # vectors of another model

    app = make_app(db, kb_factory=lambda p: KB(p, embedder=Broken()))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert screen.model_failed
        assert any(
            "another embedding model" in m and h and "kbase embed --rebuild" in h
            for m, h in app.error_log
        )
        await type_query(pilot, "tomatoes")
        assert screen.results.source == "keyword" and screen.results.hits
        assert "model unavailable" in str(app.query_one("#mode").render())


# --- responsiveness ---------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_slow_search_never_blocks_typing(index):
    """Each search waits until the test lets it go (at most 5 s): keys typed meanwhile land in the
    box and the help screen opens; the superseded search posts nothing, the last one its answer."""
    started: list[str] = []
    release = threading.Event()
    posted: list = []

    class SlowKB(KB):
        def search(self, query, **kwargs):
            started.append(query)
            release.wait(5.0)
            return super().search(query, **kwargs)

    app = KbaseApp(index, kb_factory=SlowKB)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        await settle(pilot)
        screen = main(app)
        screen.search_input.focus()
        for text in ("t", "to", "tom"):  # quicker than the debounce: one search, not three
            screen.search_input.value = text
            await pilot.pause(0.01)
        await wait_for(pilot, lambda: started == ["tom"])  # the first search is now stuck
        await pilot.press("end", *"atoes")
        await pilot.press("f1")  # the app answers keys while it runs
        assert isinstance(app.screen, HelpScreen)
        assert screen.search_input.value == "tomatoes"
        await wait_for(pilot, lambda: started[-1] == "tomatoes")  # a newer search beside the first
        assert not screen.results.hits and screen.results.border_subtitle == "searching…"
        await pilot.press("escape")
        release.set()
        await settle(pilot)
        assert started[0] == "tom" and started[-1] == "tomatoes"
        answers = sent(posted, SearchDone)
        assert [m.query for m in answers] == [
            "tomatoes"
        ]  # the cancelled 'tom' worker posted nothing
        assert screen.results.query_text == "tomatoes"
        assert [h.path for h in screen.results.hits][0] == "Garden.md"
        assert app.pool.size() >= 2  # the two searches ran side by side, each on its own connection


@pytest.mark.asyncio
async def test_a_failing_call_posts_one_work_failed_for_its_request(index):
    posted: list = []

    class FailingKB(KB):
        def backlinks(self, note):
            raise DatabaseError("disk I/O error", "check the disk")

    app = make_app(index, kb_factory=FailingKB)
    async with app.run_test(size=(100, 30), message_hook=posted.append) as pilot:
        await type_query(pilot, "tomatoes")
        await settle(pilot)
        failed = sent(posted, WorkFailed)
        shown = [m.request for m in sent(posted, DocumentLoaded)]
        assert [(m.what, m.gen, m.error.message) for m in failed] == [
            ("links", shown[-1], "disk I/O error")
        ]
        assert not any(isinstance(m, LinksLoaded) for m in posted)
        assert any(
            isinstance(m, DocumentLoaded) for m in posted
        )  # the other workers were not affected
        assert any("disk I/O error" in m for m, _ in app.error_log)


# --- help, quit, editor, status, errors -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.asyncio
async def test_help_lists_every_key_binding(index):
    from kbase.tui.app import KbaseApp as AppClass

    app = make_app(index)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.help_text().plain
        for cls in (AppClass, MainScreen, ResultsList, LinksPane, PreviewScroll, HelpScreen):
            for binding in cls.BINDINGS:
                key = help_keys(app.get_key_display(binding))
                assert key in text, (
                    f"{cls.__name__}: {binding.key} ({binding.description}) missing from help"
                )
                assert (binding.tooltip or binding.description) in text
        for words in (
            "Command palette",
            "Follow the link",
            "Clear the query",
            "Next / previous pane",
        ):
            assert words in text
        # Every description starts in the same column on any terminal: the keys column holds no
        # character a terminal may draw two cells wide (arrows are ambiguous-width: spelled out).
        rows = [row for row in text.splitlines() if row.startswith("  ")]
        assert rows and all(row[:24].isascii() and row[24] != " " for row in rows), [
            row for row in rows if not row[:24].isascii()
        ]
        assert "alt+left" in text and "up down pgup pgdn" in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")  # q closes help rather than quitting
        assert isinstance(app.screen, MainScreen) and app.is_running


@pytest.mark.asyncio
async def test_quit_with_q_only_when_not_typing(index):
    app = make_app(index)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("q")  # typed into the search box
        assert app.is_running and main(app).search_input.value == "q"
        await pilot.press("escape", "q")  # leave the box, quit
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_open_in_editor_at_the_hit_line(index, tmp_path, monkeypatch):
    record = tmp_path / "editor-args.json"
    script = tmp_path / "editor.py"
    script.write_text(
        f"import json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "pick red")
        screen = main(app)
        hit = screen.results.current
        await pilot.press("ctrl+o")
        await settle(pilot)
        assert json.loads(record.read_text()) == [f"+{hit.line}", hit.abspath]
        assert app.is_running and isinstance(app.screen, MainScreen)
        monkeypatch.setenv("EDITOR", "/no/such/editor")
        await pilot.press("escape", "e")
        await pilot.pause()
        assert any("cannot run the editor" in m and "EDITOR" in (h or "") for m, h in app.error_log)
        # an unclosed quote: a notification, not the app stopped by a traceback
        monkeypatch.setenv("EDITOR", 'code "--wait')
        await pilot.press("e")
        await pilot.pause()
        assert app.is_running and app.error_log[-1] == (
            "$EDITOR 'code \"--wait' is not a command: no closing quotation",
            "quote as in the shell, e.g. export EDITOR='code --wait'",
        )


@pytest.mark.asyncio
async def test_status_line_counts_stale_hits_and_embedded_chunks(tmp_path):
    db, vault = build(tmp_path)

    class WithCoverage(KB):
        def status(self):
            return replace(super().status(), embedded_chunks=5)

    garden = vault / "Garden.md"
    garden.write_text(garden.read_text() + "\nEdited after indexing.\n")
    app = make_app(db, kb_factory=WithCoverage)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "tomatoes")
        text = screen_text(app)
        assert "embedded 5/7 (71%)" in text
        assert "⚠ 1 hit changed on disk" in text
        assert "⚠ changed on disk" in main(app).results.get_option_at_index(0).prompt.plain


@pytest.mark.asyncio
async def test_no_index_opens_and_says_how_to_build_one(tmp_path):
    app = make_app(tmp_path / "missing.db")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert screen.index_ok is False and app.is_running
        [note] = [n for n in notifications(app) if n.severity == "error"]
        assert "no index at" in note.message and "kbase index PATH" in note.message
        assert "kbase index PATH" in screen_text(app)
        await pilot.press(*"tomatoes")  # typing is harmless: no traceback, no new notification
        await settle(pilot)
        assert app.is_running and len(notifications(app)) == 1
        # build the index meanwhile; ctrl+r picks it up
        build(tmp_path)
        shutil.move(tmp_path / "index.db", tmp_path / "missing.db")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert screen.index_ok and screen.results.hits


@pytest.mark.asyncio
async def test_database_errors_become_notifications(index):
    class Locked(KB):
        def search(self, query, **kwargs):
            raise DatabaseError(
                f"index {self.path} is locked by another process", "try again when it finishes"
            )

    app = make_app(index, kb_factory=Locked)
    async with app.run_test(size=(80, 24)) as pilot:
        await type_query(pilot, "tomatoes")
        await type_query(pilot, "s")  # the same failure again is not repeated
        assert app.is_running
        errors = [n for n in notifications(app) if n.severity == "error"]
        assert len(errors) == 1
        assert (
            "is locked by another process" in errors[0].message and "try again" in errors[0].message
        )


@pytest.mark.slow
def test_first_paint_imports_no_model(index):
    """The app paints without importing fastembed/onnxruntime, and an index without embeddings
    never loads them."""
    code = textwrap.dedent(f"""
        import asyncio, sys
        from kbase.tui.app import KbaseApp
        heavy = lambda: sorted(
            m for m in sys.modules if m.split('.')[0] in ('fastembed', 'onnxruntime'))
        assert not heavy(), heavy()
        async def main():
            app = KbaseApp({str(index)!r})
            async with app.run_test() as pilot:
                await pilot.pause(0.3)
                await app.workers.wait_for_complete()
                await pilot.press(*'tomatoes')
                await pilot.pause(0.4)
                await app.workers.wait_for_complete()
                print('hits', len(app.screen.results.hits))
        asyncio.run(main())
        print('heavy', heavy())
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "hits 4" in out.stdout and "heavy []" in out.stdout


# --- snapshots --------------------------------------------------------------------------------
def _snapshot_app(index: Path) -> KbaseApp:
    return KbaseApp(index)


async def _search(pilot, query: str, *keys: str) -> None:
    await type_query(pilot, query)
    if keys:
        await pilot.press(*keys)
        await settle(pilot)
    main(pilot.app).search_input.cursor_blink = False


def test_snapshot_results_80x24(index, snap_compare):
    assert snap_compare(
        _snapshot_app(index),
        terminal_size=(80, 24),
        run_before=lambda pilot: _search(pilot, "tomatoes"),
    )


def test_snapshot_second_hit_with_links_120x36(index, snap_compare):
    async def run_before(pilot):
        await _search(pilot, "checkpoint", "enter", "j")  # to the results, second hit

    assert snap_compare(_snapshot_app(index), terminal_size=(120, 36), run_before=run_before)


def test_snapshot_nested_paths_100x40(nested_index, snap_compare):
    assert snap_compare(
        _snapshot_app(nested_index),
        terminal_size=(100, 40),
        run_before=lambda pilot: _search(pilot, "cipher"),
    )


def test_snapshot_nested_paths_140x40(nested_index, snap_compare):
    assert snap_compare(
        _snapshot_app(nested_index),
        terminal_size=(140, 40),
        run_before=lambda pilot: _search(pilot, "cipher"),
    )


def test_snapshot_help_80x24(index, snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("escape", "question_mark")

    assert snap_compare(_snapshot_app(index), terminal_size=(80, 24), run_before=run_before)


def test_run_starts_the_app_on_the_index(monkeypatch, tmp_path):
    from kbase.tui import app as app_module

    started = []
    monkeypatch.setattr(app_module.KbaseApp, "run", lambda self: started.append(self.db_path))
    app_module.run(tmp_path / "x.db")
    assert started == [tmp_path / "x.db"]


# --- the pieces without a screen ------------------------------------------------------------------
def test_wikilinks_become_clickable_links_outside_code():
    src = (
        "See [[Garden]], [[tech/SQLite#WAL|the wal]] and `[[code]]`.\n"
        "```\n[[fenced]]\n```\n![[img.png]]\n"
    )
    out = wikilinks_to_markdown(src)
    assert out.splitlines() == [
        "See [Garden](kbase-note:Garden), [the wal](kbase-note:tech%2FSQLite%23WAL)"
        " and `[[code]]`.",
        "```",
        "[[fenced]]",
        "```",
        "[img.png](kbase-note:img.png)",
    ]
    assert link_from_href("kbase-note:tech/SQLite#WAL") == ("tech/SQLite", "WAL")
    assert link_from_href("Other%20note.md") == ("Other note.md", None)
    assert link_from_href("https://example.com") is None


def test_shorten_path_drops_leading_folders_first():
    path = f"{SECURITY}/Public Key Cryptography.md:1"
    assert shorten_path(path, 200) == path
    assert shorten_path(path, 60) == "…/Information Security/Public Key Cryptography.md:1"
    assert shorten_path(path, 40) == "…/Public Key Cryptography.md:1"
    assert (
        shorten_path(path, 10) == "…aphy.md:1"
    )  # a file name too long for the space loses its start
    assert (
        shorten_path("ノート/長い名前のファイル.md:3", 12) == "…ァイル.md:3"
    )  # counted in cells: 12
    assert shorten_path(path, 1) == "…" and shorten_path(path, 0) == ""


def test_small_helpers():
    assert editor_command("/n/a b.md", 12, {"EDITOR": "vim -p"}) == [
        "vim",
        "-p",
        "+12",
        "/n/a b.md",
    ]
    assert editor_command("/n/a b.md", 12, {"EDITOR": "code --wait"}) == [
        "code",
        "--wait",
        "--goto",
        "/n/a b.md:12",
    ]
    assert editor_command("/n/a.md", 2, {"VISUAL": "/opt/bin/subl"})[-1] == "/n/a.md:2"
    assert editor_command("/n/a.md", 2, {}, fallback=None) is None
    assert editor_command("/n/a.md", None, {}) == ["vi", "/n/a.md"]
    assert editor_command("/n/a.md", 3, {"VISUAL": "nvim", "EDITOR": "nano"})[0] == "nvim"
    assert BarFilters.parse(" journal/ ", "a, b/c  #d") == BarFilters(
        "journal/", ("a", "b/c", "#d")
    )
    assert (
        BarFilters.parse("", "").kwargs() == {"path": None, "tags": [], "exclude": []}
        and not BarFilters()
    )
    leave_out = BarFilters.parse("journal/ -journal/old -Archive/* -", "")
    assert leave_out.kwargs() == {
        "path": "journal/",
        "tags": [],
        "exclude": ["journal/old", "Archive/*"],
    }
    assert leave_out.describe() == "path:journal/ -path:journal/old -path:Archive/*"
    status = Status(
        db="x.db",
        roots=(),
        documents=3,
        chunks=8,
        embedded_chunks=2,
        links=0,
        unresolved_links=0,
        tags=0,
        oversized_chunks=0,
        diagnostics={},
        frontmatter_warnings=0,
        chunker=None,
        encodings={},
        text_bytes=0,
        db_bytes=0,
        db_to_text=None,
        last_index_at=None,
    )
    assert embedding_coverage(status) == "embedded 2/8 (25%)"
    assert embedding_coverage(replace(status, embedded_chunks=0)).startswith("no embeddings")
    note = Location("tech/SQLite.md", "/v/tech/SQLite.md")
    assert sibling_abspath(note, "Garden.md") == "/v/Garden.md"
    text, spans = clip_snippet("x " * 100 + "MATCH" + " y" * 100, [(200, 205)], 60)
    assert len(text) <= 62 and [text[a:b] for a, b in spans] == ["MATCH"]


def test_pool_lends_each_kb_to_one_thread_at_a_time(index):
    pool = KBPool(index)
    barrier = threading.Barrier(3)
    held: list = []

    def borrow():
        with pool.kb() as kb:
            held.append(kb)
            barrier.wait(timeout=5)  # all three hold one at the same time

    threads = [threading.Thread(target=borrow) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(kb) for kb in held}) == 3 and pool.size() == 3
    with pool.kb() as kb:  # given back, then reused
        assert kb in held
    with pool.vector_kb() as a, pool.kb() as b:
        assert a is not b  # vector work has a KB of its own (its vectors are cached in memory)
    with pool.vector_kb() as again:
        assert again is a
    pool.close()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_missing_vectors_are_embedded_in_the_background_while_idle(tmp_path, monkeypatch):
    import kbase.tui.screens as screens

    db, _ = build(tmp_path, embedder=FakeEmbedder())
    con = kbase.store.db.connect(db)
    total = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    con.execute("DELETE FROM chunks_vec WHERE rowid IN (SELECT id FROM chunks WHERE id % 2 = 0)")
    con.execute("UPDATE chunks SET embedded = 0 WHERE id % 2 = 0")  # half the vectors are missing
    missing = con.execute("SELECT count(*) FROM chunks WHERE NOT embedded").fetchone()[0]
    con.close()
    monkeypatch.setattr(screens, "IDLE_S", 1.5)
    embedder = FakeEmbedder()
    posted: list = []
    app = make_app(db, kb_factory=lambda p: KB(p, embedder=embedder))
    async with app.run_test(size=(120, 30), message_hook=posted.append) as pilot:
        screen = main(app)
        await wait_for(pilot, lambda: "embedding while idle" in screen_text(app))
        screen.search_input.focus()
        await pilot.press(*"tomato")  # typing: the background work waits
        steps = lambda: [m.remaining for m in sent(posted, EmbedProgress)]  # noqa: E731
        await wait_for(pilot, lambda: 0 in steps(), timeout=20)
        assert steps() == sorted(steps(), reverse=True) and len(steps()) >= 1
        await settle(pilot)
        assert f"embedded {total}/{total} (100%)" in screen_text(app)
    assert (
        kbase.store.db.connect(db, readonly=True)
        .execute("SELECT count(*) FROM chunks WHERE NOT embedded")
        .fetchone()[0]
        == 0
    )
    assert missing > 0


@pytest.mark.asyncio
async def test_an_index_built_without_embeddings_stays_keyword_only(index):
    app = make_app(index)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert "no embeddings" in screen_text(app) and "embedding while idle" not in screen_text(
            app
        )
        assert not any(w.group == "embed" for w in app.workers)


# --- issue 28: the first keystroke, a preview at once, callouts ---------------------------------
@pytest.mark.asyncio
async def test_question_mark_in_the_empty_search_box_opens_the_help(index):
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = main(app)
        assert app.focused is screen.search_input  # where a new user's first key goes
        assert "F1 or ? help" in screen.search_input.placeholder
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and screen.search_input.value == ""
        await pilot.press("escape")
        await pilot.pause()
        screen.search_input.focus()
        await pilot.press("w", "h", "y", "question_mark")  # in a query, ? is typed
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen) and screen.search_input.value == "why?"


@pytest.mark.asyncio
async def test_the_preview_shows_the_hits_text_before_the_note_is_rendered(index, monkeypatch):
    import asyncio

    from kbase.tui.widgets import PreviewPane

    never = asyncio.Event()

    async def slow_render(self, doc, location):  # Markdown that takes its time
        await never.wait()

    monkeypatch.setattr(PreviewPane, "_render_document", slow_render)
    app = make_app(index)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any(isinstance(s, MainScreen) for s in app.screen_stack))
        screen = main(app)
        screen.search_input.value = "tomatoes"
        await wait_for(pilot, lambda: screen.preview.location is not None, timeout=10)
        await pilot.pause()
        shown = str(screen.preview.query_one("#preview-empty").render())
        assert "Tomatoes need sun" in shown and screen.preview.border_title == "Garden"
        never.set()


def test_callouts_read_as_their_title_in_the_preview():
    from kbase.tui.logic import wikilinks_to_markdown

    text = (
        "> [!info]+ Read this first\n> body [[Note]]\n\n> [!NOTE]\n> more\n\n"
        "```\n> [!x] kept\n```\n"
    )
    out = wikilinks_to_markdown(text)
    assert out.splitlines()[0] == "> **Read this first**"
    assert out.splitlines()[3] == "> **Note**"
    assert "> [!x] kept" in out  # code stays as written
    assert out.count("\n") == text.count("\n")


def _hit_in_view(screen) -> bool:
    """The preview's hit block lies inside the scrolling view (on screen)."""
    block, scroll = screen.preview.hit_block, screen.preview.query_one("#md-scroll")
    return block is not None and block.region.overlaps(scroll.region)


@pytest.mark.asyncio
async def test_a_hit_on_a_reference_definition_at_the_end_shows_the_block_before_it(tmp_path):
    """A link reference definition renders as no block: a hit on one at the end of a note (the
    rust-book's '[nomicon]: https://...' lines) showed the top of the note, not its end."""
    body = "".join(f"Paragraph {i} says nothing much at all.\n\n" for i in range(40))
    vault = write(
        tmp_path / "vault",
        {"Refs.md": f"# Refs\n\n{body}The last words.\n\n[zebra]: https://example.org/zebra\n"},
    )
    db = tmp_path / "index.db"
    kbase.open(db).index([vault], embed=False)
    app = make_app(db)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "zebra")
        screen = main(app)
        hit = screen.results.current
        assert hit.line == body.count("\n") + 5  # the definition's line
        block = screen.preview.hit_block
        assert block is not None and "The last words." in (block.source or "")
        assert _hit_in_view(screen)


@pytest.mark.asyncio
async def test_the_hit_stays_in_view_when_the_terminal_is_resized(tmp_path):
    """The preview reflows at another width: the same scroll offset showed other lines, and the
    hit was left above or below the view."""
    filler = "".join(
        f"Paragraph {i} is a long line of words that wraps once the pane is narrow enough.\n\n"
        for i in range(60)
    )
    vault = write(tmp_path / "vault", {"Long.md": f"# Long\n\n{filler}The walrus is here.\n"})
    db = tmp_path / "index.db"
    kbase.open(db).index([vault], embed=False)
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await type_query(pilot, "walrus")
        screen = main(app)
        assert "walrus" in (screen.preview.hit_block.source or "") and _hit_in_view(screen)
        for size in ((220, 50), (80, 24), (120, 40)):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            await pilot.pause(0.1)
            assert _hit_in_view(screen), size


@pytest.mark.asyncio
async def test_the_note_followed_from_a_hit_stays_when_the_results_are_drawn_again(index):
    """Resizing draws the results again, and coming back from the editor searches again: neither
    picks the hit anew, which showed it in the preview in place of the note a link led to (the
    note just edited) and dropped the history."""
    app = make_app(index)
    opened: list = []
    app.open_in_editor = opened.append  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await type_query(pilot, "pinch shoots")
        screen = main(app)
        await pilot.press("escape", "3", "enter")  # follow Garden's link to Compost
        await settle(pilot)
        assert screen.preview.location.path == "Compost.md" and screen.history_pos == 1
        before = screen.results.get_option_at_index(0).prompt.plain
        await pilot.resize_terminal(160, 40)
        await settle(pilot)
        assert screen.preview.location.path == "Compost.md" and screen.history_pos == 1
        assert screen.results.get_option_at_index(0).prompt.plain != before  # drawn again
        await pilot.press("ctrl+o")
        await settle(pilot)
        assert opened[0][-1].endswith("Compost.md")
        assert screen.preview.location.path == "Compost.md" and screen.history_pos == 1
        await pilot.press("alt+left")  # and back to the hit, as before
        await settle(pilot)
        assert screen.preview.location.path == "Garden.md"
