"""Documentation sites as well as vaults (issue 34), end to end on small sites written in tmp_path:
heading attributes, folder links, titles after component blocks, runs that are not text, and
containers. The parts' unit tests are here too, beside the behaviour they serve."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli import cli
from kbase.ingest.chunk import ChunkSettings, WordCounter, chunk
from kbase.ingest.parse import heading_attributes, parse
from tests.conftest import write

# A VitePress page as the Vue guide writes them: ids in attribute lists, links to those ids.
PROPS = (
    "# Props {#props}\n\n"
    "Props are declared." + " A component lists the props it accepts." * 8 + "\n\n"
    "## Prop Passing Details {#prop-passing-details}\n\n"
    "Casing matters here." + " Names are written in camelCase in scripts." * 8 + "\n\n"
    "### Static vs. Dynamic Props {#static-vs-dynamic-props}\n\n"
    "Pass a value with v-bind.\n\n"
    "## Prop Validation {.new}\n\n"
    "Validate with types.\n"
)
SITE = {
    "guide/props.md": PROPS,
    "guide/events.md": "# Events {#events}\n\n"
    "Read [the details](./props.md#prop-passing-details),"
    " [dynamic](props.md#static-vs-dynamic-props),"
    " [validation](./props.md#prop-validation), [gone](./props.md#no-such-id) and"
    " [by text](./props.md#Prop%20Passing%20Details).\n",
    "notes/wiki.md": "# Wiki\n\n[[props#Prop Passing Details]] and"
    " [[props#prop-passing-details]]\n",
}


@pytest.mark.parametrize(
    "content, text, anchor",
    [
        ("Props {#props}", "Props", "props"),
        ("Props {#props .api}", "Props", "props"),
        (
            "Context <small>optional</small> { #context }",
            "Context <small>optional</small>",
            "context",
        ),
        ('Default { #default data-toc-label="Default value" }', "Default", "default"),
        ("Overview {: #overview }", "Overview", "overview"),
        (
            '9.7.0 <small>November 11, 2025</small> { id="9.7.0" }',
            "9.7.0 <small>November 11, 2025</small>",
            "9.7.0",
        ),
        ("Navigation path { id=navigation-path }", "Navigation path", "navigation-path"),
        ("Changes { data-search-exclude }", "Changes", None),
        ("Setup {.unnumbered}", "Setup", None),
        ("Appendix {-}", "Appendix", None),
        # not attribute lists: nothing before them, a bare word, braces inside the text
        ("{#if}", "{#if}", None),
        ("Using {name}", "Using {name}", None),
        ("fn() {}", "fn() {}", None),
        ("The {#each} block", "The {#each} block", None),
        ("Props", "Props", None),
    ],
)
def test_heading_attributes(content, text, anchor):
    assert heading_attributes(content) == (text, anchor)


def test_a_heading_reads_without_its_attribute_list_and_keeps_its_id():
    doc = parse(PROPS, "guide/props.md")
    assert doc.title == "Props"
    assert [(h.text, h.anchor) for h in doc.headings] == [
        ("Props", "props"),
        ("Prop Passing Details", "prop-passing-details"),
        ("Static vs. Dynamic Props", "static-vs-dynamic-props"),
        ("Prop Validation", None),
    ]
    paths = {c.heading_path for c in chunk(doc, WordCounter(), ChunkSettings(min_tokens=0)).chunks}
    assert "Props > Prop Passing Details > Static vs. Dynamic Props" in paths
    assert not any("{" in p for p in paths)
    # An Obsidian vault's note named by a person keeps its name; its headings read the same way.
    assert parse("## Plans {#plans}\n\ntext\n", "My Plans.md").headings[0].text == "Plans"


@pytest.fixture
def site(tmp_path):
    root = write(tmp_path / "site", SITE)
    k = kbase.open(tmp_path / "index.db")
    k.index([root], embed=False)
    yield k
    k.close()


def test_links_to_heading_ids_resolve_and_only_missing_ids_are_broken(site):
    broken = {(lk.source_path, lk.anchor) for lk in site.broken_anchors()}
    # '#prop-validation' is the id made from the text of a heading without an id of its own; a
    # wikilink names a heading as Obsidian shows it, never by an HTML id.
    assert broken == {
        ("guide/events.md", "no-such-id"),
        ("notes/wiki.md", "prop-passing-details"),
    }
    (hit,) = site.search("casing", mode="keyword")
    assert (hit.title, hit.heading_path) == ("Props", "Props")  # the sections merged: both small


@pytest.mark.parametrize(
    "target",
    [
        "guide/props#Prop Passing Details",
        "guide/props#prop-passing-details",
        "props#Prop Passing Details",
    ],
)
def test_show_opens_a_section_by_its_heading_or_its_id(site, target):
    r = site.region(target)
    assert r.lines[0] == "## Prop Passing Details {#prop-passing-details}"
    assert r.lines[-1] == "Pass a value with v-bind."
    out = CliRunner().invoke(cli, ["--db", str(site.path), "show", target])
    assert out.exit_code == 0, out.output
    assert "Casing matters here." in out.output and "Props are declared." not in out.output


def test_a_missing_id_says_which_headings_there_are(site):
    with pytest.raises(kbase.InputError) as e:
        site.region("guide/props#no-such-id")
    assert "has no heading 'no-such-id'" in str(e.value)
    assert "Prop Passing Details" in e.value.hint and "{#" not in e.value.hint


@pytest.mark.slow
@pytest.mark.asyncio
async def test_mcp_read_opens_a_section_by_its_id(site):
    from tests.test_mcp import stdio_session, text

    site.close()
    async with stdio_session(site.path) as c:
        for note in ("guide/props#prop-passing-details", "props#Prop Passing Details"):
            r = await c.call_tool("read", {"note": note})
            assert not r.is_error, text(r)
            assert "Casing matters here." in text(r) and "Props are declared." not in text(r)


# Part 2: a folder link is its index page, in every link form and everywhere links are read.
FOLDERS = {
    "index.md": "# Home\n\nStart at [the guide](guide/) or [the API](/api/).\n",
    "guide/index.md": "# Guide\n\n[Up](../), [here](./), [examples](/examples/),"
    " [search](?q=props) and [home][home].\n\n[home]: /\n",
    "guide/intro.md": "# Intro\n\nSee [examples](../examples/#first), [[examples/]],"
    " [the API](/api), [config](../api/config.md/) and [nowhere](/nowhere/).\n",
    "api/README.md": "# API\n\nReference.\n",
    "api/_index.md": "# API section\n\nHugo's section page.\n",
    "api/config.md": "# Config\n",
    "examples/_index.md": "# Examples\n\n## First\n\nOne.\n",
}


def test_resolver_serves_a_folder_by_its_index_page():
    from kbase.ingest.links import Resolver

    r = Resolver(list(FOLDERS) + ["examples/README.md", "examples/index.md"])
    for target, source, path in [
        ("/examples/", "guide/intro.md", "examples/index.md"),  # index.md before README.md
        ("../examples/", "guide/intro.md", "examples/index.md"),
        ("./", "guide/intro.md", "guide/index.md"),
        ("..", "guide/intro.md", "index.md"),
        ("/", "guide/intro.md", "index.md"),
        ("/api/", "index.md", "api/README.md"),  # README.md before _index.md
        ("guide/", "api/config.md", "guide/index.md"),  # not api/guide/: then from the root
        ("../api/config.md/", "guide/intro.md", "api/config.md"),
        ("/nowhere/", "index.md", None),
        ("../../", "guide/intro.md", None),  # out of the root
    ]:
        assert r.resolve(target, source) == path, (target, source)
    assert Resolver(["a/_index.md"]).resolve("/a/", "x.md") == "a/_index.md"


def test_folder_links_resolve_in_links_backlinks_graph_and_unresolved(tmp_path):
    root = write(tmp_path / "site", FOLDERS)
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    assert [(lk.source_path, lk.target) for lk in kb.unresolved()] == [
        ("guide/intro.md", "/nowhere/")
    ]
    targets = {lk.target: lk.target_path for lk in kb.links("guide/intro.md")}
    assert targets == {
        "../examples/": "examples/_index.md",
        "examples/": "examples/_index.md",  # the wikilink too
        "/api": "api/README.md",
        "../api/config.md/": "api/config.md",
        "/nowhere/": None,
    }
    assert {lk.target: lk.target_path for lk in kb.links("guide/index.md")} == {
        "../": "index.md",
        "./": "guide/index.md",
        "/examples/": "examples/_index.md",
        "/": "index.md",  # a reference link's definition
    }
    (first,) = [lk for lk in kb.links("guide/intro.md") if lk.target == "../examples/"]
    assert first.anchor == "first" and first.anchor_ok is True
    assert {lk.source_path for lk in kb.backlinks("examples/_index.md")} == {
        "guide/index.md",
        "guide/intro.md",
    }
    graph = kb.graph()
    ids = {n["path"]: n["id"] for n in graph["nodes"]}
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert (ids["index.md"], ids["guide/index.md"]) in edges
    assert (ids["guide/intro.md"], ids["api/README.md"]) in edges
    # A folder named as a note names its index page too.
    assert kb.note("guide/").path == "guide/index.md"
    assert kb.note("examples").path == "examples/_index.md"
    kb.close()


def test_a_markdown_link_is_read_from_its_notes_folder(tmp_path):
    # Material for MkDocs' plugins/*.md link 'index.md#multiple-instances' (plugins/index.md);
    # Obsidian's rule gave the site's root index.md (23 links in 10 of its 96 pages).
    root = write(
        tmp_path / "site",
        {
            "index.md": "# Home\n",
            "plugins/index.md": "# Plugins\n\n## Multiple instances\n\nSeveral.\n",
            "plugins/guide.md": "# Guide\n",
            "guide.md": "# Top guide\n",
            "plugins/blog.md": "# Blog\n\nSee [instances](index.md#multiple-instances),"
            " [the guide](guide.html), [[index]] and [ref][r].\n\n[r]: guide\n",
        },
    )
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    got = {
        (lk.kind, lk.target): (lk.target_path, lk.anchor_ok) for lk in kb.links("plugins/blog.md")
    }
    assert got == {
        ("markdown", "index.md"): ("plugins/index.md", True),
        ("markdown", "guide.html"): ("plugins/guide.md", None),
        ("markdown", "guide"): ("plugins/guide.md", None),
        ("wiki", "index"): ("index.md", None),  # a wikilink keeps Obsidian's rule
    }
    assert not kb.broken_anchors()
    assert {lk.source_path for lk in kb.backlinks("plugins/index.md")} == {"plugins/blog.md"}
    kb.close()


def test_a_chunk_after_a_list_items_code_does_not_open_inside_it(tmp_path):
    # The Vue API pages' list items hold code ('- **Type**' and a ts block); the next chunk's
    # overlap began inside that code, so its closing fence opened one and the prose after it
    # showed as Markdown source (86 of vue-docs' 2035 chunks, in 26 of its 119 pages).
    details = " ".join(f"Sentence {i} says the container holds hydrated nodes." for i in range(14))
    page = (
        "# Application API\n\n## app.mount()\n\nMounts the instance.\n\n- **Type**\n\n"
        "  ```ts\n  interface App {\n"
        "    mount(rootContainer: Element | string): ComponentPublicInstance\n  }\n  ```\n\n"
        f"- **Details**\n\n  {details}\n\n"
        "  For each app instance, [`mount()`](/api/x#mount) runs once: zebra.\n"
    )
    root = write(tmp_path / "site", {"api/application.md": page})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    (hit,) = kb.search("zebra", mode="keyword")
    assert hit.snippet.endswith("For each app instance, mount() runs once: zebra.")
    body = kb.reader.execute("SELECT body FROM documents").fetchone()[0]
    code = (body.index("```ts"), body.index("```\n\n") + 3)
    starts = [a for (a,) in kb.reader.execute("SELECT start_char FROM chunks")]
    assert len(starts) > 1 and not any(code[0] < a < code[1] for a in starts)
    kb.close()


# Part 3: a page opening with blocks that show nothing takes the heading after them.
HIDDEN_FIRST = (
    "---\ntitle_template: x\n---\n\n"
    "<script setup>\nimport Banner from './Banner.vue'\n\nconst n = 1 < 2\n</script>\n\n"
    "<style>\n.lambdatest { color: red }\n</style>\n\n"
    "<!-- a comment -->\n\n<Banner />\n\n"
    "# Component Events {#component-events}\n\nEmitting events.\n"
)


@pytest.mark.parametrize(
    "path, text, title",
    [
        ("guide/events.md", HIDDEN_FIRST, "Component Events"),
        (
            "keep-alive.md",
            "<script setup>\nimport A from './A.vue'\n</script>\n\n## KeepAlive\n",
            "KeepAlive",
        ),
        # Something visible first: the slug stays, as before.
        ("forms.md", '<div class="tip">Read this first.</div>\n\n# Forms\n', "forms"),
        (
            "themes.md",
            "<script setup>\nimport T from './T.vue'\n</script>\n\n<ThemePage />\n",
            "themes",
        ),
        # A note named by a person keeps its name, as Obsidian shows it.
        ("Component Notes.md", HIDDEN_FIRST, "Component Notes"),
    ],
)
def test_a_title_after_blocks_that_show_nothing(path, text, title):
    assert parse(text, path).title == title


# Part 4: runs that are not text stay in the body, at their offsets, and in no chunk.
B64 = (
    "eNplUkFugzAQ/MqKC1SiIekxIpEq9QVV1BMXCguhBdsyaxqE/PcuGAhNfYGd3Z0ZDwzeq1K7zqB39OI205UiaJGMOieiapTUBAOY"
    "Ft+zzzqqq+wUxqRYf6OBVMXCguhBdsyaxqE9kHEXfjaDXkhd7DTTmuNZ7MsGyzDYbz5CgSgbdppOBFqqT4l0eX1gZDYOm057heOB"
)
HEX_DUMP = (
    "00000000  7f 45 4c 46 02 01 01 00  00 00 00 00 00 00 00 00  |.ELF............|\n"
    "00000010  03 00 3e 00 01 00 00 00  10 6b 00 00 00 00 00 00  |..>......k......|\n"
)
MINIFIED = "!function(e,t){" + "var n=e.a||{};n.b=function(r){return r+t};" * 20 + "}(this,1);"


@pytest.mark.parametrize(
    "text, junk",
    [
        (f"[Try it](https://play.vuejs.org/#{B64}) now", f"https://play.vuejs.org/#{B64}"),
        (f'<img src="data:image/png;base64,{B64}"> ok', f"data:image/png;base64,{B64}"),
        (f"key: {B64}\n", B64),
        (f"```\n{HEX_DUMP}```\n", HEX_DUMP.rstrip("\n")),
        (f"<script>{MINIFIED}</script>\n", f"<script>{MINIFIED}</script>"),
        ("https://example.org/" + "a-b/" * 120, "https://example.org/" + "a-b/" * 120),  # 500 chars
    ],
)
def test_junk_runs(text, junk):
    from kbase.ingest.junk import hex_dumps, junk_runs

    assert [text[a:b] for a, b in junk_runs(text) + hex_dumps(text)] == [junk]


@pytest.mark.parametrize(
    "text",
    [
        "commit 79b9d15410a7b15a65cb86bcb40cbea99198a9e4 fixed it",  # a SHA-1
        "https://github.com/rust-lang/book/blob/79b9d15410a7b15a65cb86bcb40cbea99198a9e4/src/"
        "ch07-04-bringing-paths-into-scope-with-the-use-keyword.md",
        "https://github.com/search?q=executeToggleTaskDoneCommand+NOT+is%3Afork+NOT+repo%3A"
        "obsidian-tasks-group%2Fobsidian-tasks+NOT+path%3A*.md&type=code",
        "| " + "-" * 600 + " |",  # a table's rule
        "SomeVeryLongCamelCaseIdentifierNameForTheWidgetFactory2Builder is a class",
        "所有权（系统）是 Rust 最为与众不同的特性，对语言的其他部分有着深刻含义。" * 20,
        "Prose on one long line, as some editors write paragraphs without hard wraps. " * 10,
    ],
)
def test_text_is_not_junk(text):
    from kbase.ingest.junk import hex_dumps, junk_runs

    assert junk_runs(text) == [] and hex_dumps(text) == []


JUNK_PAGE = (
    "# Reactivity\n\nA ref holds a value.\n\n"
    f"[Try it in the Playground](https://play.vuejs.org/#{B64})\n\n"
    "## Data URIs\n\n"
    f"![logo](data:image/png;base64,{B64})\n\n"
    "Watchers run after the update.\n\n"
    f"```\n{HEX_DUMP}```\n"
)


def test_junk_is_in_the_body_and_in_no_chunk(tmp_path):
    from kbase.ingest.chunk import _junk

    doc = parse(JUNK_PAGE, "reactivity.md")
    chunks = chunk(doc, WordCounter(), ChunkSettings(min_tokens=0)).chunks
    runs = _junk(doc)
    assert len(runs) == 3
    for c in chunks:
        assert not any(a < c.end and b > c.start for a, b in runs)
    texts = [JUNK_PAGE[c.start : c.end] for c in chunks]
    assert "[Try it in the Playground](" in texts[0]
    assert any("Watchers run after the update." in t for t in texts)
    root = write(tmp_path / "site", {"reactivity.md": JUNK_PAGE})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    body = kb.document("reactivity.md").body
    assert body == JUNK_PAGE  # kept whole, at its offsets
    for a, b in runs:
        assert B64 in body[a:b] or "7f 45" in body[a:b]
    # The base64 held the word 'zzzqqq' ('+zzzqqq+'): keyword search no longer finds it.
    assert list(kb.search("zzzqqq", mode="keyword")) == []
    assert list(kb.search("eNplUkFugzAQ", mode="keyword")) == []
    out = CliRunner().invoke(cli, ["--db", str(kb.path), "search", "zzzqqq"])
    assert out.exit_code == 0 and "No matches." in out.output, out.output
    assert [h.path for h in kb.search("watchers update", mode="keyword")] == ["reactivity.md"]
    kb.close()


@pytest.mark.slow
def test_junk_is_not_embedded_and_nonsense_finds_nothing(tmp_path):
    root = write(tmp_path / "site", {"reactivity.md": JUNK_PAGE})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root])
    con = kb.reader
    embedded = [
        body[a:b]
        for body, a, b in con.execute(
            "SELECT d.body, c.start_char, c.end_char FROM chunks c JOIN documents d"
            " ON d.id = c.doc_id WHERE c.embedded = 1"
        )
    ]
    assert embedded and not any(B64[:40] in t or "7f 45" in t for t in embedded)
    assert list(kb.search("zzzqqq")) == []  # hybrid: no base64 chunk for the query to be near
    kb.close()


# Part 5: containers are callouts; site generators' directives stay out of snippets.
CONTAINERS = (
    "# Reactivity\n\nIntro.\n"
    "::: tip Use a ref\nA ref wraps a value so that changes are tracked.\n\n"
    "```js\nconst count = ref(0)\n```\n:::\n"
    "After the tip.\n\n"
    '!!! warning "Mind the proxy"\n\n    Destructuring loses reactivity.\n\n'
    "    - keep the object\n    - or use toRefs\n\n"
    "Outside again.\n\n"
    "???+ note\n    A folded note.\n\n"
    "{{< youtube w7Ft2ymGmfc >}}\n\n{{#include ../listings/main.rs:here}}\n\nThe end.\n"
)


def test_containers_are_callouts_kept_whole():
    doc = parse(CONTAINERS, "reactivity.md")
    callouts = [CONTAINERS[b.start : b.end] for b in doc.blocks if b.kind == "callout"]
    assert callouts == [
        "::: tip Use a ref\nA ref wraps a value so that changes are tracked.\n\n"
        "```js\nconst count = ref(0)\n```\n:::",
        '!!! warning "Mind the proxy"\n\n    Destructuring loses reactivity.\n\n'
        "    - keep the object\n    - or use toRefs",
        "???+ note\n    A folded note.",
    ]
    # the paragraphs that ran into and out of the ':::' lines are their own blocks
    texts = [CONTAINERS[b.start : b.end] for b in doc.blocks]
    assert "Intro." in texts and "After the tip." in texts
    (tip,) = [b for b in doc.blocks if b.kind == "callout" and CONTAINERS[b.start] == ":"]
    # a container too large for the budget is cut at its blocks, like a callout
    assert len(tip.parts) == 2 and CONTAINERS[tip.parts[1][0] :].startswith("```js")
    (adm,) = [b for b in doc.blocks if CONTAINERS[b.start : b.start + 3] == "!!!"]
    assert [CONTAINERS[a:b].strip() for a, b in adm.parts][1].startswith("- keep the object")
    chunks = chunk(doc, WordCounter(), ChunkSettings(max_tokens=60, min_tokens=0)).chunks
    whole = [CONTAINERS[c.start : c.end] for c in chunks]
    assert any(callouts[0] in t for t in whole) and any(callouts[1] in t for t in whole)
    # a ':::' inside a code block is code, not a container
    code = parse("```\n::: tip\nx\n:::\n```\n", "c.md")
    assert [b.kind for b in code.blocks] == ["code"]


def test_container_markup_and_directives_stay_out_of_snippets(tmp_path):
    root = write(tmp_path / "site", {"reactivity.md": CONTAINERS})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    for query in ("tracked", "destructuring", "folded"):
        (hit,) = kb.search(query, mode="keyword")
        assert query in hit.snippet.lower(), hit.snippet
        assert ":::" not in hit.snippet and "!!!" not in hit.snippet and "???" not in hit.snippet
    # as read: the title a container gives itself, else its type, as an Obsidian callout's
    from kbase.ingest.markup import plain

    doc = parse(CONTAINERS, "reactivity.md")
    shown = [plain(CONTAINERS[b.start : b.end]) for b in doc.blocks if b.kind == "callout"]
    assert shown == [
        "Use a ref A ref wraps a value so that changes are tracked. const count = ref(0)",
        "Mind the proxy Destructuring loses reactivity. keep the object or use toRefs",
        "Note A folded note.",
    ]
    (hit,) = kb.search("the end", mode="keyword")
    assert "{{" not in hit.snippet and "youtube" not in hit.snippet, hit.snippet
    kb.close()


# Material for MkDocs' own markup, as its reference pages write it.
TABS = (
    "# Content tabs\n\n"
    '=== "C"\n\n    Compile it with gcc first.\n\n'
    '===+ "C++"\n\n    Compile it with clang instead.\n\n'
    '===! "Linked"\n\n    A new set of tabs starts here.\n'
)


def test_content_tabs_show_their_titles_in_snippets(tmp_path):
    # '=== "C"' showed as '= "C"' (its '==' read as a highlight mark): 315 tab lines in 43 of
    # Material for MkDocs' 96 pages.
    root = write(tmp_path / "site", {"reference/content-tabs.md": TABS})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    (hit,) = kb.search("compile", mode="keyword")
    assert hit.snippet == (
        "…Compile it with gcc first. C++ Compile it with clang instead."
        " Linked A new set of tabs starts here."
    )
    kb.close()


def test_icons_show_nothing_in_snippets_and_titles(tmp_path):
    # ':material-brush-variant: [Colors] – Change colors' showed the shortcode: 397 icons in 55
    # of Material for MkDocs' 96 pages (':octicons-file-code-16: mkdocs.yml' on every config).
    page = (
        "# Setup :material-cog:\n\n"
        "- :material-brush-variant: [Colors](colors.md) – Change the palette.\n"
        "- :fontawesome-brands-mastodon: Mastodon, :simple-gitlab: GitLab and :smile: emoji.\n"
    )
    root = write(tmp_path / "site", {"setup/index.md": page})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    assert kb.note("setup/index.md").title == "Setup"
    (hit,) = kb.search("palette", mode="keyword")
    assert hit.snippet == "…Colors – Change the palette. Mastodon, GitLab and :smile: emoji."
    kb.close()


def test_an_attribute_list_after_an_inline_element_shows_nothing(tmp_path):
    # MkDocs' attr_list on an inline element ('**`locale`**{ #mkdocs-locale }: The locale',
    # '[Subscribe](#){ .md-button }') or on the line after a paragraph ('{ .annotate }') kept
    # its braces in snippets (49 in 13 of Material for MkDocs' 96 pages, 2 in MkDocs' docs).
    page = (
        "# Theme\n\n"
        "* **`locale`**{ #mkdocs-locale }: The locale used to build the theme.\n"
        "* [Subscribe](#){ .md-button .md-button--primary } to hear about the theme.\n"
        "* Code stays: `f(){ .x }` and f(){ return 1 } too.\n\n"
        "The theme is annotated (1).\n{ .annotate }\n"
    )
    root = write(tmp_path / "site", {"theme.md": page})
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    (hit,) = kb.search("locale", mode="keyword")
    assert hit.snippet == (
        "…locale: The locale used to build the theme. Subscribe to hear about the theme."
        " Code stays: f(){ .x } and f(){ return 1 } too. The theme is annotated (1)."
    ), hit.snippet
    kb.close()


# MkDocs' configuration page documents a setting's keys in a quote, a heading each.
CONFIGURATION = (
    "# Configuration\n\n"
    "### theme\n\n"
    "If a set of key/value pairs, the following nested keys can be defined:\n\n"
    "> BLOCK:\n>\n"
    "> #### name\n>\n> The name of a known installed theme.\n>\n"
    "> #### custom_dir { #theme-custom-dir }\n>\n> A directory containing a custom theme.\n>\n"
    "> > ##### Deeper ###\n> >\n> > Nested quotes have headings too.\n>\n"
    "> Setext keys\n> -----------\n\n"
    "**default**: `'mkdocs'`. See [locale](#locale) and [name](#name).\n\n"
    "> [!note] A callout\n> ## Callout heading\n> Its text.\n\n"
    "```\n> ## not a heading: code\n```\n"
)


def test_headings_in_quotes_are_anchors(tmp_path):
    """'> #### custom_dir' is a heading in a quote: MkDocs, GitHub and Obsidian give it an id
    and an anchor, and 18 of MkDocs' 31 broken anchors were links to such headings."""
    root = write(
        tmp_path / "site",
        {
            "user-guide/configuration.md": CONFIGURATION,
            "dev-guide/themes.md": "# Themes\n\n"
            "Set [custom_dir](../user-guide/configuration.md#theme-custom-dir),"
            " [name](../user-guide/configuration.md#name),"
            " [deeper](../user-guide/configuration.md#deeper),"
            " [setext](../user-guide/configuration.md#setext-keys),"
            " [callout](../user-guide/configuration.md#callout-heading),"
            " [code](../user-guide/configuration.md#not-a-heading-code) and"
            " [[configuration#custom_dir]], [[configuration#theme#Deeper]].\n",
        },
    )
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    broken = {(lk.source_path, lk.anchor) for lk in kb.broken_anchors()}
    assert broken == {
        ("dev-guide/themes.md", "not-a-heading-code"),
        ("user-guide/configuration.md", "locale"),
    }
    rows = kb.reader.execute(
        "SELECT h.level, h.text, h.anchor, h.line, substr(d.body, h.start_char + 1,"
        " h.end_char - h.start_char) FROM headings h JOIN documents d ON d.id = h.doc_id"
        " WHERE d.path = 'user-guide/configuration.md' ORDER BY h.seq"
    ).fetchall()
    assert rows == [
        (1, "Configuration", None, 1, "# Configuration"),
        (3, "theme", None, 3, "### theme"),
        (4, "name", None, 9, "#### name"),
        (4, "custom_dir", "theme-custom-dir", 13, "#### custom_dir { #theme-custom-dir }"),
        (5, "Deeper", None, 17, "##### Deeper ###"),
        (2, "Setext keys", None, 21, "Setext keys\n> -----------"),
        (2, "Callout heading", None, 27, "## Callout heading"),
    ]
    region = kb.region("user-guide/configuration#name")
    assert region.lines[0] == "> #### name"
    kb.close()


# Anchors of elements other than headings: mdBook's and MkDocs' '<a id>' for an old heading,
# HTML ids, MkDocs' attr_list on an inline element or a paragraph.
ELEMENTS = (
    "# Choosing your theme\n\n"
    '<a id="old-name"></a>\n\n'
    "## Message Passing { #custom-id }\n\n"
    "Threads send <span id=foo>messages</span> over <div id='chan' class=x>a channel</div>.\n\n"
    "* **`locale`**{ #mkdocs-locale }: The locale used to build the theme.\n\n"
    "Was this page helpful?\n"
    '{ #feedback style="margin: 0" }\n\n'
    '```html\n<a id="in-code"></a>\n```\n\n'
    'Write `<a id="inline"></a>` before it, <!-- <a id="comment"></a> --> or not.\n'
)


def test_element_ids_are_anchors(tmp_path):
    root = write(
        tmp_path / "site",
        {
            "user-guide/theme.md": ELEMENTS,
            "user-guide/links.md": "# Links\n\n"
            + ", ".join(
                f"[{i}](theme.md#{i})"
                for i in (
                    "old-name",
                    "custom-id",
                    "foo",
                    "chan",
                    "mkdocs-locale",
                    "Feedback",
                    "in-code",
                    "inline",
                    "comment",
                )
            )
            + " and [[theme#old-name]], [[theme#Message Passing]].\n",
        },
    )
    kb = kbase.open(tmp_path / "index.db")
    kb.index([root], embed=False)
    broken = {lk.anchor for lk in kb.broken_anchors()}
    # In code and comments an id is none; a wikilink names a heading as Obsidian does.
    assert broken == {"in-code", "inline", "comment", "old-name"}
    assert {lk.kind for lk in kb.broken_anchors() if lk.anchor == "old-name"} == {"wiki"}
    rows = kb.reader.execute(
        "SELECT h.html_id, substr(d.body, h.start_char + 1, h.end_char - h.start_char)"
        " FROM html_ids h JOIN documents d ON d.id = h.doc_id ORDER BY h.start_char"
    ).fetchall()
    assert rows == [(i, i) for i in ("old-name", "foo", "chan", "mkdocs-locale", "feedback")]
    # The heading reads without its attribute list; its id is its anchor.
    assert kb.reader.execute("SELECT text, anchor FROM headings WHERE level = 2").fetchall() == [
        ("Message Passing", "custom-id")
    ]
    # 'kbase show' opens what the link opens: the section of the heading the anchor names.
    region = kb.region("user-guide/theme#old-name")
    assert region.lines[0] == '<a id="old-name"></a>' and region.lines[-1].startswith("Write")
    assert kb.region("user-guide/theme#mkdocs-locale").lines[0].startswith("* **`locale`**")
    kb.close()
