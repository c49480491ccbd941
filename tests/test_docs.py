"""Every command a person can type is explained: help text for the command and each option,
and a README section that names it (subcommands within their parent's section)."""

import re

import click
import pytest

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


def readme_sections() -> dict[str, str]:
    """Heading line -> the text under it, up to the next heading."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    parts = re.split(r"^(#{2,4} .*)$", readme, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


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
    assert sections, f"no README heading names `kbase {name}`"


@pytest.mark.parametrize("name", [n for n, _ in commands() if " " in n])
def test_every_subcommand_is_explained_in_its_parents_section(name):
    parent = name.split()[0]
    text = "".join(body for heading, body in readme_sections().items() if named_in(heading, parent))
    assert f"kbase {name}" in text, (
        f"the README section of `kbase {parent}` does not explain `kbase {name}`"
    )


def test_global_options_have_help():
    assert all((p.help or "").strip() for p in cli.params if isinstance(p, click.Option))
