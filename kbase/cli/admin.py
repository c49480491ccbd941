"""Commands about the index itself: status, check, compact, roots, sql; browse and mcp."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kbase.cli.app import (
    BUILTIN_EXTENSIONS,
    BUILTIN_MODEL,
    dumps,
    format_options,
    index_file,
    open_kb,
    output_options,
    printable,
    terminal_width,
)


@click.command()
@output_options("text", "json")
@click.pass_context
def status(ctx, fmt):
    """Roots, counts, sizes and the last index time."""
    from dataclasses import asdict

    from kbase.cli.render import render_status

    kb = open_kb(ctx)
    st = kb.status()
    click.echo(
        dumps(asdict(st), indent=2, ensure_ascii=False) if fmt == "json" else render_status(st)
    )


@click.command()
@click.pass_context
def browse(ctx):
    """Full-screen browser: search as you type, read hits in context, follow links."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        from kbase.errors import InputError

        raise InputError(
            "kbase browse needs a terminal (its input or output is a pipe or a file)",
            "run it in a terminal; in scripts use kbase search",
        )
    from kbase.cli.quick import print_handed_searches
    from kbase.tui.app import run

    print_handed_searches()
    run(index_file(ctx))


@click.command()
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
    kbase://note/PATH. See docs/mcp.md for client configuration."""
    if http is not None:  # refuse at once, before the SDK loads or the index opens
        from kbase.mcp.transport import check_exposure, parse_http

        check_exposure(parse_http(http)[0], token)
    from kbase.cli.quick import print_handed_searches
    from kbase.mcp.server import serve

    print_handed_searches()

    if (
        http is None
        and token
        and ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE
    ):
        raise click.UsageError("--token applies to --http only (stdio needs no token)")
    serve(
        index_file(ctx),
        http=http,
        token=token if http else None,
        watch=watch,
        embed=not no_embed,
        poll=poll,
        budget=budget,
    )


class _Sql(click.Command):
    """``kbase sql "-- the notes by size
    SELECT ..."``: a query that begins with an SQL comment (``--`` or ``-``, then a space or a
    line break) is the query, not an unknown option: no option's name holds a space."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        valued = {
            o
            for p in self.get_params(ctx)
            if isinstance(p, click.Option) and not p.is_flag
            for o in p.opts
        }
        for i, arg in enumerate(args):
            if arg == "--":
                break
            if i and args[i - 1] in valued:  # an option's value ('-f "-a file.sql"')
                continue
            if arg.startswith("-") and any(c.isspace() for c in arg):
                args = [*args[:i], *args[i + 1 :], "--", arg]
                break
        return super().parse_args(ctx, args)


@click.command(cls=_Sql)
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
    if not text.strip():
        from kbase.errors import InputError

        raise InputError(
            "no SQL given", 'pass a query: kbase sql "SELECT ..." (or on stdin, or with --file)'
        )
    kb = open_kb(ctx)
    result = kb.sql(text, timeout=timeout)
    width = terminal_width()
    out, cut = render_sql(result, fmt, width)
    if out:
        click.echo(out)
    if cut:
        click.echo(
            f"note: values cut to fit {width} columns (…); --json, --jsonl or --csv print every"
            " value whole (or widen the table: COLUMNS=300 kbase sql ...)",
            err=True,
        )


@click.command()
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

    kb = open_kb(ctx)
    result = kb.check(fix=fix)
    problems = result.problems
    if fmt == "json":
        click.echo(dumps({"ok": result.ok, **asdict(result)}, indent=2, ensure_ascii=False))
    else:
        for w in result.warnings:
            click.echo(printable(f"warning: {w.path}:{w.line}: {w.detail}"))
        for line in result.fixed:
            click.echo(printable(f"fixed: {line}"))
        for p in problems:
            click.echo(
                printable(f"problem: {p.kind}: {p.detail} ({p.count})")
                + ("" if p.fixable else " [not fixable]")
            )
        if not problems:
            click.echo("ok: the index is consistent")
        elif not fix and any(p.fixable for p in problems):
            click.echo("run kbase check --fix to repair", err=True)
    if problems:
        ctx.exit(1)


@click.command()
@output_options("text", "json")
@click.pass_context
def compact(ctx, fmt):
    """Merge the keyword index, drop dead vector space, VACUUM; print the file's size before and
    after and the space saved, in KiB/MiB/GiB (1 KiB = 1024 bytes)."""
    from dataclasses import asdict

    from kbase.cli.render import human_bytes

    kb = open_kb(ctx)
    r = kb.compact()
    if fmt == "json":
        click.echo(dumps({**asdict(r), "bytes_saved": r.bytes_saved}, indent=2))
        return
    click.echo(
        f"compacted: {human_bytes(r.bytes_before)} -> {human_bytes(r.bytes_after)}"
        f" ({human_bytes(r.bytes_saved)} saved)"
    )


@click.group(invoke_without_command=True)
@output_options("text", "json")
@click.pass_context
def roots(ctx, fmt):
    """The indexed roots (folders or files). Subcommands: move, remove."""
    if ctx.invoked_subcommand is not None:
        return
    from dataclasses import asdict

    kb = open_kb(ctx)
    rs = kb.roots()
    if fmt == "json":
        click.echo(dumps([asdict(r) for r in rs], indent=2))
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
        docs = f"{r.documents:,} document{'s' * (r.documents != 1)}"
        click.echo(printable(f"{r.path}  ({docs}){state}"))


@roots.command("move")
@click.argument("old")
@click.argument("new")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when it worked (errors still).")
@click.pass_context
def roots_move(ctx, old, new, quiet):
    """Re-point root OLD to NEW after moving the notes; nothing is re-indexed."""
    kb = open_kb(ctx)
    r = kb.move_root(old, new)
    if not quiet:
        click.echo(printable(f"moved root {r.old} -> {r.new}"))


@roots.command("remove")
@click.argument("root")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when it worked (errors still).")
@click.pass_context
def roots_remove(ctx, root, quiet):
    """Forget root ROOT and every document indexed from it, in one transaction (nothing on disk
    is touched). Links from other roots to its notes turn unresolved."""
    kb = open_kb(ctx)
    r = kb.remove_root(root)
    if not quiet:
        click.echo(printable(f"removed root {r.path} ({r.documents:,} documents)"))


@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@output_options("table", "json")
@click.pass_context
def config(ctx, path, fmt):
    """The settings in force and where each comes from: the index (--db, KBASE_DB, the config
    file, the default), and what kbase index uses for the folder PATH (default: the current
    one): extensions, exclude patterns, model. Files: $XDG_CONFIG_HOME/kbase/config.toml
    (KBASE_CONFIG names another) and a vault's .kbase.toml."""
    from click.core import ParameterSource

    from kbase.cli.app import index_path
    from kbase.config import load_user, load_vault, user_config_path
    from kbase.paths import default_db_path

    root = ctx.find_root()
    user = load_user()
    folder = (path or Path.cwd()).absolute()
    vault = load_vault(folder)
    source = root.get_parameter_source("db")
    db = root.params.get("db")
    if db is not None:
        db_from = "KBASE_DB" if source == ParameterSource.ENVIRONMENT else "--db"
    elif user.index is not None:
        db_from = str(user.path)
    else:
        db_from = "default"
    db = index_path(db) if db is not None else user.index or default_db_path()
    user_file = user_config_path()
    rows = [
        ("config file", str(user_file), "found" if user.path else "none: kbase's defaults"),
        (
            "vault file",
            str(folder / ".kbase.toml"),
            "found" if vault.path else "none",
        ),
        ("index", str(db), db_from),
        (
            "extensions",
            " ".join(vault.extensions or user.extensions or ()) or BUILTIN_EXTENSIONS,
            str(vault.path)
            if vault.extensions
            else str(user.path)
            if user.extensions
            else "default",
        ),
        (
            "exclude",
            " ".join((*user.exclude, *vault.exclude)) or "(none; .kbaseignore files apply)",
            " + ".join(str(c.path) for c in (user, vault) if c.exclude) or "default",
        ),
        (
            "model",
            user.model or BUILTIN_MODEL,
            str(user.path) if user.model else "default",
        ),
    ]
    if fmt == "json":
        click.echo(
            dumps({k.replace(" ", "_"): {"value": v, "from": f} for k, v, f in rows}, indent=2)
        )
        return
    width = max(len(k) for k, _, _ in rows)
    for key, value, where in rows:
        click.echo(printable(f"{key:<{width}}  {value}  ({where})"))
