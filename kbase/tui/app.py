"""``kbase browse``: the Textual app and ``run``.

Startup stays light: Textual and this package only. The index is opened by the first worker
(``kbase.api`` is imported there) and the embedding model is loaded in the background, and only
when the index has embeddings.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from kbase.text import printable
from kbase.tui.logic import KBFactory, KBPool
from kbase.tui.screens import HelpScreen, MainScreen


class KbaseApp(App):
    """Search as you type, read hits in context, follow links."""

    CSS_PATH = "kbase.tcss"
    TITLE = "kbase"
    BINDINGS = [
        Binding("f1", "help", "Help", priority=True, tooltip="Every key (this list)"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key (this list)"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(
        self, db_path: str | Path, *, kb_factory: KBFactory | None = None, debounce: float = 0.15
    ) -> None:
        """``kb_factory(db_path)`` makes the ``KB`` each worker thread uses (tests inject one);
        ``debounce`` is how long typing must pause before a search starts (seconds)."""
        super().__init__()
        self.db_path = Path(db_path)
        self.pool = KBPool(self.db_path, kb_factory)
        self.handoff: Any = None  # kbase search handed to this app (KB.serve_searches), once loaded
        self.debounce = debounce
        self.error_log: list[tuple[str, str | None]] = []  # (message, hint) of every error shown
        self._last_error: tuple[str, float] = ("", 0.0)

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
        else:
            self.push_screen(HelpScreen())

    def notify_error(self, error: BaseException, *, title: str = "kbase") -> None:
        """An error as a notification: the message, then the hint. Never a traceback."""
        message = getattr(error, "message", None) or str(error) or type(error).__name__
        hint = getattr(error, "hint", None)
        if not hasattr(error, "message"):  # not a KbaseError: a bug or an unexpected failure
            message = f"{type(error).__name__}: {message}"
        self.error_log.append((message, hint))
        text = f"{message}\nhint: {hint}" if hint else message
        last, at = self._last_error
        if text == last and time.monotonic() - at < 5:
            return  # the same failure again (every keystroke of a locked index): say it once
        self._last_error = (text, time.monotonic())
        self.notify(
            printable(text, lines=True), title=title, severity="error", timeout=10, markup=False
        )

    def open_in_editor(self, argv: list[str]) -> None:
        """Run the editor in the terminal (the app is suspended meanwhile), then come back."""
        import subprocess

        from textual.app import SuspendNotSupported

        try:
            try:
                with self.suspend():
                    subprocess.run(argv, check=False)
            except SuspendNotSupported:
                if not self.is_headless:
                    self.notify("This terminal cannot hand over to an editor.", severity="error")
                    return
                subprocess.run(
                    argv,
                    check=False,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        except OSError as e:
            from kbase.errors import KbaseError

            self.notify_error(
                KbaseError(
                    f"cannot run the editor {argv[0]!r}: {e.strerror or e}",
                    "set $EDITOR (or $VISUAL), e.g. export EDITOR=nano",
                )
            )

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = next((s for s in self.screen_stack if isinstance(s, MainScreen)), None)
        if main is None:
            return
        yield SystemCommand(
            "Search mode: next",
            "Cycle keyword / semantic / hybrid (ctrl+t)",
            main.action_cycle_mode,
        )
        yield SystemCommand(
            "Filters: edit", "Path prefix and tags (ctrl+f)", main.action_toggle_filters
        )
        yield SystemCommand("Filters: clear", "Search everything again", main.action_clear_filters)
        yield SystemCommand(
            "Open note in $EDITOR", "At the hit's line (ctrl+o)", main.action_open_editor
        )
        yield SystemCommand("Back", "Previous note in the history (alt+left)", main.action_back)
        yield SystemCommand("Forward", "Next note in the history (alt+right)", main.action_forward)
        yield SystemCommand("Reload", "Read the index status again (ctrl+r)", main.action_reload)
        yield SystemCommand("Help: key bindings", "Every key of kbase browse (?)", self.action_help)

    def on_unmount(self) -> None:
        if self.handoff is not None:
            self.handoff.close()
        self.pool.close()


def run(db_path: Path) -> None:
    """Open the browser on the index at ``db_path`` (``kbase browse``)."""
    KbaseApp(db_path).run()
