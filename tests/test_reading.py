"""KB.read (the MCP read tool): regions with line numbers and metadata; exact-path lookup for
kbase://note/ resources; find_document's suffix rule."""

from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbase
from kbase.errors import InputError
from kbase.notes.reading import MAX_LINES
from kbase.notes.resolve import _stem as _without_suffix
from tests.conftest import write


def test_read_regions_and_metadata(kb):
    r = kb.read("Welcome")
    assert (r.path, r.title, r.first_line, r.total_lines, r.truncated) == (
        "Welcome.md",
        "Welcome",  # the file name, as Obsidian shows it (not the front matter title)
        1,
        8,
        False,
    )
    assert set(r.tags) >= {"start", "meta", "inbox"} and r.date == "2024-05-01" and not r.stale
    r = kb.read("tech/SQLite.md", 3, 3)
    assert r.lines == ("Write-ahead logging lets readers and writers work at once.",)
    assert r.numbered() == "3 | Write-ahead logging lets readers and writers work at once."
    with pytest.raises(InputError, match="has 8 lines, not 9"):
        kb.read("Welcome", 9)
    with pytest.raises(InputError, match="no lines 5-2"):
        kb.read("Welcome", 5, 2)


def test_a_long_note_is_cut_and_says_so(tmp_path):
    vault = write(tmp_path / "v", {"long.md": "".join(f"l{i}\n" for i in range(1, 1001))})
    k = kbase.open(tmp_path / "i.db")
    k.index([vault], embed=False)
    r = k.read("long")
    assert r.truncated and r.last_line == MAX_LINES and r.lines[-1] == f"l{MAX_LINES}"
    r = k.read("long", 990)
    assert not r.truncated and (r.first_line, r.last_line) == (990, 1000)


def test_document_at_is_exact(kb):
    assert kb.document_at("tech/SQLite.md").title == "SQLite"
    with pytest.raises(InputError, match="no indexed note at 'SQLite.md'"):
        kb.document_at("SQLite.md")  # no suffix matching for resource URIs


def test_a_file_root_does_not_break_name_matching(tmp_path):
    vault = write(tmp_path / "v", {"a/Note.md": "# Note\n", "single.md": "# Single\n"})
    k = kbase.open(tmp_path / "i.db")
    k.index([vault / "a", vault / "single.md"], embed=False)  # a file root: its path is ''
    assert k.document("Note").title == "Note"


@given(
    st.lists(st.sampled_from(["a", "b", ".", "x.y", "md", ".."]), min_size=1, max_size=4).map(
        "/".join
    )
)
def test_without_suffix_is_pathlibs_rule(path):
    if str(PurePosixPath(path)) != path or PurePosixPath(path).name in ("", ".."):
        return  # stored paths are normalised
    assert _without_suffix(path) == PurePosixPath(path).with_suffix("").as_posix()
