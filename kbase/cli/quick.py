"""``kbase search`` without click: the quick way in for a search from the shell (issue 36).

``kbase [--db FILE] search [OPTIONS] WORDS`` is read here (``parse``) as kbase.cli.notes's
``search`` command reads it, and run with the same code (``find``, ``show``), so that it prints
the same bytes and exits with the same status; click and the command definitions, about a third
of a keyword search's time, are never imported. Anything this does not read (``--help``,
``--open``, an option it does not know, a value click would refuse, a short option with its value
attached, shell completion, a stream click would re-wrap) returns None from ``main``: kbase.cli
then runs click, which answers it as always. tests/test_cli_quick.py checks both ways give the
same over many queries and options.
"""

from __future__ import annotations

import os
import sys

from kbase.cli.common import echo, error_lines, index_path, none_found, open_index
from kbase.cli.common import printable as _printable

TYPE_CHECKING = False  # (typing costs a hand-off more than its exchange with the server)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from kbase.api import KB, HandedSearch
    from kbase.cli.common import Echo
    from kbase.records import Hits

MODES = ("keyword", "semantic", "hybrid")
FORMATS = ("table", "json", "jsonl", "csv")  # kbase.cli.app.FORMATS (a test keeps them equal)

# The search command's options, by spelling: (parameter, value for a flag; None: takes a value).
OPTIONS: dict[str, tuple[str, Any]] = {
    "-m": ("mode", None),
    "--mode": ("mode", None),
    "-n": ("limit", None),
    "--limit": ("limit", None),
    "--path": ("path_glob", None),
    "--exclude": ("exclude", None),
    "--tag": ("tags", None),
    "--since": ("since", None),
    "--until": ("until", None),
    "--format": ("fmt", None),
    "--explain": ("explain", True),
    "--no-correct": ("no_correct", True),
    "--json": ("fmt", "json"),
    "--jsonl": ("fmt", "jsonl"),
    "--csv": ("fmt", "csv"),
}
MULTIPLE = ("exclude", "tags")
# Spellings the search command has that only click answers (help, an editor to start).
CLICK_ONLY = ("-h", "--help", "--open")
SHORT_WITH_VALUE = ("-m", "-n")  # -n5, -mkeyword: click reads these (rare); -nothing is a word


def defaults() -> dict[str, Any]:
    """The search command's parameters when none is given (as click fills them)."""
    return {
        "query": (),
        "mode": None,
        "explain": False,
        "no_correct": False,
        "open_n": None,
        "limit": 10,
        "path_glob": None,
        "exclude": (),
        "tags": (),
        "since": None,
        "until": None,
        "fmt": "table",
    }


def parse(argv: Sequence[str]) -> tuple[str | None, dict[str, Any]] | None:
    """(--db as given, else None; the search command's parameters) of ``kbase ARGV`` when it is a
    search this module runs, else None. The words are split from the options as
    kbase.cli.notes._Search splits them: a ``-word`` that is no option's spelling is a word of
    the query (an exclusion), everything after ``--`` is the query."""
    db: str | None = None
    args = iter(argv)
    for a in args:  # the group's options, then the command
        if a == "search":
            break
        if a == "--db":
            db = next(args, None)
            if db is None:
                return None
        elif a.startswith("--db="):
            db = a[len("--db=") :]
        else:
            return None
        if not db or db.startswith("-"):
            return None  # (an empty or odd --db: click says what it makes of it)
    else:
        return None
    params = defaults()
    words: list[str] = []
    for a in args:
        if a == "--":
            words.extend(args)
            break
        name = a.partition("=")[0] if a.startswith("--") else a
        spec = OPTIONS.get(name)
        if spec is None:
            if a.startswith("--") or name in CLICK_ONLY:
                return None  # --help, --open, an option that does not exist
            if a[:2] in SHORT_WITH_VALUE and _takes(a[:2], a[2:]):
                return None  # a value attached (-n5)
            words.append(a)
            continue
        param, flag = spec
        if flag is not None:
            if "=" in a:
                return None  # (--json=x: click's error)
            params[param] = flag
            continue
        if "=" in a and a.startswith("--"):
            value: str | None = a.partition("=")[2]
        else:
            value = next(args, None)
        if value is None or value.startswith("-"):
            return None  # missing, or one click may read otherwise
        got = _value(param, value)
        if got is None:
            return None  # one click refuses, with its message
        params[param] = (*params[param], got) if param in MULTIPLE else got
    if not words:
        return None  # (QUERY is required: click's message)
    params["query"] = tuple(words)
    return db, params


def _takes(short: str, value: str) -> bool:
    """Would click read ``value`` as the value of the short option ``short`` attached to it?"""
    return _value(OPTIONS[short][0], value) is not None


def _value(param: str, value: str) -> Any:
    """``value`` as click converts it for ``param``, or None when click refuses it."""
    if param == "limit":
        try:
            return int(value)  # (click.INT is int())
        except ValueError:
            return None
    if param == "mode":
        return value if value in MODES else None
    if param == "fmt":
        return value if value in FORMATS else None
    return value


def find(
    kb: KB | HandedSearch | _Answered,
    echo: Echo,
    *,
    query: Sequence[str],
    mode: str | None,
    no_correct: bool,
    limit: int,
    path_glob: str | None,
    exclude: Sequence[str],
    tags: Sequence[str],
    since: str | None,
    until: str | None,
    fmt: str,
) -> Hits:
    """The search, with what it says on stderr (what of the query was left out, a correction,
    how much of the index the semantic list covers)."""
    hits = kb.search(
        " ".join(query),
        mode=mode,
        limit=limit,
        path=path_glob,
        tags=tags,
        since=since,
        until=until,
        exclude=exclude,
        correct=not no_correct,
    )
    if hits.notice:  # what of the query was left out (repeated terms, terms past the maximum)
        echo(_printable(f"note: {hits.notice}"), err=True)
    if hits.corrected and fmt == "table":
        typed = ", ".join(f'"{w}"' for w, _ in hits.corrections)
        echo(
            _printable(
                f'showing results for "{hits.corrected}" (no note holds {typed};'
                " --no-correct searches as typed)"
            ),
            err=True,
        )
    if hits and (mode or kb.default_mode()) != "keyword":
        embedded, chunks = kb.coverage()
        if embedded < chunks:
            echo(
                f"note: semantic results cover {embedded:,} of {chunks:,} chunks"
                f" ({100 * embedded // chunks}%);"
                " the rest are still to be embedded (kbase embed)",
                err=True,
            )
    return hits


def show(
    kb: KB | HandedSearch | _Answered,
    echo: Echo,
    hits: Hits,
    *,
    fmt: str,
    color: bool,
    explain: bool,
    path_glob: str | None,
    tags: Sequence[str],
) -> None:
    """The hits as ``fmt`` asks, or why there is none (on stderr, for a table)."""
    from kbase.cli.render import render_hits

    if hits or fmt != "table":
        echo(render_hits(hits, fmt, color, explain=explain))
    else:
        echo(none_found(kb, "No matches", path_glob, tags), err=True)


def main(argv: Sequence[str]) -> int | None:
    """Run ``kbase ARGV`` if it is a search ``parse`` reads, and return its exit status; None
    (nothing done) for click to run it."""
    if "_KBASE_COMPLETE" in os.environ or not (_plain(sys.stdout) and _plain(sys.stderr)):
        return None
    parsed = parse(argv)
    if parsed is None:
        return None
    db, params = parsed
    db = db or os.environ.get("KBASE_DB") or None  # (click reads an empty KBASE_DB as unset)
    if db is not None and os.path.isdir(db):
        return None  # click's message: the index is a file
    try:  # a running kbase first (nothing of kbase's engine is imported for it)
        answer = _ask_running(db, params) if db is not None else None
        if isinstance(answer, dict) and "printed" in answer:
            status = _replay(answer)
            if status is not None:
                return status
    except KeyboardInterrupt:
        echo("Interrupted.", err=True)
        return 130
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    from pathlib import Path

    from kbase.cli.common import use_color
    from kbase.errors import KbaseError

    kb: Any = None
    try:
        try:
            path = index_path(Path(db) if db is not None else None)
            if db is None:
                answer = _ask_running(str(path), params)
            kb = _answered(path, answer)
            if kb is None:
                kb = open_index(path, echo)
                kb.hand_off = False  # (asked already: none serves it)
            hits = find(
                kb,
                echo,
                **{k: params[k] for k in params if k not in ("explain", "open_n")},
            )
            show(
                kb,
                echo,
                hits,
                fmt=params["fmt"],
                color=use_color(),
                explain=params["explain"],
                path_glob=params["path_glob"],
                tags=params["tags"],
            )
        finally:
            if kb is not None:
                kb.close()
    except KbaseError as e:  # as kbase.cli.app._Group.invoke says them
        for line in error_lines(e):
            echo(line, err=True)
        return 1
    except KeyboardInterrupt:
        echo("Interrupted.", err=True)
        return 130
    except BrokenPipeError:  # `kbase search ... | head`
        sys.stderr.close()
        return 0
    return 0


class _Answered:
    """What ``find`` and ``show`` ask of the index, as a running kbase answered (the search, its
    notices, the index's default mode and embedding coverage): this process opens the index only
    to say why a filter kept nothing."""

    def __init__(self, path: Path, hits: Hits, notices: list[str], about: dict[str, Any]):
        self.path, self.hits, self.notices = path, hits, notices
        self.mode = str(about["default_mode"])
        embedded, chunks = about["coverage"]
        self.covered = (int(embedded), int(chunks))

    def search(self, query: str, **_: Any) -> Hits:
        for message in self.notices:  # (as KB.search says those of a search handed over)
            echo(_printable(f"note: {message}"), err=True)
        return self.hits

    def default_mode(self) -> str:
        return self.mode

    def coverage(self) -> tuple[int, int]:
        return self.covered

    def filters_that_keep_nothing(self, **filters: Any) -> list[str]:
        kb = open_index(self.path, echo)
        try:
            return kb.filters_that_keep_nothing(**filters)
        finally:
            kb.close()

    def close(self) -> None:
        pass


def _ask_running(path: str, params: dict[str, Any]) -> Any:
    """The answer of a running kbase that serves the index file ``path`` to this search: what it
    would print (a server of today: kbase.cli.app's watch, mcp, browse) or its hits; None when
    none does, or for ``-m keyword`` (searched here: it needs no model). Only os, socket and json
    are imported before the answer (kbase.handoff_client)."""
    if params["mode"] == "keyword":
        return None
    from kbase import handoff_client

    if handoff_client.serving(path) is None:
        return None
    from kbase.cli.common import use_color

    request = {
        **_search_args(params),
        "about": True,  # (for a server that cannot print: the index's mode and coverage)
        "print": {"fmt": params["fmt"], "color": use_color(), "explain": params["explain"]},
    }
    return handoff_client.exchange(path, request, handoff_client.ANSWER_TIMEOUT)


def _search_args(params: dict[str, Any]) -> dict[str, Any]:
    """KB.search's arguments for the search command's parameters."""
    return {
        "query": " ".join(params["query"]),
        "mode": params["mode"],
        "limit": params["limit"],
        "path": params["path_glob"],
        "tags": list(params["tags"]),
        "since": params["since"],
        "until": params["until"],
        "exclude": list(params["exclude"]),
        "correct": not params["no_correct"],
    }


def _replay(answer: dict) -> int | None:
    """Print what the server printed for this search (``printed``) and give its exit status, or
    None when the answer is not that."""
    printed, status = answer.get("printed"), answer.get("status")
    if not (
        isinstance(printed, list)
        and isinstance(status, int)
        and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], bool) and isinstance(p[1], str)
            for p in printed
        )
    ):
        return None
    for err, text in printed:
        echo(text, err=err)
    return status


def _answered(path: Path, answer: Any) -> _Answered | None:
    """The running kbase's hits as ``find`` and ``show`` use them (a server that answers hits,
    not what to print), or None."""
    if answer is None or (isinstance(answer, dict) and "printed" in answer):
        return None
    from kbase.api import read_running

    answered = read_running(answer)
    if answered is None:
        return None
    try:
        return _Answered(path, *answered)
    except (KeyError, TypeError, ValueError):
        return None  # (not what this kbase asked for: searched here)


def print_handed_searches() -> None:
    """This process's hand-off servers (kbase watch, mcp, browse) print the searches the shell
    hands them (``printed``): called by those commands before they start."""
    from kbase.api import print_handed_searches

    print_handed_searches(printed)


def printed(
    kb: HandedSearch, args: dict[str, Any], options: dict[str, Any]
) -> tuple[list[tuple[bool, str]], int]:
    """What ``kbase search`` prints for KB.search's ``args`` (each line: on stderr?, text) and its
    exit status, with ``options`` (fmt, color, explain) as the shell's process asked: a running
    kbase prints this for the shell that handed it the search (kbase.api.print_handed_searches),
    so that both print the same bytes, from the same code."""
    from kbase.errors import KbaseError

    lines: list[tuple[bool, str]] = []

    def capture(message: str, err: bool = False) -> None:
        lines.append((bool(err), message))

    kb.on_notice = lambda message: capture(_printable(f"note: {message}"), err=True)
    try:
        hits = find(
            kb,
            capture,
            query=(args["query"],),
            mode=args["mode"],
            no_correct=not args["correct"],
            limit=args["limit"],
            path_glob=args["path"],
            exclude=args["exclude"],
            tags=args["tags"],
            since=args["since"],
            until=args["until"],
            fmt=options["fmt"],
        )
        show(
            kb,
            capture,
            hits,
            fmt=options["fmt"],
            color=options["color"],
            explain=options["explain"],
            path_glob=args["path"],
            tags=args["tags"],
        )
    except KbaseError as e:
        for line in error_lines(e):
            capture(line, err=True)
        return lines, 1
    return lines, 0


def _plain(stream: Any) -> bool:
    """A text stream click.echo writes to as it is (it re-wraps one without an encoding, or an
    ASCII one)."""
    import codecs

    encoding = getattr(stream, "encoding", None)
    if stream is None or not encoding:
        return False
    try:
        return codecs.lookup(encoding).name != "ascii"
    except LookupError:
        return False
