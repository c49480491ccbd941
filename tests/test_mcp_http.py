"""kbase mcp --http under attack: Host and Origin headers parsed and compared exactly (DNS
rebinding), against the real server over HTTP; and a refusal to serve every interface without a
token comes at once, before the MCP SDK is even loaded."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from kbase.mcp.transport import HostOriginGuard, allowed_names, parse_host, parse_origin
from tests.test_mcp import _argv, _env, _start_http
from tests.test_mcp import index as _index

index = _index  # the fixture, under its name here

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _hosts(port: int) -> list[tuple[str, int]]:
    """(Host header, expected status) pairs."""
    return [
        (f"127.0.0.1:{port}", 200),
        (f"localhost:{port}", 200),
        (f"LOCALHOST:{port}", 200),
        (f"[::1]:{port}", 200),
        (f"127.0.0.1:{port}@evil.com", 421),  # the case: a prefix match let it in
        (f"localhost:{port}@evil.com", 421),
        (f"127.0.0.1:{port}.evil.com", 421),
        (f"127.0.0.1:{port}/x", 421),
        (f"127.0.0.1:{port + 1}", 421),  # another port
        ("127.0.0.1", 421),  # no port means port 80, and the server is not on 80
        ("127.0.0.1:", 421),
        ("127.0.0.1:99999", 421),
        (f"127.0.0.1.evil.com:{port}", 421),
        (f"evil.com:{port}", 421),
        (f"localhost.:{port}", 421),
        (f"[::1]@evil.com:{port}", 421),
        (f"user@127.0.0.1:{port}", 421),
        ("", 421),
    ]


def _origins(port: int) -> list[tuple[str, int]]:
    return [
        (f"http://127.0.0.1:{port}", 200),
        ("http://localhost:3000", 200),  # a local web page on another port may call
        ("https://localhost", 200),
        ("http://[::1]:8080", 200),
        (f"http://localhost:{port}@evil.com", 403),  # the case
        (f"http://127.0.0.1:{port}@evil.com", 403),
        ("http://evil.com", 403),
        (f"http://localhost.evil.com:{port}", 403),
        ("http://localhost:3000/path", 403),
        ("null", 403),
        ("file://", 403),
        ("ftp://localhost", 403),
        ("http://localhost:abc", 403),
        ("localhost:3000", 403),
    ]


def _status(port: int, headers: list[tuple[str, str]], method: str = "POST") -> int:
    """Send one request with exactly these headers (as curl -H would, no client-side checks)
    and return the response's status code."""
    body = json.dumps(INIT).encode()
    lines = [f"{method} /mcp HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines += [f"{k}: {v}" for k, v in HEADERS.items()]
    lines += [f"content-length: {len(body)}", "connection: close", "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + body)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_host_and_origin_are_compared_exactly_by_the_real_server(index):
    db, _ = index
    proc, url, log = _start_http(db)
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        good = [("host", f"127.0.0.1:{port}")]
        for host, expect in _hosts(port):
            assert _status(port, [("host", host)]) == expect, host
        for origin, expect in _origins(port):
            assert _status(port, [*good, ("origin", origin)]) == expect, origin
        # the SSE stream (GET) and the session's end (DELETE) are checked the same way
        for method in ("GET", "DELETE"):
            assert _status(port, [("host", f"127.0.0.1:{port}@evil.com")], method) == 421
        # two Host headers, or two Origins: refused whatever the first says
        assert _status(port, [*good, ("host", "evil.com")]) in (400, 421)
        assert _status(port, [*good, ("origin", "http://localhost"), ("origin", "http://e.x")]) in (
            400,
            403,
        )
        assert proc.poll() is None  # still serving
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_host_rules():
    """The parsing in detail, including the port-80 rule for a Host without a port."""
    assert parse_host("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_host("[::1]:80") == ("::1", 80)
    assert parse_host("[0:0:0:0:0:0:0:1]:80") == ("::1", 80)  # one spelling of an address
    assert parse_host("Example.COM") == ("example.com", None)
    for bad in ("a b", "a:1:2", "[::1", "::1", "a:-1", "a:+1", "a:1x", "é.com", "a@b", "a:"):
        assert parse_host(bad) is None, bad
    assert parse_origin("HTTP://LocalHost:1") == ("http", "localhost", 1)
    assert parse_origin("null") is None and parse_origin("http://a/") is None

    on_80 = HostOriginGuard(None, allowed_names("127.0.0.1"), 80)
    assert on_80.verdict("127.0.0.1", None) is None  # no port: HTTP's default, 80
    assert on_80.verdict("localhost:80", None) is None
    on_8765 = HostOriginGuard(None, allowed_names("127.0.0.1"), 8765)
    assert on_8765.verdict("127.0.0.1", None) == (421, "Invalid Host header")
    # serving on one address: that address too, and nothing else
    lan = HostOriginGuard(None, allowed_names("192.0.2.7"), 8765)
    assert lan.verdict("192.0.2.7:8765", "http://192.0.2.7:8765") is None
    assert lan.verdict("192.0.2.8:8765", None) is not None


def test_every_interface_without_a_token_is_refused_at_once(index):
    """The refusal comes before the index is opened or the SDK imported (it took 25 s to exit)."""
    db, _ = index
    code = (
        "import sys\n"
        "from kbase.cli.app import cli\n"
        f"sys.argv = ['kbase', '--db', {str(db)!r}, 'mcp', '--http', '0.0.0.0:0']\n"
        "try:\n"
        "    cli()\n"
        "except SystemExit as e:\n"
        "    loaded = [m for m in sys.modules if m.split('.')[0] in"
        " ('mcp', 'mcp_types', 'uvicorn', 'apsw', 'numpy')]\n"
        "    print('loaded:', sorted(loaded), file=sys.stderr)\n"
        "    raise\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert r.returncode == 1 and "without a token" in r.stderr and "--token" in r.stderr
    assert "loaded: []" in r.stderr, r.stderr
    # the same through the command, as a user runs it: it ends, it does not serve
    r = subprocess.run(
        [sys.executable, *_argv(db, "--http", "[::]:0")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 1 and "without a token" in r.stderr
