"""Screens: the main browser and the help overlay.

The main screen owns the workers. Every index or model call runs in a thread worker
(``@work(thread=True, exclusive=True, group=...)``) on a ``KB`` borrowed from the app's pool; a
worker reports back with a message, and a result that a newer request has superseded is
dropped (each request carries a generation number).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Protocol, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, OptionList, Static
from textual.worker import get_current_worker

from kbase.api import has_words
from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.paths import editor_command
from kbase.records import DocRef, Status
from kbase.text import printable
from kbase.tui.logic import (
    MODES,
    SEARCH_LIMIT,
    BarFilters,
    KBPool,
    Location,
    embedding_coverage,
    sibling_abspath,
)
from kbase.tui.messages import (
    DocumentLoaded,
    EmbedProgress,
    LinksLoaded,
    ModelReady,
    NoteResolved,
    RelatedLoaded,
    SearchDone,
    StatusLoaded,
    WorkFailed,
)
from kbase.tui.widgets import (
    FilterBar,
    LinksPane,
    PreviewPane,
    PreviewScroll,
    ResultsList,
    SearchBar,
    StatusLine,
)


class Services(Protocol):
    """What the screens use of the app (kbase.tui.app.KbaseApp, which imports this module)."""

    pool: KBPool
    debounce: float
    handoff: Any  # the KB.serve_searches server, once the model is loaded

    def notify_error(self, error: BaseException, *, title: str = "kbase") -> None: ...

    def open_in_editor(self, argv: list[str]) -> None: ...


def services(widget) -> Services:
    """The app behind ``widget``, typed as the services the screens use."""
    return cast(Services, widget.app)


def _reports(what: str):
    """A worker body that returns the message to post, or yields several (None: nothing). Once
    the worker is cancelled (a newer request of its group started) nothing more is posted; an
    exception becomes one WorkFailed(what, error, gen), ``gen`` being the worker's first
    argument when it is a request's generation number."""

    def decorate(body):
        @functools.wraps(body)
        def run(self, *args):
            worker = get_current_worker()
            try:
                out = body(self, *args)
                for message in out if inspect.isgenerator(out) else (out,):
                    if worker.is_cancelled:
                        return
                    if message is not None:
                        self.post_message(message)
            except Exception as e:
                if not worker.is_cancelled:
                    self.post_message(
                        WorkFailed(what, e, args[0] if args and isinstance(args[0], int) else 0)
                    )

        return run

    return decorate


def _searched(kb, gen: int, query: str, filters: BarFilters, mode: str) -> SearchDone:
    """The search, and when it finds nothing, the filters that keep no note at all (a tag
    misspelt in the filter bar: the preview says so)."""
    hits = kb.search(query, mode=mode, limit=SEARCH_LIMIT, **filters.kwargs())
    why = []
    if not hits and (filters.path or filters.tags):
        why = kb.filters_that_keep_nothing(path=filters.path or None, tags=filters.tags)
    return SearchDone(gen, mode, query, hits, why)


MODE_HELP = "Search mode: keyword → semantic → hybrid"
RELATED_LIMIT = 8  # related notes under the links (kbase related)
# Chunks without vectors are embedded in the background once nobody has typed for this long.
IDLE_S = 2.0
EDIT_HELP = "Open the note in $EDITOR at the hit's line"
START_MESSAGE = "Type to search. Press ? for help."


class MainScreen(Screen):
    """Search box, results, preview, links, status line."""

    BINDINGS = [
        Binding("ctrl+t", "cycle_mode", "Mode", priority=True, tooltip=MODE_HELP),
        Binding(
            "ctrl+f", "toggle_filters", "Filters", priority=True, tooltip="Path and tag filters"
        ),
        Binding("ctrl+o", "open_editor", "Edit", priority=True, tooltip=EDIT_HELP),
        Binding(
            "ctrl+r",
            "reload",
            "Reload",
            show=False,
            priority=True,
            tooltip="Read the index again (after kbase index)",
        ),
        Binding("alt+left", "back", "Back", show=False, tooltip="Back to the previous note"),
        Binding("alt+right", "forward", "Forward", show=False, tooltip="Forward again"),
        Binding("slash", "focus_search", "Search", show=False, tooltip="Go to the search box"),
        Binding("escape", "escape", "Search box ⇄ results", show=False),
        Binding("m", "cycle_mode", "Mode", show=False, tooltip=MODE_HELP),
        Binding("e", "open_editor", "Edit", show=False, tooltip=EDIT_HELP),
        Binding(
            "left_square_bracket", "back", "Back", show=False, tooltip="Back to the previous note"
        ),
        Binding("right_square_bracket", "forward", "Forward", show=False, tooltip="Forward again"),
        Binding("1", "focus_pane('results')", "Results pane", show=False),
        Binding("2", "focus_pane('preview')", "Preview pane", show=False),
        Binding("3", "focus_pane('links')", "Links pane", show=False),
        Binding("down", "focus_pane('results')", "Go to the results", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.mode = "keyword"
        self.mode_chosen = False  # the user picked a mode; status must not override it
        self.has_embeddings = False
        self.model_ready = False
        self.model_failed = False
        self.index_ok: bool | None = None  # None until the first status() answers
        self.filters = BarFilters()
        self.history: list[Location] = []
        self.history_pos = -1
        self._links_choice: dict[
            int, int | None
        ] = {}  # history position -> links pane row when left
        self.doc: DocRef | None = None  # the DocRef in the preview
        self._gen = 0  # search generation
        self._final_gen = 0  # generation whose final (non-keyword-placeholder) results are shown
        self._request = 0  # preview generation
        self._debounce: Timer | None = None
        self._links_note: Location | None = None
        self._outlinks: list = []
        self._index_problem = ""
        self._last_typed = time.monotonic()  # of the last change in the search box (or the start)
        self._status: Status | None = None
        self._embedding = False  # the background embedding worker runs
        self._read_only = False  # the index is read as it is (a read-only folder or mount)

    # --- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield SearchBar(id="search")
        yield FilterBar(id="filters")
        with Horizontal(id="body"):
            yield ResultsList(id="results")
            with Vertical(id="right"):
                yield PreviewPane(id="preview")
                yield LinksPane(id="links")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ResultsList).set_title()
        self.query_one(PreviewPane).show_message(START_MESSAGE)
        self._show_mode()
        self.query_one(SearchBar).input.focus()
        self.load_status()

    # --- widgets ------------------------------------------------------------------------------
    @property
    def search_input(self) -> Input:
        return self.query_one(SearchBar).input

    @property
    def results(self) -> ResultsList:
        return self.query_one(ResultsList)

    @property
    def preview(self) -> PreviewPane:
        return self.query_one(PreviewPane)

    @property
    def links(self) -> LinksPane:
        return self.query_one(LinksPane)

    @property
    def search_pending(self) -> bool:
        """A search is scheduled: typing stopped less than the debounce ago."""
        return self._debounce is not None

    @property
    def vectors_available(self) -> bool:
        return self.has_embeddings and not self.model_failed

    def _show_mode(self) -> None:
        note = ""
        if self.model_failed:
            note = "(model unavailable)"
        elif self.mode != "keyword" and self.has_embeddings and not self.model_ready:
            note = "(loading model)"
        self.query_one(SearchBar).show_mode(
            self.mode, available=self.vectors_available or self.mode == "keyword", note=note
        )

    # --- searching ----------------------------------------------------------------------------
    @on(Input.Changed, "#query")
    def _query_changed(self, event: Input.Changed) -> None:
        self._last_typed = time.monotonic()
        self._schedule_search()

    @on(Input.Submitted, "#query")
    def _query_submitted(self, event: Input.Submitted) -> None:
        if self._debounce is not None:
            self._debounce.stop()
            self.start_search()
        if self.results.option_count:
            self.results.focus()

    @on(FilterBar.Changed)
    def _filters_changed(self, event: FilterBar.Changed) -> None:
        self.filters = event.filters
        self.query_one(StatusLine).show_filters(self.filters)
        self._schedule_search()

    def _schedule_search(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(services(self).debounce, self.start_search)

    def start_search(self) -> None:
        """Search for what the box holds now: keyword at once, then (hybrid/semantic) the
        vector search in a second worker whose results replace the keyword ones."""
        self._debounce = None
        self._gen += 1
        query = self.search_input.value
        if not has_words(query):  # nothing to search for yet (KB.search would refuse it)
            self.workers.cancel_group(self, "search-keyword")
            self.workers.cancel_group(self, "search-vector")
            self.results.clear_hits()
            self.query_one(StatusLine).show_stale(0)
            self._show_nothing(START_MESSAGE)
            return
        if self.index_ok is False:
            self.results.clear_hits(self._index_problem)
            return
        vector = self.mode != "keyword" and self.vectors_available
        self.results.set_title(pending="searching…")
        self.search_keyword(self._gen, query, self.filters)
        if vector:
            self.search_vector(self._gen, query, self.filters, self.mode)
        else:
            self.workers.cancel_group(self, "search-vector")

    @work(thread=True, exclusive=True, group="search-keyword", exit_on_error=False)
    @_reports("search")
    def search_keyword(self, gen: int, query: str, filters: BarFilters) -> SearchDone:
        with services(self).pool.kb() as kb:
            return _searched(kb, gen, query, filters, "keyword")

    @work(thread=True, exclusive=True, group="search-vector", exit_on_error=False)
    @_reports("vector")
    def search_vector(
        self, gen: int, query: str, filters: BarFilters, mode: str
    ) -> SearchDone | None:
        with services(self).pool.vector_kb() as kb:  # queued behind the model load / older search
            if get_current_worker().is_cancelled:
                return None
            return _searched(kb, gen, query, filters, mode)

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        if message.gen != self._gen:
            return  # superseded by a newer query
        vector_pending = (
            message.source == "keyword" and self.mode != "keyword" and self.vectors_available
        )
        if message.source == "keyword" and self._final_gen == message.gen:
            return  # the hybrid/semantic results arrived first; keep them
        if not vector_pending:
            self._final_gen = message.gen
        pending = f"{self.mode} results coming…" if vector_pending else ""
        # The same query again (its hybrid results, or the search run again after the editor):
        # a note the user went to from its hit, by a link, stays in the preview.
        followed = message.query == self.results.query_text and self.history_pos > 0
        self.results.show_hits(
            message.hits, source=message.source, query=message.query, pending=pending
        )
        self.query_one(StatusLine).show_stale(sum(1 for h in message.hits if h.stale))
        hit = self.results.current
        if hit is None:
            why = "; ".join(message.why)
            self._show_nothing(f"No results: {why}." if why else "No results.")
        elif not followed:
            self._show_hit(hit)

    @on(OptionList.OptionHighlighted, "#results")
    def _result_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        hit = self.results.current
        if hit is not None:
            self._show_hit(hit)

    @on(OptionList.OptionSelected, "#results")
    def _result_selected(self, event: OptionList.OptionSelected) -> None:
        self.preview.focus_view()

    def _show_hit(self, hit) -> None:
        location = Location(
            hit.path, hit.abspath, hit.line, None, hit.title, chunk_id=hit.chunk_id, page=hit.page
        )
        if self.history and self.history[self.history_pos] == location and self.history_pos == 0:
            return  # already showing it
        self.history, self.history_pos = [location], 0
        self._links_choice.clear()
        # the hit's snippet at once; its note (loaded in a thread, then rendered) replaces it
        self.preview.show_pending(
            hit.title, f"{hit.path}:{hit.line}", f"{hit.heading_path}\n\n{hit.snippet}".strip()
        )
        self.show_location(location)

    def _show_nothing(self, message: str) -> None:
        """No hit to show: the preview says ``message`` and the links pane is empty. The note
        shown before is forgotten (the same hit found again is shown again) and one still
        loading is dropped."""
        self._request += 1
        self.history, self.history_pos = [], -1
        self._links_choice.clear()
        self.doc, self._links_note, self._outlinks = None, None, []
        self.preview.show_message(message)
        self.links.clear_links()

    # --- preview and links --------------------------------------------------------------------
    def show_location(self, location: Location) -> None:
        self._request += 1
        self.load_document(self._request, location)
        self.load_links(self._request, location)

    @work(thread=True, exclusive=True, group="document", exit_on_error=False)
    @_reports("document")
    def load_document(self, request: int, location: Location) -> DocumentLoaded:
        with services(self).pool.kb() as kb:
            doc = kb.document(location.target)
            if location.anchor and location.line is None:
                try:  # a heading's or a block's section, as kbase show opens it
                    r = kb.region(f"{doc.path}#{location.anchor}")
                    location = replace(location, line=r.first, span=(r.first, r.last))
                except KbaseError:
                    pass  # no such heading or block: the note from the top
            if location.chunk_id is not None and location.span is None:
                try:
                    chunk = kb.chunk(location.chunk_id)
                    location = replace(location, span=(chunk.line, chunk.end_line))
                except KbaseError:
                    pass  # replaced since the search: the hit's line is still shown
        return DocumentLoaded(request, location, doc)

    @work(thread=True, exclusive=True, group="links", exit_on_error=False)
    @_reports("links")
    def load_links(self, request: int, location: Location) -> LinksLoaded:
        with services(self).pool.kb() as kb:
            return LinksLoaded(
                request, location, kb.links(location.target), kb.backlinks(location.target)
            )

    @work(thread=True, exclusive=True, group="related", exit_on_error=False)
    @_reports("related notes")
    def load_related(self, request: int, location: Location) -> RelatedLoaded:
        with services(
            self
        ).pool.vector_kb() as kb:  # the KB that holds the vectors in memory (no model needed)
            return RelatedLoaded(
                request, location, kb.related(location.target, limit=RELATED_LIMIT)
            )

    @on(DocumentLoaded)
    def _document_loaded(self, message: DocumentLoaded) -> None:
        if message.request != self._request:
            return
        self.doc = message.doc
        location = message.location
        if location.abspath is None:
            location = replace(location, abspath=message.doc.abspath)
        self.preview.show_document(message.doc, location)

    @on(LinksLoaded)
    def _links_loaded(self, message: LinksLoaded) -> None:
        if message.request != self._request:
            return
        self._links_note, self._outlinks = message.location, message.outlinks
        self.links.show_links(message.location, message.outlinks, message.backlinks)
        self.load_related(message.request, message.location)  # listed below the links
        row = self._links_choice.get(self.history_pos)
        if (
            row is not None
            and row < self.links.option_count
            and not self.links.get_option_at_index(row).disabled
        ):
            self.links.highlighted = row  # back (or forward) here: the link that was followed

    @on(RelatedLoaded)
    def _related_loaded(self, message: RelatedLoaded) -> None:
        if message.request == self._request:
            self.links.show_related(message.location, message.related)

    @on(LinksPane.Follow)
    def _follow(self, message: LinksPane.Follow) -> None:
        if message.entry.location is None:
            self.app.notify(
                printable(f"{message.entry.label} does not lead to a note in the index"),
                title="Unresolved link",
                severity="warning",
                markup=False,
            )
            return
        self.follow(message.entry.location)

    @on(PreviewPane.FollowLink)
    def _follow_preview_link(self, message: PreviewPane.FollowLink) -> None:
        # The links pane already resolved this note's links: use that answer when it has one.
        for link in self._outlinks:
            if link.target == message.name and link.target_path and link.target_id is not None:
                abspath = (
                    sibling_abspath(self._links_note, link.target_path)
                    if self._links_note
                    else None
                )
                self.follow(
                    Location(
                        link.target_path, abspath, None, message.anchor, link.target_title or ""
                    )
                )
                return
        self.resolve_note(message.name, message.anchor)

    @work(thread=True, exclusive=True, group="resolve", exit_on_error=False)
    @_reports("resolve")
    def resolve_note(self, name: str, anchor: str | None) -> NoteResolved:
        with services(self).pool.kb() as kb:
            note = kb.note(name)
        return NoteResolved(Location(note.path, None, None, anchor, note.title))

    @on(NoteResolved)
    def _note_resolved(self, message: NoteResolved) -> None:
        self.follow(message.location)

    def follow(self, location: Location) -> None:
        """Show ``location`` and remember it after the current one (forward history is dropped)."""
        self._remember_links_choice()
        self.history = self.history[: self.history_pos + 1] + [location]
        self._links_choice = {
            pos: row for pos, row in self._links_choice.items() if pos <= self.history_pos
        }
        self.history_pos = len(self.history) - 1
        self.show_location(location)

    def _remember_links_choice(self) -> None:
        """Which row of the links pane was chosen on the note being left (restored on return)."""
        if self.history and self._links_note == self.history[self.history_pos]:
            self._links_choice[self.history_pos] = self.links.highlighted

    def action_back(self) -> None:
        if self.history_pos > 0:
            self._remember_links_choice()
            self.history_pos -= 1
            self.show_location(self.history[self.history_pos])
        else:
            self.app.bell()

    def action_forward(self) -> None:
        if self.history_pos < len(self.history) - 1:
            self._remember_links_choice()
            self.history_pos += 1
            self.show_location(self.history[self.history_pos])
        else:
            self.app.bell()

    # --- index status and the model -----------------------------------------------------------
    @work(thread=True, exclusive=True, group="status", exit_on_error=False)
    @_reports("status")
    def load_status(self) -> StatusLoaded:
        with services(self).pool.kb() as kb:
            status = kb.status()
            read_only = any("read-only" in n for n in getattr(kb, "notices", ()))
            return StatusLoaded(status, kb.default_mode() != "keyword", read_only)

    @on(StatusLoaded)
    def _status_loaded(self, message: StatusLoaded) -> None:
        status, first = message.status, self.index_ok is not True
        self.index_ok = True
        self.has_embeddings = message.has_embeddings
        self._status = status
        self._read_only = self._read_only or message.read_only
        # An index with vectors gets the rest of them (kbase index interrupted, notes changed
        # meanwhile); one indexed with --no-embed stays keyword-only until kbase embed.
        if (
            message.has_embeddings
            and status.embedded_chunks < status.chunks
            and not self._embedding
        ):
            self._embedding = True
            self.embed_in_background()
        self._show_status()
        if message.has_embeddings and not self.mode_chosen:
            self.mode = "hybrid"
        if not message.has_embeddings:
            self.mode = "keyword"
        if message.has_embeddings and not self.model_ready and not self.model_failed:
            self.load_model()
        self._show_mode()
        if first and self.search_input.value.strip():
            self.start_search()

    def _show_status(self) -> None:
        status = self._status
        if status is None:
            return
        self.query_one(StatusLine).show_index(
            f"{status.documents:,} notes · {status.chunks:,} chunks · {embedding_coverage(status)}"
            + (" · embedding while idle" if self._embedding else "")
            + (" · read-only index" if self._read_only else "")
        )

    @work(thread=True, exclusive=True, group="embed", exit_on_error=False)
    @_reports("embed")
    def embed_in_background(self) -> Iterator[EmbedProgress]:
        """Embed the chunks that have no vector yet, newest notes first, a step at a time while
        nobody types (a step stops between two batches once typing starts again). Another
        process writing the index (kbase index, watch) goes first: this waits its turn."""
        worker = get_current_worker()

        def busy() -> bool:
            return worker.is_cancelled or time.monotonic() - self._last_typed < IDLE_S

        while not worker.is_cancelled:
            if busy():
                time.sleep(0.25)
                continue
            with services(self).pool.vector_kb() as kb:  # the model is loaded once, for both uses
                result = kb.embed_step(should_stop=busy)
            if result is None:  # another writer
                time.sleep(2)
                continue
            yield EmbedProgress(result.remaining)
            if result.remaining == 0:
                return

    @on(EmbedProgress)
    def _embed_progress(self, message: EmbedProgress) -> None:
        if self._status is not None:
            self._status = replace(
                self._status, embedded_chunks=max(0, self._status.chunks - message.remaining)
            )
        self._embedding = message.remaining > 0
        if not self.has_embeddings or not self._embedding:
            self.load_status()  # the first vectors: semantic search is possible; or all done
        self._show_status()

    @work(thread=True, exclusive=True, group="model", exit_on_error=False)
    @_reports("model")
    def load_model(self) -> ModelReady:
        """Load the embedding model (onnxruntime is imported here, never before the first paint)."""
        with services(self).pool.vector_kb() as kb:
            # Loads the model, checks it made the index's vectors, and reads the vectors
            # into memory: the first real query is then as fast as the others.
            kb.search("warm up", mode="semantic", limit=1)
            app = services(self)
            serve = getattr(kb, "serve_searches", None)  # (a test's stand-in KB may have none)
            if serve is not None and app.handoff is None:  # kbase search from a shell: here
                app.handoff = serve(use=app.pool.vector_kb)
        return ModelReady()

    @on(ModelReady)
    def _model_ready(self, message: ModelReady) -> None:
        self.model_ready = True
        self._show_mode()

    @on(WorkFailed)
    def _work_failed(self, message: WorkFailed) -> None:
        what = message.what
        if what == "embed":
            self._embedding = False
            self._show_status()
            self.app.notify(
                f"Embedding in the background stopped: {_one_line(message.error)}",
                severity="warning",
            )
            return
        if what == "status":
            self.index_ok = False
            problem = _one_line(message.error)
            hint = getattr(message.error, "hint", None)
            self.query_one(StatusLine).show_index(problem, error=True)
            missing = problem.startswith("no index")
            self._index_problem = "No index yet" if missing else "Index unavailable"
            self.results.clear_hits(self._index_problem)
            self.preview.show_message(
                problem
                + (f"\n\nhint: {hint}" if hint else "")
                + ("\n\nBuild it with:  kbase index PATH" if missing else "")
                + "\n\nThen press ctrl+r."
            )
        elif what in ("model", "vector"):
            if what == "vector" and (
                message.gen != self._gen or isinstance(message.error, InputError)
            ):
                return  # superseded, or the query's fault, which the keyword search says
            if not isinstance(message.error, DatabaseError):  # not a passing lock: the model
                self.model_failed = True
                self.mode = "keyword"
                self._show_mode()
            # The keyword results stay, as the final answer for this query.
            self._final_gen = self._gen
            self.results.set_title(pending="")
        elif what == "search":
            if message.gen != self._gen:
                return
            if isinstance(message.error, InputError):  # the query's fault (path:[): say why
                self.results.clear_hits()
                hint = message.error.hint
                self._show_nothing(message.error.message + (f"\n\nhint: {hint}" if hint else ""))
        elif what in ("document", "links", "related notes") and message.gen != self._request:
            return
        services(self).notify_error(message.error, title=f"kbase ({what})")

    # --- actions ------------------------------------------------------------------------------
    def action_cycle_mode(self) -> None:
        if self.index_ok and not self.has_embeddings:
            self.app.notify(
                "Semantic and hybrid search need embeddings; this index has none."
                "\nhint: run kbase embed",
                title="Keyword search only",
                severity="warning",
            )
            return
        if self.model_failed:
            self.app.notify(
                "The embedding model could not be loaded; only keyword search works.",
                title="Keyword search only",
                severity="warning",
            )
            return
        if self.index_ok is None:
            self.app.notify("Still opening the index…", severity="information")
            return
        if not self.index_ok:
            self.app.notify(
                f"{self._index_problem}.\nhint: kbase index PATH, then ctrl+r", severity="warning"
            )
            return
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.mode_chosen = True
        self._show_mode()
        self.start_search()

    def action_toggle_filters(self) -> None:
        bar = self.query_one(FilterBar)
        if bar.has_class("-visible") and bar.has_focus_within:
            self._leave_filters(bar)
        else:
            bar.add_class("-visible")
            bar.query_one("#filter-path", Input).focus()

    def set_filters(self, path: str = "", tags: str = "") -> None:
        """Set the filters (the filter bar shows them; the search re-runs)."""
        bar = self.query_one(FilterBar)
        bar.set_filters(path, tags)
        bar.set_class(bool(path or tags), "-visible")

    def action_clear_filters(self) -> None:
        self.set_filters()

    def action_focus_search(self) -> None:
        self.search_input.focus()

    def action_focus_pane(self, pane: str) -> None:
        if pane == "results":
            self.results.focus()
        elif pane == "preview":
            self.preview.focus_view()
        else:
            self.links.focus()

    def action_escape(self) -> None:
        focused = self.focused
        bar = self.query_one(FilterBar)
        if focused is self.search_input:
            self.results.focus()  # leave the box: single keys (q, ?, j/k, [ ]) work again
        elif bar.has_focus_within:
            self._leave_filters(bar)
        else:
            self.search_input.focus()

    def _leave_filters(self, bar: FilterBar) -> None:
        """To the results, not the search box: a command key (e, q, [) typed next must not
        replace the query, which the box selects when it gets the focus."""
        if not self.filters:
            bar.remove_class("-visible")
        self.results.focus()

    def action_reload(self) -> None:
        self.index_ok = None if self.index_ok is False else self.index_ok
        self.model_failed = False  # kbase embed may have run meanwhile: try the model again
        self.load_status()
        self.start_search()

    def action_open_editor(self) -> None:
        location = self.history[self.history_pos] if self.history else None
        if location is None:
            self.app.notify("Nothing to open: pick a result first.", severity="warning")
            return
        path = location.abspath or (self.doc.abspath if self.doc is not None else location.path)
        line = location.line or self.preview.current_line()
        try:
            argv = editor_command(path, line)  # falls back to vi
        except ValueError as e:  # $EDITOR with an unclosed quote: it stopped the app
            services(self).notify_error(KbaseError(*e.args))
            return
        assert argv is not None
        services(self).open_in_editor(argv)
        self.start_search()  # the file may have changed: refresh the "changed on disk" marks


# Arrows are ambiguous-width characters: many terminals (CJK locales, some fonts) draw them two
# cells wide, which pushed the descriptions of their help rows out of line. Words are one cell each.
_ARROW_WORDS = str.maketrans({"←": "left", "→": "right", "↑": "up", "↓": "down"})


def help_keys(display: str) -> str:
    """A key as the help lists it: Textual's display ('alt+←'), arrows spelled out ('alt+left')."""
    return display.translate(_ARROW_WORDS)


def _one_line(error: BaseException) -> str:
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return message.splitlines()[0] if message else type(error).__name__


class HelpScreen(ModalScreen):
    """Every key binding, grouped by where it works."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close help"),
        Binding("q", "dismiss", "Close help", show=False),
        Binding("question_mark", "dismiss", "Close help", show=False),
        Binding("f1", "dismiss", "Close help", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("kbase browse: keys", id="help-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(self.help_text(), id="help-text")
            yield Static(
                "esc closes · the mouse works too: click results, links and panes,"
                " scroll with the wheel",
                id="help-hint",
            )

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def help_text(self) -> Content:
        rows = []
        for section, entries in self.sections():
            rows.append(Content.styled(section, "bold $text-accent"))
            for keys, what in entries:
                rows.append(Content.assemble((f"  {keys:<22}", "bold"), what))
            rows.append(Content(""))
        return Content("\n").join(rows[:-1])

    def sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """(section, [(keys, description)]): the bindings of the app, the main screen and the
        panes (read from their BINDINGS, so none is missing), then the keys Textual's own
        widgets handle."""

        def chord(key: str) -> bool:  # works while typing in a box
            return key.startswith(("ctrl+", "alt+")) or (key[:1] == "f" and key[1:].isdigit())

        def from_bindings(*classes, keep=lambda key: True) -> list[tuple[str, str]]:
            merged: dict[str, list[str]] = {}
            for cls in classes:
                for b in cls.BINDINGS:
                    if not isinstance(b, Binding):
                        b = Binding(*b)
                    for key in (k.strip() for k in b.key.split(",")):
                        if not keep(key):
                            continue
                        display = help_keys(
                            self.app.get_key_display(Binding(key, b.action, b.description))
                        )
                        keys = merged.setdefault(b.tooltip or b.description, [])
                        if display not in keys:
                            keys.append(display)
            return [(" ".join(keys), what) for what, keys in merged.items()]

        top = (type(self.app), MainScreen)
        return [
            (
                "Anywhere",
                from_bindings(*top, keep=chord)
                + [
                    ("^p", "Command palette (modes, filters, help, …)"),
                    ("tab shift+tab", "Next / previous pane"),
                ],
            ),
            (
                "When not typing in a box",
                from_bindings(*top, keep=lambda k: not chord(k) and k != "down"),
            ),
            (
                "Search box",
                [("enter", "Search now and go to the results")]
                + from_bindings(MainScreen, keep=lambda k: k == "down")
                + [
                    ("esc", "Leave the box (to the results)"),
                    ("^u", "Clear the query"),
                ],
            ),
            (
                "Results",
                from_bindings(ResultsList)
                + [
                    ("up down pgup pgdn", "Move; the preview follows"),
                    ("home end", "First / last result"),
                    ("enter", "Read the note in the preview"),
                    ("click", "Pick a result"),
                ],
            ),
            (
                "Preview",
                from_bindings(PreviewScroll)
                + [
                    ("up down pgup pgdn", "Scroll"),
                    ("click a link", "Follow it (alt+left comes back)"),
                ],
            ),
            (
                "Links",
                from_bindings(LinksPane)
                + [
                    ("up down", "Move"),
                    ("enter or click", "Follow the link (outlink or backlink)"),
                ],
            ),
            (
                "Filter bar (^f)",
                [
                    (
                        "path",
                        "Folder prefix or glob, e.g. journal/ or tech/*.md;"
                        " -archive/ leaves a folder out",
                    ),
                    ("tags", "Tags separated by spaces; nested tags match"),
                    ("esc", "To the results"),
                ],
            ),
            ("Help", from_bindings(HelpScreen)),
        ]
