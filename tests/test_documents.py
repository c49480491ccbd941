"""One resolver for every NOTE argument: a unique match, or an error listing the candidates by
the path that names each one alone."""

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError
from tests.conftest import write

NOTE_COMMANDS = ("show", "links", "backlinks", "neighbors", "graph")


@pytest.fixture
def vault(tmp_path):
    return write(
        tmp_path / "v",
        {
            "Work/Security and privacy.md": "---\naliases: [Safety]\n---\n"
            "# Work security\n\nSee [[Home]].\n",
            "Home/Security and privacy.md": "---\naliases: [safety]\n---\n"
            "# Home security\n\nLocks. [[Plan]]\n",
            "Home.md": "# Home\n\n[[Work/Security and privacy]] and "
            "[[Home/Security and privacy|locks]].\n",
            "Plan.md": "# Plan\n\nTop-level plan. [[Home]]\n",
            "Projects/Plan.md": "# Projects plan\n\nThe other plan.\n",
            "Case/readme.md": "# lower\n",
            "Case/README.md": "# upper\n",
        },
    )


@pytest.fixture
def kb(tmp_path, vault):
    k = kbase.open(tmp_path / "i.db")
    k.index([vault], embed=False)
    yield k
    k.close()


@pytest.mark.parametrize("command", NOTE_COMMANDS)
def test_every_note_command_refuses_an_ambiguous_name_the_same_way(kb, command):
    r = CliRunner().invoke(cli, ["--db", str(kb.path), command, "Security and privacy"])
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        "Error: 'Security and privacy' matches 2 documents: Home/Security and privacy.md,"
        " Work/Security and privacy.md",
        "  hint: name one by its path, e.g. 'Home/Security and privacy.md'",
    ]
    for path in ("Home/Security and privacy.md", "Work/Security and privacy"):
        r = CliRunner().invoke(cli, ["--db", str(kb.path), command, path])
        assert r.exit_code == 0, r.output


def test_resolution_order(kb, vault):
    assert (
        kb.note("Plan").path == "Plan.md"
    )  # a whole path inside the root beats a file name elsewhere
    assert kb.note("projects/plan").path == "Projects/Plan.md"  # any case, no extension
    assert kb.note("[[Plan#Goals|the plan]]").path == "Plan.md"  # a link as written
    assert kb.note(str(vault / "Projects" / "Plan.md")).path == "Projects/Plan.md"
    assert kb.document("Home").path == "Home.md"
    assert (
        kb.document("Case/README.md").body == "# upper\n"
    )  # the same case wins among case variants
    with pytest.raises(
        InputError, match=r"'case/Readme' matches 2 documents: Case/README.md, Case/readme.md"
    ):
        kb.document("case/Readme")
    with pytest.raises(InputError, match=r"'SAFETY' matches 2 documents"):  # aliases are names too
        kb.note("SAFETY")
    assert (
        kb.note("Safety").path == "Work/Security and privacy.md"
    )  # unless one matches in same case
    with pytest.raises(InputError, match="no indexed document matches 'Nowhere'"):
        kb.links("Nowhere")


def test_the_same_path_in_two_roots_is_named_by_its_absolute_path(tmp_path):
    a = write(tmp_path / "a", {"Index.md": "# A\n"})
    b = write(tmp_path / "b", {"Index.md": "# B\n"})
    k = kbase.open(tmp_path / "two.db")
    k.index([a, b], embed=False)
    with pytest.raises(InputError) as e:
        k.backlinks("Index")
    assert e.value.message == f"'Index' matches 2 documents: {a / 'Index.md'}, {b / 'Index.md'}"
    assert k.document(str(b / "Index.md")).body == "# B\n"
    k.close()
