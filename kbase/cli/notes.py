"""Commands that find and read notes: search, show, links, backlinks, graph, related, ..."""

from __future__ import annotations

import os

import click

from kbase.cli.app import (
    depth_option,
    dumps,
    exclude_option,
    format_options,
    note_argument,
    note_filter_options,
    open_in_editor,
    open_kb,
    output_options,
    path_option,
    printable,
    say_near,
    search_options,
    use_color,
)
from kbase.cli.common import none_found


class _Search(click.Command):
    """``kbase search garden -tomatoes``: a ``-word`` that is not one of the command's option
    spellings is part of the query (an exclusion), as a person writes it. Options are ``-n``,
    ``--limit`` and the others as spelled, ``--limit=5``, and a short option with a value it
    accepts attached (``-n5``, ``-mkeyword``); ``-nothing`` is the word 'nothing' left out, not
    ``-n othing``; ``--unknown`` stays an error, and everything after ``--`` is the query."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options, words, complete = self._split(ctx, args)
        try:  # (an option missing its value, at the end: click's own error, not '--' as its value)
            return super().parse_args(ctx, [*options, "--", *words] if complete else options)
        except click.BadParameter as e:
            if e.param is None or e.param.name != "limit":
                raise
            value = next((options[i + 1] for i, a in enumerate(options[:-1]) if a == "-n"), None)
            example = " ".join([*words, f"-n{value}" if value else "-word"])
            raise click.UsageError(
                f"{e.format_message()} -n N is how many notes to list; to leave out a word,"
                f" write -word with no space: kbase search '{example}'",
                ctx,
            ) from None

    def _split(self, ctx: click.Context, args: list[str]) -> tuple[list[str], list[str], bool]:
        """``args`` as (options with their values, the query's words), each in the order typed,
        and whether every option that takes a value has one."""
        params = {
            opt: p
            for p in self.get_params(ctx)
            if isinstance(p, click.Option)
            for opt in (*p.opts, *p.secondary_opts)
        }
        options: list[str] = []
        words: list[str] = []
        complete = True
        rest = iter(args)
        for a in rest:
            if a == "--":
                words.extend(rest)
                break
            name = a.partition("=")[0] if a.startswith("--") else a
            p = params.get(name)
            if a.startswith("--") or p is not None:
                options.append(a)
                if p is not None and not p.is_flag and not p.count and "=" not in a:
                    value = next(rest, None)
                    complete = value is not None
                    options.extend([value] if value is not None else [])
            elif a.startswith("-") and len(a) > 1 and _attached(ctx, params.get(a[:2]), a[2:]):
                options.append(a)
            else:
                words.append(a)
        return options, words, complete


def _attached(ctx: click.Context, p: click.Option | None, value: str) -> bool:
    """Does the short option ``p`` (None: no such option) take ``value`` attached (-n5)?"""
    if p is None or p.is_flag or p.count:
        return False
    try:
        p.type.convert(value, p, ctx)
    except click.BadParameter:
        return False
    return True


@click.command(cls=_Search)
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
@click.option(
    "--open",
    "open_n",
    type=click.IntRange(1),
    metavar="N",
    help="Open hit N in $VISUAL/$EDITOR at its line instead of listing the hits.",
)
@search_options
@format_options
@click.pass_context
def search(
    ctx,
    query,
    mode,
    explain,
    no_correct,
    open_n,
    limit,
    path_glob,
    exclude,
    tags,
    since,
    until,
    fmt,
):
    """Search the index. QUERY: words, "phrases", prefix*, -excluded, a OR b, and Obsidian's
    operators path:x, file:x, tag:#x (-tag:x leaves out; operators alone list the notes)."""
    from kbase.cli import quick

    kb = open_kb(ctx)
    hits = quick.find(
        kb,
        click.echo,
        query=query,
        mode=mode,
        no_correct=no_correct,
        limit=limit,
        path_glob=path_glob,
        exclude=exclude,
        tags=tags,
        since=since,
        until=until,
        fmt=fmt,
    )
    if open_n is not None:
        if open_n > len(hits):
            from kbase.errors import InputError

            raise InputError(
                f"--open {open_n}: the search found {len(hits)} hit{'s' * (len(hits) != 1)}",
                "pick one of them (a larger --limit finds more)"
                if hits
                else "search for other words",
            )
        hit = hits[open_n - 1]
        open_in_editor(ctx, hit.abspath, hit.line, missing=not os.path.exists(hit.abspath))
        return
    quick.show(
        kb,
        click.echo,
        hits,
        fmt=fmt,
        color=use_color(),
        explain=explain,
        path_glob=path_glob,
        tags=tags,
    )


def _links_command(name: str, doc: str, show: str):
    @click.command(name=name, help=doc)
    @note_argument()
    @format_options
    @click.pass_context
    def command(ctx, note, fmt):
        from kbase.cli.render import render_links

        kb = open_kb(ctx)
        target = kb.note(note)
        say_near(target.corrected_from, target.path, target.title)
        found = getattr(kb, name)(target)
        if found or fmt != "table":
            click.echo(render_links(found, fmt, use_color(), show))
        else:
            click.echo(f"No {name}.", err=True)

    return command


links = _links_command(
    "links",
    "Links from NOTE (as a link names it: 'Note', 'folder/Note', an alias; or a path), "
    "each with its line.",
    "target",
)


backlinks = _links_command(
    "backlinks", "Notes that link to NOTE, each with the linking line.", "source"
)


@click.command()
@click.option(
    "--anchors", is_flag=True, help="Links to a heading or block that does not exist, instead."
)
@note_filter_options
@format_options
@click.pass_context
def unresolved(ctx, anchors, path_glob, exclude, tags, fmt):
    """Links that point at no note or file (or, with --anchors, at a missing heading or block),
    from the notes --path, --exclude and --tag keep."""
    from kbase.cli.render import render_links

    kb = open_kb(ctx)
    keep = {"path": path_glob, "exclude": exclude, "tags": tags}
    found = kb.broken_anchors(**keep) if anchors else kb.unresolved(**keep)
    if found or fmt != "table":
        click.echo(render_links(found, fmt, use_color(), "both"))
    else:
        none = "No unresolved links" if not anchors else "No broken anchors"
        click.echo(none_found(kb, none, path_glob, tags), err=True)


@click.command()
@note_filter_options
@format_options
@click.pass_context
def orphans(ctx, path_glob, exclude, tags, fmt):
    """Notes that no other note links to, of those --path, --exclude and --tag keep (links
    from every note count)."""
    from kbase.cli.render import render_notes

    kb = open_kb(ctx)
    found = kb.orphans(path=path_glob, exclude=exclude, tags=tags)
    _echo_notes(render_notes, found, fmt, empty=none_found(kb, "No orphans", path_glob, tags))


def _echo_notes(render, notes, fmt: str, empty: str, **options) -> None:
    """A listing of notes, or ``empty`` on stderr when there is none (the machine formats still
    print their empty document: ``[]``, a CSV header)."""
    if notes or fmt != "table":
        click.echo(render(notes, fmt, **options))
    else:
        click.echo(empty, err=True)


@click.command()
@note_argument()
@depth_option(1, "Hops to follow.")
@format_options
@click.pass_context
def neighbors(ctx, note, depth, fmt):
    """Notes within --depth links of NOTE, following links both ways (distance first). Each says
    which way its link goes: out (the note one hop nearer links to it), in (it links
    there), both."""
    from kbase.cli.render import render_notes

    kb = open_kb(ctx)
    target = kb.note(note)
    say_near(target.corrected_from, target.path, target.title)
    found = kb.neighbors(target, depth)
    _echo_notes(render_notes, found, fmt, empty="No neighbors.", with_distance=True)


@click.command()
@note_argument()
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

    kb = open_kb(ctx)
    target = kb.note(note)
    say_near(target.corrected_from, target.path, target.title)
    result = kb.related(target, limit=limit, include_linked=include_linked)
    if result.method == "keyword" and fmt == "table":
        click.echo(
            printable(
                f"no embeddings for {result.path}: keyword similarity on "
                f"{', '.join(result.terms) or 'no terms'}"
                " (kbase embed for similarity in meaning)"
            ),
            err=True,
        )
    if result.hits or fmt != "table":
        click.echo(render_related(result, fmt, use_color()))
    else:
        click.echo("No related notes.", err=True)


@click.command()
@note_argument(required=False)
@depth_option(None, "With NOTE: hops to follow (default 1).")
@path_option
@exclude_option
@output_options("json", "dot")
@click.pass_context
def graph(ctx, note, depth, path_glob, exclude, fmt):
    """The note graph as JSON (nodes and edges) or Graphviz DOT: all of it, or the notes within
    --depth links of NOTE. Links through notes left out by --path or --exclude are not followed."""
    from kbase.cli.render import to_dot

    kb = open_kb(ctx)
    g = kb.graph(note, depth=depth, path=path_glob, exclude=exclude)
    click.echo(dumps(g, ensure_ascii=False, indent=2) if fmt == "json" else to_dot(g))


@click.command()
@note_argument("target")
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
    kb = open_kb(ctx)
    r = kb.region(target, context)
    doc = r.doc
    say_near(doc.corrected_from, doc.path, doc.title)
    if doc.missing:
        click.echo(
            printable(
                f"warning: {doc.path} is missing on disk ({doc.abspath}); this is the indexed text"
                " (kbase index forgets a deleted note; moved the notes? kbase roots move OLD NEW)"
            ),
            err=True,
        )
    elif doc.stale:
        click.echo(
            printable(
                f"warning: {doc.path} changed on disk since it was indexed; this is the indexed"
                " text (kbase index updates it)"
            ),
            err=True,
        )
    if fmt == "json":
        click.echo(
            dumps(
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
    elif r.whole:  # the text as it is, its line breaks and tabs kept, no other control
        click.echo(printable(doc.body, lines=True), nl=not doc.body.endswith(("\n", "\r")))
    elif r.page is not None:
        if not r.text.strip():
            click.echo(printable(f"{doc.path} p.{r.page} has no text (an image only?)"), err=True)
        else:
            click.echo(printable(r.text, lines=True), nl=not r.text.endswith("\n"))
    else:
        width = len(str(r.last))
        for n, line in enumerate(r.lines, r.first):
            mark = "" if r.line is None else "> " if n == r.line else "  "
            click.echo(f"{mark}{n:>{width}} | {printable(line)}")


@click.command(name="open")
@note_argument("target")
@click.pass_context
def open_note(ctx, target):
    """Open a note in $VISUAL (else $EDITOR) at a line: NOTE (a name, an alias or a path),
    NOTE:LINE, NOTE#Heading, as kbase show finds them; vi, nano, emacs get +LINE, VS Code
    --goto FILE:LINE. Exits with the editor's status."""
    kb = open_kb(ctx)
    r = kb.region(target, 0)
    doc = r.doc
    say_near(doc.corrected_from, doc.path, doc.title)
    line = r.line or (None if r.whole else r.first)
    open_in_editor(ctx, doc.abspath, line, missing=doc.missing)
