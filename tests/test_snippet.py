"""Snippets read as text: Markdown rendered away, highlights and line numbers exact."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbase
from bench.markup import markup_in  # the fixed list of markup a snippet must not show
from kbase.ingest.markup import plain, render
from kbase.search.snippet import CLOSE, OPEN, snippet, unmark
from tests.conftest import examples, shared


def visible(markdown: str) -> str:
    return " ".join(render(markdown)[0].split())


@pytest.mark.parametrize(
    "source, expected",
    [
        ("## Recover a **snapshot**", "Recover a snapshot"),
        ("Use [[Sync settings|the settings]] now", "Use the settings now"),
        (
            "See [[Version history#Restore a file]] and [[Note#^abc]]",
            "See Version history > Restore a file and Note",
        ),
        ("Jump to [[#Usage]]", "Jump to Usage"),
        ("![[attachments/diagram.png]]^version-history-image", "diagram.png"),
        ("> [!info]+ Good to know\n> You can restore it.", "Good to know You can restore it."),
        ("> [!warning]\n> Careful.", "Warning Careful."),
        ("> # Quoted heading\n> text", "Quoted heading text"),
        ("Text %% private %% more <!-- hidden\nacross lines --> end", "Text more end"),
        ("A paragraph. ^block-1", "A paragraph."),
        ("```python\nprint(1)\n```", "print(1)"),
        ("| Col | Other |\n|---|:---:|\n| a | b |", "Col · Other a · b"),
        (
            "- [ ] #task water the plants 📅 2024-01-01\n1. first",
            "#task water the plants 📅 2024-01-01 first",
        ),
        (
            "*this* and _that_, not snake_case_name or 2 * 3 or ~~old~~ ==new==",
            "this and that, not snake_case_name or 2 * 3 or old new",
        ),
        (
            "![alt text](https://x.org/a.png) [Obsidian](https://obsidian.md) <https://x.org>",
            "alt text Obsidian https://x.org",
        ),
        ('<span class="x">html</span> and `code` and \\*escaped\\*', "html and code and *escaped*"),
        (
            '<img alt="A web page saying hello" src="a.png" /> <img src="b.png">',
            "A web page saying hello",
        ),
        ("A note[^1] with $$x^2$$", "A note[^1] with x^2"),
        # a tag that breaks a line leaves a space, an inline one nothing
        ("| `hide due date`<br>`hide start date` |", "hide due date hide start date"),
        ("<p>one</p><p>two</p> <b>bo</b>ld", "one two bold"),
        ("[**data attributes**](https://x.org) and [[Note|*alias*]]", "data attributes and alias"),
        ("Title with closing hashes ##\n===", "Title with closing hashes"),
        ("offered by task]], then](../img.gif) more [[cut", "offered by task, then more cut"),
    ],
)
def test_render_removes_markdown_syntax(source, expected):
    assert visible(source) == expected


def test_every_output_character_knows_its_source():
    text = "## Head\n\nSee [[Note#Part|alias]] and **bold** `code`."
    out, source = render(text)
    assert len(out) == len(source)
    for ch, at in zip(out, source):
        assert ch == " " or ch == ">" or text[at] == ch  # inserted " > " maps to its link


def test_snippet_highlights_are_exact_in_the_rendered_text_and_anchor_gives_the_line():
    text = (
        "Intro line\n\n## Recover a snapshot\n\n"
        "Open [[Sync|Sync settings]] then **restore** the snapshot."
    )
    marked = text.replace("snapshot", f"{OPEN}snapshot{CLOSE}").replace(
        "restore", f"{OPEN}restore{CLOSE}"
    )
    raw, ranges = unmark(marked)
    assert raw == text
    out, highlights, anchor = snippet(raw, ranges)
    assert out == "Intro line Recover a snapshot — Open Sync settings then restore the snapshot."
    assert [out[a:b] for a, b in highlights] == ["snapshot", "restore", "snapshot"]
    assert text[anchor:].startswith("snapshot") and text.count("\n", 0, anchor) == 2


def test_a_match_hidden_by_rendering_does_not_decide_the_window():
    """A match inside a link's target is not shown: the window goes to the first visible one."""
    text = "[[garden-notes|My notes]] " + "filler " * 40 + "garden beds"
    ranges = [(2, 8), (text.rindex("garden"), text.rindex("garden") + 6)]
    out, highlights, anchor = snippet(text, ranges)
    assert [out[a:b] for a, b in highlights] == ["garden"]
    assert anchor == ranges[1][0] and out.startswith("…")


def test_plain_text_documents_are_not_rendered():
    text = "# not a heading in a .txt file and **stars** stay"
    assert snippet(text, markdown=False)[0] == text
    assert snippet(text)[0] == "not a heading in a .txt file and stars stay"


def test_long_snippets_are_cut_with_an_ellipsis_but_keep_a_match_whole():
    text = "word " * 30 + "needle " + "tail " * 100
    start = text.index("needle")
    out, highlights, _ = snippet(text, [(start, start + 6)])
    assert out.startswith("…") and out.endswith("…") and len(out) <= 202
    assert [out[a:b] for a, b in highlights] == ["needle"]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "word",
                "**",
                "[[",
                "]]",
                "|",
                "#",
                "## ",
                "\n",
                " ",
                "`",
                "%%",
                "> ",
                "- ",
                "^id",
                "<b>",
                "*",
                "_",
                "[x](y)",
                "!",
                "\\",
                "$$",
                "~~",
            ]
        ),
        max_size=40,
    ),
    st.data(),
)
def test_highlights_always_cover_matched_text(parts, data):
    text = "".join(parts)
    words = [m.span() for m in re.finditer(r"word", text)]
    ranges = data.draw(st.lists(st.sampled_from(words), unique=True).map(sorted)) if words else []
    out, highlights, anchor = snippet(text, ranges)
    assert 0 <= anchor <= len(text)
    for a, b in highlights:
        assert 0 <= a < b <= len(out) and set(out[a:b]) <= set("word")


def test_titles_are_plain_text():
    assert (
        plain("**Bold** title with [[Link|alias]] and `code`") == "Bold title with alias and code"
    )


@pytest.mark.parametrize("vault", ["obsidian-tasks-docs", "foam-docs"])
def test_no_snippet_of_a_real_vault_shows_markup(vault):
    """Every chunk of the shared vaults, with its first word highlighted as a search would.
    Code is shown as written (a note about wikilinks quotes `[[them]]`): code blocks and inline
    code are replaced by letters first."""
    from kbase.ingest.chunk import chunk
    from kbase.ingest.parse import parse

    folder = shared("vaults", vault)
    seen = 0
    for path in sorted(folder.rglob("*.md")):
        doc = parse(path.read_text(encoding="utf-8"), path.name)
        body = list(doc.text)
        for b in doc.blocks:
            if b.kind == "code":
                body[b.start : b.end] = "c" * (b.end - b.start)
        body = "".join(body)
        # code blocks inside quotes and callouts too ('> ```' to '> ```')
        body = re.sub(
            r"^((?:> ?)+)[ \t]*(`{3,}|~{3,}).*?^(?:> ?)+[ \t]*\2[^\n]*$",
            lambda m: re.sub(r"[^\n]", "c", m.group(0)),
            body,
            flags=re.M | re.S,
        )
        for c in chunk(doc).chunks:
            text = re.sub(r"(?<!`)(`+)(?!`)[^\r\n]+?(?<!`)\1(?!`)", "code", body[c.start : c.end])
            word = re.search(r"[A-Za-z]{4,}", text)
            ranges = [word.span()] if word else []
            out = snippet(text, ranges)[0]
            assert not markup_in(out), f"{path.name} line {c.line}: {markup_in(out)} in {out!r}"
            for line in render(text)[0].splitlines():  # a heading marker starts a line
                assert not re.match(r"\s*#{1,6} ", line), (
                    f"{path.name} line {c.line}: heading marker in {line!r}"
                )
            seen += 1
    assert seen > 100


def test_a_heading_is_set_off_from_the_text_after_it():
    """Folded onto one line, a heading and its paragraph would run together ('Setup Install
    it'); a separator keeps them apart, whatever ends the heading's line."""
    for text in (
        "# Setup\n\nInstall it.",
        "## Setup ##\r\nInstall it.",
        "> ### Setup  \n> Install it.",
    ):
        assert snippet(text)[0] == "Setup — Install it."
    assert snippet("Setup\n\nInstall it.")[0] == "Setup Install it."  # not a heading
    assert snippet("#tag\nInstall it.")[0] == "#tag Install it."  # a tag, not a heading
    assert snippet("# Setup\n\nInstall it.", markdown=False)[0] == "# Setup Install it."
    text = "# Setup\n\nInstall it."
    out, highlights, _ = snippet(text, [(text.index("Install"), text.index("Install") + 7)])
    assert [out[a:b] for a, b in highlights] == ["Install"]


def test_snippets_keep_code_exactly_and_footnote_markers_readable():
    from kbase.search.snippet import snippet

    text = (
        "# Footnotes\n\nUse this syntax:\n\n```markdown\nThe study.[^1] More **work**.\n\n"
        "[^1]: Smith et al.\n```\n\nHover over `[^1]` or `[[Note|alias]]` to see it.[^note]\n"
    )
    out = snippet(text)[0]
    assert "The study.[^1] More **work**. [^1]: Smith et al." in out  # the code, as written
    assert "Hover over [^1] or [[Note|alias]] to see it.[^note]" in out
    assert "```" not in out and "# Footnotes" not in out
    quoted = "> [!example] Try it\n> ```text\n> # not a heading **x**\n> ```\n> after **it**\n"
    assert snippet(quoted)[0] == "Try it # not a heading **x** after it"


def test_search_for_a_footnote_shows_the_marker(tmp_path):
    from tests.conftest import shared

    foam = shared("vaults", "foam-docs")
    k = kbase.open(tmp_path / "f.db")
    k.index([foam], embed=False)
    hit = k.search("hypothesis methodology", mode="keyword")[0]
    assert hit.path.endswith("footnotes.md")
    assert "The study confirmed the hypothesis.[^1] Further work is needed.[^note]" in hit.snippet
    assert "[^1]: Smith et al." in hit.snippet


def test_a_passage_that_renders_to_nothing_shows_its_source(tmp_path):
    """A chunk that is one HTML comment (rust-book-ja keeps the English original so) renders to
    nothing; its hit shows the comment's source from the line of the first match, not an empty
    line."""
    from tests.conftest import write

    comment = "<!--\n" + "The variants of the enum are namespaced under its name.\n" * 20 + "-->"
    body = f"# Enum\n\n{'An enum lists the values a type can take. ' * 30}\n\n{comment}\n"
    k = kbase.open(tmp_path / "e.db")
    k.index([write(tmp_path / "v", {"Enum.md": body})], embed=False)
    hit = k.search("namespaced", mode="keyword")[0]
    assert hit.snippet.startswith("…The variants of the enum are namespaced")
    assert hit.highlights and hit.line == 6  # the first match


def test_a_link_whose_long_destination_the_chunk_leaves_out_shows_its_text(tmp_path):
    """Vue's docs end each example with '[Try it in the Playground](https://play.vuejs.org/#...)',
    a URL of hundreds of characters the index leaves out of its chunks: the chunk ends at '](',
    and its snippet showed '[Try it in the Playground](' (118 chunks of vue-docs-en end so)."""
    from tests.conftest import write

    url = "https://play.vuejs.org/#eNp9Us1Og0AQfpUJF5ZYqV4JNTaNxyYmVi" + "x7Q2aB" * 120 + "="
    body = (
        '# Models\n\n```vue\n<input v-model="x" />\n```\n\n'
        f"[Try it in the Playground]({url})\n\n</details>\n\nModifiers come as a prop.\n"
    )
    k = kbase.open(tmp_path / "p.db")
    k.index([write(tmp_path / "v", {"m.md": body})], embed=False)
    (hit,) = k.search("playground", mode="keyword")
    assert body.find("](") + 2 in {end for (end,) in k.sql("SELECT end_char FROM chunks").rows}
    assert hit.snippet.endswith("Try it in the Playground") and "](" not in hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["Playground"]
    assert render("[Try it](https://x.org/#abc")[0] == "Try it"  # cut anywhere after '](':
    assert render("[Try it](https://x.org/#abc\nmore")[0] == "[Try it](https://x.org/#abc\nmore"


def test_the_line_holds_a_word_the_snippet_shows(tmp_path):
    """The line is that of the passage in view holding the most of the query's words; when that
    passage starts inside the snippet but its words lie past the snippet's end (rust-book's
    ch13-02 for 'over and can': line 25, its 'and' cut off, while 'can' and 'over' shown are on
    line 23), the line is that of the first word shown."""
    from tests.conftest import write

    body = (
        "# Iterators\n\n"
        "The iterator is stored in the `v1_iter` variable. Once we have created an\n"
        "iterator, we can use it in a variety of ways. In Listing 3-5, we iterated over\n"
        "an array using a `for` loop to execute some code on each of its items. Under\n"
        "the hood, this implicitly created and then consumed an iterator, but we glossed\n"
        "over how exactly that works until now.\n"
    )
    k = kbase.open(tmp_path / "i.db")
    k.index([write(tmp_path / "v", {"Iterators.md": body})], embed=False)
    (hit,) = k.search("over and can", mode="keyword")
    marked = [hit.snippet[a:b].casefold() for a, b in hit.highlights]
    assert marked and "and" not in marked  # cut off: past the snippet's width
    line = body.splitlines()[hit.line - 1].casefold()
    assert any(re.search(rf"\b{m}\b", line) for m in marked), (hit.line, line, marked)


@pytest.mark.parametrize(
    "text, word",
    [
        ("Links to [[Note two#Section B]] and more.", "Section"),
        ("Back to [[Deep/Note two#Part A#Section B]] here.", "Section"),
        ("See [[Guide#Install]].", "Install"),
    ],
)
def test_a_highlight_is_the_word_not_the_separator_rendering_adds(text, word):
    """'[[Note#Heading]]' reads 'Note > Heading': the highlight of a match on 'Heading' (or on
    '#Heading') is 'Heading', not '> Heading'."""
    at = text.index(word)
    for a in (at, at - 1):  # the word, or the word with its '#'
        out, highlights, _ = snippet(text, [(a, at + len(word))])
        assert [out[x:y] for x, y in highlights] == [word], (a, out)
