"""Where kbase keeps its own files when not told otherwise."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """kbase's data folder: ``$XDG_DATA_HOME/kbase`` (``~/.local/share/kbase``). The default
    index and the model graph derived from the embedding model live inside it."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "kbase"


def default_db_path() -> Path:
    """``$KBASE_DB``, else ``index.db`` in the data folder (``~/.local/share/kbase/index.db``)."""
    env = os.environ.get("KBASE_DB")
    return Path(env).expanduser() if env else data_dir() / "index.db"
