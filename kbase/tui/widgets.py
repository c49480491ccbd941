"""The widgets of the main screen. They render what they are given (method calls down) and report
what the user did with messages (up); none of them touches the index."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker

from kbase.api import readable_line
from kbase.text import location as hit_location
from kbase.text import printable
from kbase.tui.logic import (
    BarFilters,
    Location,
    clip_snippet,
    highlight_spans,
    is_markdown,
    lines_before,
    link_from_href,
    preview_page,
    shorten_path,
    sibling_abspath,
    wikilinks_to_markdown,
)

# Documents longer than this are shown as plain text (a virtualised view) instead of mounting
# one widget per Markdown block.
MARKDOWN_MAX_CHARS = 200_000
CONTEXT_CHARS = 160  # of a link's line (or a related note's snippet) in the links pane


def plain_region(body: str, location: Location, most: int = 60) -> str:
    """The lines a preview opens at, as stored: the hit's chunk (its span), else ``most`` lines
    from the hit's line (or the note's start)."""
    from kbase.text import LINE_BREAK

    lines = LINE_BREAK.split(body)
    if location.span:
        first, last = location.span
    else:
        first = location.line or 1
        last = first + most - 1
    return "\n".join(lines[max(first, 1) - 1 : min(last, first + most - 1)])


class QueryInput(Input):
    """The search box. Focus starts here, so ``?`` on an empty box opens the help (as F1 does
    anywhere) instead of searching for a question mark; in a query it is typed as usual."""

    async def _on_key(self, event) -> None:
        if event.character == "?" and not self.value:
            event.stop()
            event.prevent_default()
            await self.app.run_action("help")
            return
        await super()._on_key(event)


class SearchBar(Horizontal):
    """The query box, with the search mode in front of it."""

    def compose(self) -> ComposeResult:
        yield Label("keyword", id="mode")
        yield QueryInput(
            placeholder="Search your notes   (F1 or ? help, ctrl+t mode, ctrl+f filters)",
            id="query",
        )

    @property
    def input(self) -> Input:
        return self.query_one("#query", Input)

    def show_mode(self, mode: str, *, available: bool, note: str = "") -> None:
        label = self.query_one("#mode", Label)
        text = mode if available or mode == "keyword" else f"{mode}?"
        label.update(f"{text}{(' ' + note) if note else ''}")
        label.set_class(not available, "-no-embeddings")
        label.tooltip = "ctrl+t (or m) cycles keyword / semantic / hybrid"


class FilterBar(Horizontal):
    """Path prefix (or glob), ``-path`` exclusions and tags, passed to ``KB.search``."""

    class Changed(Message):
        def __init__(self, filters: BarFilters) -> None:
            super().__init__()
            self.filters = filters

    def compose(self) -> ComposeResult:
        yield Label("path", classes="filter-label")
        yield Input(
            placeholder="folder/ or glob; -folder/ leaves out", id="filter-path", compact=True
        )
        yield Label("tags", classes="filter-label")
        yield Input(placeholder="tag tag/sub", id="filter-tags", compact=True)

    @property
    def filters(self) -> BarFilters:
        return BarFilters.parse(
            self.query_one("#filter-path", Input).value, self.query_one("#filter-tags", Input).value
        )

    def set_filters(self, path: str = "", tags: str = "") -> None:
        self.query_one("#filter-path", Input).value = path
        self.query_one("#filter-tags", Input).value = tags

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Changed(self.filters))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Changed(self.filters))


class ResultsList(OptionList):
    """One option per document, three lines that never wrap: title and score; path and line
    (shortened from the left) with the heading; the snippet with its matches. A 40-line terminal
    shows ten hits."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.hits: list = []
        self.source = ""  # which search produced the list: keyword, semantic or hybrid
        self.query_text = ""
        self.corrected: str | None = None
        self.notice: str | None = None
        self._rendered_width = 0

    def show_hits(self, hits: list, *, source: str, query: str, pending: str = "") -> None:
        keep = None
        if (
            self.highlighted is not None
            and self.highlighted < len(self.hits)
            and query == self.query_text
        ):
            keep = self.hits[self.highlighted].abspath
        self.hits, self.source, self.query_text = list(hits), source, query
        self.corrected = getattr(hits, "corrected", None)  # KB.search corrected a misspelt word
        self.notice = getattr(hits, "notice", None)  # what of the query was left out
        self._fill(next((i for i, h in enumerate(self.hits) if h.abspath == keep), 0))
        self.set_title(pending=pending)

    def _fill(self, index: int) -> None:
        """Draw the hits, ``index`` highlighted. That is no pick of the user's: no
        OptionHighlighted is posted (it would show the hit in the preview in place of a note a
        link led to from it); the screen shows what a new list should."""
        width = self._line_width()
        with self.prevent(OptionList.OptionHighlighted):
            self.set_options(
                Option(self._prompt(h, width), id=f"hit-{i}") for i, h in enumerate(self.hits)
            )
            self._rendered_width = width
            if self.hits:
                self.highlighted = min(index, len(self.hits) - 1)

    def _line_width(self) -> int:
        """The cells an option's line has (each line is cut to fit, never wrapped)."""
        return max(10, self.scrollable_content_region.width)

    def on_resize(self) -> None:
        if self.hits and self._line_width() != self._rendered_width:
            self._fill(self.highlighted or 0)

    def set_title(self, *, pending: str = "", message: str = "") -> None:
        if message:
            self.border_title = message
        elif not self.query_text:
            self.border_title = "Results"
        else:
            self.border_title = (
                f"{len(self.hits)} result{'s' * (len(self.hits) != 1)} · {self.source}"
                + (f' · showing results for "{self.corrected}"' if self.corrected else "")
                + (f" · {self.notice}" if self.notice else "")
            )
        self.border_subtitle = pending

    def clear_hits(self, message: str = "") -> None:
        self.hits, self.source, self.query_text = [], "", ""
        self.corrected = None
        self.notice = None
        self.clear_options()
        self.set_title(message=message)

    @property
    def current(self):
        if self.highlighted is None or self.highlighted >= len(self.hits):
            return None
        return self.hits[self.highlighted]

    @staticmethod
    def _prompt(hit, width: int = 140) -> Content:
        """The three lines of a hit, each at most ``width`` cells."""
        spans = highlight_spans(hit.snippet, hit.highlights)
        snippet, spans = clip_snippet(
            hit.snippet, spans, width - 2
        )  # (it may add an ellipsis at each end)
        body = _marked(snippet, spans, "$text-warning bold underline")
        body = body.stylize_before("$text-muted" if not spans else "").truncate(
            width, ellipsis=True
        )
        extra = []
        if hit.matched_chunks > 1:
            extra.append(f"{hit.matched_chunks} passages")
        if hit.heading_path and hit.heading_path != hit.title:
            extra.append(hit.heading_path)
        where = Content.assemble(
            (
                shorten_path(
                    printable(hit_location(hit.path, hit.line, hit.page, hit.card)), width
                ),
                "$text-accent",
            ),
            ("  " + printable(" · ".join(extra)), "$text-muted") if extra else "",
        )
        tail = Content.assemble(
            "  ",
            (f"{hit.score:.2f}", "$text-muted"),
            (
                ("  ⚠ missing on disk", "$text-error")
                if hit.missing
                else ("  ⚠ changed on disk", "$text-error")
                if hit.stale
                else ""
            ),
        )
        title = Content.styled(printable(hit.title), "bold").truncate(
            max(1, width - tail.cell_length), ellipsis=True
        )
        return Content("\n").join(
            [
                (title + tail).truncate(width, ellipsis=True),
                where.truncate(width, ellipsis=True),
                body,
            ]
        )


class PreviewScroll(VerticalScroll):
    """The scrolling body of the Markdown preview."""

    BINDINGS = [
        Binding("j", "scroll_down", "Scroll down", show=False),
        Binding("k", "scroll_up", "Scroll up", show=False),
    ]


class PreviewPane(Container):
    """The document, rendered: Markdown (wikilinks clickable) or plain text with line numbers;
    scrolled to the hit, whose block (Markdown) or line (text) is highlighted.

    The Markdown and text views are created on first use, so the first paint does not wait
    for markdown-it and the text area."""

    class FollowLink(Message):
        """A link in the preview was clicked."""

        def __init__(self, name: str, anchor: str | None) -> None:
            super().__init__()
            self.name = name
            self.anchor = anchor

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.location: Location | None = None
        self.hit_block = None  # the MarkdownBlock holding the hit's line
        self.hit_line: int | None = None  # 1-based line of the stored body that is highlighted
        self.line_offset = 0  # lines of front matter above the rendered Markdown
        self._next_render: tuple | None = None  # (doc, location) waiting for _render_latest
        self._renderer: Worker | None = None  # the worker running _render_latest

    def compose(self) -> ComposeResult:
        with PreviewScroll(id="md-scroll"):
            yield Static("", id="preview-empty")

    def on_mount(self) -> None:
        self.border_title = "Preview"

    def _view(self, selector: str):
        views = self.query(selector)
        return views.first() if views else None

    async def _markdown_view(self):
        md = self._view("#preview-md")
        if md is None:
            from textual.widgets import Markdown

            md = Markdown("", id="preview-md", open_links=False)
            await self.query_one("#md-scroll", VerticalScroll).mount(md)
        return md

    async def _text_view(self):
        text = self._view("#preview-text")
        if text is None:
            from textual.widgets import TextArea

            text = TextArea(
                "", id="preview-text", read_only=True, soft_wrap=True, show_line_numbers=True
            )
            await self.mount(text)
        return text

    def _show_only(self, *, text: bool, markdown: bool = False, empty: bool = False) -> None:
        self.query_one("#preview-empty").display = empty
        self.query_one("#md-scroll").display = not text
        for selector, shown in (("#preview-md", markdown), ("#preview-text", text)):
            view = self._view(selector)
            if view is not None:
                view.display = shown

    @property
    def scroller(self):
        text = self._view("#preview-text")
        return (
            text
            if text is not None and text.display
            else self.query_one("#md-scroll", VerticalScroll)
        )

    def current_line(self) -> int | None:
        """The 1-based line of the stored body the preview is at (the hit's, else its block's)."""
        if self.hit_line:
            return self.hit_line
        if self.hit_block is not None:
            return self.hit_block.source_range[0] + 1 + self.line_offset
        return None

    def focus_view(self) -> None:
        self.scroller.focus()

    def show_message(self, message: str) -> None:
        self.location, self.hit_block, self.hit_line = None, None, None
        self.border_title, self.border_subtitle = "Preview", ""
        self.query_one("#preview-empty", Static).update(message)
        self._show_only(text=False, empty=True)

    def show_pending(self, title: str, where: str, text: str) -> None:
        """What is known of a hit before its note is loaded (its title, place and snippet),
        shown at once: the note replaces it when it comes."""
        self.border_title, self.border_subtitle = printable(title), printable(where)
        self.query_one("#preview-empty", Static).update(Content(printable(text, lines=True)))
        self._show_only(text=False, empty=True)

    def show_document(self, doc, location: Location) -> None:
        """Show ``doc`` (a ``DocRef``) at ``location``: the hit's lines as plain text at once,
        then the note rendered (in an async worker: Markdown takes seconds on a loaded machine)
        in their place."""
        self.location = location
        self.border_title = printable(doc.title or doc.path)
        self.border_subtitle = printable(
            f"{doc.path}:{location.line}" if location.line else doc.path
        )
        page = preview_page(doc, location)
        if page is not None:
            self.border_subtitle = printable(f"{doc.path} p.{page} of {len(doc.pages)}")
        self.query_one("#preview-empty", Static).update(
            Content(printable(plain_region(doc.body, location), lines=True))
        )
        self._show_only(text=False, empty=True)
        self._next_render = (doc, location)
        if self._renderer is None or self._renderer.is_finished:
            self._renderer = self.run_worker(self._render_latest(), group="preview-render")

    async def _render_latest(self) -> None:
        """Render the latest document asked for, one at a time. A render is never cancelled
        half-way (a Markdown widget cancelled while it mounts its blocks can leave them waiting
        on each other); a document asked for meanwhile is rendered next, and one that was
        replaced before its turn is skipped."""
        while self._next_render is not None:
            doc, location = self._next_render
            self._next_render = None
            await self._render_document(doc, location)

    async def _render_document(self, doc, location: Location) -> None:
        self.hit_block, self.hit_line = None, location.line
        if is_markdown(doc.path) and len(doc.body) <= MARKDOWN_MAX_CHARS:
            md = await self._markdown_view()
            offset = self.line_offset = lines_before(doc.body, doc.body_start)
            # escaped first: line breaks are kept, so the blocks' lines stay the body's
            await md.update(
                wikilinks_to_markdown(printable(doc.body[doc.body_start :], lines=True))
            )
            if self._next_render is not None:
                return  # replaced while it rendered: the newer one is shown instead
            self._show_only(text=False, markdown=True)
            block = self._find_block(md, location, offset)
            self.hit_block = block
            scroll = self.query_one("#md-scroll", VerticalScroll)
            for other in self._span_blocks(md, location, offset):
                other.add_class("-hit")  # the whole chunk the hit came from
            if block is not None:
                block.add_class("-hit")
                self.call_after_refresh(self.scroll_to_hit)
            else:
                self.call_after_refresh(scroll.scroll_home, animate=False)
        else:
            text = await self._text_view()
            body, offset = doc.body, 0
            page = preview_page(doc, location)
            if page is not None:  # a PDF: the page around the hit, numbered as the whole text
                a, b = doc.pages[page - 1]
                body, offset = doc.body[a:b], lines_before(doc.body, a)
            self.line_offset = offset
            text.line_number_start = offset + 1
            text.load_text(printable(body, lines=True))  # the same lines, no control character
            self._show_only(text=True)
            rows = max(1, text.document.line_count)
            if location.span:
                from textual.widgets.text_area import Selection

                first = min(max(location.span[0] - offset, 1), rows)
                last = min(max(location.span[1] - offset, first), rows)
                text.selection = Selection(
                    (first - 1, 0), (last - 1, len(text.document.get_line(last - 1)))
                )
            elif location.line and 0 < location.line - offset <= rows:
                text.select_line(location.line - offset - 1)
            else:
                text.move_cursor((0, 0))
            self.call_after_refresh(self.scroll_to_hit)

    def scroll_to_hit(self) -> None:
        """Bring the hit back to the middle of the view: its Markdown block, or the selected
        lines of the text view."""
        text = self._view("#preview-text")
        if text is not None and text.display:
            text.scroll_cursor_visible(center=True, animate=False)
        elif self.hit_block is not None and self.hit_block.is_mounted:
            self.query_one("#md-scroll", VerticalScroll).scroll_to_center(
                self.hit_block, animate=False, origin_visible=True, immediate=True
            )

    def on_resize(self) -> None:
        # The text reflows to the new width, so the same scroll offset shows other lines: the
        # hit (in view before) would be left somewhere above or below.
        if self.location is not None:
            self.call_after_refresh(self.scroll_to_hit)

    @staticmethod
    def _span_blocks(md, location: Location, offset: int) -> list:
        """The top-level blocks that overlap the hit's chunk (its span of lines)."""
        if not location.span:
            return []
        from textual.widgets.markdown import MarkdownBlock

        first, last = location.span[0] - 1 - offset, location.span[1] - 1 - offset  # 0-based
        return [
            b
            for b in md.query(MarkdownBlock)
            if b.parent is md
            and b.source_range[1] > b.source_range[0]
            and b.source_range[0] <= last
            and b.source_range[1] > first
        ]

    @staticmethod
    def _find_block(md, location: Location, offset: int):
        from textual.widgets.markdown import MarkdownBlock

        blocks = [b for b in md.query(MarkdownBlock) if b.source_range[1] > b.source_range[0]]
        if location.line:
            line = location.line - 1 - offset  # 0-based line of the Markdown source
            inside = [b for b in blocks if b.source_range[0] <= line < b.source_range[1]]
            if inside:
                return min(inside, key=lambda b: b.source_range[1] - b.source_range[0])
            # A line no block renders (a link reference definition, an HTML comment): the
            # next block, else (at the end of the note) the last one before it.
            after = [b for b in blocks if b.source_range[0] > line and b.parent is md]
            if after:
                return min(after, key=lambda b: b.source_range[0])
            before = [b for b in blocks if b.source_range[1] <= line and b.parent is md]
            return max(before, key=lambda b: b.source_range[1]) if before else None
        if location.anchor:
            want = location.anchor.strip().lower()
            for b in blocks:
                source = (b.source or "").strip()
                if source.startswith("#") and source.lstrip("#").strip().lower() == want:
                    return b
        return None

    def on_markdown_link_clicked(self, event) -> None:
        """Markdown.LinkClicked (handled by name: the Markdown widget is imported lazily)."""
        event.stop()
        target = link_from_href(event.href)
        if target is None:
            self.app.open_url(event.href)
        else:
            self.post_message(self.FollowLink(*target))


@dataclass(frozen=True)
class LinkEntry:
    """What a row of the links pane leads to."""

    location: Location | None  # None: unresolved, or an attachment
    label: str  # the link as written ([[Note]], or a Markdown link's target), else the path


class LinksPane(OptionList):
    """Outlinks then backlinks of the previewed note, each with the line it sits on."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    class Follow(Message):
        def __init__(self, entry: LinkEntry) -> None:
            super().__init__()
            self.entry = entry

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.entries: dict[str, LinkEntry] = {}

    def on_mount(self) -> None:
        self.border_title = "Links"

    def show_links(self, note: Location, outlinks: list, backlinks: list) -> None:
        self.entries = {}
        options: list = [
            Option(Content.styled(f"→ links ({len(outlinks)})", "bold $text-accent"), disabled=True)
        ]
        for i, link in enumerate(outlinks):
            if link.target_id is not None and link.target_path:
                loc = Location(
                    link.target_path,
                    sibling_abspath(note, link.target_path),
                    None,
                    link.anchor,
                    link.target_title or link.target_path,
                )
                name = link.target_title or link.target_path
            else:
                loc = None
                name = link.target + (" (attachment)" if link.target_path else " (unresolved)")
            if link.anchor:
                name += f" › {link.anchor}"
            written = f"[[{link.target}]]" if link.kind == "wiki" else link.target
            self.entries[f"out-{i}"] = LinkEntry(loc, written)
            options.append(Option(self._prompt(name, link, broken=loc is None), id=f"out-{i}"))
        options.append(
            Option(
                Content.styled(f"← backlinks ({len(backlinks)})", "bold $text-accent"),
                disabled=True,
            )
        )
        for i, link in enumerate(backlinks):
            loc = Location(
                link.source_path,
                sibling_abspath(note, link.source_path),
                link.line,
                None,
                link.source_title,
            )
            self.entries[f"in-{i}"] = LinkEntry(loc, link.source_path)
            options.append(
                Option(
                    self._prompt(f"{link.source_title}  {link.source_path}:{link.line}", link),
                    id=f"in-{i}",
                )
            )
        self.set_options(options)
        self.border_title = f"Links {len(outlinks)} out · {len(backlinks)} in"
        first = next((i for i, o in enumerate(options) if not o.disabled), None)
        self.highlighted = first

    def show_related(self, note: Location, related) -> None:
        """Append the related notes (a kbase RelatedResult) below the links."""
        how = " by keywords" if related.method == "keyword" else ""
        options: list = [
            Option(
                Content.styled(f"≈ related{how} ({len(related.hits)})", "bold $text-accent"),
                disabled=True,
            )
        ]
        for i, hit in enumerate(related.hits):
            loc = Location(
                hit.path, hit.abspath, hit.line, None, hit.title, hit.chunk_id, page=hit.page
            )
            self.entries[f"rel-{i}"] = LinkEntry(loc, hit.path)
            options.append(
                Option(
                    self._prompt(
                        f"{hit.title}  {hit_location(hit.path, hit.line, hit.page, hit.card)}",
                        hit.snippet,
                    ),
                    id=f"rel-{i}",
                )
            )
        self.add_options(options)
        if self.highlighted is None:
            self.highlighted = next(
                (i for i in range(self.option_count) if not self.get_option_at_index(i).disabled),
                None,
            )

    def clear_links(self) -> None:
        self.entries = {}
        self.clear_options()
        self.border_title = "Links"

    @staticmethod
    def _prompt(name: str, about, broken: bool = False) -> Content:
        """A row: ``name``, then ``about``: a link's line as it reads (``[[a|b]]`` is b), the
        link underlined and kept in view when the line is long; or a hit's snippet."""
        if isinstance(about, str):
            context, spans = clip_snippet(about, [], CONTEXT_CHARS)
        else:
            text, (a, b) = readable_line(about.context, about.context_span)
            context, spans = clip_snippet(text, [(a, b)] if a < b else [], CONTEXT_CHARS)
        return Content.assemble(
            (printable(name), "$text-error" if broken else "bold"),
            "\n",
            _marked(context, spans, "underline").stylize_before("$text-muted"),
        )

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        entry = self.entries.get(event.option.id or "")
        if entry is not None:
            self.post_message(self.Follow(entry))


class StatusLine(Horizontal):
    """Index statistics on the left, warnings (stale hits, filters) on the right."""

    def compose(self) -> ComposeResult:
        yield Label("opening index…", id="status-index")
        yield Label("", id="status-filters")
        yield Label("", id="status-stale")

    def show_index(self, text: str, *, error: bool = False) -> None:
        label = self.query_one("#status-index", Label)
        label.update(text)
        label.set_class(error, "-error")

    def show_filters(self, filters: BarFilters) -> None:
        self.query_one("#status-filters", Label).update(
            f"filter {filters.describe()}" if filters else ""
        )

    def show_stale(self, count: int) -> None:
        label = self.query_one("#status-stale", Label)
        label.update(
            f"⚠ {count} hit{'s' * (count != 1)} changed on disk: kbase index" if count else ""
        )


def _marked(text: str, spans: list[tuple[int, int]], style: str) -> Content:
    """``text`` fit to print (``printable``), its ``spans`` (offsets into ``text``) styled."""
    parts: list = []
    pos = 0
    for a, b in spans:
        parts += [printable(text[pos:a]), (printable(text[a:b]), style)]
        pos = b
    parts.append(printable(text[pos:]))
    return Content.assemble(*parts)
