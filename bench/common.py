"""What every benchmark in bench/ shares: where things are, git, a revision exported to a folder.

Run the benchmarks as modules from the repository root (``python -m bench.eval``), so that
``bench`` and ``kbase`` import from this checkout without any ``sys.path`` change.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"  # ../shared/data: material nobody here wrote
VAULTS = SHARED / "vaults"
RETRIEVAL = SHARED / "retrieval"
QUESTIONS = REPO / "bench" / "questions"
# Indexes and material the benchmarks make, outside the repository (KBASE_BENCH_CACHE moves it).
CACHE = Path(os.environ.get("KBASE_BENCH_CACHE") or REPO.parent / "cache")


def git(*args: str) -> str:
    """A read-only git command in the repository; its output, stripped ('' when git fails)."""
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return done.stdout.strip()


def git_revision() -> str:
    """The last commit that changed the engine (kbase/, schema.sql), '+dirty' with local changes."""
    rev = git("log", "-1", "--format=%h", "--", "kbase", "schema.sql") or "unknown"
    return rev + ("+dirty" if git("status", "--porcelain", "--", "kbase", "schema.sql") else "")


def ab_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The arguments of an A/B script over vaults: revisions A and B (``.``: the working tree),
    then the vaults, as absolute paths (each side runs in a folder of its own)."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("a", help="revision A (git), or . for the working tree")
    ap.add_argument("b", help="revision B")
    ap.add_argument("vaults", nargs="+", type=lambda p: Path(p).resolve())
    return ap


def export_revision(rev: str, into: Path, *paths: str) -> Path:
    """The repository as committed at ``rev`` (``git archive``; only ``paths`` when given), in
    the folder ``into`` (made, with its parents): a base revision to run side by side with this
    checkout (``PYTHONPATH=into``)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, *paths], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into
