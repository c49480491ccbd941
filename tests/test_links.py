"""kbase.ingest.links: parsing links out of notes and resolving them the way Obsidian does."""

from __future__ import annotations

import posixpath
import random
import re
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbase.ingest.links import (
    LinkRef,
    Resolver,
    anchor_ok,
    block_ids,
    heading_slug,
    is_attachment,
    parse_links,
)
from kbase.ingest.parse import parse
from kbase.records import Block, Heading, ParsedDoc
from tests.conftest import examples, shared


def links(text: str, path: str = "note.md") -> list[LinkRef]:
    return parse_links(parse(text, path))


def sources(text: str) -> list[str]:
    """The exact source of each link found in ``text``."""
    return [text[link.start : link.end] for link in links(text)]


def one(text: str) -> LinkRef:
    found = links(text)
    assert len(found) == 1, found
    return found[0]


# ------------------------------------------------------------------------- wikilink forms


@pytest.mark.parametrize(
    "source, target, anchor, alias, embed",
    [
        ("[[Note]]", "Note", None, None, False),
        ("[[Note|alias]]", "Note", None, "alias", False),
        ("[[Note#Heading]]", "Note", "Heading", None, False),
        ("[[Note#Heading#Sub]]", "Note", "Heading#Sub", None, False),
        ("[[Note#^block-1]]", "Note", "^block-1", None, False),
        ("[[#Heading]]", "", "Heading", None, False),
        ("[[#^block]]", "", "^block", None, False),
        ("[[Note#Heading|shown text]]", "Note", "Heading", "shown text", False),
        ("[[folder/Note.md]]", "folder/Note.md", None, None, False),
        ("![[Note]]", "Note", None, None, True),
        ("![[Note#Section]]", "Note", "Section", None, True),
        ("![[doc.pdf#page=3]]", "doc.pdf", "page=3", None, True),
        ("![[img.png|a caption]]", "img.png", None, "a caption", True),
        ("[[Nöte with 'quotes']]", "Nöte with 'quotes'", None, None, False),
        ("[[  foo   |foo > ^abc]]", "foo", None, "foo > ^abc", False),  # target trimmed
        ("[[foo#^abc ]]", "foo", "^abc", None, False),
        ("[[link|]]", "link", None, "", False),  # blank display text
        ("[[x|Example **bold**, *italic*]]", "x", None, "Example **bold**, *italic*", False),
    ],
)
def test_wikilink_forms(source, target, anchor, alias, embed):
    text = f"Before {source} after.\n"
    link = one(text)
    assert text[link.start : link.end] == source
    assert (link.target, link.anchor, link.alias, link.embed, link.kind) == (
        target,
        anchor,
        alias,
        embed,
        "wiki",
    )


@pytest.mark.parametrize(
    "source, size, alias",
    [
        ("![[img.png|100]]", "100", None),
        ("![[img.png|100x200]]", "100x200", None),
        ("![[img.png|caption|640x480]]", "640x480", "caption"),
    ],
)
def test_embed_size_is_not_an_alias(source, size, alias):
    link = one(f"x {source} y")
    assert (link.size, link.alias, link.target, link.embed) == (size, alias, "img.png", True)


def test_a_size_on_a_plain_link_is_its_alias():
    link = one("[[img.png|100]]")
    assert (link.alias, link.size) == ("100", None)


def test_escaped_pipe_in_a_table_separates_target_and_alias():
    text = "| a | b |\n|---|---|\n| [[Filters#Dates\\|Dates]] | [[Sorting\\|Sort]] |\n"
    found = links(text)
    assert [text[x.start : x.end] for x in found] == [
        "[[Filters#Dates\\|Dates]]",
        "[[Sorting\\|Sort]]",
    ]
    assert [(x.target, x.anchor, x.alias) for x in found] == [
        ("Filters", "Dates", "Dates"),
        ("Sorting", None, "Sort"),
    ]


def test_offsets_are_exact_with_crlf_front_matter_and_unicode():
    text = "---\r\ntitle: é\r\n---\r\n# Ünïcode ✓\r\n\r\nA [[Ä]] and ![[b.png]]\r\n"
    assert sources(text) == ["[[Ä]]", "![[b.png]]"]


def test_links_come_in_order_and_are_all_found():
    text = "[[a]] [b](b.md) ![[c]] ![d](d.png) [[e|f]]\n\n- [[g]]\n> [[h]]\n# [[i]]\n"
    assert sources(text) == [
        "[[a]]",
        "[b](b.md)",
        "![[c]]",
        "![d](d.png)",
        "[[e|f]]",
        "[[g]]",
        "[[h]]",
        "[[i]]",
    ]
    starts = [x.start for x in links(text)]
    assert starts == sorted(starts)


@pytest.mark.parametrize(
    "text",
    [
        "[[unclosed link\n\nRegular text.",
        "![[Partial embed",
        "![[Not a valid embed.]\n",
        "[[two\nlines]]",
        "[[]] and [[ ]] and [[|x]]",
        "\\[[escaped bracket]]",
    ],
)
def test_not_links(text):
    assert links(text) == []


def test_unclosed_bracket_does_not_swallow_the_next_link():
    assert sources("[[unclosed [[closed]] ![[Partial embed\n\n![image, not embed](white.png)") == [
        "[[closed]]",
        "![image, not embed](white.png)",
    ]


def test_escaped_bang_makes_a_plain_link():
    text = "\\![[x]]"
    link = one(text)
    assert (text[link.start : link.end], link.embed) == ("[[x]]", False)


# ------------------------------------------------------------------------- Markdown links


@pytest.mark.parametrize(
    "source, target, anchor, alias, embed",
    [
        ("[text](other.md)", "other.md", None, "text", False),
        ("[t](<path with spaces.md>)", "path with spaces.md", None, "t", False),
        ("[t](other.md#heading)", "other.md", "heading", "t", False),
        ("[t](other%20note.md)", "other note.md", None, "t", False),
        ("[t](Three%20laws#Some%20heading)", "Three laws", "Some heading", "t", False),
        ("[t](N%C3%B6te.md)", "Nöte.md", None, "t", False),
        ('[t](../images/x.png "a title")', "../images/x.png", None, "t", False),
        ("[t](a(1).md)", "a(1).md", None, "t", False),
        ("[t](#local-heading)", "", "local-heading", "t", False),
        ("[t](#^blockid)", "", "^blockid", "t", False),
        ("![alt](img.png)", "img.png", None, "alt", True),
        ("![](img.png)", "img.png", None, "", True),
        ("[a [nested] text](x.md)", "x.md", None, "a [nested] text", False),
    ],
)
def test_markdown_link_forms(source, target, anchor, alias, embed):
    text = f"Before {source} after.\n"
    link = one(text)
    assert text[link.start : link.end] == source
    assert (link.target, link.anchor, link.alias, link.embed, link.kind) == (
        target,
        anchor,
        alias,
        embed,
        "markdown",
    )


@pytest.mark.parametrize(
    "text",
    [
        "[web](https://example.com/x.md)",
        "[mail](mailto:me@example.com)",
        "[app](obsidian://open?vault=x)",
        "[file](file:///tmp/x.md)",
        "[proto-relative](//example.com/x)",
        "[empty]()",
        "[spaces](my note.md)",  # CommonMark: a bare destination has no spaces
        "[ref][label]",
        "[^1] footnote",
        "- [ ] task",
        "\\[escaped](x.md)",
    ],
)
def test_not_local_markdown_links(text):
    assert links(text) == []


def test_a_wikilink_wins_over_markdown_link_syntax_around_it():
    assert sources("[see [[x]]](y.md)") == ["[[x]]"]


# --------------------------------------------------------------------------- exclusions


def test_no_links_in_code():
    text = (
        "Link within backticks: `[[a]]` and ``x ` [[b]] `` and `![[c]]`.\n"
        "\n"
        "```\n[[fenced]]\n```\n"
        "\n"
        "~~~md\n![[tilde]]\n~~~\n"
        "\n"
        "    [[indented]]\n"
        "\n"
        "- item\n"
        "  ```\n  [[in a list]]\n  ```\n"
        "- [[kept 1]]\n"
        "\n"
        "> quote [[kept 2]]\n"
        "> ```\n> [[in a quote]]\n> ```\n"
        "\n"
        "[[kept 3]] `[x](y.md)` [z](z.md)\n"
    )
    assert sources(text) == ["[[kept 1]]", "[[kept 2]]", "[[kept 3]]", "[z](z.md)"]


def test_code_nested_in_lists_and_quotes_is_found_without_markdown_it_py():
    """markdown-it-pyrs finds the nested code blocks, as markdown-it-py does; the slow parser
    (70-250 ms of CPU to import, in each worker) is not loaded for it."""
    import subprocess
    import sys

    text = (
        "- item\n  ```\n  [[in a list]]\n  ```\n- [[kept 1]]\n\n      [[indented in a list]]\n"
        "\n> quote [[kept 2]]\n> ```\n> [[in a quote]]\n> ```\n>\n>     [[indented]]\n"
    )
    code = (
        "import sys\n"
        "from kbase.ingest.links import parse_links\n"
        "from kbase.ingest.parse import parse\n"
        f"ls = parse_links(parse({text!r}, 'n.md'))\n"
        "print([ls.text[a:b] for a, b in zip(ls.starts, ls.ends)], 'markdown_it' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['[[kept 1]]', '[[kept 2]]'] False"


@pytest.mark.parametrize(
    "text",
    [
        "- a\n\n  ```\n  code\n  ```\n- b\n\n      indented\n",
        "> q\n> ```py\n> x\n> ```\n>\n>     four\n",
        "1. one\n   ~~~\n   x\n   ~~~\n   - nested\n\n         deep\n",
        "- \u00e9 \u00fc\n  ```\n  \u00e9\n  ```\r\n- x\r\n\r\n      y\r\n",
        "> - li\n>   ```\n>   c\n>   ```\n> > ```\n> > d\n> > ```\n",
    ],
)
def test_nested_code_lines_agree_with_markdown_it_py(text):
    from markdown_it import MarkdownIt

    from kbase.ingest.parse import code_block_lines

    md = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])
    expected = [tuple(t.map) for t in md.parse(text) if t.type in ("fence", "code_block") and t.map]
    assert expected and code_block_lines(text) == expected


def test_nested_code_lines_leave_what_the_fast_parser_may_get_wrong_to_the_other():
    from kbase.ingest.parse import code_block_lines

    assert code_block_lines("> a\n2) b\n") is None  # markdown-it-pyrs parts from -py here
    assert code_block_lines("- a\n\n  $$\n  x\n  $$\n") is None  # math


def test_backticks_that_do_not_close_are_literal():
    # CommonMark: a run of two backticks needs a run of exactly two to close.
    assert sources("``a ` [[x]] and ```[[y]]``\n\n`unclosed [[z]]\n") == ["[[z]]"]
    assert sources("``[[in code]]`` [[out]] `a``b`") == ["[[out]]"]
    assert sources("a ` [[one]]\n\nb ` [[two]]") == ["[[one]]", "[[two]]"]  # not one span


def test_html_comments_hide_links_but_percent_comments_do_not():
    text = (
        "a <!-- [[hidden]] --> b [[shown]]\n\n"
        "<!--\n[[hidden block]]\n-->\n\n"
        "%% [[kept in an Obsidian comment]] %%\n\n"
        "`<!--` [[after code]] -->\n"
    )
    # Obsidian's metadata cache records links inside %% comments (they count as backlinks).
    assert sources(text) == ["[[shown]]", "[[kept in an Obsidian comment]]", "[[after code]]"]


def test_links_in_html_blocks_are_kept():
    # Only comments hide links; Obsidian indexes a link in a <div> block like any other.
    assert sources("<div>\n[[in html]]\n</div>\n") == ["[[in html]]"]


def test_unclosed_html_comment_at_line_start_hides_the_rest():
    assert sources("[[a]]\n\n<!-- never closed\n\n[[b]]\n") == ["[[a]]"]
    assert sources("inline <!-- not a comment [[c]]\n") == ["[[c]]"]


def test_plain_text_documents_have_no_links():
    assert parse_links(parse("[[x]] [y](y.md)", "notes.txt")) == []


# --------------------------------------------------------------------- front matter links


def test_front_matter_links():
    text = (
        "---\n"
        'related: "[[X]]"\n'
        "up: '[[Folder/Y#Part|why]]'\n"
        "list:\n"
        '  - "[[A]]"\n'
        '  - "[[B]]"\n'
        "  - plain\n"
        "unquoted: [[Z]]\n"
        "# comment [[C]]\n"
        "---\n"
        "Body [[D]]\n"
    )
    found = links(text)
    assert [text[x.start : x.end] for x in found] == [
        "[[X]]",
        "[[Folder/Y#Part|why]]",
        "[[A]]",
        "[[B]]",
        "[[D]]",
    ]
    assert [x.kind for x in found] == ["frontmatter"] * 4 + ["wiki"]
    assert (found[1].target, found[1].anchor, found[1].alias) == ("Folder/Y", "Part", "why")


def test_front_matter_that_does_not_parse_has_no_links():
    assert sources('---\nrelated: "[[X]]\n  bad: [\n---\nBody\n') == []


# ------------------------------------------------------------------------------ block ids


def test_block_ids():
    text = (
        "This is a block ^dda637\n\n"
        "- item one ^item-1\n- item two\n\n"
        "| a |\n|---|\n| b |\n\n^table-id\n\n"
        "`code ^notid`\n\n"
        "```\nfenced ^notid2\n```\n\n"
        "no space^notid3\n"
    )
    found = block_ids(parse(text, "n.md"))
    assert [i for i, _, _ in found] == ["dda637", "item-1", "table-id"]
    assert all(text[s:e] == "^" + i for i, s, e in found)


def test_a_block_id_right_after_an_embed_needs_no_space():
    # Obsidian's own help vault ("Collaborate on a shared vault") writes an image's block id this
    # way and embeds it from "Version history": after ']]' no word can run on into the id.
    text = (
        "![[version-history-collaboration.png]]^version-history-image\n\n"
        "See [[Other]]^after-link\n\n"
        "x^notid and E = mc^2\n\n"
        "a]^notid2\n"
    )
    found = block_ids(parse(text, "n.md"))
    assert [i for i, _, _ in found] == ["version-history-image", "after-link"]
    assert all(text[s:e] == "^" + i for i, s, e in found)


# ---------------------------------------------------------------------------------- anchors


def test_heading_slug_is_obsidians_strip_heading_lowercased():
    # Obsidian's documented example: every one of these characters becomes a space.
    assert heading_slug('foo!"#$%&()*+,.:;<=>?@^`{|}~/\\[]\\\r\nbar') == "foo bar"
    assert heading_slug("Sample HTML: Full mode") == heading_slug("Sample HTML Full mode")
    assert heading_slug("  Other   date-editing options ") == "other date-editing options"
    assert heading_slug("'Tasks: Toggle task done' command") == "'tasks toggle task done' command"


def _headings(*spec: tuple[int, str]) -> list[Heading]:
    return [Heading(level, text, 0, 0, i + 1) for i, (level, text) in enumerate(spec)]


def test_anchor_ok_matches_headings_like_obsidian():
    heads = _headings(
        (1, "Title"),
        (2, "Heading"),
        (3, "Subheading"),
        (2, "Appendix: Changes in 7.0.0"),
        (2, "Other"),
        (3, "Deep"),
    )
    assert anchor_ok("Heading", heads, [])
    assert anchor_ok("heading", heads, [])  # case-insensitive
    assert anchor_ok("#Heading", heads, [])
    assert anchor_ok("Appendix Changes in 7.0.0", heads, [])  # Obsidian's link drops the ':'
    assert anchor_ok("Heading#Subheading", heads, [])
    assert anchor_ok("Title#Subheading", heads, [])  # any depth below
    assert anchor_ok("Title#Heading#Subheading", heads, [])
    assert not anchor_ok("Heading#Deep", heads, [])  # Deep is under Other, not Heading
    assert not anchor_ok("Subheading#Heading", heads, [])
    assert not anchor_ok("Missing", heads, [])
    assert not anchor_ok("heading-1", _headings((1, "Heading 1")), [])  # no GitHub slugs


def test_anchor_ok_block_ids():
    assert anchor_ok("^dda637", [], ["dda637"])
    assert anchor_ok("^DDA637", [], ["^dda637"])
    assert not anchor_ok("^other", [], ["dda637"])
    assert not anchor_ok("^dda637", _headings((1, "^dda637")), [])


def test_nested_heading_anchor_prefers_a_match_inside_the_section():
    heads = _headings((2, "A"), (3, "Notes"), (2, "B"), (3, "Details"), (2, "A"), (3, "Details"))
    assert anchor_ok("A#Details", heads, [])  # the second A holds it


# ------------------------------------------------------------------------------ resolving

VAULT = [
    "Note.md",
    "Uppercased-Note.md",
    "dir1/Note.md",
    "dir2/Note.md",
    "dir2/sub/Deep.md",
    "dir1/Only here.md",
    "a/b/Same.md",
    "a/Same.md",
    "x/y/z/Same.md",
    "v1.2 notes.md",
    "Notes.md.md",
    "Nöte with 'quotes'.md",
    "images/white.png",
    "docs/manual.pdf",
    "canvas/Board.canvas",
]


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver(VAULT, {"Note.md": ["Home", "Start page"], "dir1/Only here.md": ["Unique"]})


@pytest.mark.parametrize(
    "target, source, expected",
    [
        ("Note", "Note.md", "Note.md"),
        ("note", "x.md", "Note.md"),  # case-insensitive
        ("NOTE.MD", "x.md", "Note.md"),  # extension optional, and case-insensitive too
        ("uppercased-note", "x.md", "Uppercased-Note.md"),
        ("Only here", "x.md", "dir1/Only here.md"),  # a unique name, anywhere
        ("Deep", "x.md", "dir2/sub/Deep.md"),
        ("Same", "x.md", "a/Same.md"),  # shortest path wins
        ("Same", "x/y/z/other.md", "x/y/z/Same.md"),  # ...but the source's folder first
        ("Same", "a/b/other.md", "a/b/Same.md"),
        ("Same", "a/other.md", "a/Same.md"),
        ("Same", "x/y/other.md", "x/y/z/Same.md"),  # a subfolder of the source's counts
        ("Note", "dir2/other.md", "Note.md"),  # 'note.md' is a path: exact beats same-folder
        ("Only here", "dir2/other.md", "dir1/Only here.md"),
        ("dir1/Note", "Note.md", "dir1/Note.md"),  # a folder part: matched as a path suffix
        ("dir2/Note.md", "Note.md", "dir2/Note.md"),
        ("b/Same", "x.md", "a/b/Same.md"),
        ("sub/Deep", "x.md", "dir2/sub/Deep.md"),
        ("/Note", "dir1/x.md", "Note.md"),  # from the vault root
        ("/dir1/Note", "x.md", "dir1/Note.md"),
        ("/sub/Deep", "x.md", None),  # a rooted path must match exactly
        ("./Note", "dir1/x.md", "dir1/Note.md"),  # relative to the source's folder
        ("../dir2/Note", "dir1/x.md", "dir2/Note.md"),
        ("../Note", "dir1/x.md", "Note.md"),
        ("../../Note.md", "dir2/sub/x.md", "Note.md"),
        ("v1.2 notes", "x.md", "v1.2 notes.md"),  # a dot in the name is not an extension
        ("Notes.md", "x.md", "Notes.md.md"),
        ("Nöte with 'quotes'", "x.md", "Nöte with 'quotes'.md"),
        ("No\u0308te with 'quotes'", "x.md", "Nöte with 'quotes'.md"),  # NFD typed, NFC on disk
        ("white.png", "dir1/x.md", "images/white.png"),  # attachments resolve too
        ("images/white.png", "x.md", "images/white.png"),
        ("manual.pdf", "x.md", "docs/manual.pdf"),
        ("Board.canvas", "x.md", "canvas/Board.canvas"),
        ("white", "x.md", None),  # an attachment needs its extension
        ("Home", "dir1/x.md", "Note.md"),  # front matter alias
        ("start PAGE", "x.md", "Note.md"),
        ("Unique", "x.md", "dir1/Only here.md"),
        ("", "dir1/Only here.md", "dir1/Only here.md"),  # '' is the note itself
        ("Missing", "x.md", None),
        ("ote", "x.md", None),  # file names match whole, not by suffix
    ],
)
def test_resolve(resolver, target, source, expected):
    assert resolver.resolve(target, source) == expected


def test_aliases_only_when_no_file_matches():
    res = Resolver(["Home.md", "notes/Index.md"], {"notes/Index.md": ["Home", "Start"]})
    assert res.resolve("Home", "x.md") == "Home.md"  # a file name beats an alias
    assert res.resolve("Start", "x.md") == "notes/Index.md"
    strict = Resolver(
        ["Home.md", "notes/Index.md"], {"notes/Index.md": ["Start"]}, use_aliases=False
    )
    assert strict.resolve("Start", "x.md") is None  # what Obsidian itself does


def test_is_attachment():
    assert is_attachment("img.PNG") and is_attachment("a/b.pdf") and is_attachment("x.canvas")
    assert not is_attachment("Note") and not is_attachment("Note.md")
    assert not is_attachment("v1.2 notes") and not is_attachment("dir.png/Note")


# ------------------------------------------------------------------ obsidian-export conformance

# Expected files rendered from another input file than the one of the same path.
EXPORT_SOURCE_OF = {
    "start-at/single-file/Note B.md": "start-at/subdir/Note B.md",
    "postprocessors/Note_embed_postprocess_only.md": "postprocessors/Note.md",
    "postprocessors/Note_embed_stop_and_skip.md": "postprocessors/Note.md",
}
# A note that the data copy lost (its non-ASCII name did not survive); expected/ links to it
# and inlines its text, which is all that is needed of it.
EXPORT_LOST_NOTES = {
    "non-ascii": {"Nöte with 'quotes'.md": "This note has quotes in the filename.\n"},
}
# Links that expected/ leaves unresolved, and why.
EXPORT_UNRESOLVED = {
    ("main-samples/embeds.md", "![[non-existing note]]"),  # no such note
    ("postprocessors/Note_embed_stop_and_skip.md", "![[_embed]]"),  # a postprocessor dropped it
    ("single-file/note.md", "[[other-note]]"),  # a one-file export: the target was not exported
    ("single-file/note.md", "[[other-note|another note]]"),
}
_EXPORTED_LINK = re.compile(r"(!?)\[((?:[^\[\]\\]|\\.)*)\]\(([^()\s]*)\)")
_FRAGMENT = re.compile(r"!?\[\[[^\]]*\]\]|(?<=[.:!?])\s+|\n")


def _display(link: LinkRef) -> str:
    """The link text obsidian-export gives a wikilink."""
    if link.alias is not None:
        return link.alias
    if link.anchor is None:
        return link.target
    return f"{link.target} > {link.anchor}" if link.target else link.anchor


def _exported_link(link: LinkRef, out: str, pos: int, folder: str) -> tuple[str | None, int]:
    """The vault path of the first link in ``out`` from ``pos`` on that shows ``link``'s text,
    and the offset after it; (None, pos) if there is none."""
    shown = link.target if link.embed else _display(link)
    for m in _EXPORTED_LINK.finditer(out, pos):
        if re.sub(r"\\(.)", r"\1", m.group(2)) == shown:
            path = unquote(m.group(3).split("#")[0])
            return posixpath.normpath(posixpath.join(folder, path)), m.end()
    return None, pos


def _inlined_note(
    link: LinkRef, out: str, pos: int, notes: dict[str, ParsedDoc]
) -> tuple[str | None, int]:
    """The note, among those named like ``link``'s target, whose text appears first in ``out``
    from ``pos`` on (where obsidian-export inlined the embed), and the offset after it."""
    name = link.target.rsplit("/", 1)[-1].lower()
    best: tuple[int, int, str] | None = None
    for path, note in notes.items():
        if path.rsplit("/", 1)[-1].lower() not in (name, name + ".md"):
            continue
        for piece in _FRAGMENT.split(note.text[note.body_start :]):
            piece = piece.strip()
            at = out.find(piece, pos) if len(piece) >= 8 else -1
            if at >= 0 and (best is None or at < best[0]):
                best = (at, at + len(piece), path)
    return (best[2], best[1]) if best else (None, pos)


def test_obsidian_export_conformance():
    """Each wikilink in input/ that obsidian-export resolved goes to the same file in kbase.

    expected/ renders a resolved link as ``[text](relative%20url.md#slug)``, an attachment
    embed as ``![name](url)`` or ``[name](url)``, and a note embed by inlining the note (or
    the section), so a note embed's target is the same-named note whose text appears there.
    expected/ is read in step with the links of the input.
    """
    root = shared("wikilinks", "obsidian-export")
    checked, matched, unresolved, mismatches = 0, 0, {}, []
    anchors, missing_anchors = 0, set()
    for exported in sorted((root / "expected").rglob("*.md")):
        rel = exported.relative_to(root / "expected").as_posix()
        vault_name, source = EXPORT_SOURCE_OF.get(rel, rel).split("/", 1)
        vault = root / "input" / vault_name
        files = [p.relative_to(vault).as_posix() for p in vault.rglob("*") if p.is_file()]
        lost = {f: t for f, t in EXPORT_LOST_NOTES.get(vault_name, {}).items() if f not in files}
        files += lost
        notes = {
            f: parse(lost[f] if f in lost else (vault / f).read_text(encoding="utf-8"), f)
            for f in files
            if f.endswith(".md")
        }
        resolver = Resolver(files, {f: d.aliases for f, d in notes.items()})
        out = exported.read_text(encoding="utf-8")
        doc, pos = notes[source], 0
        for link in parse_links(doc):
            if link.kind != "wiki":
                continue
            if link.embed and not is_attachment(link.target):
                want, pos = _inlined_note(link, out, pos, notes)
            else:
                want, pos = _exported_link(link, out, pos, posixpath.dirname(source))
            written = doc.text[link.start : link.end]
            got = resolver.resolve(link.target, source)
            if want is None:
                unresolved[(rel, written)] = got
                continue
            checked += 1
            if got == want:
                matched += 1
            else:
                mismatches.append((rel, written, got, want))
            if link.anchor and want in notes:
                anchors += 1
                note = notes[want]
                if not anchor_ok(link.anchor, note.headings, [b for b, _, _ in block_ids(note)]):
                    missing_anchors.add(written)
    print(f"obsidian-export: {matched}/{checked} resolved links match; {anchors} anchors")
    assert mismatches == []
    assert checked == 45
    assert set(unresolved) == EXPORT_UNRESOLVED
    assert unresolved[("main-samples/embeds.md", "![[non-existing note]]")] is None
    # Every anchor exists (the partial embed ![[note-with-headings#heading]] of '## Heading'
    # among them: headings match case-insensitively) but '^abc': foo.md has no such block.
    assert anchors == 11
    assert missing_anchors == {
        "[[foo#^abc]]",
        "[[foo#^abc ]]",
        "[[foo#^abc |foo > ^abc]]",
        "[[ foo#^abc ]]",
    }


# ------------------------------------------------------------------- obsidian-tasks-docs vault


def test_obsidian_tasks_docs():
    vault = shared("vaults", "obsidian-tasks-docs")
    files = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*") if p.is_file())
    notes = {
        f: parse((vault / f).read_text(encoding="utf-8"), f) for f in files if f.endswith(".md")
    }
    resolver = Resolver(files, {f: d.aliases for f, d in notes.items()})
    found = {f: parse_links(d) for f, d in notes.items()}
    every = [(f, link) for f, ls in found.items() for link in ls]
    wikilinks = [(f, x) for f, x in every if x.kind == "wiki" and not x.embed]
    embeds = [(f, x) for f, x in every if x.kind == "wiki" and x.embed]
    markdown = [(f, x) for f, x in every if x.kind == "markdown"]
    assert (len(wikilinks), len(embeds), len(markdown)) == (1108, 28, 129)
    assert not any(x.kind == "frontmatter" for _, x in every)

    unresolved = [(f, x) for f, x in every if resolver.resolve(x.target, f) is None]
    # Every note link resolves; the vault copy holds no images, so image links do not.
    assert [x for _, x in unresolved if not is_attachment(x.target)] == []
    assert sorted(x.target for _, x in unresolved if x.kind == "wiki") == [
        "on-completion-after.png",
        "on-completion-before.png",
    ]
    assert sum(1 for _, x in unresolved if x.kind == "markdown") == 127

    missing, naive_missing, anchors = [], [], 0
    for f, x in every:
        target = resolver.resolve(x.target, f)
        if x.anchor is None or target is None or not target.endswith(".md"):
            continue
        anchors += 1
        note = notes[target]
        if not anchor_ok(x.anchor, note.headings, [b for b, _, _ in block_ids(note)]):
            missing.append((f, x.target, x.anchor))
        if x.anchor.split("#")[-1] not in {h.text for h in note.headings}:
            naive_missing.append(x)
    assert anchors == 415
    assert missing == []
    # Compared as written, 29 anchors would miss: 'Appendix: Changes...' linked as 'Appendix
    # Changes...' (Obsidian strips the ':' when it writes the link) or in another case.
    assert len(naive_missing) == 29


# ------------------------------------------------------------------------------- properties

_PIECES = [
    "[[",
    "]]",
    "![[",
    "[",
    "]",
    "](",
    "(",
    ")",
    "!",
    "|",
    "\\|",
    "#",
    "^",
    "\\",
    "`",
    "``",
    "```",
    "<!--",
    "-->",
    "<",
    ">",
    "%20",
    "\n",
    "\n\n",
    "\r\n",
    "    ",
    "- ",
    "> ",
    "---\n",
    "a",
    "b.md",
    " ",
    "x.png",
    "http:",
    ":",
    '"',
    "'",
]


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=4)), max_size=40).map("".join))
def test_parse_links_never_raises_and_links_do_not_overlap(text):
    doc = parse(text, "p.md")
    found = parse_links(doc)
    previous_end = 0
    for link in found:
        assert 0 <= link.start < link.end <= len(text)
        assert text[link.start] in "[!"
        assert link.start >= previous_end
        previous_end = link.end
    # as a worker sends them: the same links, targets read from the text alike
    import pickle

    assert list(pickle.loads(pickle.dumps(found))) == list(found)
    for block_id, start, end in block_ids(doc):
        assert text[start:end] == "^" + block_id


# ------------------------------------------------------------------------------ performance


def link_corpus(n: int = 10_000, seed: int = 7):
    """``n`` notes with 10 links each (some dangling, some in code), 500 attachments, aliases:
    (paths, [(path, ParsedDoc)], aliases). Also used by bench/links.py for timing."""
    rng = random.Random(seed)
    paths = [f"area {i % 40}/topic {i % 7}/Note {i}.md" for i in range(n)]
    paths += [f"assets/img{i}.png" for i in range(500)]
    docs = []
    for path in paths[:n]:
        parts = []
        for k in range(10):
            j = rng.randrange(n + 100)  # some links to notes that do not exist
            parts.append(
                rng.choice(
                    [
                        f"see [[Note {j}]]",
                        f"in [[Note {j}#Heading {k}|this part]]",
                        f"![[img{j % 500}.png|100]]",
                        f"[md](/area%20{j % 40}/topic%20{j % 7}/Note%20{j}.md)",
                        f"`code` and [[Note {j}]]",
                    ]
                )
            )
        paras = ["# Title"] + [
            " ".join(parts[i : i + 3]) + " lorem ipsum dolor sit amet." * 4 for i in range(0, 10, 3)
        ]
        text = "\n\n".join(paras) + "\n"
        blocks, at = [], 0
        for para in paras:
            kind = "heading" if para.startswith("#") else "paragraph"
            blocks.append(Block(kind, at, at + len(para)))
            at += len(para) + 2
        docs.append(
            (path, ParsedDoc(text, "markdown", "t", None, 0, None, (), (), (), tuple(blocks)))
        )
    aliases = {p: (f"alias {i}",) for i, p in enumerate(paths[:n])}
    return paths, docs, aliases


def parse_and_resolve(paths, docs, aliases) -> tuple[int, int]:
    resolver = Resolver(paths, aliases)
    count = resolved = 0
    for path, doc in docs:
        for link in parse_links(doc):
            count += 1
            resolved += resolver.resolve(link.target, path) is not None
    return count, resolved


@pytest.mark.slow
def test_ten_thousand_notes_parse_and_resolve():
    """Scale, not speed (bench/links.py times it): every link found, nearly all resolve."""
    count, resolved = parse_and_resolve(*link_corpus())
    assert count == 100_000
    assert resolved > 90_000
