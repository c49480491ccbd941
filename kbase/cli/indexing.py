"""Commands that build the index: index, watch, embed, chunks."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kbase.cli.app import (
    BUILTIN_EXTENSIONS,
    ConfigDefault,
    chunk_options,
    dumps,
    format_options,
    model_options,
    open_kb,
    output_options,
    parse_size,
    printable,
    use_color,
)
from kbase.cli.progress import (
    Bars,
    EmbedEta,
    IdleEmbedLines,
    SwitchEta,
    say_embedded,
    say_model_hint,
)

if TYPE_CHECKING:
    from kbase.config import Config
    from kbase.records import IndexReport


def config_model(user: Config) -> str | None:
    """The config file's model, checked: an unknown name is one line that names the file."""
    if user.model is None:
        return None
    from kbase.api import model_name
    from kbase.config import ConfigError
    from kbase.errors import InputError

    try:
        model_name(user.model)
    except InputError as e:
        raise ConfigError(f"config {user.path}: {e.message}", e.hint) from None
    return user.model


@contextmanager
def terminate_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM (a service manager, docker stop, kill, timeout) stops the command as Ctrl-C does:
    the index is left consistent either way, but this way it says so (and ``kbase watch`` sends
    its "stopped" event). The list yielded holds the signal once one came: exit code 143 then."""
    terminated: list[int] = []

    def on_term(signum, frame) -> None:
        terminated.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--ext",
    "extensions",
    multiple=True,
    metavar="EXT",
    cls=ConfigDefault,
    config_key="extensions",
    builtin=BUILTIN_EXTENSIONS,
    help="File extension to index (repeatable; a vault's .kbase.toml beats the default).",
)
@click.option(
    "--max-size",
    callback=parse_size,
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
    from kbase.config import load_user

    user = load_user()  # extensions, exclude, model (a vault's .kbase.toml: see KB.index)
    kb = open_kb(ctx)
    as_json = fmt == "json"  # no progress bars, no warnings on stderr: the report says it all
    settings = kb.chunk_settings(max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)
    told: list[bool] = []  # the skips and warnings were printed when keyword search was ready

    def tell_skips(report: IndexReport) -> None:
        told.append(True)
        if not quiet and not as_json:
            for path, reason in report.skipped:
                bar.say(f"skipped {path}: {reason}")  # say() escapes
            for path, msg in report.warnings:
                bar.say(f"warning {path}: {msg}")

    with terminate_as_interrupt() as terminated, Bars(not quiet and not as_json) as bar:
        eta = EmbedEta(bar.chunks, not quiet and not as_json, bar)
        report = kb.index(
            paths,
            progress=bar.files,
            embed_progress=eta,
            embed=embed,
            settings=settings,
            extensions=tuple(extensions) or None,
            default_extensions=user.extensions,
            exclude=user.exclude,
            max_size=max_size,
            follow_outside=follow_outside,
            model=model or config_model(user),
            download=download,
            switch_progress=SwitchEta(kb, bar.switch, not quiet and not as_json),
            on_keyword_ready=tell_skips,
            remember_embed=True,  # --embed / --no-embed: from now on, an interrupted run too
        )
    if fmt == "json":
        from dataclasses import asdict

        click.echo(dumps(asdict(report), ensure_ascii=False, indent=2))
    else:
        if not quiet and not told:  # stopped before the files were all indexed
            for path, reason in report.skipped:
                click.echo(printable(f"skipped {path}: {reason}"), err=True)
            for path, msg in report.warnings:
                click.echo(printable(f"warning {path}: {msg}"), err=True)
        click.echo(
            f"{'interrupted after' if report.interrupted else 'indexed in'} "
            f"{report.seconds:.2f} s: "
            f"{report.new} new, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.renamed} renamed, {report.removed} removed, {len(report.skipped)} skipped"
            + (
                f", {len(report.warnings)} warning{'s' if len(report.warnings) > 1 else ''}"
                if report.warnings
                else ""
            )
            + (f", {report.rechunked} re-chunked" if report.rechunked else "")
        )
        if not quiet and not report.interrupted:
            say_empty_roots(kb, paths, tuple(extensions) or user.extensions)
        if report.embedding and (
            report.embedding.embedded or report.embedding.reused or report.embedding.switch
        ):
            say_embedded(report.embedding)
        # (a keyword-only index is told when it is first embedded: kbase embed)
        hint = None if quiet or report.interrupted or not kb.auto_embed() else kb.model_hint()
        if hint is not None:
            say_model_hint(hint)
    if report.interrupted:
        click.echo(
            "Interrupted: the index is consistent; run kbase index again to finish.", err=True
        )
        ctx.exit(143 if terminated else 130)


def say_empty_roots(kb, paths, extensions: tuple[str, ...] | None) -> None:
    """On stderr: each folder given that holds no file kbase indexes (the wrong folder, or notes
    in another format), with the extensions in force."""
    import os

    from kbase.config import load_vault

    given = {os.path.abspath(p) for p in paths}
    for root in kb.roots():
        if root.documents or root.path not in given or not os.path.isdir(root.path):
            continue
        ext = load_vault(root.path).extensions or extensions
        click.echo(
            printable(
                f"warning {root.path}: no file to index there; kbase reads"
                f" {' '.join(ext) if ext else BUILTIN_EXTENSIONS} files (--ext adds others)"
            ),
            err=True,
        )


class JsonEvents:
    """``--json`` for the commands that run on (watch, embed): one JSON object per line on stdout,
    written as it happens, each with its ``event`` and ``time`` (local, ISO 8601, seconds), for
    scripts to read line by line."""

    PROGRESS_EVERY_S = 1.0  # progress lines at most this often (and the last one always)

    def __init__(self) -> None:
        self.said_progress = float("-inf")

    def __call__(self, event: str, **fields) -> None:
        import sys
        from datetime import datetime

        stamp = datetime.now().astimezone().isoformat(timespec="seconds")
        click.echo(dumps({"event": event, "time": stamp, **fields}, ensure_ascii=False))
        sys.stdout.flush()

    def progress(self, event: str):
        """An embedding progress callback (done, total) that writes ``event`` lines."""
        import time

        def on_progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done >= total or now - self.said_progress >= self.PROGRESS_EVERY_S:
                self.said_progress = now
                self(event, done=done, total=total)

        return on_progress


@click.command()
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
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per line on stdout, as it happens: watching, changed, skipped, error,"
    " embedding, stopped.",
)
@click.pass_context
def watch(ctx, paths, no_embed, debounce, poll, as_json):
    """Keep the index current while you edit (PATHS, or every known root). Ctrl-C stops.

    Each batch of changes runs the same incremental index as kbase index (renames and deletes
    included; only new and changed chunks are embedded). Quiet unless something changed."""
    from datetime import datetime

    from kbase.cli.render import render_changes

    skips_shown: set[tuple[str, str]] = set()  # each skipped file is reported once, not every batch
    events = JsonEvents() if as_json else None

    def on_json_batch(b, emit: JsonEvents) -> None:
        if b.error:
            emit("error", message=b.error)
            return
        r = b.report
        for skip in r.skipped:
            if skip not in skips_shown:
                skips_shown.add(skip)
                emit("skipped", path=skip[0], reason=skip[1])
        for path, message in r.warnings:  # (of the files this batch read: each change warns)
            emit("warning", path=path, message=message)
        if b.changed:
            emit(
                "changed",
                changes=[{"kind": kind, "path": path} for kind, path in r.changed],
                embedded=r.embedding.embedded if r.embedding else 0,
                seconds=round(b.seconds, 3),
                catch_up=b.catch_up,
            )

    remaining: list[int] = []

    def on_json_embed(r) -> None:
        if events is not None and (not remaining or remaining[-1] != r.remaining):
            remaining.append(r.remaining)
            events("embedding", remaining=r.remaining, embedded=r.embedded, reused=r.reused)

    def on_batch(b) -> None:
        if events is not None:
            on_json_batch(b, events)
            return
        stamp = datetime.now().strftime("%H:%M:%S")
        if b.error:
            click.echo(printable(f"{stamp} error: {b.error}"), err=True)
            return
        r = b.report
        for skip in r.skipped:
            if skip not in skips_shown:
                skips_shown.add(skip)
                click.echo(printable(f"{stamp} skipped {skip[0]}: {skip[1]}"), err=True)
        for path, message in r.warnings:
            click.echo(printable(f"{stamp} warning {path}: {message}"), err=True)
        if b.changed:
            embedded = r.embedding.embedded if r.embedding else 0
            click.echo(
                f"{stamp} {render_changes(r.changed)}"
                + (f", {embedded} chunks embedded" if embedded else "")
                + f" ({b.seconds:.2f} s)"
            )

    from kbase.config import load_user

    user = load_user()
    on_embed = on_json_embed if events is not None else IdleEmbedLines()
    kb = open_kb(ctx)
    keyword_only = not no_embed and kb.path.exists() and not kb.auto_embed()
    if events is not None:
        events(
            "watching",
            paths=[str(p) for p in paths],
            embed=not no_embed and not keyword_only,
        )
    else:
        click.echo(
            printable(
                f"watching {', '.join(str(p) for p in paths) or 'every indexed root'}"
                " (Ctrl-C to stop)"
            ),
            err=True,
        )
    if keyword_only:
        click.echo(
            "this index is keyword-only: changes are not embedded"
            " (kbase embed embeds it and turns embedding on)",
            err=True,
        )
    from kbase.cli.quick import print_handed_searches

    print_handed_searches()
    with terminate_as_interrupt() as terminated:
        try:
            # No bars; a line on stderr when one file takes long (not with --json: stdout is
            # events). A kbase search meanwhile is handed to this process (its model and vectors
            # loaded).
            with Bars(events is None, bars=False) as slow, kb.serve_searches():
                kb.watch(
                    paths,
                    debounce_ms=debounce,
                    on_batch=on_batch,
                    embed=not no_embed,
                    force_polling=True if poll else None,
                    on_embed=on_embed,
                    progress=slow.files,
                    default_extensions=user.extensions,  # the config file's, as kbase index
                    exclude=user.exclude,
                )
        except KeyboardInterrupt:
            pass
    # Watching ends only on Ctrl-C or SIGTERM (run_watch returns then): exit code 130 (143), as
    # for every command.
    if events is not None:
        events("stopped")
    else:
        click.echo("stopped; the index is consistent", err=True)
    ctx.exit(143 if terminated else 130)


@click.command()
@click.option(
    "--rebuild", is_flag=True, help="Drop every vector and embed everything again (another model)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object per line on stdout: progress (done, total; at most once a second),"
    " switch_progress, then done with the report. No progress bar.",
)
@model_options
@click.pass_context
def embed(ctx, rebuild, quiet, as_json, model, download):
    """Embed the chunks that have no vector yet (resumes where an interrupted run stopped), and
    go on with a switch of models (--model) under way."""
    from kbase.config import load_user

    model = model or config_model(load_user())
    kb = open_kb(ctx)
    if as_json:
        events = JsonEvents()
        events("start", index=str(kb.path), rebuild=rebuild)
        result = kb.embed(
            rebuild=rebuild,
            progress=events.progress("progress"),
            model=model,
            download=download,
            switch_progress=events.progress("switch_progress"),
        )
        from dataclasses import asdict

        events("done", **asdict(result))
        return
    with Bars(not quiet) as bar:
        eta = EmbedEta(bar.chunks, not quiet, bar, announce=False)
        result = kb.embed(
            rebuild=rebuild,
            progress=eta,
            model=model,
            download=download,
            switch_progress=SwitchEta(kb, bar.switch, not quiet),
        )
    say_embedded(result)
    hint = None if quiet or model is not None else kb.model_hint()
    if hint is not None:  # (as kbase index says it, once the index is done)
        say_model_hint(hint)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@chunk_options
@format_options
def chunks(file, max_tokens, overlap, min_tokens, fmt):
    """Show how kbase cuts FILE into chunks (offsets, lines, tokens, kind, heading path, flags).

    Reads the file itself; no index is needed. --json gives every field and each chunk's text."""
    from kbase.api import chunk_file
    from kbase.cli.render import render_chunks

    doc, result = chunk_file(file, max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)
    click.echo(render_chunks(doc.text, result.chunks, result.diagnostics, fmt, use_color()))
