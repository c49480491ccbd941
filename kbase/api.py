"""The Python API: ``kb = kbase.open(path)``. The CLI and the TUI use it too."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import apsw

from kbase.errors import DatabaseError, IndexBusyError, InputError, ModelUnavailable
from kbase.paths import default_db_path
from kbase.records import Hits
from kbase.search import MAX_SEARCH_LIMIT as MAX_SEARCH_LIMIT  # (for the faces)
from kbase.search import SEARCH_TIMEOUT
from kbase.store import db

if TYPE_CHECKING:
    from kbase.embed.embedder import Embedder
    from kbase.embed.nearest import VectorCache
    from kbase.embed.switch import Models
    from kbase.embed.vectors import EmbedProgress
    from kbase.handoff import Server
    from kbase.indexer.pipeline import Progress
    from kbase.ingest.chunk import Chunking, ChunkSettings
    from kbase.notes.graph import LinkHit, Note
    from kbase.notes.reading import NoteText
    from kbase.notes.resolve import Region
    from kbase.records import (
        CheckReport,
        CompactReport,
        DocRef,
        EmbedReport,
        IndexReport,
        ModelHint,
        ModelInfo,
        NoteEntry,
        ParsedDoc,
        RelatedResult,
        RootInfo,
        RootMove,
        RootRemoval,
        SqlResult,
        Status,
    )
    from kbase.search.hits import ChunkRef
    from kbase.watch import WatchBatch


P = ParamSpec("P")
R = TypeVar("R")


def ask_running(
    path: str | os.PathLike[str], args: dict[str, Any]
) -> tuple[Hits, list[str], dict[str, Any]] | None:
    """``KB.search(**args)`` on the index file ``path`` as a running kbase that serves it answers
    it (kbase.handoff.ask_about: the hits, the notices the search gave, and what the server says
    of the index: its default mode and coverage), or None when none does: for a one-shot
    process that has not opened the index."""
    from kbase import handoff

    return handoff.ask_about(path, args, SEARCH_TIMEOUT)


def read_running(answer: Any) -> tuple[Hits, list[str], dict[str, Any]] | None:
    """``ask_running``'s result from an answer kbase.handoff_client.exchange received (asked
    with ``about``; kbase.cli.quick asks without importing kbase.api first), or None."""
    from kbase import handoff

    return handoff.read_about(answer)


# What a running kbase prints for a search a shell hands it (kbase.cli.quick.printed), when the
# command line that started it says (``print_handed_searches``); else it answers hits.
_printer: Callable[[HandedSearch, dict[str, Any], dict[str, Any]], Any] | None = None


def print_handed_searches(
    printer: Callable[[HandedSearch, dict[str, Any], dict[str, Any]], Any],
) -> None:
    """Let the servers this process starts (``KB.serve_searches``) print a search for the shell
    that hands it over: ``printer(kb, args, options)`` gives (lines: (on stderr?, text) each,
    exit status) for KB.search's ``args`` and the shell's ``options`` (fmt, color, explain). The
    command line sets it (kbase watch, mcp, browse): the shell then prints what it receives,
    having imported almost nothing (kbase.handoff_client)."""
    global _printer
    _printer = printer


class HandedSearch:
    """A KB as a search handed over from the shell uses it (``print_handed_searches``): the
    search runs in this process, each notice it gives passed to ``on_notice``."""

    def __init__(self, kb: KB) -> None:
        self.kb = kb
        self.on_notice: Callable[[str], None] | None = None

    def search(self, query: str, **options: Any) -> Hits:
        before = len(self.kb.notices)
        hits = self.kb._search_here(query, **options)
        for message in self.kb.notices[before:]:
            if self.on_notice is not None:
                self.on_notice(message)
        return hits

    def default_mode(self) -> str:
        return self.kb.default_mode()

    def coverage(self) -> tuple[int, int]:
        return self.kb.coverage()

    def filters_that_keep_nothing(
        self, *, path: str | None = None, tags: Sequence[str] = ()
    ) -> list[str]:
        return self.kb.filters_that_keep_nothing(path=path, tags=tags)


class KB:
    """An open kbase index. Reads use a read-only connection; ``index`` opens a writer on demand.

    >>> kb = kbase.open("notes.db")
    >>> kb.index(["~/notes"])
    >>> for hit in kb.search("sqlite wal", limit=5): print(hit.path, hit.line, hit.snippet)
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | None = None,
        cache_vectors: bool = True,
    ) -> None:
        """``cache_vectors``: keep the vectors in memory for fast repeated semantic queries (a
        long-lived process); one-shot commands pass False and query sqlite-vec directly."""
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self._reader: apsw.Connection | None = None
        self._sql_ready = False  # kbase_embed() and kbase_search() registered on the reader
        self._embedder = embedder
        self._explicit_embedder = embedder is not None  # else: the index's own model
        self.vector_cache: VectorCache | None = None
        if cache_vectors:
            from kbase.embed.nearest import VectorCache

            self.vector_cache = VectorCache()
        self.search_timeout = SEARCH_TIMEOUT  # seconds, for each search
        # A one-shot process (the CLI): hand hybrid and semantic searches to a running kbase that
        # serves this index (``serve_searches``; kbase.handoff), searching here when none does.
        self.hand_off = False
        self.notices: list[str] = []  # see _notice
        self.on_notice: Callable[[str], None] | None = None
        self._said_immutable = False

    @property
    def embedder(self) -> Embedder:
        """The index's embedding model (the one its vectors were made with; all-MiniLM-L6-v2 for
        an index without vectors), or the one given to ``KB()``. Loaded on first use
        (milliseconds; the very first use builds its cached graph, a few seconds)."""
        if self._explicit_embedder and self._embedder is not None:
            return self._embedder
        from kbase.embed import catalog
        from kbase.embed.vectors import stored_fingerprint

        stored = self._read(stored_fingerprint) if self.path.exists() else None
        if self._embedder is None or (stored is not None and self._embedder.fingerprint != stored):
            self._embedder = catalog.for_index(stored)
            notice = getattr(self._embedder, "notice", None)
            if notice:  # e.g. its cache cannot be written: it runs all the same, say why
                self._notice(notice)
            model: Any = self._embedder
            if self.vector_cache is not None and hasattr(model, "many_queries"):
                model.many_queries = True  # a long-lived process: see MiniLMEmbedder
        return self._embedder

    def model(self) -> ModelInfo:
        """The index's embedding model, and the one it is switching to (see ``embed``)."""
        from kbase.embed import catalog, vectors

        def read(con: apsw.Connection) -> ModelInfo:
            current, nxt = vectors.stored_fingerprint(con), vectors.next_fingerprint(con)
            done, total = vectors.switch_progress(con)
            from kbase.records import ModelInfo

            return ModelInfo(
                name=catalog.name_of(current) or catalog.DEFAULT,
                fingerprint=current,
                switching_to=catalog.name_of(nxt),
                switch_done=done,
                switch_total=total,
            )

        return self._read(read)

    # connections -------------------------------------------------------------------------------
    @property
    def reader(self) -> apsw.Connection:
        """A read-only connection (opened on first use; the index must exist)."""
        if self._reader is None:
            self._reader = db.connect(self.path, readonly=True)
            why = db.IMMUTABLE.get(str(self.path.absolute()))
            if why and not self._said_immutable:
                self._said_immutable = True
                self._notice(
                    f"index {self.path}: {why}: reading it as it is"
                    " (commands that write to it cannot)"
                )
        return self._reader

    def _notice(self, message: str) -> None:
        """Something the user should know once (not an error): kept in ``notices`` and passed
        to ``on_notice`` if set (the CLI prints it on stderr)."""
        self.notices.append(message)
        if self.on_notice is not None:
            self.on_notice(message)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
            self._sql_ready = False

    def refresh(self) -> None:
        """Forget the read connection and the vectors held in memory, so that the next read opens
        the file again: for a long-lived process whose index file was replaced (deleted and
        built again) under the same name."""
        from kbase.embed.nearest import VectorCache

        self.close()
        if self.vector_cache is not None:
            self.vector_cache = VectorCache()

    def __enter__(self) -> KB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing -----------------------------------------------------------------------------------
    def index(
        self,
        paths: Sequence[str | os.PathLike[str]] = (),
        *,
        embed: bool | None = None,
        settings: ChunkSettings | None = None,
        extensions: Sequence[str] | None = None,
        max_size: int | None = None,
        progress: Progress | None = None,
        embed_progress: EmbedProgress | None = None,
        follow_outside: bool = False,
        model: str | None = None,
        download: bool = False,
        switch_progress: EmbedProgress | None = None,
        on_keyword_ready: Callable[[IndexReport], None] | None = None,
        exclude: Sequence[str] = (),
        default_extensions: Sequence[str] | None = None,
        remember_embed: bool = False,
    ) -> IndexReport:
        """Index folders or files (all known roots when ``paths`` is empty; see ``pipeline.index``),
        then embed the new and changed chunks. ``embed``: None (the default) does what the index
        is set to do (``auto_embed``: yes, unless it was made keyword-only with
        ``set_auto_embed(False)``, as ``kbase index --no-embed`` does); True or False decide for
        this run only, or from now on with ``remember_embed`` (recorded before any file is
        indexed, so an interrupted run keeps it). Keyword search works as soon as the first step
        is done. A symlink leading outside every indexed root is skipped (``report.skipped`` says
        so) unless ``follow_outside``, which the index remembers for the roots given with it.
        ``on_keyword_ready`` is called with the report (its files, skips and warnings final) as
        soon as the files are indexed, before any embedding: a face tells of skipped files then,
        not minutes later. ``exclude``: gitignore patterns left out of every root (the user's
        config file's); each root's ``.kbase.toml`` adds its own, and sets the extensions when
        ``extensions`` is not given (else ``default_extensions``, else kbase's).

        The paths are checked before anything is created, and a first run that fails before it
        stored anything removes the file it created: a failed first run leaves no file. An
        index that existed before the call is never removed."""
        from kbase.embed import vectors
        from kbase.indexer import maintenance, pipeline

        created = not self.path.exists()
        if model is not None:
            from kbase.embed import catalog

            catalog.make(model, download=download)  # a bad or missing model fails before any work
        if paths:
            pipeline.resolve_paths(paths)  # a missing folder is an error before any file exists
        elif created:
            raise InputError(
                "nothing to index yet", "pass the folders of your notes: kbase index PATH..."
            )
        made = []  # the folders connect() will make for a new index, deepest first
        folder = self.path.absolute().parent
        while created and not folder.exists() and folder != folder.parent:
            made.append(folder)
            folder = folder.parent
        report: IndexReport | None = None
        try:
            with self._connection(create=True) as con:
                if remember_embed and embed is not None:
                    vectors.set_auto_embed(con, embed)
                elif db.meta_get(con, vectors.AUTO_EMBED) is None:  # new, or from an older kbase
                    vectors.set_auto_embed(con, vectors.auto_embed(con))
                if embed is None:
                    embed = vectors.auto_embed(con)
                try:
                    report = pipeline.index(
                        con,
                        paths,
                        settings=settings,
                        progress=progress,
                        extensions=extensions or None,
                        max_size=max_size,
                        follow_outside=follow_outside,
                        exclude=tuple(exclude),
                        default_extensions=default_extensions or pipeline.DEFAULT_EXTENSIONS,
                    )
                except BaseException as e:
                    # A first run that fails (a full disk, say) leaves no file behind, not the
                    # part it committed; one stopped with Ctrl-C keeps what it did, unless that
                    # is nothing.
                    if created and (not isinstance(e, KeyboardInterrupt) or not _has_roots(con)):
                        con.close()  # still under the writer lock: no other run wrote to it
                        db.remove_index(self.path)
                        for d in made:
                            try:
                                d.rmdir()
                            except OSError:
                                break
                        if isinstance(e, apsw.Error | DatabaseError):
                            raise _first_run_failed(e, self.path) from e
                    raise
                if on_keyword_ready is not None:
                    on_keyword_ready(report)
                if model is not None and not embed:
                    from kbase.embed import switch

                    with self._models() as models:  # recorded; embedded later
                        switch.choose(con, models, model, download)
                if embed and not report.interrupted:
                    report.embedding = self._embed(
                        con,
                        embed_progress,
                        model=model,
                        download=download,
                        switch_progress=switch_progress,
                    )
                if not report.interrupted:
                    maintenance.settle(con)
                return report
        except KeyboardInterrupt:
            if report is None:
                raise
            report.interrupted = True  # the embedding batch in flight is lost, nothing else
            return report

    def chunk_settings(
        self,
        *,
        max_tokens: int | None = None,
        overlap: float | None = None,
        min_tokens: int | None = None,
    ) -> ChunkSettings | None:
        """The index's chunk settings with the ones given changed, for ``index(settings=...)``;
        None when none is given (the index keeps its own)."""
        from kbase.ingest.chunk import ChunkSettings
        from kbase.store.db import meta_get

        if max_tokens is None and overlap is None and min_tokens is None:
            return None
        base = ChunkSettings.from_fingerprint(
            self._read(meta_get, "chunker") if self.path.exists() else None
        )
        return base.with_changes(max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)

    def embed(
        self,
        *,
        rebuild: bool = False,
        progress: EmbedProgress | None = None,
        model: str | None = None,
        download: bool = False,
        switch_progress: EmbedProgress | None = None,
    ) -> EmbedReport:
        """Embed every chunk that has no vector yet (all of them with ``rebuild``).

        ``model`` chooses the index's embedding model (kbase.embed.catalog: all-MiniLM-L6-v2,
        multilingual-e5-small, fastembed:NAME; ``download`` lets fastembed fetch it). An index
        without vectors takes it at once. One with another model's vectors switches: the new
        model embeds every chunk, newest notes first (``switch_progress``), while search goes on
        with the old vectors; when all are done they replace the old ones in one transaction.
        Interrupted, the switch goes on at the next ``embed``/``index``/``embed_step``."""
        from kbase.embed import vectors

        with self._connection() as con:
            vectors.set_auto_embed(con, True)
            if rebuild:
                vectors.drop_vectors(con)
            return self._embed(
                con, progress, model=model, download=download, switch_progress=switch_progress
            )

    def model_hint(self) -> ModelHint | None:
        """When most of the index's notes are in Chinese, Japanese, Korean, Thai, Lao, Khmer or
        Burmese and its embedding model is the English default (all-MiniLM-L6-v2, which reads
        neither those notes nor questions in those languages): the model that would read them.
        Said once per index (None from then on, and when not so)."""
        from kbase.embed import catalog
        from kbase.search import cjk
        from kbase.store.db import meta_get, meta_set

        if not self.path.exists():
            return None

        def models(con: apsw.Connection) -> tuple[str | None, str | None]:
            fingerprint = meta_get(con, "embedder_next") or meta_get(con, "embedder")
            model = catalog.name_of(fingerprint) if fingerprint else catalog.DEFAULT
            return meta_get(con, "model_hint"), model

        said, model = self._read(models)
        if said is not None or model != catalog.DEFAULT:
            return None
        found = self._read(cjk.languages)
        share = sum(found.values())
        if share <= 0.5:
            return None
        self._write(meta_set, "model_hint", catalog.MULTILINGUAL)
        from kbase.records import ModelHint

        return ModelHint(tuple(found), round(share, 2), catalog.DEFAULT, catalog.MULTILINGUAL)

    def auto_embed(self) -> bool:
        """Whether ``index`` (and ``embed_step``, what long-lived processes call while idle)
        embeds new and changed chunks: true unless the index was made keyword-only
        (``set_auto_embed(False)``, ``kbase index --no-embed``) and not embedded since."""
        from kbase.embed import vectors

        return self._read(vectors.auto_embed)

    def set_auto_embed(self, on: bool) -> None:
        """Keep the index keyword-only (False) until ``embed()`` or ``set_auto_embed(True)``."""
        from kbase.embed import vectors

        self._write(vectors.set_auto_embed, on)

    def embed_step(
        self,
        *,
        limit: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        progress: EmbedProgress | None = None,
    ) -> EmbedReport | None:
        """Embed up to ``limit`` chunks that have no vector yet (default ``vectors.WINDOW``, a few
        seconds of work), newest notes first, one committed batch at a time, ending early once
        ``should_stop()`` is true (asked between batches). What a long-lived process (the TUI,
        ``kbase watch``, an MCP server) calls while idle, until ``remaining`` is 0. The writer
        lock is held for this step only; None when another process holds it (try again later).
        A keyword-only index (``auto_embed`` false) has nothing to embed: an empty report."""
        from kbase.embed import vectors

        try:
            with self._connection(lock=False) as con:
                if not vectors.auto_embed(con) or (
                    vectors.missing_count(con) == 0
                    and vectors.has_vectors(con)
                    and vectors.next_fingerprint(con) is None
                ):  # nothing to do: no need to wait for the writer lock
                    from kbase.records import EmbedReport

                    return EmbedReport()
                with db.writer_lock(self.path):
                    report = self._embed(
                        con, progress, limit=limit or vectors.WINDOW, should_stop=should_stop
                    )
                    if report.embedded or report.reused:
                        from kbase.indexer.maintenance import checkpoint, release_free_pages

                        release_free_pages(con)  # a vector block given back (tidy_vectors)
                        checkpoint(con)
                    return report
        except IndexBusyError:
            return None

    @contextlib.contextmanager
    def _models(self) -> Iterator[Models]:
        """The embedder searched with, for kbase.embed.switch to change (a model chosen, a
        switch finished); KB keeps what it ends with."""
        from kbase.embed.switch import Models

        models = Models(self._embedder, self._explicit_embedder, lambda: self.embedder)
        try:
            yield models
        finally:
            self._embedder, self._explicit_embedder = models.current, models.explicit

    def _embed(
        self,
        con: apsw.Connection,
        progress: EmbedProgress | None,
        *,
        limit: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        model: str | None = None,
        download: bool = False,
        switch_progress: EmbedProgress | None = None,
    ) -> EmbedReport:
        """One embedding run: kbase.embed.switch.run."""
        from kbase.embed import switch

        with self._models() as models:
            return switch.run(
                con,
                models,
                progress,
                limit=limit,
                should_stop=should_stop,
                model=model,
                download=download,
                switch_progress=switch_progress,
            )

    # reading -----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        mode: str | None = None,
        limit: int = 10,
        path: str | None = None,
        tags: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        exclude: Sequence[str] = (),
        correct: bool = True,
    ) -> Hits:
        """Search; one hit per document, best first, each with its ``rank`` (1, 2, ...). ``mode``:
        'keyword', 'semantic' or 'hybrid'; by default hybrid once the index has vectors, keyword
        before. ``path`` keeps, ``exclude`` leaves out notes by path: globs, or folders and paths
        (case-insensitive). The query may hold Obsidian's operators (``path:``, ``file:``,
        ``tag:#x``; see kbase.search.query); operators alone list the notes they keep, by path.

        A word that no note holds is corrected to the nearest frequent word of the index
        (kbase.search.spell) unless ``correct`` is false; the result's ``corrected`` says so.

        A query needs a word to search for (letters or digits, not only ``-excluded`` ones) or an
        operator: an empty query, or one of punctuation only, is an ``InputError`` in every mode;
        so is an operator kbase cannot read (``line:``, ``path:`` without a value). Repeated
        terms count once, and a query past ``MAX_QUERY_TERMS`` distinct terms or
        ``MAX_QUERY_CHARS`` characters is cut there (``kbase.search.query``): the result's
        ``notice`` says so. A search still running after ``search_timeout`` seconds (10) is
        stopped: an ``InputError``; ``limit`` is 1 to ``MAX_SEARCH_LIMIT`` (1,000), and the
        first hits do not depend on it (a larger limit adds hits after them).

        The search itself is ``kbase.search.run.search``; with ``hand_off``, a hybrid or
        semantic search is handed to a running kbase that serves this index, if one does."""
        if self.hand_off:
            handed = self._hand_off(query, mode, limit, path, tags, since, until, exclude, correct)
            if handed is not None:
                return handed
        return self._search_here(
            query,
            mode=mode,
            limit=limit,
            path=path,
            tags=tags,
            since=since,
            until=until,
            exclude=exclude,
            correct=correct,
        )

    def _search_here(
        self,
        query: str,
        *,
        mode: str | None = None,
        limit: int = 10,
        path: str | None = None,
        tags: Sequence[str] = (),
        since: str | None = None,
        until: str | None = None,
        exclude: Sequence[str] = (),
        correct: bool = True,
    ) -> Hits:
        """``search`` in this process."""
        from kbase.ingest.discover import outside_doc_ids
        from kbase.search import run

        try:
            hits = run.search(
                self.reader,
                query,
                mode=mode,
                limit=limit,
                path=path,
                tags=tags,
                since=since,
                until=until,
                exclude=exclude,
                correct=correct,
                embedder=lambda: self.embedder,
                cache=self.vector_cache,
                timeout=self.search_timeout,
                leave_out=outside_doc_ids,  # (files outside the roots: an older kbase's index)
            )
        except ModelUnavailable as e:
            if mode is not None:  # asked for by name: say why it cannot be had
                raise
            self._notice(f"{e.message}: keyword results only ({e.hint})")
            return self._search_here(
                query,
                mode="keyword",
                limit=limit,
                path=path,
                tags=tags,
                since=since,
                until=until,
                exclude=exclude,
                correct=correct,
            )
        except apsw.InterruptError:
            raise
        except apsw.Error as e:
            raise db.translate_error(e, self.path) from e
        if not hits and mode != "keyword" and query.strip():
            self._say_unread(query)
        return hits

    def _say_unread(self, query: str) -> None:
        """Nothing found for a query in a script the index's model does not read (a Chinese
        question on an English model): say that meaning search could not read it."""
        if self.default_mode() == "keyword":
            return  # (before the imports: a keyword search loads nothing of the models)
        from kbase.embed import catalog
        from kbase.embed.embedder import reader
        from kbase.search.fusion import PARAMS

        model = self.embedder
        reads = reader(model)
        if reads is not None and reads(query) < PARAMS.min_read:
            name = catalog.name_of(model.fingerprint) or getattr(model, "name", catalog.DEFAULT)
            self._notice(
                f"the index's model, {name}, reads English only, so search by"
                " meaning cannot read this query; a model that reads it: pip install"
                f' "kbase[multilingual]", then kbase index --model {catalog.MULTILINGUAL}'
            )

    def _hand_off(
        self,
        query: str,
        mode: str | None,
        limit: int,
        path: str | None,
        tags: Sequence[str],
        since: str | None,
        until: str | None,
        exclude: Sequence[str],
        correct: bool,
    ) -> Hits | None:
        """The search as a running kbase answers it (kbase.handoff.ask), or None: a keyword
        search (this process answers it as fast), no index here yet, or no server."""
        if mode == "keyword" or not isinstance(query, str) or not self.path.exists():
            return None
        if isinstance(tags, str) or isinstance(exclude, str):
            return None  # (sent as lists of words; the odd forms are searched here)
        if mode is None and self.default_mode() == "keyword":
            return None
        from kbase import handoff

        args = {
            "query": query,
            "mode": mode,
            "limit": limit,
            "path": path,
            "tags": list(tags),
            "since": since,
            "until": until,
            "exclude": list(exclude),
            "correct": correct,
        }
        answered = handoff.ask(self.path, args, self.search_timeout)
        if answered is None:
            return None
        hits, notices = answered
        for message in notices:
            self._notice(message)
        return hits

    def serve_searches(
        self, use: Callable[[], contextlib.AbstractContextManager[KB]] | None = None
    ) -> Server:
        """Answer the hybrid and semantic searches one-shot processes (``kbase search``) hand to
        this one for this index, over a socket only this user can reach (kbase.handoff), until
        the returned server is closed; ``serving`` is false when another process serves the
        index already or the socket's directory is not private (then a notice says why).

        ``use()`` lends the KB a search runs on (the MCP server's and the TUI's own, under their
        locks); by default a KB of its own (its own reader and vectors in memory, the process's
        model), one search at a time, closed with the server. The model and the vectors are
        loaded at once, in the background, so the first search handed over is as fast as the
        rest."""
        from kbase import handoff

        cleanup = None
        if use is None:
            own = KB(self.path, embedder=self._embedder if self._explicit_embedder else None)
            use = own._one_at_a_time()

            def cleanup() -> None:  # once the search or warm-up under way is done with it
                with use() as kb:
                    kb.close()

        def search(args: dict[str, Any]) -> tuple[Hits, list[str]]:
            with use() as kb:
                before = len(kb.notices)
                hits = kb._search_here(**args)
                return hits, kb.notices[before:]

        def about() -> dict[str, Any]:  # (for a client that has not opened the index)
            with use() as kb:
                return {"default_mode": kb.default_mode(), "coverage": list(kb.coverage())}

        def printed(args: dict[str, Any], options: dict[str, Any]) -> Any:
            assert printer is not None
            with use() as kb:
                return printer(HandedSearch(kb), args, options)

        printer = _printer
        server = handoff.Server(
            self.path,
            search,
            cleanup=cleanup,
            about=about,
            printer=printed if printer is not None else None,
        )
        if not server.start():
            if cleanup is not None:
                cleanup()
            if handoff.SUPPORTED and not handoff.private(server.path.parent):
                self._notice(f"searches are not handed to this process: {server.reason}")
            return server
        threading.Thread(
            target=self._warm, args=(use,), name="kbase-handoff-warm", daemon=True
        ).start()
        return server

    def _one_at_a_time(self) -> Callable[[], contextlib.AbstractContextManager[KB]]:
        """``use`` for a KB that serves searches: one at a time, opened again when the index
        file was replaced (deleted and built again under the same name)."""
        lock = threading.Lock()
        seen: list[tuple[int, int] | None] = [None]

        @contextlib.contextmanager
        def use() -> Iterator[KB]:
            with lock:
                try:
                    st = os.stat(self.path)
                    identity: tuple[int, int] | None = (st.st_dev, st.st_ino)
                except OSError:
                    identity = None
                if seen[0] is not None and identity != seen[0]:
                    self.refresh()
                seen[0] = identity
                yield self

        return use

    @staticmethod
    def _warm(use: Callable[[], contextlib.AbstractContextManager[KB]]) -> None:
        """Load the model and the vectors of an embedded index (see ``serve_searches``)."""
        try:
            with use() as kb:
                if kb.path.exists() and kb.default_mode() != "keyword":
                    kb._search_here("warm up", mode="semantic", limit=1)
        except Exception:  # (the searches handed over say what is wrong, if it lasts)
            pass

    def filters_that_keep_nothing(
        self, *, path: str | None = None, tags: Sequence[str] = ()
    ) -> list[str]:
        """Of a search's ``path`` and ``tags`` filters, each that alone keeps no note of the
        index, said as a user reads it ("no note has the tag 'x' ..."): why a search found
        nothing when a filter holds a typo."""
        from kbase.search.filters import keeping_nothing

        return self._read(keeping_nothing, path, tuple(tags))

    def coverage(self) -> tuple[int, int]:
        """(chunks with a vector, all chunks): how much of the index semantic search covers
        (less than all while embedding is under way)."""
        from kbase.embed.vectors import coverage

        return self._read(coverage)

    def default_mode(self) -> str:
        """'hybrid' when the index has vectors, else 'keyword'."""
        from kbase.search.run import default_mode

        return self._read(default_mode)

    def query_vector(self, query: str) -> bytes:
        """The query's embedding, after checking the index was embedded with the same model."""
        from kbase.search.run import query_vector

        return self._read(query_vector, self.embedder, query)

    def document(self, target: str) -> DocRef:
        """The document ``target`` names: a path, a name as a link gives it, or an alias; one
        match, else an ``InputError`` listing the candidates (see
        ``kbase.notes.resolve.resolve``)."""
        from kbase.notes.resolve import find_document

        return self._read(find_document, target)

    def region(self, target: str, context: int = 10) -> Region:
        """Lines of a document: ``PATH``, ``PATH:LINE`` (with ``context`` lines either side) or
        ``PATH:START-END``; a line out of range is an ``InputError`` (see ``documents.region``)."""
        from kbase.notes.resolve import region

        return self._read(region, target, context)

    def read(
        self,
        target: str,
        start_line: int | None = None,
        end_line: int | None = None,
        *,
        page: int | None = None,
    ) -> NoteText:
        """Lines of a note found as ``kbase show`` finds it (a NoteText with its metadata); without
        a range, the whole note up to ``reading.MAX_LINES`` lines (``truncated`` says if cut).
        ``page``: a PDF's page (1-based), instead of a line range. A name with a heading or a
        block (``Note#Heading``, ``[[Note#^id|text]]``) reads that section or block when no range
        is given (see ``region``), and so does ``PATH:LINE`` (the line and 10 either side) or
        ``PATH:START-END``, as a search hit's place is written."""
        from kbase.notes.reading import read_note
        from kbase.notes.resolve import is_location, split_anchor

        doc = None
        if (
            start_line is None
            and end_line is None
            and page is None
            and (split_anchor(target)[1] or is_location(target))
        ):
            r = self.region(target)
            if not r.whole and r.page is None:
                start_line, end_line, doc = r.first, r.last, r.doc
        doc = doc or self.document(target)
        return self._read(read_note, doc, start_line, end_line, page=page)

    def document_at(self, path: str) -> DocRef:
        """The document at exactly ``path`` inside its root (see ``reading.note_at``)."""
        from kbase.notes.reading import note_at

        return self._read(note_at, path)

    def note_list(self, offset: int = 0, limit: int = 500) -> list[NoteEntry]:
        """Every note in path order (path, title, kind), ``limit`` of them from ``offset``: to page
        through all the notes (the MCP server's resources/list)."""
        from kbase.notes.reading import note_list

        return self._read(note_list, max(0, offset), max(0, limit))

    def complete_notes(self, typed: str, limit: int = 100) -> tuple[list[str], int]:
        """Paths of the notes whose path, file name or title starts with ``typed`` (completion as
        someone types a note's name), paths that start with it first: ``limit`` of them, and how
        many match in all."""
        from kbase.notes.reading import complete_notes

        return self._read(complete_notes, typed, max(0, limit))

    # the link graph ---------------------------------------------------------------------------
    def note(self, name: str | Note) -> Note:
        """``document``'s note as a graph node (id, path, title): the same resolution (a name a
        typo away included: ``corrected_from`` says so). A Note is returned as it is, so a face
        can resolve a name once, tell the user, and pass the Note on to ``links`` and the rest."""
        from kbase.notes import graph

        if isinstance(name, graph.Note):
            return name
        return self._read(graph.find_note, name)

    def links(self, note: str | Note) -> list[LinkHit]:
        """Links from ``note`` (resolved or not), in order."""
        from kbase.notes import graph

        return self._read(graph.links_from, self.note(note))

    def backlinks(self, note: str | Note) -> list[LinkHit]:
        """Links from other notes to ``note``."""
        from kbase.notes import graph

        return self._read(graph.links_to, self.note(note))

    def unresolved(
        self, *, path: str | None = None, exclude: Sequence[str] = (), tags: Sequence[str] = ()
    ) -> list[LinkHit]:
        """Links that point at no note or file, from the notes ``path``, ``exclude`` and ``tags``
        keep (as ``search`` filters them)."""
        from kbase.notes import graph

        return self._read(graph.unresolved, _note_filters(path, exclude, tags))

    def broken_anchors(
        self, *, path: str | None = None, exclude: Sequence[str] = (), tags: Sequence[str] = ()
    ) -> list[LinkHit]:
        from kbase.notes import graph

        return self._read(graph.broken_anchors, _note_filters(path, exclude, tags))

    def orphans(
        self, *, path: str | None = None, exclude: Sequence[str] = (), tags: Sequence[str] = ()
    ) -> list[Note]:
        """Notes no other note links to, of those ``path``, ``exclude`` and ``tags`` keep."""
        from kbase.notes import graph

        return self._read(graph.orphans, _note_filters(path, exclude, tags))

    def neighbors(self, note: str | Note, depth: int = 1) -> list[Note]:
        """Notes within ``depth`` links of ``note`` either way, nearest first, each with the
        ``direction`` of its link to the note one hop nearer (``via``): 'out', 'in' or 'both'."""
        from kbase.notes import graph

        return self._read(graph.neighbors, self.note(note), depth)

    def related(
        self,
        note: str | Note,
        *,
        limit: int = 10,
        include_linked: bool = False,
    ) -> RelatedResult:
        """Notes nearest in meaning to ``note`` (a RelatedResult): from the stored chunk vectors,
        or, when the note has none, from its most distinctive terms (``method == 'keyword'``).
        Notes it links to are left out unless ``include_linked``."""
        from kbase.notes import related as related_notes

        if limit < 1:
            raise InputError(f"limit must be at least 1, not {limit}", "ask for 1 or more notes")
        cache = self.vector_cache or related_notes.VectorCache()
        return self._read(
            related_notes.related,
            self.note(note),
            limit=limit,
            include_linked=include_linked,
            cache=cache,
        )

    def graph(
        self,
        note: str | None = None,
        *,
        depth: int | None = None,
        path: str | None = None,
        exclude: Sequence[str] = (),
    ) -> dict:
        """``{"nodes": [...], "edges": [...]}``: the whole graph, or ``note``'s neighbourhood
        within ``depth`` links (default 1), keeping the notes ``path`` and ``exclude`` allow
        (see ``graph.graph``)."""
        from kbase.notes import graph

        return self._read(
            graph.graph, None if note is None else self.note(note), depth, path, tuple(exclude)
        )

    def watch(
        self,
        paths: Sequence[str | os.PathLike[str]] = (),
        *,
        stop_event: threading.Event | None = None,
        on_batch: Callable[[WatchBatch], None] | None = None,
        embed: bool = True,
        force_polling: bool | None = None,
        debounce_ms: int | None = None,
        on_embed: Callable[[EmbedReport], None] | None = None,
        progress: Progress | None = None,
        exclude: Sequence[str] = (),
        default_extensions: Sequence[str] | None = None,
    ) -> int:
        """Keep the index in step with ``paths`` (none: every root) until ``stop_event`` is set or
        Ctrl-C; ``on_batch`` gets each run's WatchBatch (see ``kbase.watch.watch``), ``progress``
        each run's progress, ``exclude`` and ``default_extensions`` each run's (as ``index``
        takes them). Returns how many index runs were made."""
        from kbase.watch import watch

        options: dict[str, Any] = {} if debounce_ms is None else {"debounce_ms": debounce_ms}
        if progress is not None:
            options["progress"] = progress
        if exclude:
            options["exclude"] = tuple(exclude)
        if default_extensions:
            options["default_extensions"] = tuple(default_extensions)
        return watch(
            self,
            paths,
            stop_event=stop_event,
            on_batch=on_batch,
            embed=embed,
            force_polling=force_polling,
            on_embed=on_embed,
            **options,
        )

    # maintenance ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _connection(
        self, *, lock: bool = True, create: bool = False, check: bool = False
    ) -> Iterator[apsw.Connection]:
        """A writing connection, under the writer lock unless ``lock`` is false, closed after; an
        SQLite error becomes kbase's one-line error. ``check``: kbase check's (see
        ``db.connect_for_check``)."""
        # A writer locks the file before SQLite opens it: of two first runs at once, the one
        # refused must not have written a schema meanwhile (that made the other's writes BUSY).
        # Where the file cannot be opened yet, SQLite opens it first and says why.
        early = lock and db.lockable(self.path, create=create)
        try:
            with contextlib.ExitStack() as held:
                if early:
                    held.enter_context(db.writer_lock(self.path))
                con = (
                    db.connect_for_check(self.path)
                    if check
                    else db.connect(self.path, create=create)
                )
                held.callback(con.close)
                if lock and not early:
                    held.enter_context(db.writer_lock(self.path))
                yield con
        except apsw.Error as e:
            raise db.translate_error(e, self.path) from e

    def _write(self, fn: Callable[..., R], *args: Any, lock: bool = True) -> R:
        """``fn(connection, *args)`` on a writing connection (see ``_connection``)."""
        with self._connection(lock=lock) as con:
            return fn(con, *args)

    def check(self, fix: bool = False) -> CheckReport:
        """Integrity and invariants; with ``fix``, repair what the stored texts allow. ``warnings``:
        notes indexed without their front matter (not a problem of the index; fix the notes)."""
        from kbase.indexer import maintenance

        # FTS5's integrity check is an INSERT command (it changes nothing): a writable connection.
        fixed = self._write(maintenance.fix) if fix else []
        with self._connection(lock=False, check=True) as con:
            problems = tuple(maintenance.check(con))
        from kbase.records import CheckReport

        return CheckReport(
            problems=problems,
            fixed=tuple(fixed),
            warnings=tuple(self._read(maintenance.frontmatter_warnings)),
        )

    def compact(self) -> CompactReport:
        from kbase.indexer import maintenance

        self.close()  # VACUUM needs the readers gone
        return self._write(maintenance.compact, self.path)

    def roots(self) -> list[RootInfo]:
        from kbase.indexer import maintenance

        return self._read(maintenance.roots, self.path)

    def move_root(self, old: str, new: str) -> RootMove:
        from kbase.indexer import maintenance

        return self._write(maintenance.move_root, old, new, self.path)

    def remove_root(self, root: str) -> RootRemoval:
        """Forget ``root`` (its path as ``roots()`` lists it) and every document indexed from it,
        in one transaction; nothing on disk is touched."""
        from kbase.indexer import maintenance

        return self._write(maintenance.remove_root, root)

    # SQL ------------------------------------------------------------------------------------------
    def sql(
        self, query: str, *, timeout: float | None = None, max_rows: int | None = None
    ) -> SqlResult:
        """Run a read-only query (kbase_embed() and kbase_search() included); see kbase.sqlapi."""
        from kbase import sqlapi

        con = self.reader
        if not self._sql_ready:
            sqlapi.register(con, self)
            self._sql_ready = True
        return sqlapi.run(con, query, timeout=timeout or sqlapi.SQL_TIMEOUT, max_rows=max_rows)

    def sql_search(self, query: object, mode: object = None, lim: object = None) -> list[dict]:
        """What ``kbase_search(query [, mode [, lim]])`` gives in ``kbase sql``, for another SQL
        face (the Datasette plugin): one dict a row, its arguments checked as SQL passes them."""
        from kbase import sqlapi

        return [
            dict(zip(sqlapi.SEARCH_COLUMNS, r)) for r in sqlapi.search_rows(self, query, mode, lim)
        ]

    def sql_embed(self, text: object) -> bytes:
        """What ``kbase_embed(text)`` gives in ``kbase sql``: the query's vector (float32 blob)."""
        from kbase import sqlapi

        return sqlapi.embed_function(self)(text)

    def chunk(self, chunk_id: int) -> ChunkRef:
        """A chunk's place in its document (offsets and lines), e.g. to highlight a hit."""
        from kbase.search.hits import chunk_ref

        return self._read(chunk_ref, chunk_id)

    def status(self) -> Status:
        from kbase.indexer.maintenance import status

        st = replace(self._read(status, self.path), model=self.model())
        if not self.checkpoint() and os.path.exists(f"{self.path}-wal"):
            st = replace(st, wal_bytes=os.path.getsize(f"{self.path}-wal"))
            with contextlib.suppress(DatabaseError):
                from kbase.indexer.maintenance import wal_waiting

                with self._connection(lock=False) as con:
                    st = replace(st, wal_waiting_bytes=wal_waiting(con))
        return st

    def checkpoint(self) -> bool:
        """Copy the WAL into the index and truncate it, unless a reader still holds an old
        snapshot (never waits: False then, and when the index cannot be written); True when the
        WAL is empty now. Index runs do it when they end; ``kbase watch`` and ``status`` too, so
        the WAL shrinks as soon as the reader lets go."""
        try:
            if not os.path.getsize(f"{self.path}-wal"):
                return True
        except OSError:
            return True
        from kbase.indexer.maintenance import checkpoint

        try:
            with self._connection(lock=False) as con:
                return checkpoint(con)
        except DatabaseError:
            return False

    def _read(
        self, fn: Callable[Concatenate[apsw.Connection, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """``fn(reader, *args, **kwargs)`` in one read snapshot; an SQLite error becomes kbase's
        one-line error."""
        try:
            with self.reader:  # one snapshot for the whole read, even while a writer commits
                return fn(self.reader, *args, **kwargs)
        except apsw.InterruptError:
            raise  # a time limit's (db.time_limit says whose)
        except apsw.Error as e:
            raise db.translate_error(e, self.path) from e


def _first_run_failed(e: apsw.Error | DatabaseError, path: Path) -> DatabaseError:
    """The error of a first index run, whose file was removed: its hint says so."""
    error = db.translate_error(e, path) if isinstance(e, apsw.Error) else e
    hint = (
        (error.hint or "").replace("; the index is intact", "").replace("the index is intact", "")
    )
    return DatabaseError(error.message, f"{hint}; this first run left no index behind".lstrip("; "))


def _has_roots(con: apsw.Connection) -> bool:
    try:
        return con.execute("SELECT 1 FROM roots LIMIT 1").fetchone() is not None
    except apsw.Error:
        return True  # cannot tell: keep the file


def model_name(name: str) -> str:
    """The embedding model ``name`` means, as an index records it (``all-minilm`` ->
    'all-MiniLM-L6-v2'); an InputError naming the choices for a name kbase does not know. Nothing
    is loaded."""
    from kbase.embed import catalog

    return catalog.canonical(name)


def has_words(text: str) -> bool:
    """Whether ``text`` has anything to search for, words or Obsidian operators, or an operator
    ``KB.search`` would name as wrong (it refuses a query of punctuation alone)."""
    from kbase.search.query import parse_query

    q = parse_query(text)
    return not q.empty or bool(q.operators) or q.error is not None


def readable_line(line: str, span: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """A line of Markdown (a link's context) as a person reads it, as snippets show notes, and
    where its ``span`` (the link, [start, end)) lies in that: ``See [[Beta|the second note]].``
    reads ``See the second note.``"""
    from kbase.ingest.markup import render

    text, source = render(line)
    lead = len(text) - len(text.lstrip())  # (a table row's cell padding)
    text, source = text.strip(), source[lead:]
    start, end = (
        next((i for i, at in enumerate(source) if at >= edge), len(text)) for edge in span
    )
    return text, (min(start, len(text)), min(end, len(text)))


def chunk_file(
    path: str | os.PathLike[str],
    *,
    max_tokens: int | None = None,
    overlap: float | None = None,
    min_tokens: int | None = None,
) -> tuple[ParsedDoc, Chunking]:
    """How ``index`` cuts one file into chunks, without an index (``kbase chunks``)."""
    from kbase.indexer.pipeline import chunk_file as chunked
    from kbase.ingest.chunk import ChunkSettings

    settings = ChunkSettings().with_changes(
        max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens
    )
    doc, chunking, _ = chunked(path, settings)
    return doc, chunking


def _note_filters(path: str | None, exclude: Sequence[str], tags: Sequence[str]):
    """The notes a listing keeps, as search filters them (None: every note)."""
    if not path and not exclude and not tags:
        return None
    from kbase.search.filters import Filters

    return Filters(path=path, exclude=tuple(exclude), tags=tuple(tags))
