"""Walk roots and yield the files to index, with one stat each.

Hidden entries (``.git``, ``.obsidian``, ``.trash``, dotfiles) are skipped, ``.kbaseignore``
files (gitignore syntax, one per folder, applying below it) are honoured, symlinked folders are
followed once (a loop is reported, never followed), and files over the size cap are skipped.

Each file is indexed once, under its own path: a symlink (to a file or a folder) whose target the
walk of the same root reaches anyway (not hidden, not ignored, of an indexed extension) is skipped
with a reason, whichever name sorts first, so a run from a subfolder agrees with a run of the
root. A symlink to what the walk does not reach on its own (a file in an ignored folder, a
``.txt`` named ``.md``) is indexed under the link's name, as is one into another indexed root:
each root is a vault of its own, whose links resolve among its files.

A symlink (to a file or a folder) whose target resolves outside every indexed root is skipped with
a reason, unless ``follow_outside``: the index holds files under its roots, so that a link to
``/etc/passwd`` planted in a shared vault never reaches a search result or an agent.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.text import printable

if TYPE_CHECKING:
    import apsw
    import pathspec

DEFAULT_EXTENSIONS = (".md", ".markdown", ".txt", ".pdf", ".canvas")
DEFAULT_MAX_SIZE = 10 * 1024 * 1024  # bytes; larger files are skipped: notes are rarely this big
# PDFs carry images and fonts: a 300-page scanned book is 100 MB and more, yet its text is small.
# They are read by the worker processes (kbase.indexer.prepare), never held whole in the
# indexer's memory.
PDF_MAX_SIZE = 512 * 1024 * 1024
PDF_EXTENSIONS = (".pdf",)
CANVAS_EXTENSIONS = (".canvas",)  # (kbase.ingest.canvas reads them: here, for a cheap test)


def size_cap(name: str, max_size: int | None) -> int:
    """The size above which a file is skipped: ``max_size`` when given, else the default of its
    kind (PDF_MAX_SIZE for a PDF, DEFAULT_MAX_SIZE for everything else)."""
    if max_size is not None:
        return max_size
    return PDF_MAX_SIZE if name.lower().endswith(PDF_EXTENSIONS) else DEFAULT_MAX_SIZE


IGNORE_FILE = ".kbaseignore"


@dataclass(frozen=True)
class Candidate:
    """A file to index: ``relpath`` is '/'-separated and relative to the walked root."""

    relpath: str
    abspath: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Attachment:
    """A file that is not indexed as text but that notes can link to (an image, a PDF)."""

    relpath: str


@dataclass(frozen=True)
class Skipped:
    """A file or folder left out, with the reason (a warning for the user)."""

    abspath: str
    reason: str


def walk(
    root: Path,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    max_size: int | None = None,
    start: Path | None = None,
    attachments: frozenset[str] = frozenset(),
    inside: Sequence[str] | None = None,
    follow_outside: bool = False,
    exclude: Sequence[str] = (),
) -> Iterator[Candidate | Skipped | Attachment]:
    """Yield the candidate files under ``root`` (or under ``start``, a file or folder inside it).

    ``relpath`` is always relative to ``root``; a file root has the relpath ''. ``inside``: the
    resolved paths of every indexed root (default: ``root``'s); a symlink resolving outside all
    of them is skipped unless ``follow_outside``. ``exclude``: gitignore patterns relative to
    ``root``, left out as a ``.kbaseignore`` there would.
    """
    exts = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
    root = Path(root)
    target = Path(start) if start is not None else root
    rel_start = target.relative_to(root).as_posix() if start is not None else ""
    rel_start = "" if rel_start == "." else rel_start
    try:
        st = target.stat()
    except OSError as e:
        yield Skipped(str(target), f"cannot read: {e.strerror}")
        return
    if not stat.S_ISDIR(st.st_mode):
        # A file named explicitly is indexed whatever its extension (decoding decides); a hidden
        # one is skipped as a walk of its folder skips it, or runs would disagree.
        if target.name.startswith("."):
            yield Skipped(str(target), HIDDEN_REASON)
            return
        yield from _file(rel_start, str(target), st, max_size)
        return
    specs: list[tuple[str, pathspec.PathSpec]] = []
    if exclude:  # the config files' patterns (kbase.config), as a .kbaseignore at the root
        import pathspec

        specs.append(("", pathspec.GitIgnoreSpec.from_lines(exclude)))
    # The .kbaseignore files from the root down to the start folder apply too.
    prefix = ""
    for part in [""] + (rel_start.split("/") if rel_start else []):
        prefix = f"{prefix}{part}/" if part else ""
        problem = _load_ignore(root / prefix, prefix, specs)
        if problem:
            yield problem
    atts = frozenset("." + a.lower().lstrip(".") for a in attachments)
    bounds = None if follow_outside else tuple(inside or (os.path.realpath(root),))
    tree = _Tree(os.path.realpath(root), exts, [(p, sp) for p, sp in specs if not p])
    yield from _walk_dir(
        target, rel_start, exts, max_size, specs, set(), atts, bounds, tree, top=True
    )


class _Tree:
    """What the walk of a root reaches by real paths alone (no symlink followed): where a
    symlink inside the root leads to a file or folder the walk indexes anyway."""

    def __init__(
        self, root: str, exts: tuple[str, ...], specs: list[tuple[str, pathspec.PathSpec]]
    ) -> None:
        self.root, self.exts, self.specs = root, exts, specs  # (specs: the root's own)

    def reaches(self, real: str, is_dir: bool) -> str | None:
        """The path inside the root of ``real`` (a resolved path) when the walk reaches it at
        that path and indexes it (a file) or walks it (a folder); else None."""
        if not within(real, (self.root,)):
            return None
        if not (os.path.isdir(real) if is_dir else os.path.isfile(real)):
            return None  # (a broken link: said so where it is listed)
        rel = Path(os.path.relpath(real, self.root)).as_posix()
        if rel == ".":
            return rel if is_dir else None
        parts = rel.split("/")
        if any(p.startswith(".") for p in parts) or not _utf8(rel):
            return None
        if not is_dir and not parts[-1].lower().endswith(self.exts):
            return None
        specs = list(self.specs)
        folder = ""
        for part in parts[:-1]:
            folder = f"{folder}/{part}" if folder else part
            if _ignored(folder, True, specs):
                return None
            _load_ignore(Path(self.root, folder), folder + "/", specs)  # (a bad line: said there)
        return None if _ignored(rel, is_dir, specs) else rel


def same_tree_reason(rel: str, is_dir: bool) -> str:
    if is_dir:
        where = "the root folder" if rel == "." else f"folder {printable(rel)}"
        return f"symlink to {where}, whose files are indexed under their own paths"
    return f"symlink to {printable(rel)}, which is indexed under its own path"


def _load_ignore(
    folder: Path, prefix: str, specs: list[tuple[str, pathspec.PathSpec]]
) -> Skipped | None:
    ignore = folder / IGNORE_FILE
    try:
        lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return None
    except OSError as e:
        return Skipped(str(ignore), f"cannot read ignore file: {e.strerror}")
    import pathspec  # only for folders that have an ignore file

    try:
        specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(lines)))
        return None
    except ValueError:  # a line that is no pattern ('!'): left out, as git passes it over
        from kbase.config import pattern_problem

        bad = [n for n, line in enumerate(lines, 1) if pattern_problem(line)]
    good = [line for n, line in enumerate(lines, 1) if n not in bad]
    specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(good)))
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return Skipped(
        str(ignore),
        f"line {bad[0]}{more}, {lines[bad[0] - 1]!r}, is not a gitignore pattern: left out,"
        " the other lines apply",
    )


def _ignored(rel: str, is_dir: bool, specs: list[tuple[str, pathspec.PathSpec]]) -> bool:
    for prefix, spec in specs:
        if rel.startswith(prefix):
            sub = rel[len(prefix) :]
            if spec.match_file(sub + "/" if is_dir else sub):
                return True
    return False


def _walk_dir(
    folder: Path,
    rel: str,
    exts: tuple[str, ...],
    max_size: int | None,
    specs: list[tuple[str, pathspec.PathSpec]],
    seen: set[tuple[int, int]],
    atts: frozenset[str] = frozenset(),
    bounds: tuple[str, ...] | None = None,
    tree: _Tree | None = None,
    top: bool = False,
) -> Iterator[Candidate | Skipped | Attachment]:
    try:
        st = folder.stat()
    except OSError as e:
        yield Skipped(str(folder), f"cannot read folder: {e.strerror}")
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        yield Skipped(str(folder), "folder already visited through a symlink (loop or second link)")
        return
    seen.add(key)
    n = len(specs)
    if not top:
        problem = _load_ignore(folder, rel + "/", specs)
        if problem:
            yield problem
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        yield Skipped(str(folder), f"cannot list folder: {e.strerror}")
        return
    try:
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                if name.lower().endswith(exts) and _is_file(entry):
                    yield Skipped(printable(entry.path), HIDDEN_REASON)
                continue
            child_rel = f"{rel}/{name}" if rel else name
            try:
                is_dir = entry.is_dir()  # follows symlinks
            except OSError:
                is_dir = False
            # (An attachment is never read: a link to one reveals nothing.)
            if (is_dir or name.lower().endswith(exts)) and entry.is_symlink():
                target = os.path.realpath(entry.path)
                if bounds is not None and not within(target, bounds):
                    if not _ignored(child_rel, is_dir, specs):
                        yield Skipped(printable(entry.path), outside_reason(target))
                    continue
                # (a folder walked already, a loop among them: said so below, as before)
                walked = is_dir and _key(target) in seen
                same = tree.reaches(target, is_dir) if tree is not None and not walked else None
                if same is not None:  # indexed under its own path: not twice
                    if not _ignored(child_rel, is_dir, specs):
                        yield Skipped(printable(entry.path), same_tree_reason(same, is_dir))
                    continue
            if not _utf8(name):
                # The index stores paths as UTF-8 text; undecodable bytes in a name cannot be
                # stored.
                if is_dir or name.lower().endswith(exts):
                    what = "folder" if is_dir else "file"
                    yield Skipped(
                        printable(entry.path),
                        f"{what} name is not valid UTF-8 (rename it to index it)",
                    )
                continue  # an attachment with such a name: no note can link to it anyway
            if is_dir:
                if not _ignored(child_rel, True, specs):
                    yield from _walk_dir(
                        Path(entry.path), child_rel, exts, max_size, specs, seen, atts, bounds, tree
                    )
                continue
            if not name.lower().endswith(exts):
                if (
                    atts
                    and os.path.splitext(name)[1].lower() in atts
                    and not _ignored(child_rel, False, specs)
                ):
                    yield Attachment(child_rel)
                continue
            if _ignored(child_rel, False, specs):
                continue
            try:
                est = entry.stat()
            except OSError as e:
                reason = "broken symlink" if entry.is_symlink() else f"cannot stat: {e.strerror}"
                yield Skipped(entry.path, reason)
                continue
            yield from _file(child_rel, entry.path, est, max_size)
    finally:
        del specs[n:]


def _key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def within(path: str, bounds: Sequence[str]) -> bool:
    """Is the resolved ``path`` one of ``bounds`` (resolved roots) or under one of them?"""
    for b in bounds:
        if path == b or path.startswith(b.rstrip(os.sep) + os.sep):
            return True
    return False


def follow_outside_key(root_id: int) -> str:
    """The meta key marking a root indexed with ``follow_outside`` (later runs follow it too)."""
    return f"follow_outside:{root_id}"


def root_bounds(con: apsw.Connection) -> tuple[str, ...]:
    """The resolved paths of every indexed root (where it is now, if it moved with the index):
    where a symlink may lead, and where a note read from the index must be."""
    from kbase.store.db import located_root

    return tuple(
        os.path.realpath(located_root(path, relpath, con.filename))
        for path, relpath in con.execute("SELECT path, relpath FROM roots")
    )


def outside_doc_ids(con: apsw.Connection, doc_ids: list[int]) -> set[int]:
    """Those of ``doc_ids`` whose file resolves outside every indexed root (and whose root was
    not indexed with ``--follow-outside``): what ``kbase.notes.resolve.check_inside`` would
    refuse. A search leaves them out, so that no snippet of such a file reaches a result."""
    from kbase.store.db import located_root, meta_get

    if not doc_ids:
        return set()
    bounds = root_bounds(con)
    marks = ",".join("?" * len(doc_ids))
    out = set()
    for doc_id, path, root, relpath, root_id in con.execute(
        "SELECT d.id, d.path, r.path, r.relpath, r.id FROM documents AS d"
        f" JOIN roots AS r ON r.id = d.root_id WHERE d.id IN ({marks})",
        doc_ids,
    ):
        where = located_root(root, relpath, con.filename)
        real = os.path.realpath(os.path.join(where, path) if path else where)
        if not within(real, bounds) and meta_get(con, follow_outside_key(root_id)) is None:
            out.add(doc_id)
    return out


def outside_reason(target: str) -> str:
    return (
        f"symlink to {printable(target)}, outside the indexed roots"
        " (pass --follow-outside to index it)"
    )


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # os.fsdecode turned undecodable bytes into lone surrogates
        return False


HIDDEN_REASON = (
    "hidden file (its name starts with '.'): kbase skips hidden files and folders, as Obsidian"
    " hides them; rename it to index it"
)


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _file(
    rel: str, abspath: str, st: os.stat_result, max_size: int | None
) -> Iterator[Candidate | Skipped]:
    cap = size_cap(abspath, max_size)
    if not stat.S_ISREG(st.st_mode):
        yield Skipped(abspath, "not a regular file")
    elif st.st_size > cap:
        yield Skipped(
            abspath,
            f"larger than the size cap ({st.st_size:,} > {cap:,} bytes; raise it with --max-size)",
        )
    else:
        yield Candidate(rel, abspath, st.st_size, st.st_mtime_ns)
