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
