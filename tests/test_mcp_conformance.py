"""The official MCP conformance suite (@modelcontextprotocol/conformance, from npm) against
``kbase mcp --http``: every server scenario that does not need the suite's own test tools,
resources and prompts (which a real server does not have) must pass.

.ci/run installs the suite into .ci/node_modules (with bun, as it needs Node >= 22); the test
never downloads anything and skips, saying why, where it is not installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_mcp import _start_http
from tests.test_mcp import index as _index

index = _index  # the fixture, under its name here

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".ci" / "node_modules" / ".bin"

# Scenarios a real server can pass: the protocol's own requests, on kbase's own tools and notes.
SCENARIOS = (
    "server-initialize",
    "ping",
    "logging-set-level",
    "completion-complete",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
# The rest call the suite's test fixtures by name (a tool test_simple_text, a resource
# test://static-text, a prompt test_simple_prompt, ...) or need a server that asks the client
# for sampling or elicitation, which a read-only index never does.
NEEDS_TEST_FIXTURES = {
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "elicitation-sep1330-enums",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
}


def _runner() -> list[str]:
    """How to run the suite: node when it is 22 or newer, else the bun .ci/run installed."""
    suite = BIN / "conformance"
    if not suite.exists():
        pytest.skip(
            "the MCP conformance suite is not installed: .ci/run installs it with npm "
            "(or: cd .ci && npm install)"
        )
    node = shutil.which("node")
    if node:
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        m = re.match(r"v(\d+)", version)
        if m and int(m.group(1)) >= 22:
            return [node, str(suite)]
    bun = BIN / "bun"
    if (
        bun.exists()
        and subprocess.run([str(bun), "--version"], capture_output=True).returncode == 0
    ):
        return [str(bun), str(suite)]
    pytest.skip("the conformance suite needs Node >= 22 or bun; neither is installed")


@pytest.mark.slow
def test_the_official_conformance_suite_passes(index, tmp_path):
    run = _runner()
    listed = subprocess.run(
        [*run, "list", "--server"], capture_output=True, text=True, timeout=120
    ).stdout
    suite_scenarios = set(re.findall(r"^\s*-\s*(\S+)", listed, re.M))
    # a scenario added by a newer suite is noticed, not silently skipped
    assert suite_scenarios and suite_scenarios <= set(SCENARIOS) | NEEDS_TEST_FIXTURES, (
        suite_scenarios - set(SCENARIOS) - NEEDS_TEST_FIXTURES
    )
    db, _ = index
    proc, url, log = _start_http(db)
    failures = []
    try:
        for scenario in SCENARIOS:
            out = tmp_path / scenario
            r = subprocess.run(
                [*run, "server", "--url", url, "--scenario", scenario, "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            checks = [c for f in out.rglob("checks.json") for c in json.loads(f.read_text("utf-8"))]
            bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
            if not checks or bad:
                failures.append((scenario, bad or r.stdout[-2000:] + r.stderr[-2000:]))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert failures == [], failures
