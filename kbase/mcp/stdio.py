"""``kbase mcp`` over stdio: one JSON-RPC message a line, read as bytes and judged by
kbase.mcp.wire before the SDK's server sees it (in place of the SDK's stdio transport, which
decoded every line whole, however long, and dropped what did not parse without an answer).

A line is read in pieces of ``READ_CHUNK`` bytes; one longer than ``wire.MAX_MESSAGE`` is skipped
as it streams in (never held in memory: a 300 MB line costs no more than a short one) and
answered with an error. While serving, descriptor 0 reads the null device and 1 writes to stderr,
so nothing printed by accident reaches the wire.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError

from kbase.mcp import wire

READ_CHUNK = 256 * 1024


class LineReader:
    """Bytes in, whole lines out (without their line break); a line over ``limit`` bytes comes
    out as ``(size, head)`` once it ends, its middle never kept."""

    def __init__(self, limit: int = wire.MAX_MESSAGE) -> None:
        self.limit = limit
        self._line = bytearray()
        self._skipping: bytes | None = None  # the head of a line over the limit
        self._skipped = 0

    def feed(self, data: bytes) -> list[bytes | tuple[int, bytes]]:
        out: list[bytes | tuple[int, bytes]] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            piece = data[start:] if nl < 0 else data[start:nl]
            if self._skipping is not None:
                self._skipped += len(piece)
            elif len(self._line) + len(piece) > self.limit:
                self._skipping = bytes(self._line[: wire.HEAD]) + piece[: wire.HEAD]
                self._skipped = len(self._line) + len(piece)
                self._line = bytearray()
            else:
                self._line += piece
            if nl < 0:
                return out
            if self._skipping is not None:
                out.append((self._skipped, self._skipping))
                self._skipping = None
            else:
                out.append(bytes(self._line))
                self._line = bytearray()  # (a new one: the old one's memory goes back)
            start = nl + 1


def _claim_stdio() -> tuple[int, int, Callable[[], None]]:
    """The wire's own descriptors (copies of 0 and 1), with 0 and 1 pointed elsewhere; and how
    to put them back."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)

    return wire_in, wire_out, restore


async def serve(server: Any, complain: Callable[[str, str], None]) -> None:
    """Serve ``server`` (an MCPServer) on this process's stdin and stdout until stdin ends."""
    fd_in, fd_out, restore = _claim_stdio()
    try:
        await run(server, fd_in, fd_out, complain)
    finally:
        restore()


async def run(server: Any, fd_in: int, fd_out: int, complain: Callable[[str, str], None]) -> None:
    low = server._lowlevel_server
    to_server, from_wire = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_wire, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    in_flight = wire.InFlight()
    say = wire.Complaints(complain)

    def write(message: Any) -> None:
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(fd_out, view) :]

    async def reader(replies: Any) -> None:
        lines = LineReader()

        async def refuse(reply: JSONRPCError) -> None:
            say("refused", f"refused a message: {reply.error.message}")
            await replies.send(SessionMessage(reply))

        async with to_server, replies:
            while True:
                data = await anyio.to_thread.run_sync(
                    os.read, fd_in, READ_CHUNK, abandon_on_cancel=True
                )
                if not data:
                    return
                for line in lines.feed(data):
                    if isinstance(line, tuple):
                        await refuse(wire.too_large(*line))
                    elif line.strip():
                        message = wire.classify(line)
                        if isinstance(message, JSONRPCError):
                            await refuse(message)
                        elif (dup := in_flight.claim(message)) is not None:
                            await refuse(dup)
                        else:
                            await to_server.send(SessionMessage(message))

    async def writer() -> None:
        async with from_server:
            async for item in from_server:
                in_flight.answered(item.message)
                await anyio.to_thread.run_sync(write, item.message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        reading = anyio.CancelScope()
        tg.start_soon(_scoped, reading, reader, to_wire.clone())
        async with to_wire:
            await low.run(from_wire, to_wire, low.create_initialization_options())
        reading.cancel()  # the server ended first: stop waiting for input


async def _scoped(scope: anyio.CancelScope, fn: Callable[..., Any], *args: Any) -> None:
    with scope:
        await fn(*args)
