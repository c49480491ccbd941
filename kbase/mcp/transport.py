"""``kbase mcp --http``: the address, the bearer token and the Host/Origin checks.

Host and Origin are parsed, not matched as prefixes: ``Host: 127.0.0.1:PORT@evil.com`` is not
``127.0.0.1`` on PORT, it is no valid Host at all. A request is served when

- its Host names this server exactly: a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``),
  or the address served on, or (serving on every interface) this machine's names and addresses;
  and the port the server listens on. A Host without a port means HTTP's default port 80
  (RFC 9110, 4.2.1), so ``Host: 127.0.0.1`` is accepted only by a server on port 80 and refused
  (421) on any other: the same rule for every name.
- its Origin, when it sends one, is ``http`` or ``https`` on one of those names (any port: a
  local web page may talk to the server); ``null``, an origin with a path, a user or a
  malformed port is refused (403).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import Any

from kbase.errors import InputError

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_ENV = "KBASE_MCP_TOKEN"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


def parse_http(value: str) -> tuple[str, int]:
    """'PORT', ':PORT', 'HOST:PORT' or '[V6]:PORT' -> (host, port); the host defaults to
    127.0.0.1."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    number = int(port) if port.isascii() and port.isdigit() else -1
    if not 0 <= number <= 65535:
        raise InputError(
            f"--http {value!r} is not [HOST:]PORT", "e.g. --http 8765 or --http 127.0.0.1:8765"
        )
    return host, number


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse, before anything is opened, to serve other interfaces without a token."""
    if not token and not is_loopback(host):
        raise InputError(
            f"serving on {host} without a token would let anyone who can reach it read your notes",
            f"pass --token SECRET (or set {TOKEN_ENV}), or serve on 127.0.0.1",
        )


def parse_host(value: str) -> tuple[str, int | None] | None:
    """A Host header as (lower-case host, port or None), or None when it is not a valid
    ``uri-host [":" port]`` (RFC 9110): user info, paths, spaces, an empty or non-numeric port
    and every other extra are refused, not skipped."""
    if not value or not value.isascii():
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        try:
            host = str(ipaddress.IPv6Address(host))
        except ValueError:
            return None
    else:
        host, _, port_text = value.partition(":")
        rest = value[len(host) :]
        host = host.lower()
        if not host or not set(host) <= _NAME_CHARS or ":" in port_text:
            return None
    if not rest:
        return host, None
    digits = rest[1:]
    if rest[0] != ":" or not digits.isdigit() or len(digits) > 5 or int(digits) > 65535:
        return None
    return host, int(digits)


def parse_origin(value: str) -> tuple[str, str, int | None] | None:
    """An Origin header as (scheme, host, port or None), or None when it is not exactly
    ``scheme://host[:port]`` (RFC 6454); ``null`` is None."""
    scheme, sep, rest = value.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        return None
    parsed = parse_host(rest)
    if parsed is None:
        return None
    return scheme, parsed[0], parsed[1]


def allowed_names(host: str) -> frozenset[str]:
    """The host names a request may use: loopback, the address served on, and on every
    interface this machine's names and their addresses."""
    names: set[str] = set(LOOPBACK_NAMES)
    if host in ("0.0.0.0", "::", ""):
        machine = {socket.gethostname(), socket.getfqdn()}
        names |= {n.lower() for n in machine if n}
        for name in machine:
            try:
                names |= {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
            except OSError:
                pass
    else:
        names.add(host.lower())
    return frozenset(str(ipaddress.ip_address(n)) if _is_ip(n) else n for n in names)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostOriginGuard:
    """ASGI middleware: the DNS-rebinding checks above, before anything else sees the request
    (421 for a Host, 403 for an Origin, as the MCP transport spec asks)."""

    def __init__(self, app: Any, names: frozenset[str], port: int) -> None:
        self.app, self.names, self.port = app, names, port

    def verdict(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        parsed = parse_host(host or "")
        if parsed is None or parsed[0] not in self.names or (parsed[1] or 80) != self.port:
            return 421, "Invalid Host header"
        if origin is not None:
            o = parse_origin(origin)
            if o is None or o[1] not in self.names:
                return 403, "Invalid Origin header"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers: dict[str, list[str]] = {}
        for k, v in scope.get("headers", ()):
            headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        hosts, origins = headers.get("host", []), headers.get("origin", [])
        refused: tuple[int, str] | None
        if len(hosts) != 1 or len(origins) > 1:
            refused = (421, "Invalid Host header") if len(hosts) != 1 else (403, "Invalid Origin")
        else:
            refused = self.verdict(hosts[0], origins[0] if origins else None)
        if refused is None:
            return await self.app(scope, receive, send)
        status, text = refused
        body = text.encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class StaticToken:
    """The SDK's TokenVerifier for one shared secret (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str):
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="kbase", scopes=[])
        return None


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int) -> socket.socket:
    """A bound socket on (host, port); port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until the server accepts them
    except OSError as e:
        sock.close()
        raise InputError(
            f"cannot listen on {host}:{port}: {e.strerror}", "choose another port with --http"
        ) from e
    return sock


def auth_options(host: str, port: int, token: str | None) -> dict[str, Any]:
    """The MCPServer options that require ``Authorization: Bearer TOKEN`` (none without one)."""
    if not token:
        return {}
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    return {
        "token_verifier": StaticToken(token),
        "auth": AuthSettings(
            issuer_url=AnyHttpUrl(f"http://{url_host(host)}:{port or 80}"),
            resource_server_url=None,
        ),
    }


def serve_http(
    server: Any, host: str, sock: socket.socket, say, *, token: str | None = None, complain=None
) -> None:
    """Serve ``server`` (an MCPServer) over streamable HTTP on ``sock`` until Ctrl-C;
    ``complain(level, message)``: where lines about misbehaving clients go (``say``'s default)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from kbase.mcp import gate

    port = sock.getsockname()[1]
    # The SDK's own check matches prefixes ('127.0.0.1:*' lets '127.0.0.1:1@evil.com' in): off,
    # and HostOriginGuard in front of everything instead.
    app = server.streamable_http_app(
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=gate.IDLE_TIMEOUT,
        max_sessions=2 * gate.MAX_SESSIONS,  # (the gate keeps to MAX_SESSIONS; this, a backstop)
    )
    gated = gate.Gate(app, lambda: server.session_manager, complain or say, token)
    guarded = HostOriginGuard(gated, allowed_names(host), port)
    say("notice", f"serving on http://{url_host(host)}:{port}/mcp")
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
