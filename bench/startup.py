"""Issue 28 item 11, side by side: how long ``kbase`` takes to start, against a base revision and
against ripgrep over the same notes.

    python -m bench.startup [--rev REV] [--rounds 15] [--notes 10000] [--vault DIR ...] [--qmd]

Each round runs, alternating the order: ``kbase --version``, ``kbase --help`` and ``kbase search
-m keyword QUERY`` with the base revision (A, ``git archive REV``) and with this checkout (B),
and ``rg -i -l QUERY VAULT`` (files that contain the query, which is what a keyword search over
files answers at least). Each kbase is started the way its console script starts it (pip's
wrapper: ``import re, sys`` and the ``[project.scripts]`` entry point), with a bytecode cache
(``PYTHONPYCACHEPREFIX``; this machine sets PYTHONDONTWRITEBYTECODE, an installed kbase has its
.pyc files), warmed before anything is timed. Medians of wall and CPU time (user + sys of the
child) are printed with the load average before and after; results go to
bench/out/startup.json.

``--qmd``: qmd's ``search`` (BM25, bun; bench/install_qmd.sh installs it) on the same vault
joins each search's rotation, from a collection made beforehand in a private HOME (issue 36:
keyword ``kbase search`` no slower than qmd's).

``--hybrid DB``: a hybrid ``kbase search QUERY`` (``--hybrid-query``, repeatable: each query a
case, and all of them together) on a copy of the embedded index DB, cold (no running kbase:
``KBASE_HANDOFF=0``), A beside B in the same rotation (issue 36: <= 0.25 s on a quiet machine).
The model's cached graph is built during the warm-up.

Vaults: the shared vaults (../shared/data/vaults, each indexed keyword-only) and a generated
vault of ``--notes`` notes (bench/gen_vault.py), so that the comparison with rg shows how each
grows with the size of the notes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, export_revision

OUT = REPO / "bench" / "out"
SHARED = REPO.parent / "shared" / "data" / "vaults"

# (vault, query): a word each vault uses a few times, so that both tools find something.
QUERIES = {
    "obsidian-tasks-docs": "recurrence",
    "foam-docs": "footnote",
    "rust-book": "borrow",
    "rust-book-zh": "所有权",
    "rust-book-ja": "所有権",
    "generated": "throughput",
}


def entry_point(code: Path) -> str:
    """The ``kbase`` console script of a checkout, as pip writes it."""
    m = re.search(r'^kbase = "([\w.]+):(\w+)"', (code / "pyproject.toml").read_text(), re.M)
    if m is None:
        raise SystemExit(f"{code}/pyproject.toml has no kbase script")
    module, attr = m.groups()
    return f"import re, sys; from {module} import {attr}; sys.argv[0] = 'kbase'; sys.exit({attr}())"


def env_for(code: Path, data: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **env,
        "PYTHONPATH": str(code),
        "XDG_DATA_HOME": str(data),
        "PYTHONPYCACHEPREFIX": str(cache),
    }


def run(cmd: list[str], env: dict | None, cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD~1", help="base revision (A)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--notes", type=int, default=10000, help="generated vault size (0: none)")
    ap.add_argument("--vault", action="append", type=Path, help="vaults (default: the shared)")
    ap.add_argument("--qmd", action="store_true", help="qmd's search beside (bench/install_qmd.sh)")
    ap.add_argument(
        "--qmd-dir",
        type=Path,
        default=Path(os.environ.get("QMD_DIR", "~/.cache/kbase-bench/qmd")).expanduser(),
    )
    ap.add_argument("--hybrid", type=Path, help="an embedded index: cold hybrid searches too")
    ap.add_argument(
        "--hybrid-query", action="append", help="(repeatable) default: 'what is a lifetime'"
    )
    a = ap.parse_args()
    qmd = None
    if a.qmd:
        from bench.run import find_qmd

        qmd = find_qmd(a.qmd_dir)
        if qmd is None:
            raise SystemExit(f"qmd not found in {a.qmd_dir}: run bench/install_qmd.sh first")
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not installed: apt-get install ripgrep")
    work = Path(tempfile.mkdtemp(prefix="kbase-startup-"))
    sides = {"A": export_revision(a.rev, work / "a" / "kbase-src"), "B": REPO}
    data, cache = work / "data", work / "pycache"
    envs = {k: env_for(code, data, cache) for k, code in sides.items()}
    scripts = {k: entry_point(code) for k, code in sides.items()}
    vaults = a.vault or [SHARED / v for v in QUERIES if (SHARED / v).exists()]
    if a.notes:
        gen = work / "generated"
        subprocess.run(
            [
                sys.executable,
                str(REPO / "bench" / "gen_vault.py"),
                str(gen),
                "--notes",
                str(a.notes),
            ],
            check=True,
            capture_output=True,
        )
        vaults.append(gen)
    indexes = {}
    for v in vaults:
        db = work / f"{v.name}.db"
        subprocess.run(
            [
                sys.executable,
                "-c",
                scripts["B"],
                "--db",
                str(db),
                "index",
                "-q",
                "--no-embed",
                str(v),
            ],
            env=envs["B"],
            cwd=work,
            check=True,
            capture_output=True,
        )
        indexes[v] = db
    envs["qmd"] = {}
    if qmd:
        from bench.run import qmd_env

        envs["qmd"] = qmd_env(qmd, str(work / "qmd-home"), work)
        for i, v in enumerate(indexes):
            subprocess.run(
                [*qmd, "collection", "add", str(v), "--name", f"v{i}"],
                env=envs["qmd"],
                check=True,
                capture_output=True,
            )
    cases: dict[str, dict[str, list[str] | None]] = {
        "--version": {k: [sys.executable, "-c", scripts[k], "--version"] for k in sides},
        "--help": {k: [sys.executable, "-c", scripts[k], "--help"] for k in sides},
    }
    for i, (v, db) in enumerate(indexes.items()):
        q = QUERIES.get(v.name, "note")
        cases[f"search -m keyword {q!r} ({v.name})"] = {
            **{
                k: [sys.executable, "-c", scripts[k], "--db", str(db), "search", "-m", "keyword", q]
                for k in sides
            },
            "rg": ["rg", "-i", "-l", q, str(v)],
            **({"qmd": [*qmd, "search", "-c", f"v{i}", q, "-n", "10"]} if qmd else {}),
        }
    if a.hybrid is not None:
        copy = work / "hybrid.db"
        shutil.copyfile(a.hybrid, copy)
        for q in a.hybrid_query or ["what is a lifetime"]:
            cases[f"search {q!r} (hybrid, cold; {a.hybrid.name})"] = {
                k: [sys.executable, "-c", scripts[k], "--db", str(copy), "search", "-n", "5", q]
                for k in sides
            }
        for k in sides:
            envs[k]["KBASE_HANDOFF"] = "0"
    for case in cases.values():  # warm: bytecode caches, the page cache
        for cmd in case.values():
            for _ in range(2):
                subprocess.run(
                    cmd,
                    env=envs["qmd"] if qmd and cmd[0] == qmd[0] else envs["B"],
                    capture_output=True,
                )
        for k in sides:
            subprocess.run(case[k], env=envs[k], cwd=work, check=True, capture_output=True)
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        c: {k: [] for k in case} for c, case in cases.items()
    }
    load_before = load()
    for r in range(a.rounds):
        for c, case in cases.items():
            order = list(case) if r % 2 == 0 else list(reversed(case))
            for k in order:
                env = None if k == "rg" else envs[k] or None
                times[c][k].append(run(case[k], env, work))
    load_after = load()
    result = {"rev": a.rev, "rounds": a.rounds, "load": [load_before, load_after], "cases": {}}
    print(f"A = {a.rev}, B = this checkout; {a.rounds} rounds; load {load_before} -> {load_after}")
    print(f"{'case':<58}{'side':>5}{'wall ms':>10}{'cpu ms':>9}")
    for c, per in times.items():
        result["cases"][c] = {}
        for k, xs in per.items():
            wall = statistics.median(x[0] for x in xs) * 1000
            cpu = statistics.median(x[1] for x in xs) * 1000
            result["cases"][c][k] = {"wall_ms": round(wall, 1), "cpu_ms": round(cpu, 1)}
            print(f"{c:<58}{k:>5}{wall:>10.1f}{cpu:>9.1f}")
    hybrid = [c for c in times if "(hybrid, cold;" in c]
    if len(hybrid) > 1:  # every hybrid query's runs together
        for k in sides:
            xs = [x for c in hybrid for x in times[c][k]]
            wall = statistics.median(x[0] for x in xs) * 1000
            cpu = statistics.median(x[1] for x in xs) * 1000
            label = f"hybrid, cold: all {len(hybrid)} queries"
            result["cases"].setdefault(label, {})[k] = {
                "wall_ms": round(wall, 1),
                "cpu_ms": round(cpu, 1),
            }
            print(f"{label:<58}{k:>5}{wall:>10.1f}{cpu:>9.1f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "startup.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
