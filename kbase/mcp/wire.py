"""What arrives on the wire, judged before the SDK sees it (stdio lines and HTTP bodies alike).

- A message longer than ``MAX_MESSAGE`` bytes is refused (its id, when its first bytes show one,
  gets the error, so a client waiting on it is answered).
- Bytes that are not UTF-8 JSON get JSON-RPC's Parse error (-32700, id null); JSON that is not one
  JSON-RPC 2.0 message (``null``, ``[]``, a batch, an object without ``method``) its Invalid
  Request (-32600, with the message's id when it has a usable one).
- A request whose id is that of a request of the same session still in flight is refused
  (-32600) and the first one answered as usual (``InFlight``); before, the second took the
  first's place and one of the two was never answered.
- Complaints about clients (an aborted body, a refused message) go to stderr as one short line,
  at most one a second, with a count of the ones not said (``Complaints``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pydantic_core
from mcp.server.streamable_http_manager import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.dispatcher import coerce_request_id
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

MAX_MESSAGE = DEFAULT_MAX_REQUEST_BODY_SIZE  # bytes in one message (4 MiB: the SDK's HTTP limit)
HEAD = 1024  # bytes of a refused message kept to find its id
REASON_CHARS = 200

_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,200}")')


def error(request_id: Any, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message[:REASON_CHARS])
    )


def _usable_id(value: Any) -> Any:
    """A JSON-RPC id (a string or an integer; not a bool, a float, a list), else None."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value if not isinstance(value, str) or len(value) <= REASON_CHARS else None


def id_hint(head: bytes) -> Any:
    """The id a message's first bytes give (before its params), for an error about a message too
    large to parse; None when they show none."""
    before = head.split(b'"params"', 1)[0]
    m = _ID.search(before)
    if m is None:
        return None
    try:
        return _usable_id(pydantic_core.from_json(m.group(1)))
    except ValueError:
        return None


def too_large(size: int, head: bytes) -> JSONRPCError:
    return error(
        id_hint(head),
        INVALID_REQUEST,
        f"Invalid Request: message of {size:,} bytes refused (at most {MAX_MESSAGE:,})",
    )


def classify(raw: bytes) -> JSONRPCMessage | JSONRPCError:
    """The JSON-RPC message ``raw`` holds, or the error that answers it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return error(None, PARSE_ERROR, f"Parse error: not UTF-8 (byte {e.start:,})")
    try:
        value = pydantic_core.from_json(text)
    except ValueError as e:
        return error(None, PARSE_ERROR, f"Parse error: {e}")
    if not isinstance(value, dict):
        kind = "a batch" if isinstance(value, list) else "not an object"
        return error(None, INVALID_REQUEST, f"Invalid Request: {kind} (one JSON-RPC 2.0 message)")
    if "method" in value and "id" in value and _usable_id(value["id"]) is None:
        # (else a request with a bad id would pass as a notification, and never be answered)
        return error(None, INVALID_REQUEST, "Invalid Request: an id is a string or an integer")
    try:
        return jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        if value.get("jsonrpc") != "2.0":
            why = 'no "jsonrpc": "2.0"'
        elif "method" not in value and "result" not in value and "error" not in value:
            why = "no method (nor result or error)"
        else:
            why = "a field of the wrong type"
        return error(_usable_id(value.get("id")), INVALID_REQUEST, f"Invalid Request: {why}")


class InFlight:
    """The ids of one session's requests still unanswered."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._lock = threading.Lock()

    def claim(self, message: JSONRPCMessage) -> JSONRPCError | None:
        """Note a request as in flight; the error for it when its id is already in flight."""
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            rid = (message.params or {}).get("requestId")  # it will not be answered
            if _usable_id(rid) is not None:
                self.settle(rid)
            return None
        if not isinstance(message, JSONRPCRequest):
            return None
        key = coerce_request_id(message.id)
        with self._lock:
            if key in self._ids:
                return error(
                    message.id,
                    INVALID_REQUEST,
                    f"Invalid Request: id {message.id!r} is the id of a request still in flight "
                    "(ids must be unique among requests in flight)",
                )
            self._ids.add(key)
        return None

    def settle(self, request_id: Any) -> None:
        with self._lock:
            self._ids.discard(coerce_request_id(request_id))

    def answered(self, message: JSONRPCMessage) -> None:
        """A message on its way out: a response settles its request."""
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self.settle(message.id)


class Complaints:
    """One short stderr line per kind of client fault, at most one a second each; the ones in
    between are counted in the next line."""

    EVERY = 1.0

    def __init__(self, say: Callable[[str, str], None]) -> None:
        self.say = say
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def __call__(self, kind: str, message: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -self.EVERY) < self.EVERY:
                self._quiet[kind] = self._quiet.get(kind, 0) + 1
                return
            self._last[kind] = now
            quiet = self._quiet.pop(kind, 0)
        more = f" (and {quiet:,} more since the last such line)" if quiet else ""
        self.say("warning", message + more)
