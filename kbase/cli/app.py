"""The ``kbase`` group and what its commands share: the index they open, options, colour."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbase import __version__
from kbase.cli.common import dumps as dumps  # (the commands' JSON; and below, theirs too)
from kbase.cli.common import error_lines, index_path, open_index, printable
from kbase.cli.common import use_color as use_color
from kbase.errors import KbaseError

if TYPE_CHECKING:
    from kbase.api import KB


# What every listing can print (``--format``); kbase.cli.render renders them. Commands import
# the engine and the renderers when they run, so that --help and --version import neither.
FORMATS = ("table", "json", "jsonl", "csv")


# Every command, and the module:function that defines it. This is the one place a command is
# registered; its module is imported only when it runs (or when --help lists it), so that
# `kbase search` does not import what `kbase mcp` or `kbase index` need.
COMMANDS = {
    "index": "kbase.cli.indexing:index",
    "watch": "kbase.cli.indexing:watch",
    "embed": "kbase.cli.indexing:embed",
    "chunks": "kbase.cli.indexing:chunks",
    "search": "kbase.cli.notes:search",
    "show": "kbase.cli.notes:show",
    "open": "kbase.cli.notes:open_note",
    "links": "kbase.cli.notes:links",
    "backlinks": "kbase.cli.notes:backlinks",
    "unresolved": "kbase.cli.notes:unresolved",
    "orphans": "kbase.cli.notes:orphans",
    "neighbors": "kbase.cli.notes:neighbors",
    "related": "kbase.cli.notes:related",
    "graph": "kbase.cli.notes:graph",
    "status": "kbase.cli.admin:status",
    "check": "kbase.cli.admin:check",
    "compact": "kbase.cli.admin:compact",
    "roots": "kbase.cli.admin:roots",
    "sql": "kbase.cli.admin:sql",
    "config": "kbase.cli.admin:config",
    "browse": "kbase.cli.admin:browse",
    "mcp": "kbase.cli.admin:mcp",
}


class _Group(click.Group):
    """The commands of ``COMMANDS``, loaded on demand; turns library errors into one line on
    stderr and a non-zero exit, never a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        import importlib

        module, _, name = target.partition(":")
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command) and command.name == cmd_name, target
        return command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KbaseError as e:
            for line in error_lines(e):
                click.echo(line, err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # `kbase search ... | head`
            sys.stderr.close()
            ctx.exit(0)


def open_kb(ctx: click.Context) -> KB:
    """The command's index, opened once and closed when the command ends."""
    root = ctx.find_root()
    if "kb" not in root.obj:
        kb = open_index(index_file(ctx), click.echo)
        root.obj["kb"] = kb
        root.call_on_close(kb.close)
    return root.obj["kb"]


def output_options(*formats: str):
    """``--format`` (the first of ``formats`` is for people and the default) plus a shortcut
    for each format for scripts the command offers (--json, --jsonl, --csv): every command
    asks for its output the same way."""

    def decorate(f):
        for name in reversed(formats[1:]):
            f = click.option(
                f"--{name}", "fmt", flag_value=name, help=f"Shortcut for --format {name}."
            )(f)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(formats),
            default=formats[0],
            show_default=True,
            help="What to print.",
        )(f)

    return decorate


format_options = output_options(*FORMATS)  # lists of results: table, json, jsonl, csv


def terminal_width() -> int | None:
    """The terminal's width (``COLUMNS`` first), or None when printing to a file or a pipe and
    ``COLUMNS`` is not set (nothing is cut then)."""
    import shutil

    return shutil.get_terminal_size((0, 0)).columns or None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="KBASE_DB",
    show_envvar=True,
    help="Index file. Default: the config file's index, else $XDG_DATA_HOME/kbase/index.db"
    " (~/.local/share/kbase/index.db).",
)
@click.version_option(__version__, prog_name="kbase")
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """kbase: your notes in one SQLite file, searchable from the terminal.

    Settings: --db, else KBASE_DB, else the config file (kbase config shows which is in force
    and from where)."""
    ctx.obj = {}  # the index file is found when a command needs it (index_file), not for --help


def index_file(ctx: click.Context) -> Path:
    """The index the command opens (index_path of --db), found once."""
    root = ctx.find_root()
    if "db" not in root.obj:
        root.obj["db"] = index_path(root.params.get("db"))
    return root.obj["db"]


def complete_note(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a NOTE argument: the paths of the notes whose path, file name or title
    starts with what is typed (KB.complete_notes: one query over the names, no text read). The
    index is the one the command would open (--db, KBASE_DB, the default); nothing when there is
    none or it cannot be read (completion never prints an error)."""
    from click.shell_completion import CompletionItem

    if ":" in incomplete or "#" in incomplete:
        return []  # PATH:LINE, PATH#page=N: the path is typed already
    try:
        path = index_path(ctx.find_root().params.get("db"))
        if not Path(path).is_file():
            return []
        from kbase.api import KB

        kb = KB(path, cache_vectors=False)
        try:
            paths, _ = kb.complete_notes(incomplete, 200)
        finally:
            kb.close()
    except Exception:  # a broken index, a locked file: no completion, not a traceback
        return []
    return [CompletionItem(p) for p in paths]


def _register_bash_quoting() -> None:
    r"""Bash inserts a completion as it is given (click's script asks for no quoting), so a note
    named 'SQLite WAL mode.md' became three arguments. Here bash's completions are escaped as
    the shell reads them (``SQLite\ WAL\ mode.md``), each backslash doubled for the ``read`` in
    click's script, which removes one. zsh and fish quote what they insert themselves."""
    import re

    from click.shell_completion import BashComplete, add_completion_class

    class Bash(BashComplete):
        def format_completion(self, item) -> str:
            word = re.sub(r"([^\w@%+=:,./-])", r"\\\1", item.value)  # as bash reads a word
            # click's script reads the line with read, not read -r: one level of \\ goes
            return item.type + "," + word.replace("\\", "\\\\")

    add_completion_class(Bash, "bash")


if "_KBASE_COMPLETE" in os.environ:  # only while a shell asks for completions
    _register_bash_quoting()


def note_argument(name: str = "note", **options):
    """A NOTE argument (a name, an alias or a path) with its names completed from the index."""
    return click.argument(name, shell_complete=complete_note, **options)


def open_in_editor(ctx: click.Context, abspath: str, line: int | None, missing: bool) -> None:
    """Start ``$VISUAL`` (else ``$EDITOR``) on ``abspath`` at ``line``, as the TUI's ctrl+o does
    (kbase.paths.editor_command), and exit with the editor's status; one error line when no
    editor is set, it cannot be run, or the file is gone."""
    import subprocess

    from kbase.errors import InputError
    from kbase.paths import editor_command

    at = f"{abspath}:{line}" if line else abspath
    if missing:
        raise InputError(
            f"{printable(abspath)} is missing on disk",
            "kbase index forgets a deleted note; kbase show prints the indexed text",
        )
    try:
        argv = editor_command(abspath, line, fallback=None)
    except ValueError as e:  # $EDITOR with an unclosed quote
        raise InputError(*e.args) from None
    if argv is None:
        raise InputError(
            f"no editor to open {printable(at)}: $VISUAL and $EDITOR are not set",
            "set one, e.g. export EDITOR=nano (or vim, 'code --wait'), in your shell's profile",
        )
    try:
        code = subprocess.run(argv, check=False).returncode
    except OSError as e:
        raise InputError(
            f"cannot run the editor {argv[0]!r}: {e.strerror or e}",
            "check $VISUAL / $EDITOR, e.g. export EDITOR=nano",
        ) from e
    if code:
        ctx.exit(code)


def parse_size(ctx, param, value):
    import re

    if value is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", value, re.I)
    if not m:
        raise click.BadParameter(f"{value!r} is not a size; use e.g. 500K, 10M, 1G")
    return int(float(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower()))


# kbase's own defaults of what the user's config file may set, as --help and kbase config say
# them (kbase.ingest.discover holds the extensions; a test keeps the two the same).
BUILTIN_EXTENSIONS = ".md .markdown .txt .pdf .canvas"
BUILTIN_MODEL = "the index's model, all-MiniLM-L6-v2 for a new index"


class ConfigDefault(click.Option):
    """An option whose default the user's config file may set (``config_key``): its --help ends
    with the default in force, and says when it comes from that file, read when help is shown
    (``builtin``: kbase's own default, as text)."""

    def __init__(self, *args, config_key: str, builtin: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.config_key = config_key
        self.builtin = builtin

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        from kbase.config import ConfigError, load_user, user_config_path

        try:
            value = getattr(load_user(), self.config_key)
        except ConfigError:
            return record[0], (
                f"{record[1]} Default: {self.builtin} (the config file {user_config_path()}"
                " cannot be read: kbase config says why)."
            )
        if not value:
            return record[0], f"{record[1]} Default: {self.builtin}."
        shown = " ".join(value) if isinstance(value, tuple) else str(value)
        return record[0], (
            f"{record[1]} Default: {shown} (from {user_config_path()}; without it: {self.builtin})."
        )


def model_options(f):
    """--model and --download, for index and embed."""
    f = click.option(
        "--download",
        is_flag=True,
        help="Let fastembed download the --model fastembed:NAME it does not have (network).",
    )(f)
    f = click.option(
        "--model",
        metavar="NAME",
        cls=ConfigDefault,
        config_key="model",
        builtin=BUILTIN_MODEL,
        help="The embedding model: all-MiniLM-L6-v2 (English), multilingual-e5-small"
        " (about 100 languages), fastembed:NAME. Another model than the index's re-embeds"
        " everything; search keeps the old vectors until that is done.",
    )(f)
    return f


class _ChunkOption(click.Option):
    """A chunker option whose help names kbase's default (kbase.records.defaults, the one place
    it is written), read only when that help is shown: ``kbase --help`` loads no records."""

    def __init__(self, *args, default_name: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.default_name = default_name

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from kbase.records import defaults

        template = self.help or ""
        self.help = template.format(default=getattr(defaults, self.default_name))
        try:
            return super().get_help_record(ctx)
        finally:
            self.help = template


def chunk_options(f):
    """The chunker's tunables (defaults: the index's settings, else kbase's)."""
    f = click.option(
        "--min-tokens",
        cls=_ChunkOption,
        default_name="MIN_TOKENS",
        type=click.IntRange(0),
        help="Merge smaller chunks with a neighbour (default {default}).",
    )(f)
    f = click.option(
        "--overlap",
        cls=_ChunkOption,
        default_name="OVERLAP_RATIO",
        type=click.FloatRange(0, 0.5),
        help="Overlap between prose chunks (default {default}).",
    )(f)
    f = click.option(
        "--max-tokens",
        cls=_ChunkOption,
        default_name="MAX_TOKENS",
        type=click.IntRange(4, 10_000),
        help="Chunk budget in model tokens (default {default}).",
    )(f)
    return f


path_option = click.option(
    "--path",
    "path_glob",
    metavar="GLOB",
    help="Only notes whose path matches GLOB, or lies under this folder.",
)


exclude_option = click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="GLOB",
    help="Leave out notes whose path matches GLOB, or lies under this folder (repeatable).",
)


def depth_option(default: int | None, help: str):
    return click.option(
        "-d",
        "--depth",
        type=click.IntRange(1, 100),
        default=default,
        show_default=default is not None,
        help=help,
    )


tag_option = click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="TAG",
    help="Only notes with this tag (repeatable; nested tags match).",
)


def note_filter_options(f):
    """--path, --exclude, --tag: which notes a command looks at (search, orphans, unresolved)."""
    return path_option(exclude_option(tag_option(f)))


def search_options(f):
    f = click.option(
        "--until",
        metavar="DATE",
        help="Only notes dated on or before DATE (YYYY-MM-DD, or 7d/2w/3m/1y ago).",
    )(f)
    f = click.option(
        "--since",
        metavar="DATE",
        help="Only notes dated on or after DATE (front matter date, else file time).",
    )(f)
    f = note_filter_options(f)
    f = click.option(
        "-n",
        "--limit",
        type=int,  # checked where every face's limit is: kbase.search.run.check_limit
        default=10,
        show_default=True,
        help="Number of notes to return (1 to 1,000).",
    )(f)
    return f


def say_near(asked: str | None, path: str, title: str) -> None:
    """On stderr: the name given named no note, and the note it titles, or the one a typo away,
    is used instead."""
    if asked:
        from kbase.text import shown_instead  # (not imported for kbase --help)

        click.echo(printable(shown_instead(asked, path, title)), err=True)


def main() -> None:  # pragma: no cover
    cli(prog_name="kbase")
