"""What index and embed print while they work: progress bars, estimates, summaries."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

import click

from kbase.cli.app import printable

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from kbase.records import EmbedReport


def say_model_hint(hint) -> None:
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


class Bars:
    """Progress bars on stderr (rich), or nothing when stderr is not a terminal; and, terminal or
    not, a line when one file takes long (``SLOW_FILE_S``): which file is being worked on."""

    SLOW_FILE_S = 5.0
    POLL_S = 0.5

    def __init__(self, enabled: bool, bars: bool = True) -> None:
        self.said_slow = enabled
        self.enabled = enabled and bars and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self.embed_left = ""  # the embedding estimate (EmbedEta), shown as its time left
        self._current: tuple[str, float] | None = None  # the file being worked on, since when
        self._stop: threading.Event | None = None

    def __enter__(self) -> Bars:
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

    def say(self, message: str) -> None:
        """A line on stderr, above the bars when they show."""
        if self._progress is not None:
            self._progress.console.print(printable(message), markup=False, highlight=False)
        else:
            click.echo(printable(message), err=True)

    def _watch_slow(self, stop: threading.Event) -> None:
        import time

        told = None  # the file last named: once is enough (a file the writer parsed itself and
        # then writes is the current one twice over)
        while not stop.wait(self.POLL_S):
            current = self._current
            if current is None or current[0] == told:
                continue
            seconds = time.monotonic() - current[1]
            if seconds >= self.SLOW_FILE_S:
                told = current[0]
                message = printable(f"still working on {current[0]} ({seconds:.0f} s so far)")
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
            task,
            completed=done,
            total=total,
            current=printable(current)[-40:],
            rate=rate,
            left=left,
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


class SwitchEta:
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


class EmbedEta:
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
            if self.enabled and self.announce and total:
                click.echo(
                    f"keyword search is ready; embedding {total:,} chunk{'s' * (total != 1)}"
                    " for semantic search "
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


class IdleEmbedLines:
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


def say_embedded(e: EmbedReport) -> None:
    if e.embedded or e.reused or not e.switch:
        click.echo(
            f"embedded {e.embedded:,} chunk{'s' * (e.embedded != 1)} in {e.seconds:.1f} s"
            + (f" ({e.reused} reused)" if e.reused else "")
        )
    s = e.switch
    if s is not None:
        click.echo(
            f"switching to {e.switching_to}: embedded {s.embedded:,}"
            f" chunk{'s' * (s.embedded != 1)} in {s.seconds:.1f} s"
            + (f" ({s.reused} reused)" if s.reused else "")
            + (
                f"; done, search uses {e.switching_to} now"
                if s.remaining == 0
                else f"; {s.remaining:,} to go (kbase embed goes on)"
            )
        )
