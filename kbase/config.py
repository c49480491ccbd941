"""kbase's config files (TOML, read with tomllib), checked key by key.

- The user's: ``$XDG_CONFIG_HOME/kbase/config.toml`` (``~/.config/kbase/config.toml``; the
  environment variable ``KBASE_CONFIG`` names another file): ``index`` (the default index file),
  ``extensions`` and ``exclude`` (what ``kbase index`` reads and leaves out), ``model`` (the
  embedding model ``kbase index`` and ``kbase embed`` use).
- A vault's: ``.kbase.toml`` at the top of an indexed folder, which ``kbase index`` reads for that
  folder: ``extensions`` and ``exclude``.

What is given on the command line beats the environment (``KBASE_DB``), which beats a vault's file,
which beats the user's, which beats kbase's defaults. ``exclude`` holds gitignore patterns, as a
``.kbaseignore`` does; the user's and the vault's add up. A bad file is one ``ConfigError``
naming the file, the key and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kbase.errors import InputError

VAULT_FILE = ".kbase.toml"
USER_KEYS = {
    "index": 'the default index file, e.g. index = "~/notes/kb.db"',
    "extensions": 'the file extensions kbase index reads, e.g. extensions = [".md", ".txt"]',
    "exclude": 'gitignore patterns kbase index leaves out, e.g. exclude = ["templates/"]',
    "model": 'the embedding model, e.g. model = "multilingual-e5-small"',
}
VAULT_KEYS = {k: USER_KEYS[k] for k in ("extensions", "exclude")}


class ConfigError(InputError):
    """A config file that cannot be used: one line naming the file, the key and the fix."""


@dataclass(frozen=True)
class Config:
    """What one config file sets (None: not set), and the file it came from."""

    path: Path | None = None
    index: Path | None = None
    extensions: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = field(default=())
    model: str | None = None


def user_config_path() -> Path:
    """``$KBASE_CONFIG``, else ``$XDG_CONFIG_HOME/kbase/config.toml``
    (``~/.config/kbase/config.toml``)."""
    env = os.environ.get("KBASE_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kbase" / "config.toml"


def load_user() -> Config:
    """The user's config (an empty one when the file does not exist)."""
    return _load(user_config_path(), USER_KEYS)


def load_vault(root: str | os.PathLike[str]) -> Config:
    """A vault's ``.kbase.toml`` (an empty config when the folder has none)."""
    root = Path(root)
    if not root.is_dir():
        return Config()
    return _load(root / VAULT_FILE, VAULT_KEYS)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is no gitignore pattern ('!', a lone backslash), or None when it is one
    (git passes such a line over; pathspec refuses the whole list)."""
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except ValueError as e:
        return str(e)
    return None


MAX_CONFIG_BYTES = 1 << 20  # a config file is a few lines; a vault's may be anything


def _read(path: Path) -> str | None:
    """The file's text; None if there is none. Only a regular file of at most MAX_CONFIG_BYTES
    is read (a FIFO waited for ever, /dev/zero grew without end), without waiting to open it."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(
            f"cannot read config {path}: {e.strerror}", "check its permissions"
        ) from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(
                f"config {path} is not a regular file", "make it a file of key = value lines"
            )
        try:
            data = f.read(MAX_CONFIG_BYTES + 1)
        except OSError as e:
            raise ConfigError(f"cannot read config {path}: {e.strerror}", "check the file") from e
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config {path} is larger than {MAX_CONFIG_BYTES >> 20} MB",
            'a config file holds a few key = value lines, e.g. model = "..."',
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8 text", "save it as UTF-8") from e


def _load(path: Path, keys: dict[str, str]) -> Config:
    source = _read(path)
    if source is None:
        return Config()
    import tomllib  # (4 ms: only for a file there is)

    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(
            f"config {path} is not valid TOML: {e}", 'write key = value lines, e.g. model = "..."'
        ) from e
    except (RecursionError, ValueError) as e:  # arrays nested thousands deep; 5,000-digit numbers
        what = (
            "nested too deeply"
            if isinstance(e, RecursionError)
            else "a number too long"
            if "digits" in str(e)
            else str(e).splitlines()[0][:200]
        )
        raise ConfigError(
            f"config {path} is not TOML kbase can read ({what})",
            'write key = value lines, e.g. model = "..."',
        ) from None
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise ConfigError(
            f"config {path}: unknown key {unknown[0]!r}",
            f"the keys are {', '.join(keys)} (kbase config shows what is in force)",
        )

    def text(key: str) -> str | None:
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"config {path}: {key} must be a non-empty string", keys[key])
        return value

    def texts(key: str) -> tuple[str, ...] | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"config {path}: {key} must be a list of strings", keys[key])
        return tuple(value)

    exclude = texts("exclude") or ()
    bad = next((p for p in exclude if pattern_problem(p)), None)
    if bad is not None:
        raise ConfigError(
            f"config {path}: exclude pattern {bad!r} is not a gitignore pattern", keys["exclude"]
        )
    index = text("index")
    extensions = texts("extensions")
    if extensions == ():  # (read as kbase's own list, silently)
        raise ConfigError(f"config {path}: extensions is empty", keys["extensions"])
    if extensions is not None:
        extensions = tuple(e if e.startswith(".") else "." + e for e in extensions)
    return Config(
        path=path,
        index=(path.parent / Path(index).expanduser()) if index else None,
        extensions=extensions,
        exclude=exclude,
        model=text("model"),
    )
