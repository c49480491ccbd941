"""The package type-checks: mypy (a test dependency, configured in pyproject.toml) finds nothing."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_mypy_finds_no_errors():
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
