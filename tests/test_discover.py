import os

from kbase.ingest.discover import Candidate, Skipped, walk
from tests.conftest import write


def rels(items):
    return sorted(i.relpath for i in items if isinstance(i, Candidate))


def test_walk_skips_hidden_folders_and_other_extensions(tmp_path):
    write(
        tmp_path,
        {
            "a.md": "x",
            "b.markdown": "x",
            "c.txt": "x",
            "d.png": "x",
            ".hidden.md": "x",
            ".git/x.md": "x",
            ".obsidian/y.md": "x",
            ".trash/z.md": "x",
            "sub/e.MD": "x",
        },
    )
    assert rels(walk(tmp_path)) == ["a.md", "b.markdown", "c.txt", "sub/e.MD"]
    assert rels(walk(tmp_path, extensions=("txt",))) == ["c.txt"]


def test_kbaseignore_uses_gitignore_syntax_at_every_level(tmp_path):
    write(
        tmp_path,
        {
            ".kbaseignore": "drafts/\n*.tmp.md\n!keep.tmp.md\n",
            "a.md": "x",
            "x.tmp.md": "x",
            "keep.tmp.md": "x",
            "drafts/d.md": "x",
            "sub/.kbaseignore": "private.md\n",
            "sub/private.md": "x",
            "sub/public.md": "x",
            "other/private.md": "x",
        },
    )
    assert rels(walk(tmp_path)) == ["a.md", "keep.tmp.md", "other/private.md", "sub/public.md"]
    # a walk that starts in a subfolder still honours the ignore files above it
    assert rels(walk(tmp_path, start=tmp_path / "sub")) == ["sub/public.md"]


def test_a_kbaseignore_line_that_is_no_pattern_is_left_out_and_said(tmp_path):
    """'!' alone in a .kbaseignore (git passes it over) was a traceback from pathspec."""
    write(tmp_path, {".kbaseignore": "drafts/\n!\n\\\n", "a.md": "x", "drafts/d.md": "x"})
    items = list(walk(tmp_path))
    assert rels(items) == ["a.md"]  # the other lines apply
    [skip] = [i for i in items if isinstance(i, Skipped)]
    assert skip.abspath == str(tmp_path / ".kbaseignore")
    assert skip.reason == (
        "line 2 (and 1 more), '!', is not a gitignore pattern: left out, the other lines apply"
    )


def test_symlink_loop_is_reported_not_followed(tmp_path):
    write(tmp_path, {"a/note.md": "x"})
    os.symlink(tmp_path / "a", tmp_path / "a" / "loop")
    items = list(walk(tmp_path))
    assert rels(items) == ["a/note.md"]
    assert any(isinstance(i, Skipped) and "symlink" in i.reason for i in items)


def test_symlinked_folder_is_followed_once(tmp_path):
    write(tmp_path / "elsewhere", {"n.md": "x"})
    write(tmp_path / "vault", {"m.md": "x", "inside/i.md": "x"})
    os.symlink(tmp_path / "elsewhere", tmp_path / "vault" / "linked")
    os.symlink(tmp_path / "vault" / "inside", tmp_path / "vault" / "z-inside-again")
    items = list(walk(tmp_path / "vault", follow_outside=True))
    assert rels(items) == ["inside/i.md", "linked/n.md", "m.md"]
    assert [i.reason for i in items if isinstance(i, Skipped)] == [
        "folder already visited through a symlink (loop or second link)"
    ]


def test_a_symlink_out_of_the_roots_is_skipped_unless_followed(tmp_path):
    write(tmp_path / "elsewhere", {"n.md": "x", "f.md": "secret"})
    write(tmp_path / "vault", {"m.md": "x"})
    write(tmp_path / "other", {"o.md": "x"})
    os.symlink(tmp_path / "elsewhere", tmp_path / "vault" / "linked")
    os.symlink(tmp_path / "elsewhere" / "f.md", tmp_path / "vault" / "f.md")
    os.symlink(tmp_path / "other", tmp_path / "vault" / "other")
    items = list(walk(tmp_path / "vault"))
    assert rels(items) == ["m.md"]
    reasons = {os.path.basename(i.abspath): i.reason for i in items if isinstance(i, Skipped)}
    assert reasons["f.md"].startswith(f"symlink to {tmp_path / 'elsewhere' / 'f.md'}, outside")
    assert "--follow-outside" in reasons["linked"] and "other" in reasons
    inside = (str(tmp_path / "vault"), str(tmp_path / "other"))
    assert rels(walk(tmp_path / "vault", inside=inside)) == ["m.md", "other/o.md"]


def test_size_cap_and_broken_symlink(tmp_path):
    write(tmp_path, {"big.md": "x" * 2000, "small.md": "x"})
    os.symlink(tmp_path / "missing.md", tmp_path / "dangling.md")
    items = list(walk(tmp_path, max_size=1000))
    assert rels(items) == ["small.md"]
    reasons = {os.path.basename(i.abspath): i.reason for i in items if isinstance(i, Skipped)}
    assert "size cap" in reasons["big.md"] and "--max-size" in reasons["big.md"]
    assert reasons["dangling.md"] == "broken symlink"


def test_single_file_root(tmp_path):
    write(tmp_path, {"one.txt": "hello"})
    (c,) = walk(tmp_path / "one.txt")
    assert c.relpath == "" and c.size == 5
