"""The ``kbase`` command: thin wrappers that resolve the index, call the library, render.

The group and its shared options are in ``kbase.cli.app``; the commands are in ``indexing``,
``notes`` and ``admin``, which add themselves to the group when they are imported, here.
"""

import kbase.cli.admin
import kbase.cli.indexing
import kbase.cli.notes  # noqa: F401
from kbase.cli.app import cli, main

__all__ = ["cli", "main"]
