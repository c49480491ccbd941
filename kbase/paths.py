"""Where kbase keeps its own files when not told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

# The default model's tokenizer and vocabulary, shipped with kbase: the chunker counts model tokens
# with it, the embedder runs it, and the spelling correction reads its English words.
TOKENIZER_DIR = Path(__file__).parent / "assets" / "all-MiniLM-L6-v2"


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


# Editors that take FILE:LINE (with --goto for VS Code and its forks) rather than +LINE FILE.
_GOTO_EDITORS = {"code", "code-insiders", "codium", "cursor", "windsurf"}
_COLON_EDITORS = {"subl", "zed", "hx", "helix"}


def editor_command(
    path: str,
    line: int | None,
    environ: os._Environ | dict | None = None,
    fallback: str | None = "vi",
) -> list[str] | None:
    """``$VISUAL``, else ``$EDITOR``, else ``fallback`` (None: no editor, None returned) as argv,
    opening ``path`` at ``line``: ``+LINE FILE`` (vi, vim, nvim, nano, emacs, micro, kak, ...),
    ``--goto FILE:LINE`` for VS Code and its forks, ``FILE:LINE`` for Sublime Text, Zed and
    Helix. The TUI (ctrl+o) and ``kbase open`` / ``search --open`` start the same command.
    A command the shell could not read either (an unclosed quote) is a ``ValueError`` whose
    args are the message (naming the variable) and a hint."""
    import shlex

    env = os.environ if environ is None else environ
    var = "VISUAL" if env.get("VISUAL") else "EDITOR"
    editor = env.get("VISUAL") or env.get("EDITOR") or fallback
    if not editor or not editor.strip():
        return None
    try:
        argv = shlex.split(editor)
    except ValueError as e:  # shlex: 'No closing quotation', 'No escaped character'
        raise ValueError(
            f"${var} {editor!r} is not a command: {str(e).lower()}",
            f"quote as in the shell, e.g. export {var}='code --wait'",
        ) from None
    name = os.path.basename(argv[0]).lower().removesuffix(".exe")
    if not line or line <= 0:
        argv.append(path)
    elif name in _GOTO_EDITORS:
        argv += ["--goto", f"{path}:{line}"]
    elif name in _COLON_EDITORS:
        argv.append(f"{path}:{line}")
    else:
        argv += [f"+{line}", path]
    return argv
