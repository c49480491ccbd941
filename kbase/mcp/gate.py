"""``kbase mcp --http``: what a client sends, judged before the SDK's session manager sees it, and
the sessions kept within bounds (ASGI middleware, behind the Host/Origin checks).

- A POST's body is read here in full (at most ``wire.MAX_MESSAGE`` bytes, else 413). A client
  that closes its connection mid-body costs one short stderr line (``wire.Complaints``: at most
  one a second, the rest counted), not a traceback, and never reaches the SDK.
- A body that is not one JSON-RPC message gets JSON-RPC's own error (``wire.classify``); a
  request reusing the id of a request of its session still in flight is refused with -32600,
  and both are answered.
- Sessions: one that has made no call but ``initialize`` is closed ``UNUSED_TTL`` seconds after
  it opened; a client address keeps at most ``UNUSED_PER_CLIENT`` such sessions (its oldest go
  first); and at most ``MAX_SESSIONS`` are open at all, the least recently used idle ones closed
  to make room. So ``initialize`` in a loop cannot lock other clients out or grow memory; a
  closed session answers 404, on which a client opens a new one (the protocol's rule). Idle
  sessions that were used close after ``IDLE_TIMEOUT``.

With a token, only requests that carry it are judged here (the others go straight to the SDK,
which answers 401), so a client without the token cannot close anyone's session.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import JSONRPCError, JSONRPCRequest

from kbase.mcp import wire

UNUSED_TTL = 60.0  # seconds a session may stay without a call after initialize
UNUSED_PER_CLIENT = 16  # sessions without a call that one client address may hold
MAX_SESSIONS = 256  # sessions open at once (the SDK's own default is 10,000)
IDLE_TIMEOUT = 30 * 60.0  # seconds without a request before a used session is closed
SWEEP_EVERY = 5.0  # seconds between looks for unused sessions past UNUSED_TTL

SESSION_HEADER = b"mcp-session-id"


@dataclass
class Session:
    sid: str
    client: str
    opened: float
    last: float
    used: bool = False
    busy: int = 0  # requests of it being served now (an open GET stream included)


class Gate:
    """The ASGI middleware described in the module docstring. ``manager()`` gives the SDK's
    StreamableHTTPSessionManager (made with the app, so asked for at the first request)."""

    def __init__(
        self,
        app: Any,
        manager: Callable[[], Any],
        complain: Callable[[str, str], None],
        token: str | None = None,
    ) -> None:
        self.app, self.manager = app, manager
        self.complain = wire.Complaints(complain)
        self._token = f"Bearer {token}".encode() if token else None
        self.sessions: dict[str, Session] = {}
        self.in_flight: dict[str, wire.InFlight] = {}
        self._swept = time.monotonic()

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        if self._token is None:
            return True
        given = [v for k, v in headers if k.lower() == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self._token)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not self._authorized(scope.get("headers", [])):
            return await self.app(scope, receive, send)
        headers = scope.get("headers", [])
        sid = next((v.decode("latin-1") for k, v in headers if k.lower() == SESSION_HEADER), None)
        session = self.sessions.get(sid) if sid else None
        now = time.monotonic()
        if now - self._swept >= SWEEP_EVERY:
            self._swept = now
            await self._enforce(None, "")
        if scope["method"] != "POST":
            return await self._serve(session, scope, receive, send)

        body = await self._body(scope, receive, send)
        if body is None:
            return
        message = wire.classify(body)
        if isinstance(message, JSONRPCError):
            self.complain("refused", f"refused a request: {message.error.message}")
            return await _json(send, 400, message)
        replay = _replay(body, receive)
        if sid is None:  # a new session, if the SDK opens one
            return await self._open(scope, replay, send)
        flight = self.in_flight.get(sid)
        if flight is not None:
            dup = flight.claim(message)
            if dup is not None:
                self.complain("refused", f"refused a request: {dup.error.message}")
                return await _json(send, 200, dup)
        if session is not None and isinstance(message, JSONRPCRequest):
            session.used = session.used or message.method != "initialize"
        try:
            await self._serve(session, scope, replay, send)
        finally:
            if flight is not None and isinstance(message, JSONRPCRequest):
                flight.settle(message.id)

    async def _serve(self, session: Session | None, scope, receive, send) -> None:
        if session is None:
            return await self.app(scope, receive, send)
        session.busy += 1
        session.last = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            session.busy -= 1
            session.last = time.monotonic()

    async def _body(self, scope, receive, send) -> bytes | None:
        """The whole body, or None when the request was answered (413) or abandoned."""
        declared = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > wire.MAX_MESSAGE:
            await _plain(send, 413, "Request body too large")
            return None
        parts, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                expected = f" of {int(declared):,}" if declared and declared.isdigit() else ""
                self.complain(
                    "aborted",
                    f"a client closed its connection after {size:,}{expected} bytes of its "
                    "request (nothing done)",
                )
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > wire.MAX_MESSAGE:
                await _plain(send, 413, "Request body too large")
                return None
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    async def _open(self, scope, receive, send) -> None:
        """A request without a session: the SDK opens one for an initialize; keep track of it
        and keep the sessions within bounds."""
        opened: list[str] = []

        async def watch(message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                sid = next(
                    (v for k, v in message.get("headers", []) if k.lower() == SESSION_HEADER),
                    None,
                )
                if sid is not None:
                    opened.append(sid.decode("latin-1"))
                    now = time.monotonic()
                    client = (scope.get("client") or ("?", 0))[0]
                    s = Session(opened[0], client, now, now, busy=1)
                    self.sessions[s.sid] = s
                    self.in_flight[s.sid] = wire.InFlight()
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if opened and opened[0] in self.sessions:
                s = self.sessions[opened[0]]
                s.busy -= 1
                s.last = time.monotonic()
                await self._enforce(s.sid, s.client)

    async def _enforce(self, new: str | None, client: str) -> None:
        """Close what the bounds of the module docstring say must go (never a session with a
        request being served, never the one just opened)."""
        manager = self.manager()
        live = getattr(manager, "_server_instances", {})
        for sid in [sid for sid in self.sessions if sid not in live]:
            self._forget(sid)
        now = time.monotonic()
        idle = [s for s in self.sessions.values() if not s.busy and s.sid != new]
        going = {s.sid for s in idle if not s.used and now - s.opened > UNUSED_TTL}
        if new is not None:
            unused = sorted(
                (s for s in idle if not s.used and s.client == client and s.sid not in going),
                key=lambda s: s.opened,
            )
            excess = len(unused) + 1 - UNUSED_PER_CLIENT  # (+1: the new one is unused too)
            going |= {s.sid for s in unused[: max(0, excess)]}
        rest = sorted(
            (s for s in idle if s.sid not in going), key=lambda s: (s.used, s.last)
        )  # unused first, then the least recently used
        excess = len(self.sessions) - len(going) - MAX_SESSIONS
        going |= {s.sid for s in rest[: max(0, excess)]}
        for sid in going:
            transport = live.get(sid)
            self._forget(sid)
            if transport is not None:
                await manager._discard_session(sid, transport)

    def _forget(self, sid: str) -> None:
        self.sessions.pop(sid, None)
        self.in_flight.pop(sid, None)


def _replay(body: bytes, receive):
    """A receive that gives ``body`` first, then what the connection says (a disconnect)."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _json(send, status: int, message: Any) -> None:
    body = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    await _respond(send, status, b"application/json", body)


async def _plain(send, status: int, text: str) -> None:
    await _respond(send, status, b"text/plain", text.encode())


async def _respond(send, status: int, kind: bytes, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})
