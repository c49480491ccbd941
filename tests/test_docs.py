"""Every command a person can type is explained: help text for the command and each option, a
section of the manual (docs/cli.md, docs/mcp.md) that names it (subcommands within their parent's
section), and the generated reference (docs/cli-reference.md) is up to date."""

import re

import click
import pytest

import kbase
from kbase.cli.app import cli
from tests.conftest import REPO


def commands(group: click.Group = cli, prefix: str = "") -> list[tuple[str, click.Command]]:
    """Every command and subcommand, as the group lists them (the top group loads on demand)."""
    found = []
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None, name
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix}{name} ")
    return found


MANUAL = ("docs/cli.md", "docs/mcp.md")


def readme_sections() -> dict[str, str]:
    """Heading line -> the text under it, up to the next heading, over the manual's pages."""
    sections: dict[str, str] = {}
    for page in MANUAL:
        text = (REPO / page).read_text(encoding="utf-8")
        parts = re.split(r"^(#{1,4} .*)$", text, flags=re.M)
        sections.update(zip(parts[1::2], parts[2::2]))
    return sections


def named_in(heading: str, name: str) -> bool:
    """``kbase NAME`` or a backquoted ``NAME ...`` in a heading."""
    return re.search(rf"`(kbase )?{re.escape(name)}\b", heading) is not None


def test_the_command_list_is_complete():
    names = [name for name, _ in commands()]
    assert {"index", "search", "show", "mcp", "roots", "roots move"} <= set(names) and len(
        names
    ) >= 20


@pytest.mark.parametrize(("name", "command"), commands(), ids=[name for name, _ in commands()])
def test_every_command_and_option_has_help(name, command):
    assert (command.help or "").strip(), f"kbase {name} has no help text"
    assert command.get_short_help_str(80).strip()
    missing = [
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert missing == [], f"kbase {name}: options without help: {missing}"


@pytest.mark.parametrize("name", [n for n, _ in commands() if " " not in n])
def test_every_command_has_a_readme_section(name):
    sections = [heading for heading in readme_sections() if named_in(heading, name)]
    assert sections, f"no heading of {MANUAL} names `kbase {name}`"


@pytest.mark.parametrize("name", [n for n, _ in commands() if " " in n])
def test_every_subcommand_is_explained_in_its_parents_section(name):
    parent = name.split()[0]
    text = "".join(body for heading, body in readme_sections().items() if named_in(heading, parent))
    assert f"kbase {name}" in text, (
        f"the manual's section of `kbase {parent}` does not explain `kbase {name}`"
    )


def test_global_options_have_help():
    assert all((p.help or "").strip() for p in cli.params if isinstance(p, click.Option))


def test_the_cli_reference_is_generated_from_the_commands():
    """docs/cli-reference.md holds every command's --help as the code prints it today (cog)."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "docs/cli-reference.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, "docs/cli-reference.md is out of date: cog -r docs/cli-reference.md"


PAGES = (
    "README.md",
    "BENCHMARKS.md",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")),
)


def anchors(text: str) -> set[str]:
    """The ids GitHub gives a page's headings: lower case, punctuation but ``-`` and ``_``
    dropped, spaces to ``-``, a repeated heading numbered (``-1``, ``-2``); code blocks skipped."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.*?) *$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = sum(1 for a in found if a == slug or re.fullmatch(rf"{re.escape(slug)}-\d+", a))
        found.add(f"{slug}-{n}" if n else slug)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_link_points_at_a_file_and_heading_that_exist(page):
    """A relative link of README.md, BENCHMARKS.md or docs/*.md (outside code) names a file that
    exists, relative to the page, and a #fragment names one of that page's headings."""
    source = REPO / page
    text = re.sub(r"^```.*?^```", "", source.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code: examples of links, not links
    broken = []
    for target in re.findall(r"(?<!!\[)\]\(([^)\s]+)\)", text):  # not ![](...), as a column reads
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        file = (source.parent / path) if path else source
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(REPO)}")
        elif fragment and file.suffix == ".md":
            if fragment not in anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{target}: no heading #{fragment} in {file.relative_to(REPO)}")
    assert not broken, broken


def test_the_readme_mcp_table_names_each_tools_arguments_as_they_are(db_path):
    import asyncio
    import re

    from kbase.mcp.backend import Backend
    from kbase.mcp.server import build_server
    from tests.conftest import REPO

    kbase.open(db_path).close()
    tools = asyncio.run(build_server(Backend(db_path)).list_tools())
    readme = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(\w+)` \| ([^|]*(?:\\\|[^|]*)*) \|", readme, re.M)
    }
    assert {t.name for t in tools} <= set(rows)
    for tool in tools:
        props = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        args = rows[tool.name]
        for name in props:
            if name == "budget":  # said once, in the table's heading
                continue
            want = f"**`{name}`**" if name in required else f"`{name}`"
            assert want in args, f"docs/mcp.md's `{tool.name}` row does not name {want}: {args}"
