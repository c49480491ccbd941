"""An embedding run over the index, model switches included: the chunks without a vector of the
searched model first, then (what is left of the run's budget) a switch to another model, newest
notes first, while search goes on with the old vectors (kbase.embed.vectors keeps both sets and
swaps them in one transaction). KB.embed, KB.index and KB.embed_step make one call here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import apsw

from kbase.embed import catalog, vectors
from kbase.embed.embedder import Embedder
from kbase.embed.vectors import EmbedProgress
from kbase.records import EmbedReport


@dataclass
class Models:
    """The embedder a KB searches with: ``current`` (None until first needed; ``load`` makes the
    index's own), and whether the caller chose it (``explicit``: never replaced by a switch)."""

    current: Embedder | None
    explicit: bool
    load: Callable[[], Embedder]

    def searched(self) -> Embedder:
        self.current = self.load()
        return self.current


def choose(con: apsw.Connection, models: Models, model: str, download: bool) -> Embedder:
    """Make ``model`` the index's: at once when it has no vectors (or this model's), else by
    starting a switch. The embedder, loaded; ``models`` follows the choice."""
    target = catalog.make(model, download=download)
    current = vectors.stored_fingerprint(con)
    if current == target.fingerprint or not vectors.has_embeddings(con):
        if current not in (None, target.fingerprint):
            vectors.drop_vectors(con)  # no vector to keep: the new model embeds directly
        vectors.cancel_switch(con)  # (a switch to a third model is forgotten)
        vectors.ensure_vector_table(con, target)  # records the choice
        if not models.explicit or models.current is None:
            models.current, models.explicit = target, False
    elif not models.explicit:
        vectors.start_switch(con, target)
    return target


def run(
    con: apsw.Connection,
    models: Models,
    progress: EmbedProgress | None,
    *,
    limit: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    model: str | None = None,
    download: bool = False,
    switch_progress: EmbedProgress | None = None,
) -> EmbedReport:
    """The chunks without a vector of the searched model, then (the rest of ``limit``) a switch
    to another model: the one ``model`` names, or one already under way. When a switch ends,
    ``models.current`` is its model."""
    target = choose(con, models, model, download) if model else None
    report = EmbedReport()
    if not (vectors.missing_count(con) == 0 and vectors.has_vectors(con)):
        report = vectors.embed_missing(
            con,
            target if target is not None and models.current is target else models.searched(),
            progress=progress,
            limit=limit,
            should_stop=should_stop,
        )
    nxt = vectors.next_fingerprint(con)
    left = None if limit is None else limit - report.embedded - report.reused
    stopped = should_stop is not None and should_stop()
    if nxt is None or report.remaining or stopped or (left is not None and left <= 0):
        return report
    if target is None or target.fingerprint != nxt:
        name = catalog.name_of(nxt)
        target = catalog.make(name) if catalog.known(name) and name else None
        if target is None or target.fingerprint != nxt:
            vectors.cancel_switch(con)  # its model is gone or changed: nothing to go on with
            return report
    switched = vectors.embed_switch(
        con, target, progress=switch_progress or progress, limit=left, should_stop=should_stop
    )
    if switched.remaining == 0:
        models.current, models.explicit = target, False
    # (``remaining`` counts the switch's chunks too: idle embedders go on until it is done)
    return replace(
        report,
        switch=switched,
        switching_to=catalog.name(target),
        remaining=report.remaining + switched.remaining,
    )
