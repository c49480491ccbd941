"""Reference-style Markdown links (CommonMark link reference definitions), as mdBook writes them:
parsed with exact offsets, stored and resolved in a real index, hidden from snippets."""

from __future__ import annotations

import re

import pytest

import kbase
from kbase.indexer import pipeline
from kbase.ingest.chunk import ChunkSettings
from kbase.ingest.links import parse_links
from kbase.ingest.markup import ends_in_definition, render
from kbase.ingest.parse import parse
from kbase.store import db
from tests.conftest import shared, write

CHAPTER = (
    "# What Is Ownership?\n\n"
    "Ownership rules are simple. See [“Data Types”][data-types], [Chapter 8][ch8],\n"
    "[the tree][] and [Strings]. Not a link: [undefined][nope], `[Chapter 8][ch8]` in code,\n"
    "\\[Chapter 8][ch8] escaped, and [^1] a footnote.\n\n"
    "```rust\n// [x][ch8] in a code block\n```\n\n"
    "![diagram][img] and [external][web].\n\n"
    "[^1]: A footnote, not a definition.\n\n"
    "[data-types]: ch03-02-data-types.html#data-types\n"
    '[CH8]: ch08-02-strings.html "Strings"\n'
    "[the tree]: <ch07 paths.md#Paths>\n"
    "[strings]: ch08-02-strings.md#storing-utf-8-encoded-text-with-strings\n"
    "[img]: img/trpl04-01.svg\n"
    "[web]: https://doc.rust-lang.org/std/\n"
    "[ch8]: ignored-second-definition.md\n"
)


def refs(text: str, path: str = "ch04-01-what-is-ownership.md"):
    doc = parse(text, path)
    return doc, parse_links(doc)


def test_reference_links_are_parsed_with_exact_offsets():
    doc, found = refs(CHAPTER)
    got = [
        (doc.text[lk.start : lk.end], lk.target, lk.anchor, lk.alias, lk.embed, lk.kind)
        for lk in found
    ]
    assert got == [
        (
            "[“Data Types”][data-types]",
            "ch03-02-data-types.html",
            "data-types",
            "“Data Types”",
            False,
            "markdown",
        ),
        ("[Chapter 8][ch8]", "ch08-02-strings.html", None, "Chapter 8", False, "markdown"),
        ("[the tree][]", "ch07 paths.md", "Paths", "the tree", False, "markdown"),
        (
            "[Strings]",
            "ch08-02-strings.md",
            "storing-utf-8-encoded-text-with-strings",
            "Strings",
            False,
            "markdown",
        ),
        ("![diagram][img]", "img/trpl04-01.svg", None, "diagram", True, "markdown"),
    ]


def test_reference_links_mix_in_order_with_inline_links_and_skip_code():
    text = (
        "A [[Wiki]] then [ref][r] then [inline](b.md) then [[Wiki|x]] [r].\n\n"
        "    [indented][r] is code\n\n"
        "> quoted [ref][r]\n\n"
        "[r]: a.md\n"
    )
    doc, found = refs(text)
    assert [doc.text[lk.start : lk.end] for lk in found] == [
        "[[Wiki]]",
        "[ref][r]",
        "[inline](b.md)",
        "[[Wiki|x]]",
        "[r]",
        "[ref][r]",
    ]
    assert [lk.target for lk in found if lk.kind == "markdown"] == ["a.md", "b.md", "a.md", "a.md"]


def test_a_definition_inside_a_paragraph_or_code_defines_nothing():
    text = "Text [x][y] here\n[y]: a.md\n\n```\n[z]: b.md\n```\n\n[z] and [x][y].\n"
    assert refs(text)[1] == []


@pytest.fixture
def book(tmp_path):
    return write(
        tmp_path / "book",
        {
            "ch04-01-what-is-ownership.md": CHAPTER,
            "ch03-02-data-types.md": "# Data Types\n\nScalars.\n",
            "ch08-02-strings.md": "# Strings\n\n## Storing UTF-8 Encoded Text with Strings\n\nx\n",
            "ch07 paths.md": "# Paths\n\ny\n",
            "img/trpl04-01.svg": "<svg/>",
            "page.html": "<p>a real html page</p>",
            "linker.md": "[real][p] and [book][o], [[ch08-02-strings#storing-utf-8-encoded-text"
            "-with-strings]] and [self](#linker)\n\n# Linker\n\n"
            "[p]: page.html\n[o]: ch03-02-data-types.html#nope\n",
        },
    )


def test_reference_links_are_stored_and_resolved_in_the_index(tmp_path, book):
    con = db.connect(tmp_path / "r.db", create=True)
    pipeline.index(con, [book])
    rows = con.execute(
        "SELECT s.path, l.start_char, l.end_char, l.kind, l.target, l.anchor, l.alias,"
        " coalesce(t.path, l.target_path), l.anchor_ok FROM links l"
        " JOIN documents s ON s.id = l.doc_id LEFT JOIN documents t ON t.id = l.target_id"
        " ORDER BY s.path, l.start_char"
    ).fetchall()
    texts = {p: (book / p).read_text(encoding="utf-8") for p in {r[0] for r in rows}}
    for path, start, end, *_ in rows:
        assert texts[path][start:end].startswith(("[", "!["))  # body[start:end] is the link
    got = {(r[0], texts[r[0]][r[1] : r[2]]): (r[3], r[7], r[8]) for r in rows}
    ch = "ch04-01-what-is-ownership.md"
    # An mdBook '.html' target with no such file is the '.md' of the same stem, and its anchor
    # is the heading's HTML id.
    assert got[(ch, "[“Data Types”][data-types]")] == ("markdown", "ch03-02-data-types.md", 1)
    assert got[(ch, "[Chapter 8][ch8]")] == ("markdown", "ch08-02-strings.md", None)
    assert got[(ch, "[the tree][]")] == ("markdown", "ch07 paths.md", 1)
    # A Markdown link's anchor may be a heading's HTML id (GitHub's and mdBook's), to a '.md' too.
    assert got[(ch, "[Strings]")] == ("markdown", "ch08-02-strings.md", 1)
    assert got[(ch, "![diagram][img]")] == ("markdown", "img/trpl04-01.svg", None)
    # With no page.md, page.html stays unresolved (kbase does not index .html files); a wrong
    # HTML id is a broken anchor.
    assert got[("linker.md", "[real][p]")] == ("markdown", None, None)
    assert got[("linker.md", "[book][o]")] == ("markdown", "ch03-02-data-types.md", 0)
    # A wikilink names a heading as Obsidian does: an HTML id is no heading of it.
    wiki = "[[ch08-02-strings#storing-utf-8-encoded-text-with-strings]]"
    assert got[("linker.md", wiki)] == ("wiki", "ch08-02-strings.md", 0)
    assert got[("linker.md", "[self](#linker)")] == ("markdown", "linker.md", 1)
    assert len(rows) == 9
    con.close()
    kb = kbase.open(tmp_path / "r.db")
    back = {lk.source_path for lk in kb.backlinks("ch03-02-data-types.md")}
    assert back == {ch, "linker.md"}


def test_definition_lines_do_not_show_in_snippets(tmp_path, book):
    con = db.connect(tmp_path / "s.db", create=True)
    pipeline.index(con, [book])
    con.close()
    kb = kbase.open(tmp_path / "s.db")
    (hit,) = kb.search("ownership rules", mode="keyword")  # the passage before the definitions
    assert hit.snippet.startswith("…Ownership rules are simple. See “Data Types”, Chapter 8")
    for raw in ("[data-types]:", "[web]:", "][data", ".html#data-types"):
        assert raw not in hit.snippet, hit.snippet
    rendered = render('See [“Data Types”][data-types].\n\n[data-types]: ch03.html#x "T"\nNext\n')[0]
    assert rendered == "See “Data Types”.\n\nNext\n"


def test_the_rust_book_chapters_link_to_each_other(tmp_path):
    vault = shared("vaults", "rust-book")
    doc = parse((vault / "ch04-01-what-is-ownership.md").read_text(encoding="utf-8"), "x.md")
    found = parse_links(doc)
    assert len(found) >= 5
    for lk in found:
        assert doc.text[lk.start : lk.end].endswith("]")
        assert lk.target.endswith(".html") and lk.kind == "markdown"


def test_a_match_only_in_definitions_shows_the_definition_line(tmp_path, book):
    """The words of a definition are hidden when read, but they match (mdBook's definitions hold
    the names of the pages they link to): the hit shows the source from the matched line and
    gives that line, rather than another line's text with nothing highlighted."""
    kb = kbase.open(tmp_path / "d.db")
    kb.index([book], embed=False)
    (hit,) = kb.search("doc.rust-lang.org", mode="keyword")
    assert hit.snippet.startswith("…[web]: https://doc.rust-lang.org/std/"), hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["doc.rust-lang.org"]
    lines = CHAPTER.splitlines()
    assert lines[hit.line - 1].startswith("[web]: https://doc.rust-lang.org")


def test_a_definition_may_put_its_destination_and_title_on_the_next_line():
    text = (
        "See [the guide][g], [the api][a] and [Note].\n\n"
        "[g]:\n  guide.md#setup\n"
        '[a]: api.md\n  "The API"\n'
        "[note]: note.md\n"
        '  "not a title" and more words\n\n'
        "[Note]: some words of a paragraph\n"
    )
    doc, found = refs(text, "index.md")
    got = [(doc.text[lk.start : lk.end], lk.target, lk.anchor) for lk in found]
    assert got == [
        ("[the guide][g]", "guide.md", "setup"),
        ("[the api][a]", "api.md", None),
        ("[Note]", "note.md", None),
        (
            "[Note]",
            "note.md",
            None,
        ),  # of the paragraph '[Note]: some words', a link as in CommonMark
    ]
    rendered = render(text)[0]
    # The three definitions go whole (a next line that is no title stays: it is a paragraph);
    # '[Note]: some words' is a paragraph too, shown as written.
    assert "guide.md" not in rendered and "api.md" not in rendered and "note.md" not in rendered
    assert "The API" not in rendered
    assert '"not a title" and more words' in rendered
    assert "[Note]: some words of a paragraph" in rendered


def test_the_japanese_rust_book_links_a_definition_written_over_two_lines():
    """rust-book-ja writes some definitions as '[label]:' and the destination on the next line
    (18 of them in -ja and -zh were not links before)."""
    vault = shared("vaults", "rust-book-ja")
    path = "ch11-01-writing-tests.md"
    text = (vault / path).read_text(encoding="utf-8")
    doc = parse(text, path)
    targets = {lk.target for lk in parse_links(doc)}
    assert "ch11-02-running-tests.html" in targets


def test_chunks_of_definitions_start_at_a_line_start(tmp_path):
    """A chunk that opens on a link reference definition opens at its line's start: the next
    chunk's overlap was taken from the definitions before it (a run of them, or the one that
    ends a list item), at a space inside a line, so the chunk began with a label's later words
    or a bare URL (19 of Material for MkDocs' 106 chunks on a definition line, 2 of MkDocs'
    10), which showed as text and was not seen as definitions alone."""
    labels = [f"Plugin {i}: the settings of the blog, the tags and the cards" for i in range(40)]
    page = (
        "# Plugins\n\n"
        + "The plugins are listed here with their settings and what each does. " * 3
        + "\n\n"
        + "".join(f"[{label}]: ../p{i}.md\n" for i, label in enumerate(labels))
        + "[MkDocs Bootswatch]: https://mkdocs.github.io/mkdocs-bootswatch/\n\n"
        + "They will be included with the site by default until a future release. " * 3
        + "\n"
    )
    item = "We are doubling down on Open Source, as it is at the heart of the value of our work. "
    items = "".join(
        f"- {item * 2}It is our [organic approach to growth {i}].\n\n"
        f"  [organic approach to growth {i}]: https://star-history.com/#squidfunk/m-{i}\n\n"
        for i in range(4)
    )
    root = write(tmp_path / "site", {"insiders.md": page, "future.md": f"# Ahead\n\n{items}"})
    kb = kbase.open(tmp_path / "d.db")
    kb.index([root], embed=False, settings=ChunkSettings(max_tokens=200, overlap_ratio=0.12))
    on_definitions = 0
    for start, body in kb.reader.execute(
        "SELECT c.start_char, d.body FROM chunks c JOIN documents d ON d.id = c.doc_id"
    ):
        line_start = body.rfind("\n", 0, start) + 1
        line = body[line_start : body.find("\n", start)]
        if re.match(r" {0,3}\[[^\]]+\]:", line):
            on_definitions += 1
            assert not body[line_start:start].strip(), line
    assert on_definitions > 4  # the run is cut into chunks of its own
    kb.close()


@pytest.mark.parametrize(
    "text, start, ends",
    [
        ("Text.\n\n[a b]: a.md", 0, True),
        ("  [a b]: https://x.y/z\n  [c d]: ../c.md#d", 2, True),  # indented, from the '['
        ("[g]:\r\n  guide.md\r\n  'The guide'", 0, True),  # over three lines, CRLF
        ("[Note]: some words of a paragraph", 0, False),
        ("[a]: a.md\n\nThen a paragraph.", 0, False),
        ("See [a] and [b].", 0, False),
    ],
)
def test_ends_in_definition(text, start, ends):
    assert ends_in_definition(text, start) is ends


def test_shortcut_reference_links_show_their_text_in_snippets(tmp_path):
    """'[text]' is a link where the note defines its label (CommonMark, case and spaces aside)
    and shows its text, as '[text][label]' does; one without a definition, and a task's '[x]',
    stay as written (MkDocs' docs link so: 206 such links, Material for MkDocs' 1,160)."""
    page = (
        "# Theme\n\n"
        "Customize with [Customizing  your theme], [the guide][], ![logo] and [MkDocs],"
        " not [undefined] nor `[MkDocs]` in code; zebra.\n\n"
        "- [x] zebra done\n- [ ] zebra open\n\n"
        "```\n[undefined]: code.md\n```\n\n"
        "[customizing your theme]: customizing.md#custom_dir\n"
        "[the guide]: guide.md\n"
        "[logo]: logo.png\n"
        "[x]: x.md\n"
        "  [mkdocs]: https://www.mkdocs.org/\n"
    )
    root = write(tmp_path / "site", {"theme.md": page, "customizing.md": "# Customizing\n"})
    kb = kbase.open(tmp_path / "s.db")
    kb.index([root], embed=False)
    (hit,) = kb.search("zebra", mode="keyword")
    assert hit.snippet == (
        "…Customize with Customizing your theme, the guide, logo and MkDocs, not [undefined]"
        " nor [MkDocs] in code; zebra. zebra done zebra open [undefined]: code.md"
    ), hit.snippet
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["zebra"] * 3
    # Recorded as links as '[text][label]' is: the local ones.
    links = {(lk.target, lk.anchor) for lk in kb.links("theme.md")}
    assert links == {("customizing.md", "custom_dir"), ("guide.md", None), ("logo.png", None)}
    kb.close()
