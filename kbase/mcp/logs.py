"""The server's log messages to its clients (MCP logging): warnings and progress reach a client
at the level it set with ``logging/setLevel`` (``warning`` until it sets one).

Two kinds of message:

- about one call (the notes found changed on disk since indexed, ...): sent on that call's own
  stream, before its result;
- from the background (a watch run, idle embedding, an error there, the index file replaced):
  sent to every connected client whose level allows it, on its connection's own channel (the
  stdio pipe, or the SSE stream an HTTP client opened with GET). Everything but debug also goes
  to stderr, where a client that shows the server's log shows it.

Clients of the 2026-07-28 protocol ask per request instead (the ``io.modelcontextprotocol/
logLevel`` request meta); the SDK applies that, and they get the messages about their calls.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
import weakref
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import EmptyResult, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from kbase.mcp.backend import to_stderr

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LEVEL = "warning"
LOGGER = "kbase"


def _connection(session: Any) -> Any:
    # ServerSession is built per request; the connection behind it is what lasts.
    return getattr(session, "_connection", session)


def _quiet(coro_fn, *args, **kwargs):
    """Call one of the SDK's logging methods (deprecated for 2026-07-28, not before it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return coro_fn(*args, **kwargs)


class ClientLog:
    """The level each connected client asked for, and the sending of messages to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the SDK's hooks -------------------------------------------------------------------------
    async def middleware(self, ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        """Every request: remember its client (so background messages can reach it)."""
        self._seen(ctx.session)
        return await call_next(ctx)

    async def set_level(self, ctx: ServerRequestContext, params: SetLevelRequestParams):
        """``logging/setLevel``: messages at ``params.level`` and above from now on."""
        with self._lock:
            self._levels[_connection(ctx.session)] = params.level
        return EmptyResult()

    def _seen(self, session: Any) -> None:
        conn = _connection(session)
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            if conn not in self._levels:
                try:
                    self._levels[conn] = DEFAULT_LEVEL
                except TypeError:  # not weakly referable: not a connection we can reach later
                    pass

    def level(self, session: Any) -> str:
        with self._lock:
            return self._levels.get(_connection(session), DEFAULT_LEVEL)

    @staticmethod
    def allows(threshold: str, level: str) -> bool:
        return LEVELS.index(level) >= LEVELS.index(threshold)

    # -- sending ----------------------------------------------------------------------------------
    async def about_call(self, ctx: Any, level: str, message: str) -> None:
        """A message about the call ``ctx`` (the SDK's tool Context) is serving."""
        rc = ctx.request_context
        session = rc.session
        modern = session.protocol_version in MODERN_PROTOCOL_VERSIONS
        if not modern and not self.allows(self.level(session), level):
            return  # before 2026-07-28 the filtering is the server's job
        try:
            await _quiet(
                session.send_log_message,
                level,
                message,
                logger=LOGGER,
                related_request_id=rc.request_id,
            )
        except Exception:  # a client gone mid-call: the result will not arrive either
            pass

    def broadcast(self, level: str, message: str) -> None:
        """From any thread: ``message`` to stderr and to every client whose level allows it."""
        to_stderr(level, message)
        with self._lock:
            loop = self._loop
            targets = [c for c, lv in self._levels.items() if self.allows(lv, level)]
        if loop is None or loop.is_closed() or not targets:
            return
        for conn in targets:
            try:
                coro = _quiet(conn.log, level, message, LOGGER)
                asyncio.run_coroutine_threadsafe(coro, loop)
            except Exception:
                pass
