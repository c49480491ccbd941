"""One search, from the text typed to the Hits shown: the arguments checked, the query bounded,
parsed, corrected and parsed again, the query embedded, then the mode's ranked lists (keyword
tiers, semantic, or both fused) under one time limit. ``KB.search`` opens the index and the model
and makes this one call."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import apsw

from kbase.errors import InputError
from kbase.records import Hit, Hits
from kbase.search import MAX_SEARCH_LIMIT, SEARCH_TIMEOUT
from kbase.search.filters import Filters
from kbase.search.query import bound_query, parse_query
from kbase.store import db

if TYPE_CHECKING:
    from kbase.embed.embedder import Embedder
    from kbase.embed.nearest import VectorCache

# Every search stops after SEARCH_TIMEOUT seconds (one line says so) and returns at most
# MAX_SEARCH_LIMIT results; the query itself is bounded by kbase.search.query.bound_query.
MODES = ("keyword", "semantic", "hybrid")


def check_limit(limit: int) -> int:
    """The one check of a search's ``limit`` (every face passes it on as given): 1 to
    MAX_SEARCH_LIMIT."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InputError(f"limit must be a whole number, not {limit!r}", "ask for 1 to 1,000")
    if limit < 1:
        raise InputError(f"limit must be at least 1, not {limit}", "ask for 1 or more results")
    if limit > MAX_SEARCH_LIMIT:
        raise InputError(
            f"limit {limit:,} is too large", f"ask for at most {MAX_SEARCH_LIMIT:,} results"
        )
    return limit


def search(
    con: apsw.Connection,
    query: str,
    *,
    mode: str | None = None,
    limit: int = 10,
    path: str | None = None,
    tags: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    exclude: Sequence[str] | str = (),
    correct: bool = True,
    embedder: Callable[[], Embedder],
    cache: VectorCache | None = None,
    timeout: float = SEARCH_TIMEOUT,
    leave_out: Callable[[apsw.Connection, list[int]], set[int]] | None = None,
) -> Hits:
    """``KB.search`` (see its docstring for the arguments) on the read connection ``con``.

    ``embedder`` gives the index's model when it is needed (not in keyword mode, nor for a query
    of operators alone); ``mode`` None is hybrid when the index has vectors, else keyword. Each
    read is its own snapshot; the correction and the search share one time limit of ``timeout``
    seconds, past which an ``InputError`` says so. ``leave_out(con, doc_ids)``: the documents of
    a page never to show (KB passes kbase.ingest.discover.outside_doc_ids)."""
    if mode not in (None, *MODES):
        raise InputError(f"unknown search mode {mode!r}", "use keyword, semantic or hybrid")
    check_limit(limit)
    query, notice = bound_query(query)
    parsed = parse_query(query)
    if parsed.error:
        raise InputError(*parsed.error)
    if parsed.empty and not parsed.operators:
        raise InputError(
            f"no words to search for in {query!r}",
            "search for a word or a number; punctuation alone is ignored, and -word only excludes",
        )
    if isinstance(exclude, str):
        exclude = (exclude,)
    filters = Filters(
        path=path,
        tags=tuple(tags),
        since=since,
        until=until,
        exclude=tuple(exclude),
        operators=parsed.operators,
        without=parsed.excluded,  # a note holding one anywhere is left out, in every mode
    )
    started = time.monotonic()  # one time limit for the correction and the search
    with con:
        mode = mode or default_mode(con)
    model = embedder() if mode != "keyword" and not parsed.filters_only else None
    if model is not None and hasattr(model, "prepare_query"):
        # (a one-shot process: the model loads and embeds the query meanwhile, on another core)
        model.prepare_query(parsed.text)  # (the words as typed: rarely corrected)
    corrected = None
    if correct and not parsed.empty:
        from kbase.search import spell

        with _time_limit(con, timeout, timeout):
            with con:
                corrected = spell.correct(con, query)
    text = corrected.text if corrected else query
    meaning = parse_query(text).text  # what the model reads: the words, not the operators
    if model is not None:
        from kbase.search import hybrid, semantic  # noqa: F401  (imported while the model loads)
    vector: bytes | Callable[[], bytes] = b""
    if model is not None:
        check_vectors(con, model)
        # The query's vector when the search needs it: a hybrid search ranks the keyword list
        # first while the model (prepare_query) is still loading on the other core. The wait
        # counts against the time limit as it did before the search.
        vector = functools.cache(functools.partial(model.embed_query, meaning))
    left = max(0.001, timeout - (time.monotonic() - started))
    with _time_limit(con, left, timeout):
        with con:  # one snapshot for the whole search, even while a writer commits
            hits = _ranked(con, parsed, text, mode, vector, model, limit, filters, cache)
            if leave_out is not None and (gone := leave_out(con, [h.doc_id for h in hits])):
                hits = [h for h in hits if h.doc_id not in gone]
    fixed = corrected.text if corrected else None
    out = Hits(replace(h, rank=i, corrected_query=fixed) for i, h in enumerate(hits, 1))
    out.notice = notice
    out.corrected = fixed
    out.corrections = corrected.words if corrected else ()
    return out


def _ranked(
    con: apsw.Connection,
    parsed,
    text: str,
    mode: str,
    vector: bytes | Callable[[], bytes],
    model: Embedder | None,
    limit: int,
    filters: Filters,
    cache: VectorCache | None,
) -> list[Hit]:
    """The mode's hits for the (corrected) query ``text``."""
    from kbase.search import keyword

    if parsed.filters_only:
        return keyword.listed(con, parsed, limit=limit, filters=filters)
    if mode == "keyword":
        return keyword.keyword_search(con, text, limit=limit, filters=filters)
    if mode == "semantic":
        from kbase.search import semantic

        if callable(vector):
            vector = vector()
        return semantic.semantic_search(con, vector, limit=limit, filters=filters, cache=cache)
    from kbase.embed.embedder import reader
    from kbase.search import hybrid
    from kbase.search.fusion import params_for

    assert model is not None
    return hybrid.hybrid_search(
        con,
        text,
        vector,
        limit=limit,
        filters=filters,
        params=params_for(model),
        cache=cache,
        reads=reader(model),
    )


def default_mode(con: apsw.Connection) -> str:
    """'hybrid' when the index has vectors, else 'keyword'."""
    from kbase.embed.vectors import has_embeddings

    return "hybrid" if has_embeddings(con) else "keyword"


def query_vector(con: apsw.Connection, embedder: Embedder, query: str) -> bytes:
    """The query's embedding, after checking the index was embedded with the same model."""
    check_vectors(con, embedder)
    return embedder.embed_query(query)


def check_vectors(con: apsw.Connection, embedder: Embedder) -> None:
    """Raise unless the index has vectors, made by ``embedder``'s model."""
    from kbase.embed import vectors

    with con:
        stored = vectors.stored_fingerprint(con)
        if stored is None:
            raise InputError("this index has no embeddings yet", "run: kbase embed")
        vectors.check_fingerprint(con, embedder)


@contextlib.contextmanager
def _time_limit(con: apsw.Connection, seconds: float, budget: float) -> Iterator[None]:
    """``db.time_limit``, its expiry kbase's one-line error naming the whole ``budget``."""
    try:
        with db.time_limit(con, seconds):
            yield
    except db.TimeLimitExceeded:
        raise InputError(
            f"search stopped after the {budget:g} s time limit",
            "use fewer or rarer words, or narrow it with a path or tag filter",
        ) from None
