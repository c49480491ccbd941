"""kbase keyword-index benchmarks: one command, JSON in bench/out/, a Markdown table on stdout.

    python -m bench.run                  # synthetic 10,000-note vault + ../shared/data/vaults/*
    python -m bench.run --notes 2000     # smaller synthetic vault (0 = none)
    python -m bench.run --peer qmd       # also time qmd (install it with bench/install_qmd.sh)
    python -m bench.run --profile        # also cProfile the in-process index
                                         # (bench/out/profile-*.txt)
    python -m bench.run --rev HEAD       # kbase as committed at a revision, not the working tree
    python -m bench.run --ingest 5 --peer qmd --base main   # fresh index only: A/B/C alternated

Run it with the project's Python (the one whose bin/ holds the ``kbase`` script). Child processes
cache their bytecode under bench/out/pycache, as an installed kbase would have it.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import io
import json
import os
import platform
import pstats
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import apsw

from bench.common import REPO, export_revision
from bench.gen_vault import generate

kbase = None  # imported in main(), from the working tree or from --rev

BENCH = REPO / "bench"
OUT = BENCH / "out"
REAL_VAULTS = REPO / ".." / "shared" / "data" / "vaults"
KBASE = [str(Path(sys.executable).parent / "kbase")]
GNU_TIME = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None
ENV = dict(
    os.environ
)  # for kbase processes; main() adds the bytecode cache (and PYTHONPATH for --rev)
# The keyword index only: no embedding while indexing (bench/retrieval.py measures embeddings).
NO_EMBED: dict = {"cli": [], "api": {}}  # set by setup_kbase() when kbase embeds by default
TARGETS = {  # metric: (comparison, limit, label)
    "fresh_notes_per_s": (">=", 1000, "fresh index (CLI) notes/s"),
    "reindex_nochange_s": ("<=", 0.5, "no-change re-index (CLI) s"),
    "query_p50_ms": ("<=", 5.0, "in-process query p50 ms"),
    "cli_search_s": ("<=", 0.15, "`kbase search` process s"),
    "db_to_text": ("<=", 2.5, "db size / text size"),
}


# measuring -------------------------------------------------------------------------------------
def run(cmd: list[str], env: dict | None = None, rss: bool = False) -> dict:
    """Run a process to completion: wall time, CPU time, stdout, and with ``rss`` its peak RSS.

    Peak RSS comes from GNU time: a child's own rusage would report this (large) process's RSS,
    because Linux carries the high-water mark of the forking process across exec."""
    with (
        tempfile.NamedTemporaryFile() as out,
        tempfile.NamedTemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as mem,
    ):
        full = [GNU_TIME, "-f", "%M", "-o", mem.name, *cmd] if rss and GNU_TIME else cmd
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        code = subprocess.run(full, stdout=out, stderr=err, env=env or ENV).returncode
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        maxrss = int(mem.read().split()[-1]) if rss and GNU_TIME and not code else None
    if code:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {stderr.strip()[-800:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "s": wall,
        "cpu_s": cpu,
        "maxrss_mb": maxrss / 1024 if maxrss else None,
        "stdout": stdout,
    }


def median_run(cmds: list[list[str]], env: dict | None = None) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of running each command once."""
    runs = [run(c, env) for c in cmds]
    return statistics.median(r["s"] for r in runs), statistics.median(r["cpu_s"] for r in runs)


def db_bytes(path: Path) -> int:
    """Size of a SQLite file after folding its WAL back in (plus whatever WAL is left)."""
    con = apsw.Connection(str(path))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    con.close()
    return sum(os.path.getsize(f) for f in (str(path), f"{path}-wal") if os.path.exists(f))


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]  # nearest rank


class Edit:
    """Changes one note (a line appended, a new word each time) and puts it back afterwards."""

    def __init__(self, path: Path) -> None:
        self.path, self.original, self.n = path, path.read_bytes(), 0

    def __call__(self) -> None:
        self.n += 1
        self.path.write_bytes(
            self.original + f"\nEdited again ({self.n}): zzbenchedit{self.n}.\n".encode()
        )

    def restore(self) -> None:
        self.path.write_bytes(self.original)


def middle_note(vault: Path) -> Path:
    notes = sorted(vault.rglob("*.md"))
    return notes[len(notes) // 2]


# queries ---------------------------------------------------------------------------------------
def make_queries(vault: Path, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (kind, query) pairs drawn from the vault's own words: 1-3 words, phrases, prefixes,
    exclusions. Words skip the 10 most frequent (the, of, ...) but follow the vault's
    frequencies."""
    rng = random.Random(seed)
    files = sorted(p for p in vault.rglob("*") if p.suffix.lower() in (".md", ".markdown", ".txt"))
    words, bigrams = Counter(), Counter()
    for p in rng.sample(files, min(len(files), 1500)):
        for line in p.read_text(encoding="utf-8", errors="replace").lower().splitlines():
            toks = re.findall(r"[a-z]{3,}", line)
            words.update(toks)
            bigrams.update(zip(toks, toks[1:]))
    ranked = [w for w, c in words.most_common() if c >= 2][10:]
    pool = ranked[: max(50, len(ranked) // 2)]  # the more frequent half of the vocabulary
    phrases = [" ".join(b) for b, c in bigrams.most_common(2000) if c >= 2 and b[0] != b[1]]
    word = lambda: rng.choice(pool)  # noqa: E731
    mix = [
        ("1 word", 25),
        ("2 words", 25),
        ("3 words", 15),
        ("phrase", 15),
        ("prefix", 10),
        ("exclusion", 10),
    ]
    out = []
    for kind, share in mix:
        for _ in range(round(n * share / 100)):
            if kind == "phrase":
                q = f'"{rng.choice(phrases)}"'
            elif kind == "prefix":
                q = word()[: rng.randint(3, 4)] + "*"
            elif kind == "exclusion":
                q = f"{word()} -{word()}"
            else:
                q = " ".join(word() for _ in range(int(kind[0])))
            out.append((kind, q))
    rng.shuffle(out)
    return out[:n]


def query_latency(db: Path, queries: list[tuple[str, str]]) -> dict:
    kb = kbase.open(db)
    for _, q in queries[:10]:  # warm the connection and the page cache
        kb.search(q)
    times, by_kind, hits = [], {}, []
    for kind, q in queries:
        t0 = time.perf_counter()
        found = kb.search(q)
        ms = (time.perf_counter() - t0) * 1000
        times.append(ms)
        by_kind.setdefault(kind, []).append(ms)
        hits.append(len(found))
    kb.close()
    return {
        "query_p50_ms": statistics.median(times),
        "query_p95_ms": percentile(times, 95),
        "query_max_ms": max(times),
        "query_mean_hits": statistics.mean(hits),
        "query_p50_ms_by_kind": {k: round(statistics.median(v), 2) for k, v in by_kind.items()},
    }


# one corpus ------------------------------------------------------------------------------------
def bench_kbase(name: str, vault: Path, work: Path, a: argparse.Namespace) -> dict:
    db = work / f"{name}.db"
    index = [*KBASE, "--db", str(db), "index", str(vault), "-q", *NO_EMBED["cli"]]
    r = run(index, rss=True)
    con = apsw.Connection(str(db))
    notes, text = con.execute("SELECT count(*), coalesce(sum(size), 0) FROM documents").fetchone()
    chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    con.close()
    res = {
        "notes": notes,
        "chunks": chunks,
        "text_bytes": text,
        "fresh_s": r["s"],
        "fresh_cpu_s": r["cpu_s"],
        "fresh_notes_per_s": notes / r["s"],
        "fresh_notes_per_cpu_s": notes / r["cpu_s"],
        "fresh_mb_per_s": text / 1e6 / r["s"],
        "fresh_maxrss_mb": r["maxrss_mb"],
    }
    res["db_bytes"] = db_bytes(db)
    res["db_to_text"] = res["db_bytes"] / text

    runs = [run(index, rss=True) for _ in range(a.repeat)]
    res["reindex_nochange_s"] = statistics.median(x["s"] for x in runs)
    res["reindex_nochange_cpu_s"] = statistics.median(x["cpu_s"] for x in runs)
    res["reindex_nochange_maxrss_mb"] = runs[-1]["maxrss_mb"]
    res["reindex_one_changed_s"] = reindex_one_changed(vault, [index] * a.repeat)

    queries = make_queries(vault, a.queries, a.seed)
    res.update(query_latency(db, queries))
    plain = [q for kind, q in queries if kind.endswith(("word", "words"))][: a.cli_runs]
    res["cli_queries"] = plain
    res["cli_search_s"], res["cli_search_cpu_s"] = median_run(
        [[*KBASE, "--db", str(db), "search", q] for q in plain]
    )
    res["cli_version_s"] = median_run([[*KBASE, "--version"]] * 5)[
        0
    ]  # process floor: Python + click

    res.update(inproc_index(vault, work / f"{name}-inproc.db"))
    if a.profile:  # a separate run: cProfile roughly doubles the time
        prof = cProfile.Profile()
        prof.runcall(kbase.open(work / f"{name}-profile.db").index, [vault], **NO_EMBED["api"])
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s).strip_dirs()
        st.sort_stats("cumulative").print_stats(45)
        st.sort_stats("tottime").print_stats(30)
        (OUT / f"profile-{name}.txt").write_text(s.getvalue())
        prof.dump_stats(OUT / f"profile-{name}.pstats")
    return res


def inproc_index(vault: Path, db: Path) -> dict:
    """A fresh in-process index, timing its stages (decode, parse, chunk, write incl. commit)."""
    from kbase.indexer import prepare, writes
    from kbase.ingest import derive

    spent: Counter = Counter()

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return wrapper

    hooks = [
        (m, n)
        for m, n in [
            (prepare, "decode"),
            (prepare, "parse"),
            (derive, "chunk"),
            (writes, "write_document"),
        ]
        if hasattr(m, n)
    ]
    saved = [getattr(m, n) for m, n in hooks]
    for (m, n), fn in zip(hooks, saved):
        setattr(m, n, timed(n, fn))
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        report = kbase.open(db).index([vault], **NO_EMBED["api"])
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        for (m, n), fn in zip(hooks, saved):
            setattr(m, n, fn)
    spent["rest (walk, stat, read, hash, open)"] = total - sum(spent.values())
    return {
        "inproc_fresh_s": total,
        "inproc_fresh_cpu_s": cpu,
        "inproc_fresh_notes_per_s": report.new / total,
        "inproc_stages_s": {k: round(v, 3) for k, v in spent.items()},
    }


def reindex_one_changed(vault: Path, cmds: list[list[str]], env: dict | None = None) -> float:
    """Median time of ``cmds`` each run after changing one note (restored afterwards, and
    re-synced)."""
    edit, times = Edit(middle_note(vault)), []
    try:
        for cmd in cmds:
            edit()
            times.append(run(cmd, env)["s"])
    finally:
        edit.restore()
    run(cmds[0], env)
    return statistics.median(times)


def find_qmd(qmd_dir: Path) -> list[str] | None:
    js = qmd_dir / "node_modules/@tobilu/qmd/dist/cli/qmd.js"
    bun = qmd_dir / "node_modules/.bin/bun"
    return [str(bun), str(js)] if js.exists() and bun.exists() else None


def qmd_env(qmd: list[str], home: str, work: Path) -> dict:
    """A private HOME keeps qmd's index and config out of yours; bun's transpiler cache is
    shared."""
    return {
        **os.environ,
        "HOME": home,
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_CONFIG_HOME": f"{home}/.config",
        "BUN_RUNTIME_TRANSPILER_CACHE_PATH": str(work / "bun-cache"),
        "PATH": f"{Path(qmd[0]).parent}:{os.environ['PATH']}",
    }


def bench_qmd(
    qmd: list[str], vault: Path, work: Path, queries: list[str], a: argparse.Namespace
) -> dict:
    """qmd's keyword path: collection add (index), update (re-check), search (BM25), db size."""
    with tempfile.TemporaryDirectory(prefix="kbase-bench-qmd-") as home:
        warm = qmd_env(
            qmd, f"{home}/warm", work
        )  # fill bun's transpiler cache, as any second use would have it
        run([*qmd, "collection", "add", str(warm_vault(work)), "--name", "w"], warm)
        run([*qmd, "search", "-c", "w", "note", "-n", "10"], warm)
        env = qmd_env(qmd, f"{home}/run", work)
        r = run([*qmd, "collection", "add", str(vault), "--name", "v"], env, rss=True)
        m = re.search(r"Indexed: (\d+) new", r["stdout"])
        notes = int(m.group(1)) if m else None
        res = {
            "notes": notes,
            "fresh_s": r["s"],
            "fresh_cpu_s": r["cpu_s"],
            "fresh_maxrss_mb": r["maxrss_mb"],
            "fresh_notes_per_s": notes / r["s"] if notes else None,
        }
        res["reindex_nochange_s"], res["reindex_nochange_cpu_s"] = median_run(
            [[*qmd, "update"]] * a.repeat, env
        )
        res["reindex_one_changed_s"] = reindex_one_changed(
            vault, [[*qmd, "update"]] * a.repeat, env
        )
        res["cli_search_s"], res["cli_search_cpu_s"] = median_run(
            [[*qmd, "search", "-c", "v", q, "-n", "10"] for q in queries], env
        )
        res["cli_version_s"] = median_run([[*qmd, "--help"]] * 5, env)[0]
        res["db_bytes"] = sum(db_bytes(p) for p in Path(f"{home}/run").rglob("*.sqlite"))
    return res


def ingest_rounds(
    vault: Path, work: Path, sides: dict[str, tuple[list[str], dict]], rounds: int
) -> dict:
    """Fresh index only, each side in turn, ``rounds`` times (A B C A B C ...: the machine's speed
    drifts, so every side sees the same drift). ``sides``: name -> (command without the database
    or vault, environment); a side is given a new database (kbase) or HOME (qmd) each round."""
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for i in range(rounds):
        for name, (cmd, env) in sides.items():
            target = work / f"ingest-{name}-{i}"
            if name == "qmd":
                full = [*cmd, "collection", "add", str(vault), "--name", "v"]
                env = qmd_env(cmd, str(target), work)
            else:
                full = [
                    *cmd,
                    "--db",
                    str(target / "index.db"),
                    "index",
                    str(vault),
                    "-q",
                    "--no-embed",
                ]
            target.mkdir()
            r = run(full, env)
            r["db_bytes"] = sum(
                db_bytes(p) for p in target.rglob("*") if p.suffix in (".db", ".sqlite")
            )
            if name == "kbase" and i == rounds - 1:
                r["dbstat"] = dbstat(target / "index.db")
            r["load"] = os.getloadavg()[0]
            runs[name].append(r)
            shutil.rmtree(target)
    out = {}
    for name, rs in runs.items():
        out[name] = {
            "fresh_s": statistics.median(r["s"] for r in rs),
            "fresh_cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "fresh_s_all": [round(r["s"], 3) for r in rs],
            "fresh_cpu_s_all": [round(r["cpu_s"], 3) for r in rs],
            "db_bytes": rs[-1]["db_bytes"],
            "load": [round(r["load"], 1) for r in rs],
        }
        if "dbstat" in rs[-1]:
            out[name]["dbstat"] = rs[-1]["dbstat"]
    return out


def dbstat(db: Path) -> dict[str, int]:
    """Bytes of pages per table and index (SQLite's dbstat), largest first."""
    con = apsw.Connection(str(db))
    rows = con.execute(
        "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
    ).fetchall()
    con.close()
    return dict(rows)


def ingest_table(name: str, vault: Path, res: dict) -> str:
    notes = sum(1 for p in vault.rglob("*") if p.suffix.lower() in (".md", ".markdown", ".txt"))
    ref = res.get("qmd")
    lines = [
        f"### {name}: {notes:,} files",
        "",
        "| side | fresh index s (median) | CPU s (median) | CPU ms per note |"
        " db MB | wall / qmd | db / qmd |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, r in res.items():
        vs = f"{r['fresh_s'] / ref['fresh_s']:.2f}" if ref else "–"
        db = f"{r['db_bytes'] / ref['db_bytes']:.2f}" if ref and ref["db_bytes"] else "–"
        lines.append(
            f"| {side} | {r['fresh_s']:.3f} | {r['fresh_cpu_s']:.3f}"
            f" | {r['fresh_cpu_s'] / notes * 1000:.3f}"
            f" | {r['db_bytes'] / 1e6:.2f} | {vs} | {db} |"
        )
    loads = [x for r in res.values() for x in r["load"]]
    if "dbstat" in res.get("kbase", {}):
        stat = res["kbase"]["dbstat"]
        lines += [
            "",
            "kbase's file by table and index (dbstat, MB): "
            + ", ".join(f"{k} {v / 1e6:.2f}" for k, v in list(stat.items())[:12])
            + f"; the other {len(stat) - 12}"
            f" {sum(list(stat.values())[12:]) / 1e6:.2f}.",
        ]
    each = ", ".join(
        f"{s} " + " ".join(f"{x:.3f}" for x in r["fresh_s_all"]) for s, r in res.items()
    )
    lines += ["", f"Each run: {each} s; 1-min load {min(loads):.1f}-{max(loads):.1f}."]
    return "\n".join(lines)


def warm_vault(work: Path) -> Path:
    """Two tiny notes, to run each command once before timing (bytecode and transpiler caches)."""
    v = work / "warm-vault"
    if not v.exists():
        v.mkdir(parents=True)
        (v / "a.md").write_text("---\ntags: [x]\n---\n# A note\n\nSee [[b]]. Some words #tag.\n")
        (v / "b.md").write_text("# B\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nx = 1\n```\n")
    return v


def synthetic_vault(notes: int, seed: int) -> Path:
    """The generated vault, kept in bench/out/vaults/ and made again when gen_vault.py changes."""
    vault = OUT / "vaults" / f"synthetic-{notes}-s{seed}"
    marker = vault.with_suffix(".json")
    version = hashlib.sha256((BENCH / "gen_vault.py").read_bytes()).hexdigest()[:12]
    if not marker.exists() or json.loads(marker.read_text()).get("generator") != version:
        shutil.rmtree(vault, ignore_errors=True)
        t0 = time.perf_counter()
        info = {**generate(vault, notes, seed), "generator": version}
        print(f"   generated in {time.perf_counter() - t0:.1f} s: {info}", file=sys.stderr)
        marker.write_text(json.dumps(info))
    return vault


def setup_kbase(rev: str | None, work: Path) -> str:
    """Import kbase (the working tree, or ``rev`` exported with git archive) and warm its caches."""
    global kbase
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = str(OUT / "pycache")
    # The kbase processes import this checkout's kbase (or --rev's), not the one the
    # environment's kbase script was installed from (an editable install points at another).
    src = export_revision(rev, work / "src", "kbase", "schema.sql") if rev else REPO
    sys.path.insert(0, str(src))
    ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), ENV.get("PYTHONPATH")]))
    import kbase as kb

    kbase = kb
    if (
        "--no-embed" in run([*KBASE, "index", "--help"])["stdout"]
    ):  # kbase that embeds while indexing
        NO_EMBED.update(cli=["--no-embed"], api={"embed": False})
    db = work / "warm.db"
    for cmd in (
        ["index", str(warm_vault(work)), "-q", *NO_EMBED["cli"]],
        ["search", "note"],
        ["status"],
    ):
        run([*KBASE, "--db", str(db), *cmd])
    run([*KBASE, "--version"])
    if rev:
        return f"{rev} = {git('rev-parse', '--short', rev)} (git archive)"
    dirty = git("status", "--porcelain", "--", "kbase", "schema.sql").splitlines()
    return f"working tree, HEAD {git('rev-parse', '--short', 'HEAD')}" + (
        f" + {len(dirty)} uncommitted changes in kbase/ or schema.sql" if dirty else " (clean)"
    )


def git(*args: str) -> str:
    """A read-only git command in the repository; its output."""
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True
    ).stdout.strip()


# reporting -------------------------------------------------------------------------------------
def fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def verdict(key: str, v: float) -> str:
    op, limit, _ = TARGETS[key]
    return "pass" if (v >= limit if op == ">=" else v <= limit) else "**FAIL**"


def table(name: str, r: dict, peer: dict | None) -> str:
    lines = [
        f"### {name}: {r['notes']:,} notes, {r['text_bytes'] / 1e6:.1f} MB of text,"
        f" {r['chunks']:,} chunks",
        "",
    ]
    lines += ["| metric | kbase | target | result |", "|---|---:|---:|---|"]
    for key, (op, limit, label) in TARGETS.items():
        lines.append(f"| {label} | {fmt(r[key])} | {op} {limit} | {verdict(key, r[key])} |")
    extra = [
        ("fresh index (CLI) s", "fresh_s"),
        ("fresh index (CLI) CPU s (user + sys)", "fresh_cpu_s"),
        ("fresh index (CLI) notes per CPU s", "fresh_notes_per_cpu_s"),
        ("fresh index (CLI) MB of text/s", "fresh_mb_per_s"),
        ("fresh index in-process notes/s", "inproc_fresh_notes_per_s"),
        ("fresh index peak RSS MB", "fresh_maxrss_mb"),
        ("no-change re-index CPU s", "reindex_nochange_cpu_s"),
        ("one-file-changed re-index s", "reindex_one_changed_s"),
        ("in-process query p95 ms", "query_p95_ms"),
        ("`kbase search` process CPU s", "cli_search_cpu_s"),
        ("`kbase --version` process s", "cli_version_s"),
        ("db size MB", "db_bytes"),
    ]
    for label, key in extra:
        if key in r:
            v = r[key] / 1e6 if key == "db_bytes" else r[key]
            lines.append(f"| {label} | {fmt(v)} | | |")
    if r.get("inproc_stages_s"):
        stages = sorted(r["inproc_stages_s"].items(), key=lambda kv: -kv[1])
        lines += [
            "",
            f"In-process fresh index, {r['inproc_fresh_s']:.1f} s: "
            + ", ".join(f"{k} {v:.1f} s ({v / r['inproc_fresh_s']:.0%})" for k, v in stages)
            + ".",
        ]
    if peer:
        lines += [
            "",
            f"qmd 2.8.3 (bun) on the same files ({fmt(peer['notes'])} notes):",
            "",
            "| metric | kbase | qmd | kbase / qmd |",
            "|---|---:|---:|---:|",
        ]
        for label, key in [
            ("fresh index s", "fresh_s"),
            ("fresh index CPU s", "fresh_cpu_s"),
            ("fresh index notes/s", "fresh_notes_per_s"),
            ("fresh index peak RSS MB", "fresh_maxrss_mb"),
            ("no-change re-index s", "reindex_nochange_s"),
            ("no-change re-index CPU s", "reindex_nochange_cpu_s"),
            ("one-file-changed re-index s", "reindex_one_changed_s"),
            ("CLI search s", "cli_search_s"),
            ("CLI search CPU s", "cli_search_cpu_s"),
            ("process floor s (--version / --help)", "cli_version_s"),
            ("db size MB", "db_bytes"),
        ]:
            k, q = r.get(key), peer.get(key)
            scale = 1e6 if key == "db_bytes" else 1
            ratio = f"{k / q:.2f}" if k and q else "–"
            lines.append(
                f"| {label} | {fmt(k / scale if k else k)}"
                f" | {fmt(q / scale if q else q)} | {ratio} |"
            )
    return "\n".join(lines)


def cpu_check() -> float:
    """Seconds for a fixed pure-Python loop: compares this machine's speed between runs."""
    t0 = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i
    return round(time.perf_counter() - t0, 3)


def machine() -> dict:
    cpu = (
        next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="kbase keyword-index benchmarks")
    ap.add_argument("--notes", type=int, default=10_000, help="synthetic vault size (0: skip it)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-real", action="store_true", help=f"skip the real vaults in {REAL_VAULTS}")
    ap.add_argument("--queries", type=int, default=100, help="in-process queries per corpus")
    ap.add_argument("--cli-runs", type=int, default=10, help="`kbase search` processes per corpus")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each re-index measurement")
    ap.add_argument(
        "--profile", action="store_true", help="also cProfile an in-process index into bench/out/"
    )
    ap.add_argument(
        "--rev", help="benchmark kbase as committed at this git revision (via git archive)"
    )
    ap.add_argument("--peer", choices=["qmd"], help="also measure a peer on the same vaults")
    ap.add_argument(
        "--ingest",
        type=int,
        metavar="ROUNDS",
        help="only the fresh index, ROUNDS times per side, sides alternating (kbase, --base, qmd)",
    )
    ap.add_argument("--base", help="with --ingest: also time kbase at this git revision")
    ap.add_argument(
        "--qmd-dir",
        type=Path,
        default=Path(os.environ.get("QMD_DIR", "~/.cache/kbase-bench/qmd")).expanduser(),
    )
    a = ap.parse_args()

    OUT.mkdir(exist_ok=True)
    qmd = None
    if a.peer == "qmd":
        qmd = find_qmd(a.qmd_dir)
        if not qmd:
            print(
                f"qmd not found in {a.qmd_dir}: run bench/install_qmd.sh first; skipping the peer.",
                file=sys.stderr,
            )
    corpora: list[
        tuple[str, Path | None]
    ] = []  # name, real vault to copy (None: the synthetic one)
    if a.notes:
        corpora.append((f"synthetic-{a.notes}", None))
    if not a.no_real:
        if REAL_VAULTS.is_dir():
            corpora += [(p.name, p) for p in sorted(REAL_VAULTS.iterdir()) if p.is_dir()]
        else:
            print(f"no real vaults at {REAL_VAULTS.resolve()}: skipping them", file=sys.stderr)

    results = {
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "args": {k: str(v) for k, v in vars(a).items()},
        "targets": TARGETS,
        "corpora": {},
    }
    tables = []
    with tempfile.TemporaryDirectory(prefix="kbase-bench-") as tmp:
        work = Path(tmp)
        try:
            results["kbase"] = setup_kbase(a.rev, work)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            sys.exit(f"kbase does not run: {e}")
        results["cpu_check_s"] = [cpu_check()]
        sides = {"kbase": (KBASE, ENV)}
        if a.ingest and a.base:
            base_env = {
                **ENV,
                "PYTHONPATH": str(export_revision(a.base, work / "base", "kbase", "schema.sql")),
            }
            run(
                [
                    *KBASE,
                    "--db",
                    str(work / "warm-base.db"),
                    "index",
                    str(warm_vault(work)),
                    "-q",
                    "--no-embed",
                ],
                base_env,
            )
            sides[f"kbase {a.base}"] = (KBASE, base_env)
            results["base"] = f"{a.base} = {git('rev-parse', '--short', a.base)}"
        if a.ingest and qmd:
            run(
                [*qmd, "collection", "add", str(warm_vault(work)), "--name", "w"],
                qmd_env(qmd, str(work / "qw"), work),
            )
            sides["qmd"] = (qmd, {})
        for name, source in corpora:
            print(f"== {name}", file=sys.stderr)
            if source is None:
                vault = synthetic_vault(a.notes, a.seed)
            else:  # a real vault is edited during the run, so work on a copy
                vault = work / "vaults" / name
                shutil.copytree(source, vault)
            entry = results["corpora"][name] = {
                "vault": str(source or vault),
                "loadavg": os.getloadavg(),
            }
            if a.ingest:
                entry["ingest"] = ingest_rounds(vault, work, sides, a.ingest)
                tables.append(ingest_table(name, vault, entry["ingest"]))
                continue
            try:
                entry["kbase"] = bench_kbase(name, vault, work, a)
                if qmd:
                    print("   qmd", file=sys.stderr)
                    entry["qmd"] = bench_qmd(qmd, vault, work, entry["kbase"]["cli_queries"], a)
            except RuntimeError as e:  # a failing command: report it, go on with the next corpus
                entry["error"] = str(e)
                print(f"   failed: {e}", file=sys.stderr)
                tables.append(f"### {name}\n\nfailed: `{e}`")
                continue
            tables.append(table(name, entry["kbase"], entry.get("qmd")))
    results["cpu_check_s"].append(cpu_check())
    results["seconds"] = round(time.perf_counter() - T0, 1)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for p in (OUT / f"results-{stamp}.json", OUT / "latest.json"):
        p.write_text(json.dumps(results, indent=2))
    m = results["machine"]
    print(
        f"kbase benchmarks: {m['cpus']} CPUs ({m['cpu']}), Python {m['python']},"
        f" SQLite {m['sqlite']}; "
        f"kbase {results['kbase']}"
        + (f", base {results['base']}" if "base" in results else "")
        + f"; {results['seconds']} s; JSON in {OUT.relative_to(REPO)}/results-{stamp}.json"
    )
    loads = ", ".join(f"{n} {c['loadavg'][0]:.1f}" for n, c in results["corpora"].items())
    print(
        f"CPU check {results['cpu_check_s'][0]} s before, {results['cpu_check_s'][1]} s after; "
        f"1-min load average at the start of each corpus: {loads}\n"
    )
    print("\n\n".join(tables))


T0 = time.perf_counter()
if __name__ == "__main__":
    main()
