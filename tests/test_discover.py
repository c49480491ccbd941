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


def _skips(items) -> dict[str, str]:
    return {os.path.basename(i.abspath): i.reason for i in items if isinstance(i, Skipped)}


def test_a_symlinked_file_in_the_tree_is_indexed_once_under_its_own_path(tmp_path):
    """A symlink to a file of the same root was a second document (the same hits twice): the
    real file is indexed, the link skipped with a reason, whichever name sorts first, from the
    root or from a subfolder, followed outside or not."""
    vault = write(tmp_path / "vault", {"m-real.md": "x", "sub/n.md": "x"})
    os.symlink("m-real.md", vault / "a-link.md")  # sorts before its target
    os.symlink("../m-real.md", vault / "sub" / "z-link.md")
    os.symlink("sub", vault / "b-sub")  # a folder: the same rule
    for follow in (False, True):
        items = list(walk(vault, follow_outside=follow))
        assert rels(items) == ["m-real.md", "sub/n.md"]
        assert _skips(items) == {
            "a-link.md": "symlink to m-real.md, which is indexed under its own path",
            "z-link.md": "symlink to m-real.md, which is indexed under its own path",
            "b-sub": "symlink to folder sub, whose files are indexed under their own paths",
        }
    assert rels(walk(vault, start=vault / "sub")) == ["sub/n.md"]


def test_a_symlink_to_what_the_walk_does_not_reach_is_indexed_under_its_name(tmp_path):
    """A link is the only way in to a file of an ignored or hidden folder, or of another
    extension: it is indexed under the link's name (nothing is lost); one into another indexed
    root too, as a symlinked folder is (each root resolves its links among its own files)."""
    vault = write(
        tmp_path / "vault",
        {".kbaseignore": "drafts/\n", "drafts/d.md": "x", ".hidden/h.md": "x", "t.txt": "x"},
    )
    write(tmp_path / "other", {"o.md": "x"})
    os.symlink("drafts/d.md", vault / "d.md")
    os.symlink(".hidden/h.md", vault / "h.md")
    os.symlink("t.txt", vault / "t.md")
    os.symlink(tmp_path / "other" / "o.md", vault / "o.md")
    inside = (str(vault), str(tmp_path / "other"))
    assert rels(walk(vault, extensions=(".md",), inside=inside)) == ["d.md", "h.md", "o.md", "t.md"]
    items = list(walk(vault, extensions=(".md", ".txt"), inside=inside))
    assert rels(items) == ["d.md", "h.md", "o.md", "t.txt"]
    assert _skips(items) == {"t.md": "symlink to t.txt, which is indexed under its own path"}


def test_kbase_index_keeps_one_document_for_a_symlinked_file_and_reruns_agree(tmp_path):
    """Through kbase index on a real index: the twin a link made before goes (its text stays,
    at the real path), and runs of the root, of the subfolder and of every root agree."""
    from click.testing import CliRunner

    from kbase.cli.app import cli

    vault = write(tmp_path / "vault", {"real.md": "# Real\n\nunique words\n", "sub/n.md": "x"})
    db = tmp_path / "i.db"

    def run(*args: str):
        r = CliRunner().invoke(cli, ["--db", str(db), *args])
        assert r.exit_code == 0, r.output
        return r

    (vault / "sub" / "twin.md").write_text("# Real\n\nunique words\n")  # a copy first
    assert "3 new" in run("index", "--no-embed", str(vault)).stdout
    (vault / "sub" / "twin.md").unlink()
    os.symlink("../real.md", vault / "sub" / "twin.md")
    r = run("index", "--no-embed", str(vault))
    assert "0 new, 0 updated, 2 unchanged, 0 renamed, 1 removed, 1 skipped" in r.stdout
    assert "twin.md: symlink to real.md, which is indexed under its own path" in r.stderr
    for again in ([str(vault)], [str(vault / "sub")], []):
        r = run("index", "--no-embed", *again)
        assert "0 new, 0 updated" in r.stdout and " 0 removed" in r.stdout, (again, r.stdout)
    hits = run("search", "unique", "--json").stdout
    assert '"real.md"' in hits and "twin.md" not in hits
