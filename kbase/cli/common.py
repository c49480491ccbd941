"""What the command line's two ways in share, without click: the ``kbase`` group
(kbase.cli.app) and the quick way a plain ``kbase search`` takes (kbase.cli.quick). Printing
(``echo``, ``style``: the bytes click.echo and click.style give), JSON text, colour, the index a
command opens, and the lines an error prints.

This module imports only ``os``, ``re`` and ``sys`` when it loads: a keyword search from the
shell pays for what it uses only."""

from __future__ import annotations

import os
import re
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hand-off needs none)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from kbase.api import KB
    from kbase.errors import KbaseError

    Echo = Callable[..., None]  # echo(message, err=False)


def dumps(value, **options) -> str:
    """JSON text (kbase.text.json_text: DEL, C1 and bidi controls escaped, as JSON escapes C0),
    so no terminal control reaches a terminal through --json either."""
    from kbase.text import json_text

    return json_text(value, **options)


def use_color() -> bool:
    """Colour on a terminal, unless NO_COLOR is set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def printable(text: str, **options) -> str:
    """``kbase.text.printable`` (what comes from a file, made fit to print), imported when first
    used: --help imports no module of the engine."""
    from kbase.text import printable as fit_to_print

    return fit_to_print(text, **options)


# The styles kbase prints with, as click.style writes them (ANSI SGR codes, then a reset):
# tests/test_cli_quick.py keeps the two the same.
_COLORS = {"red": 31, "yellow": 33, "cyan": 36}


def style(text: str, fg: str | None = None, bold: bool | None = None, dim: bool | None = None):
    """``click.style(text, fg=, bold=, dim=)`` for kbase's colours (red, yellow, cyan)."""
    bits = [f"\033[{_COLORS[fg]}m"] if fg is not None else []
    if bold is not None:
        bits.append(f"\033[{1 if bold else 22}m")
    if dim is not None:
        bits.append(f"\033[{2 if dim else 22}m")
    return "".join(bits) + text + "\033[0m"


# click.echo removes escape sequences from what goes to a file or a pipe (click._compat)
_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")


def echo(message: str, err: bool = False) -> None:
    """``click.echo(message, err=err)`` for a line of text on a stream click would not wrap
    (kbase.cli.quick checks that it would not): the line, its escape sequences removed unless
    the stream is a terminal, then a flush."""
    stream = sys.stderr if err else sys.stdout
    out = message + "\n"
    if "\033" in out and not stream.isatty():
        out = _ANSI.sub("", out)
    stream.write(out)
    stream.flush()


def index_path(db: Path | None) -> Path:
    """The index a command opens: ``db`` (--db or KBASE_DB, which click reads), else the config
    file's ``index``, else kbase's default (``$XDG_DATA_HOME/kbase/index.db``)."""
    if db is not None:
        return db
    from kbase.config import load_user
    from kbase.paths import default_db_path

    return load_user().index or default_db_path()


def open_index(path: Path, echo: Echo) -> KB:
    """The index a one-shot command searches (the caller closes it): vectors read by sqlite-vec,
    a hybrid search handed to a running kbase watch/mcp/browse if one serves it, notices on
    stderr."""
    from kbase.api import KB

    kb = KB(path, cache_vectors=False)  # one query per process: sqlite-vec answers it
    kb.hand_off = True
    kb.on_notice = lambda message: echo(printable(f"note: {message}"), err=True)
    return kb


def error_lines(e: KbaseError) -> list[str]:
    """What a command prints on stderr for a library error (then it exits with 1)."""
    lines = [printable(f"Error: {e.message}")]  # it may name a file
    if e.hint:
        lines.append(printable(f"  hint: {e.hint}"))  # one line too: it may name a file
    return lines


def none_found(kb: Any, none: str, path: str | None, tags) -> str:
    """``none`` ("No orphans"), and why when --path or --tag keeps no note at all (a typo)."""
    why = kb.filters_that_keep_nothing(path=path, tags=tags) if path or tags else []
    return printable(f"{none}: {'; '.join(why)}." if why else f"{none}.")
