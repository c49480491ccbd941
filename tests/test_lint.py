"""The code stays lint-clean and formatted under the project's ruff rules (pyproject.toml):
line length 100, pyflakes, pycodestyle, import order, pyupgrade, bugbear, no stale noqa."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

PATHS = ("kbase", "tests", "bench")


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "command",
    [("check", "--output-format", "concise"), ("format", "--check")],
    ids=["check", "format"],
)
def test_ruff_finds_nothing(command):
    result = ruff(*command, *PATHS)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
