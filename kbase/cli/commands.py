"""The ``kbase`` command: thin wrappers that resolve the index, call the library, render."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbase import __version__
from kbase.errors import KbaseError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from kbase.api import KB
    from kbase.models import EmbedReport


# What every listing can print (``--format``); kbase.cli.render renders them. Commands import
# the engine and the renderers when they run, so that --help and --version import neither.
FORMATS = ("table", "json", "jsonl", "csv")


def _dumps(value, **options) -> str:
    import json

    return json.dumps(value, **options)


class _Group(click.Group):
    """Turns library errors into one line on stderr and a non-zero exit, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KbaseError as e:
            click.echo(f"Error: {e.message}", err=True)
            if e.hint:
                click.echo(f"  hint: {e.hint}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except BrokenPipeError:  # `kbase search ... | head`
            sys.stderr.close()
            ctx.exit(0)


def _kb(ctx: click.Context) -> KB:
    """The command's index, opened once and closed when the command ends."""
    root = ctx.find_root()
    if "kb" not in root.obj:
        from kbase.api import KB

        kb = KB(root.obj["db"], cache_vectors=False)  # one query per process: sqlite-vec answers it
        kb.on_notice = lambda message: click.echo(f"note: {message}", err=True)
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


def _color() -> bool:
    return sys.stdout.isatty()


def _terminal_width() -> int | None:
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
    help="Index file. Default: $XDG_DATA_HOME/kbase/index.db (~/.local/share/kbase/index.db).",
)
@click.version_option(__version__, prog_name="kbase")
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """kbase: your notes in one SQLite file, searchable from the terminal."""
    from kbase.paths import default_db_path

    ctx.obj = {"db": db or default_db_path()}


def _parse_size(ctx, param, value):
    import re

    if value is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", value, re.I)
    if not m:
        raise click.BadParameter(f"{value!r} is not a size; use e.g. 500K, 10M, 1G")
    return int(float(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower()))


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
        help="The embedding model: all-MiniLM-L6-v2 (English, default), multilingual-e5-small"
        " (about 100 languages), fastembed:NAME. Another model than the index's re-embeds"
        " everything; search keeps the old vectors until that is done.",
    )(f)
    return f


def chunk_options(f):
    """The chunker's tunables (defaults: the index's settings, else kbase's)."""
    f = click.option(
        "--min-tokens",
        type=click.IntRange(0),
        help="Merge smaller chunks with a neighbour (default 48).",
    )(f)
    f = click.option(
        "--overlap",
        type=click.FloatRange(0, 0.5),
        help="Overlap between prose chunks (default 0.12).",
    )(f)
    f = click.option(
        "--max-tokens",
        type=click.IntRange(4, 10_000),
        help="Chunk budget in model tokens (default 200).",
    )(f)
    return f


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--ext",
    "extensions",
    multiple=True,
    metavar="EXT",
    help="File extension to index (repeatable). Default: .md .markdown .txt .pdf .canvas",
)
@click.option(
    "--max-size",
    callback=_parse_size,
    metavar="SIZE",
    help="Skip larger files (default 10M, PDFs 512M).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no warnings; only the summary.")
@output_options("text", "json")
@click.option(
    "--embed/--no-embed",
    "embed",
    default=None,
    help="--no-embed: only the keyword index, from now on for this index (kbase embed or"
    " kbase index --embed embeds it and turns embedding back on). Default: as the index is set"
    " (kbase status says which).",
)
@click.option(
    "--follow-outside",
    is_flag=True,
    help="Index what symlinks lead to outside the indexed folders too (remembered per folder).",
)
@chunk_options
@model_options
@click.pass_context
def index(
    ctx,
    paths,
    extensions,
    max_size,
    quiet,
    fmt,
    embed,
    follow_outside,
    max_tokens,
    overlap,
    min_tokens,
    model,
    download,
):
    """Index folders or files of notes (incrementally). With no PATHS, update every known root.

    Chunk settings given here are kept by the index; changing them re-chunks every document from
    its stored text (no file is read again)."""
    kb = _kb(ctx)
    as_json = fmt == "json"  # no progress bars, no warnings on stderr: the report says it all
    settings = kb.chunk_settings(max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)
    existed = kb.path.exists()
    if embed is not None and existed:
        kb.set_auto_embed(embed)  # before the run: an interrupted run keeps the choice
    with _Bars(not quiet and not as_json) as bar:
        eta = _EmbedEta(bar.chunks, not quiet and not as_json, bar)
        report = kb.index(
            paths,
            progress=bar.files,
            embed_progress=eta,
            embed=embed,
            settings=settings,
            extensions=tuple(extensions) or None,
            max_size=max_size,
            follow_outside=follow_outside,
            model=model,
            download=download,
            switch_progress=_SwitchEta(kb, bar.switch, not quiet and not as_json),
        )
    if embed is not None and not existed and kb.path.exists():
        kb.set_auto_embed(embed)
    if fmt == "json":
        from dataclasses import asdict

        click.echo(_dumps(asdict(report), ensure_ascii=False, indent=2))
    else:
        if not quiet:
            for path, reason in report.skipped:
                click.echo(f"skipped {_printable(path)}: {reason}", err=True)
            for path, msg in report.warnings:
                click.echo(f"warning {_printable(path)}: {msg}", err=True)
        click.echo(
            f"{'interrupted after' if report.interrupted else 'indexed in'} "
            f"{report.seconds:.2f} s: "
            f"{report.new} new, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.renamed} renamed, {report.removed} removed, {len(report.skipped)} skipped"
            + (f", {len(report.warnings)} warnings" if report.warnings else "")
            + (f", {report.rechunked} re-chunked" if report.rechunked else "")
        )
        if report.embedding and (
            report.embedding.embedded or report.embedding.reused or report.embedding.switch
        ):
            _say_embedded(report.embedding)
        hint = None if quiet or report.interrupted else kb.model_hint()
        if hint is not None:
            _say_model_hint(hint)
    if report.interrupted:
        click.echo(
            "Interrupted: the index is consistent; run kbase index again to finish.", err=True
        )
        ctx.exit(130)


def _say_model_hint(hint) -> None:
    """Once per index: its notes are mostly in languages its English model does not read."""
    names = list(hint.languages)
    langs = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    click.echo(
        f"note: {hint.share:.0%} of these passages are in {langs}; the index's model,"
        f" {hint.model}, reads English\n  only, so search by meaning misses them (keyword search"
        " reads them). A model that reads them:\n"
        f'  pip install "kbase[multilingual]", then kbase index --model {hint.suggested}',
        err=True,
    )


class _Bars:
    """Progress bars on stderr (rich), or nothing when stderr is not a terminal; and, terminal or
    not, a line when one file takes long (``SLOW_FILE_S``): which file is being worked on."""

    SLOW_FILE_S = 5.0
    POLL_S = 0.5

    def __init__(self, enabled: bool) -> None:
        self.said_slow = enabled
        self.enabled = enabled and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self.embed_left = ""  # the embedding estimate (_EmbedEta), shown as its time left
        self._current: tuple[str, float] | None = None  # the file being worked on, since when
        self._stop: threading.Event | None = None

    def __enter__(self) -> _Bars:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            class _TimeLeft(TimeRemainingColumn):
                """rich's time left, or the measured estimate where one is given."""

                def render(self, task):
                    from rich.text import Text

                    left = task.fields.get("left")
                    return (
                        Text(f"~{left}", style="progress.remaining")
                        if left
                        else super().render(task)
                    )

            self._progress = Progress(
                TextColumn("{task.description:<9}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                _TimeLeft(),
                TextColumn("{task.fields[current]}", style="dim"),
                transient=True,
                console=None,
            )
            self._progress.__enter__()
        if self.said_slow:
            self._stop = threading.Event()
            threading.Thread(target=self._watch_slow, args=(self._stop,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def _watch_slow(self, stop: threading.Event) -> None:
        import time

        told = None
        while not stop.wait(self.POLL_S):
            current = self._current
            if current is None or current is told:
                continue
            seconds = time.monotonic() - current[1]
            if seconds >= self.SLOW_FILE_S:
                told = current
                message = f"still working on {_printable(current[0])} ({seconds:.0f} s so far)"
                if self._progress is not None:
                    self._progress.console.print(message, style="dim", markup=False)
                else:
                    click.echo(message, err=True)

    def _update(self, name: str, done: int, total: int, current: str = "", unit: str = "") -> None:
        if self._progress is None:
            return
        if name not in self._tasks:
            self._tasks[name] = self._progress.add_task(
                name, total=total, current="", rate="", left=""
            )
        task = self._tasks[name]
        elapsed = next(t.elapsed or 0 for t in self._progress.tasks if t.id == task)
        rate = f"{done / elapsed:.0f} {unit}/s" if elapsed > 0.5 and unit else ""
        left = self.embed_left if name == "embedding" else ""
        self._progress.update(
            task, completed=done, total=total, current=current[-40:], rate=rate, left=left
        )

    def files(self, done: int, total: int, current: str) -> None:
        import time

        if self._current is None or self._current[0] != current:
            self._current = (current, time.monotonic()) if current else None
        self._update("indexing", done, total, current, "files")

    def chunks(self, done: int, total: int) -> None:
        self._update("embedding", done, total, "", "chunks")

    def switch(self, done: int, total: int) -> None:
        self._update("switching", done, total, "", "chunks")


class _SwitchEta:
    """Says once, on stderr, that the index is switching models (and that search goes on with
    the old one); then, after some seconds, how long it will take."""

    AFTER_S = 5.0

    def __init__(self, kb, inner, enabled: bool) -> None:
        import time

        self.kb, self.inner, self.enabled, self.clock = kb, inner, enabled, time.monotonic
        self.start: float | None = None
        self.told = False

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start = now
            if self.enabled:
                m = self.kb.model()
                click.echo(
                    f"switching to {m.switching_to}: embedding {total:,} chunks"
                    f" ({m.switch_done:,} of {m.switch_total:,} done before); search uses"
                    f" {m.name} until they are all done (Ctrl-C stops safely; kbase embed"
                    " goes on)",
                    err=True,
                )
        elif self.enabled and not self.told and done < total and now - self.start >= self.AFTER_S:
            self.told = True
            rate = done / (now - self.start)
            click.echo(
                f"switching: about {_duration((total - done) / rate)} left at {rate:.0f} chunks/s",
                err=True,
            )
        self.inner(done, total)


class _EmbedEta:
    """Says on stderr when keyword search is ready (embedding starts), then how long embedding
    will take, and keeps that current: the progress bar's time left on a terminal, else a new
    line every ``EVERY_S``; passes the progress on to the bar.

    The rate is measured, never assumed: chunks per second since the first batch was done (the
    first one pays for loading the model), first told once a whole window of the embedder's
    order is done (``WINDOW`` chunks, which run shortest first: an earlier rate would be too
    fast) and at least ``AFTER_S`` seconds have passed."""

    AFTER_S = 5.0
    EVERY_S = 60.0
    WINDOW = 256  # kbase's embedder takes chunks this many at a time, each window by length

    def __init__(self, inner, enabled: bool, bar=None, clock=None, announce: bool = True) -> None:
        import time

        self.inner, self.enabled, self.bar, self.announce = inner, enabled, bar, announce
        self.clock = clock or time.monotonic
        self.start: float | None = None
        self.base: tuple[float, int] | None = None  # (time, done) after the first batch
        self.told: float | None = None  # when the estimate was last printed

    def left(self, done: int, total: int, now: float) -> tuple[float, float] | None:
        """(seconds left, chunks per second), or None while there is too little to go on."""
        if self.base is None or done >= total:
            return None
        t0, d0 = self.base
        if (
            done - d0 < min(self.WINDOW, total - d0)
            or now - (now if self.start is None else self.start) < self.AFTER_S
        ):
            return None
        if now <= t0 or done <= d0:
            return None
        rate = (done - d0) / (now - t0)
        return (total - done) / rate, rate

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start = now
            if self.enabled and self.announce:
                click.echo(
                    f"keyword search is ready; embedding {total:,} chunks for semantic search "
                    "(Ctrl-C stops safely; kbase embed resumes)",
                    err=True,
                )
        elif self.base is None and done > 0:
            self.base = (now, done)
        estimate = self.left(done, total, now)
        if estimate is not None:
            seconds, rate = estimate
            if self.bar is not None:
                self.bar.embed_left = _duration(seconds)
            quiet_bar = self.bar is not None and self.bar.enabled  # the bar keeps it current
            first = self.told is None
            due = self.told is not None and now - self.told >= self.EVERY_S
            if self.enabled and (first or (not quiet_bar and due)):
                self.told = now
                click.echo(
                    "embedding: "
                    + ("" if first else f"{done:,} of {total:,} chunks done, ")
                    + f"about {_duration(seconds)} left at {rate:.0f} chunks/s",
                    err=True,
                )
        self.inner(done, total)


def _duration(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 90
        else f"{seconds / 60:.0f} min"
        if seconds < 5400
        else f"{seconds / 3600:.1f} h"
    )


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--no-embed", is_flag=True, help="Keep only the keyword index current.")
@click.option(
    "--debounce",
    type=click.IntRange(10, 60_000),
    default=300,
    show_default=True,
    metavar="MS",
    help="Changes within this many milliseconds are indexed together.",
)
@click.option(
    "--poll", is_flag=True, help="Poll the file system (network drives, some containers)."
)
@click.pass_context
def watch(ctx, paths, no_embed, debounce, poll):
    """Keep the index current while you edit (PATHS, or every known root). Ctrl-C stops.

    Each batch of changes runs the same incremental index as kbase index (renames and deletes
    included; only new and changed chunks are embedded). Quiet unless something changed."""
    from datetime import datetime

    from kbase.cli.render import render_changes

    skips_shown: set[tuple[str, str]] = set()  # each skipped file is reported once, not every batch

    def on_batch(b) -> None:
        stamp = datetime.now().strftime("%H:%M:%S")
        if b.error:
            click.echo(f"{stamp} error: {b.error}", err=True)
            return
        r = b.report
        for skip in r.skipped:
            if skip not in skips_shown:
                skips_shown.add(skip)
                click.echo(f"{stamp} skipped {_printable(skip[0])}: {skip[1]}", err=True)
        if b.changed:
            embedded = r.embedding.embedded if r.embedding else 0
            click.echo(
                f"{stamp} {render_changes(r.changed)}"
                + (f", {embedded} chunks embedded" if embedded else "")
                + f" ({b.seconds:.2f} s)"
            )

    on_embed = _IdleEmbedLines()
    kb = _kb(ctx)
    click.echo(
        f"watching {', '.join(str(p) for p in paths) or 'every indexed root'} (Ctrl-C to stop)",
        err=True,
    )
    if not no_embed and kb.path.exists() and not kb.auto_embed():
        click.echo(
            "this index is keyword-only: changes are not embedded"
            " (kbase embed embeds it and turns embedding on)",
            err=True,
        )
    try:
        kb.watch(
            paths,
            debounce_ms=debounce,
            on_batch=on_batch,
            embed=not no_embed,
            force_polling=True if poll else None,
            on_embed=on_embed,
        )
    except KeyboardInterrupt:
        pass
    # Watching ends only on Ctrl-C (run_watch returns then): exit code 130, as for every command.
    click.echo("stopped; the index is consistent", err=True)
    ctx.exit(130)


class _IdleEmbedLines:
    """What ``kbase watch`` says about embedding a backlog (chunks that were waiting for vectors
    at start, an interrupted index): a line at most once a minute while it lasts and one when it
    is done. A change's own chunks are counted on its line, so a step that left nothing waiting
    says nothing unless it ended a backlog."""

    EVERY_S = 60.0

    def __init__(self, clock=None) -> None:
        import time

        self.clock = clock or time.monotonic
        self.said = float("-inf")
        self.backlog = False

    def __call__(self, r: EmbedReport) -> None:
        from datetime import datetime

        stamp = datetime.now().strftime("%H:%M:%S")
        if r.remaining:
            if not self.backlog or self.clock() - self.said >= self.EVERY_S:
                self.said = self.clock()
                click.echo(f"{stamp} embedding while idle: {r.remaining:,} chunks still to embed")
            self.backlog = True
        elif self.backlog:
            self.backlog = False
            click.echo(f"{stamp} embedding while idle: every chunk is embedded")


def _printable(path: str) -> str:
    from kbase.text import printable

    return printable(path).replace("\n", "\\n").replace("\r", "\\r")


@cli.command()
@click.option(
    "--rebuild", is_flag=True, help="Drop every vector and embed everything again (another model)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@model_options
@click.pass_context
def embed(ctx, rebuild, quiet, model, download):
    """Embed the chunks that have no vector yet (resumes where an interrupted run stopped), and
    go on with a switch of models (--model) under way."""
    kb = _kb(ctx)
    with _Bars(not quiet) as bar:
        eta = _EmbedEta(bar.chunks, not quiet, bar, announce=False)
        result = kb.embed(
            rebuild=rebuild,
            progress=eta,
            model=model,
            download=download,
            switch_progress=_SwitchEta(kb, bar.switch, not quiet),
        )
    _say_embedded(result)


def _say_embedded(e: EmbedReport) -> None:
    if e.embedded or e.reused or not e.switch:
        click.echo(
            f"embedded {e.embedded} chunks in {e.seconds:.1f} s"
            + (f" ({e.reused} reused)" if e.reused else "")
        )
    s = e.switch
    if s is not None:
        click.echo(
            f"switching to {e.switching_to}: embedded {s.embedded} chunks in {s.seconds:.1f} s"
            + (f" ({s.reused} reused)" if s.reused else "")
            + (
                f"; done, search uses {e.switching_to} now"
                if s.remaining == 0
                else f"; {s.remaining:,} to go (kbase embed goes on)"
            )
        )


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


def _search_options(f):
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
    f = click.option(
        "--tag",
        "tags",
        multiple=True,
        metavar="TAG",
        help="Only notes with this tag (repeatable; nested tags match).",
    )(f)
    f = exclude_option(f)
    f = path_option(f)
    f = click.option(
        "-n",
        "--limit",
        type=click.IntRange(1, 10_000),
        default=10,
        show_default=True,
        help="Number of notes to return.",
    )(f)
    return f


@cli.command()
@click.argument("query", nargs=-1, required=True)
@click.option(
    "-m",
    "--mode",
    type=click.Choice(["keyword", "semantic", "hybrid"]),
    help="Default: hybrid once the index has embeddings, keyword before.",
)
@click.option(
    "--explain", is_flag=True, help="Show each ranked list's rank and contribution per hit."
)
@click.option(
    "--no-correct",
    "no_correct",
    is_flag=True,
    help="Search the words as typed: no spelling correction of words no note holds.",
)
@_search_options
@format_options
@click.pass_context
def search(
    ctx, query, mode, explain, no_correct, limit, path_glob, exclude, tags, since, until, fmt
):
    """Search the index. QUERY: words, "phrases", prefix*, -excluded, a OR b, and Obsidian's
    operators path:x, file:x, tag:#x (-tag:x leaves out; operators alone list the notes)."""
    from kbase.cli.render import render_hits

    kb = _kb(ctx)
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
        click.echo(f"note: {hits.notice}", err=True)
    if hits.corrected and fmt == "table":
        typed = ", ".join(f'"{w}"' for w, _ in hits.corrections)
        click.echo(
            f'showing results for "{hits.corrected}" (no note holds {typed};'
            " --no-correct searches as typed)",
            err=True,
        )
    if hits and (mode or kb.default_mode()) != "keyword":
        embedded, chunks = kb.coverage()
        if embedded < chunks:
            click.echo(
                f"note: semantic results cover {embedded:,} of {chunks:,} chunks"
                f" ({100 * embedded // chunks}%);"
                " the rest are still to be embedded (kbase embed)",
                err=True,
            )
    if hits or fmt != "table":
        click.echo(render_hits(hits, fmt, _color(), explain=explain))
    else:
        click.echo("No matches.", err=True)


def _say_near(asked: str | None, path: str, title: str) -> None:
    """On stderr: the name given named no note, and the note a typo away is used instead."""
    if asked:
        click.echo(f"did you mean {title!r}? showing {path} (no note is named {asked!r})", err=True)


@cli.command()
@output_options("text", "json")
@click.pass_context
def status(ctx, fmt):
    """Roots, counts, sizes and the last index time."""
    from dataclasses import asdict

    from kbase.cli.render import render_status

    kb = _kb(ctx)
    st = kb.status()
    click.echo(
        _dumps(asdict(st), indent=2, ensure_ascii=False) if fmt == "json" else render_status(st)
    )


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@chunk_options
@format_options
def chunks(file, max_tokens, overlap, min_tokens, fmt):
    """Show how kbase cuts FILE into chunks (offsets, lines, tokens, kind, heading path, flags).

    Reads the file itself; no index is needed. --json gives every field and each chunk's text."""
    from kbase.api import chunk_file
    from kbase.cli.render import render_chunks

    doc, result = chunk_file(file, max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)
    click.echo(render_chunks(doc.text, result.chunks, result.diagnostics, fmt, _color()))


def _links_command(name: str, doc: str, show: str):
    @cli.command(name=name, help=doc)
    @click.argument("note")
    @format_options
    @click.pass_context
    def command(ctx, note, fmt):
        from kbase.cli.render import render_links

        kb = _kb(ctx)
        target = kb.note(note)
        _say_near(target.corrected_from, target.path, target.title)
        found = getattr(kb, name)(target)
        if found or fmt != "table":
            click.echo(render_links(found, fmt, _color(), show))
        else:
            click.echo(f"No {name}.", err=True)

    return command


_links_command(
    "links",
    "Links from NOTE (as a link names it: 'Note', 'folder/Note', an alias; or a path), "
    "each with its line.",
    "target",
)
_links_command("backlinks", "Notes that link to NOTE, each with the linking line.", "source")


@cli.command()
@click.option(
    "--anchors", is_flag=True, help="Links to a heading or block that does not exist, instead."
)
@format_options
@click.pass_context
def unresolved(ctx, anchors, fmt):
    """Links that point at no note or file (or, with --anchors, at a missing heading or block)."""
    from kbase.cli.render import render_links

    kb = _kb(ctx)
    found = kb.broken_anchors() if anchors else kb.unresolved()
    if found or fmt != "table":
        click.echo(render_links(found, fmt, _color(), "both"))
    else:
        click.echo("No unresolved links." if not anchors else "No broken anchors.", err=True)


@cli.command()
@format_options
@click.pass_context
def orphans(ctx, fmt):
    """Notes that no other note links to."""
    from kbase.cli.render import render_notes

    kb = _kb(ctx)
    _echo_notes(render_notes, kb.orphans(), fmt)


def _echo_notes(render, notes, fmt: str, **options) -> None:
    """A listing of notes, or ``No matches.`` on stderr when there is none (the machine formats
    still print their empty document: ``[]``, a CSV header)."""
    if notes or fmt != "table":
        click.echo(render(notes, fmt, **options))
    else:
        click.echo("No matches.", err=True)


@cli.command()
@click.argument("note")
@depth_option(1, "Hops to follow.")
@format_options
@click.pass_context
def neighbors(ctx, note, depth, fmt):
    """Notes within --depth links of NOTE, following links both ways (distance first). Each says
    which way its link goes: out (the note one hop nearer links to it), in (it links
    there), both."""
    from kbase.cli.render import render_notes

    kb = _kb(ctx)
    target = kb.note(note)
    _say_near(target.corrected_from, target.path, target.title)
    _echo_notes(render_notes, kb.neighbors(target, depth), fmt, with_distance=True)


@cli.command()
@click.argument("note")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Number of notes.",
)
@click.option(
    "--all", "include_linked", is_flag=True, help="Include the notes NOTE already links to."
)
@format_options
@click.pass_context
def related(ctx, note, limit, include_linked, fmt):
    """Notes closest in meaning to NOTE (from its chunk vectors), leaving out those it links to.

    Without embeddings, the note's most distinctive terms are searched instead (and it says so)."""
    from kbase.cli.render import render_related

    kb = _kb(ctx)
    target = kb.note(note)
    _say_near(target.corrected_from, target.path, target.title)
    result = kb.related(target, limit=limit, include_linked=include_linked)
    if result.method == "keyword" and fmt == "table":
        click.echo(
            f"no embeddings for {result.path}: keyword similarity on "
            f"{', '.join(result.terms) or 'no terms'}"
            " (kbase embed for similarity in meaning)",
            err=True,
        )
    if result.hits or fmt != "table":
        click.echo(render_related(result, fmt, _color()))
    else:
        click.echo("No related notes.", err=True)


@cli.command()
@click.argument("note", required=False)
@depth_option(None, "With NOTE: hops to follow (default 1).")
@path_option
@exclude_option
@output_options("json", "dot")
@click.pass_context
def graph(ctx, note, depth, path_glob, exclude, fmt):
    """The note graph as JSON (nodes and edges) or Graphviz DOT: all of it, or the notes within
    --depth links of NOTE. Links through notes left out by --path or --exclude are not followed."""
    from kbase.cli.render import to_dot

    kb = _kb(ctx)
    g = kb.graph(note, depth=depth, path=path_glob, exclude=exclude)
    click.echo(_dumps(g, ensure_ascii=False, indent=2) if fmt == "json" else to_dot(g))


@cli.command()
@click.pass_context
def browse(ctx):
    """Full-screen browser: search as you type, read hits in context, follow links."""
    from kbase.tui.app import run

    run(ctx.obj["db"])


@cli.command()
@click.option(
    "--http",
    metavar="[HOST:]PORT",
    help="Serve streamable HTTP on HOST:PORT (host 127.0.0.1 unless given) instead of stdio.",
)
@click.option(
    "--token",
    envvar="KBASE_MCP_TOKEN",
    show_envvar=True,
    metavar="SECRET",
    help="With --http: require 'Authorization: Bearer SECRET' on every request.",
)
@click.option(
    "--watch", is_flag=True, help="Keep the index current while serving (as kbase watch does)."
)
@click.option(
    "--no-embed", is_flag=True, help="With --watch: do not embed missing chunks while idle."
)
@click.option("--poll", is_flag=True, help="With --watch: poll the file system (network drives).")
@click.option(
    "--budget",
    type=click.IntRange(500, 100_000),
    default=8000,
    show_default=True,
    metavar="TOKENS",
    help="The tools' default result size in tokens (an agent may pass another per call).",
)
@click.pass_context
def mcp(ctx, http, token, watch, no_embed, poll, budget):
    """Serve the index to AI agents over the Model Context Protocol (stdio, or --http).

    Tools: search, read, links, related, sql, status (all read-only); resources: every note as
    kbase://note/PATH. See the README for client configuration."""
    if http is not None:  # refuse at once, before the SDK loads or the index opens
        from kbase.mcp.transport import check_exposure, parse_http

        check_exposure(parse_http(http)[0], token)
    from kbase.mcp.server import serve

    if (
        http is None
        and token
        and ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE
    ):
        raise click.UsageError("--token applies to --http only (stdio needs no token)")
    serve(
        ctx.obj["db"],
        http=http,
        token=token if http else None,
        watch=watch,
        embed=not no_embed,
        poll=poll,
        budget=budget,
    )


@cli.command()
@click.argument("query", required=False)
@click.option(
    "-f",
    "--file",
    "sql_file",
    type=click.File("r", encoding="utf-8"),
    help="Read the SQL from a file.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.01),
    default=10.0,
    show_default=True,
    help="Stop the query after this many seconds.",
)
@format_options
@click.pass_context
def sql(ctx, query, sql_file, timeout, fmt):
    """Run a read-only SQL query on the index (from QUERY, --file, or stdin with QUERY '-').

    sqlite-vec is loaded, and kbase adds kbase_embed(text) (a query vector) and the table-valued
    kbase_search(query, mode, limit). See docs/SCHEMA.md for the tables, views and examples."""
    from kbase.cli.render import render_sql

    if sql_file is not None:
        text = sql_file.read()
    elif query in (None, "-"):
        text = sys.stdin.read()
    else:
        text = query
    kb = _kb(ctx)
    result = kb.sql(text, timeout=timeout)
    width = _terminal_width()
    out, cut = render_sql(result, fmt, width)
    if out:
        click.echo(out)
    if cut:
        click.echo(
            f"note: values cut to fit {width} columns (…); --json, --jsonl or --csv print every"
            " value whole (or widen the table: COLUMNS=300 kbase sql ...)",
            err=True,
        )


@cli.command()
@click.option(
    "--fix",
    is_flag=True,
    help="Repair what can be rebuilt from the stored texts (no file is read).",
)
@output_options("text", "json")
@click.pass_context
def check(ctx, fix, fmt):
    """Check the index: SQLite's integrity check and kbase's invariants (offsets, keyword index,
    vectors, links, chunker and embedder versions). Exit code 1 if a problem remains.

    Also lists the notes indexed without their front matter (malformed YAML...): warnings about
    the notes, not problems of the index (the exit code ignores them)."""
    from dataclasses import asdict

    kb = _kb(ctx)
    result = kb.check(fix=fix)
    problems = result.problems
    if fmt == "json":
        click.echo(_dumps({"ok": result.ok, **asdict(result)}, indent=2, ensure_ascii=False))
    else:
        for w in result.warnings:
            click.echo(f"warning: {_printable(w.path)}:{w.line}: {w.detail}")
        for line in result.fixed:
            click.echo(f"fixed: {line}")
        for p in problems:
            click.echo(
                f"problem: {p.kind}: {p.detail} ({p.count})"
                + ("" if p.fixable else " [not fixable]")
            )
        if not problems:
            click.echo("ok: the index is consistent")
        elif not fix and any(p.fixable for p in problems):
            click.echo("run kbase check --fix to repair", err=True)
    if problems:
        ctx.exit(1)


@cli.command()
@output_options("text", "json")
@click.pass_context
def compact(ctx, fmt):
    """Merge the keyword index, drop dead vector space, VACUUM; print the file's size before and
    after and the space saved, in KiB/MiB/GiB (1 KiB = 1024 bytes)."""
    from dataclasses import asdict

    from kbase.cli.render import human_bytes

    kb = _kb(ctx)
    r = kb.compact()
    if fmt == "json":
        click.echo(_dumps({**asdict(r), "bytes_saved": r.bytes_saved}, indent=2))
        return
    click.echo(
        f"compacted: {human_bytes(r.bytes_before)} -> {human_bytes(r.bytes_after)}"
        f" ({human_bytes(r.bytes_saved)} saved)"
    )


@cli.group(invoke_without_command=True)
@output_options("text", "json")
@click.pass_context
def roots(ctx, fmt):
    """The indexed roots (folders or files). Subcommands: move, remove."""
    if ctx.invoked_subcommand is not None:
        return
    from dataclasses import asdict

    kb = _kb(ctx)
    rs = kb.roots()
    if fmt == "json":
        click.echo(_dumps([asdict(r) for r in rs], indent=2))
        return
    for r in rs:
        state = (
            ""
            if r.exists
            else (
                f"  MOVED? kbase roots move {r.path!r} {r.moved_with_index!r}"
                if r.moved_with_index
                else "  MISSING: kbase roots move OLD NEW, or kbase roots remove OLD"
            )
        )
        click.echo(f"{r.path}  ({r.documents} documents){state}")


@roots.command("move")
@click.argument("old")
@click.argument("new")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when it worked (errors still).")
@click.pass_context
def roots_move(ctx, old, new, quiet):
    """Re-point root OLD to NEW after moving the notes; nothing is re-indexed."""
    kb = _kb(ctx)
    r = kb.move_root(old, new)
    if not quiet:
        click.echo(f"moved root {r.old} -> {r.new}")


@roots.command("remove")
@click.argument("root")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when it worked (errors still).")
@click.pass_context
def roots_remove(ctx, root, quiet):
    """Forget root ROOT and every document indexed from it, in one transaction (nothing on disk
    is touched). Links from other roots to its notes turn unresolved."""
    kb = _kb(ctx)
    r = kb.remove_root(root)
    if not quiet:
        click.echo(f"removed root {r.path} ({r.documents:,} documents)")


@cli.command()
@click.argument("target")
@click.option(
    "-C",
    "--context",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="Lines shown around PATH:LINE.",
)
@output_options("text", "json")
@click.pass_context
def show(ctx, target, context, fmt):
    """Print a document from the index: PATH, PATH:LINE (with context), PATH:START-END, or a
    PDF's page: PATH#page=N."""
    kb = _kb(ctx)
    r = kb.region(target, context)
    doc = r.doc
    _say_near(doc.corrected_from, doc.path, doc.title)
    if doc.missing:
        click.echo(
            f"warning: {doc.path} is missing on disk ({doc.abspath}); this is the indexed text"
            " (kbase index forgets a deleted note; moved the notes? kbase roots move OLD NEW)",
            err=True,
        )
    elif doc.stale:
        click.echo(
            f"warning: {doc.path} changed on disk since it was indexed; this is the indexed text"
            " (kbase index updates it)",
            err=True,
        )
    if fmt == "json":
        click.echo(
            _dumps(
                {
                    "path": doc.path,
                    "abspath": doc.abspath,
                    "title": doc.title,
                    "stale": doc.stale,
                    "missing": doc.missing,
                    "first_line": r.first,
                    "last_line": r.last,
                    "page": r.page,
                    "pages": r.pages or None,
                    "text": r.text,
                },
                ensure_ascii=False,
            )
        )
    elif r.whole:
        click.echo(doc.body, nl=not doc.body.endswith(("\n", "\r")))
    elif r.page is not None:
        if not r.text.strip():
            click.echo(f"{doc.path} p.{r.page} has no text (an image only?)", err=True)
        else:
            click.echo(r.text, nl=not r.text.endswith("\n"))
    else:
        width = len(str(r.last))
        for n, line in enumerate(r.lines, r.first):
            mark = "" if r.line is None else "> " if n == r.line else "  "
            click.echo(f"{mark}{n:>{width}} | {line}")


def main() -> None:  # pragma: no cover
    cli(prog_name="kbase")
