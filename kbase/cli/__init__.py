"""The command-line face: the ``kbase`` group and its one registry of commands (``app``), the
commands (``indexing``, ``notes``, ``admin``), their renderers (``render``) and progress lines
(``progress``).

``main`` is the ``kbase`` executable. It imports only what the command line asks for: ``kbase
--version`` answers before click or any of kbase is imported, a plain ``kbase search`` runs
without click (kbase.cli.quick), and each command imports its own parts of the engine when it
runs (``python -X importtime -m kbase ...`` shows what).
"""

from __future__ import annotations

import sys


def main() -> None:
    """The ``kbase`` executable."""
    if sys.argv[1:] == ["--version"]:
        from kbase import __version__

        sys.stdout.write(f"kbase, version {__version__}\n")
        return
    try:
        if "search" in sys.argv[1:4]:  # (after --db FILE at most)
            from kbase.cli import quick

            code = quick.main(sys.argv[1:])
            if code is not None:
                sys.exit(code)
        from kbase.cli.app import cli

        cli(prog_name="kbase")
    finally:
        _leave_to_the_os()


def _leave_to_the_os() -> None:
    """The objects still alive once a command is done are left to the operating system: the
    interpreter's last collection would walk every one of them (the parsed notes, the token
    counts, the tokenizer) only to free what exiting frees anyway, 15-30 ms of a fresh index
    of a hundred notes. Files and the index are closed by then (with blocks, click's context);
    exit hooks still run."""
    import gc

    gc.freeze()


def __getattr__(name: str):
    if (
        name == "cli"
    ):  # ``from kbase.cli import cli``: the group, without importing it for --version
        from kbase.cli.app import cli

        return cli
    raise AttributeError(f"module 'kbase.cli' has no attribute {name!r}")
