"""PDFs (issue 25): extraction speed against poppler's pdftotext, and the page check.

    python -m bench.pdf speed [FOLDER...] [--rounds 5]
    python -m bench.pdf pages [FOLDER...] [--phrases 300] [--seed 1] [--json OUT]

Default material: ../shared/data/pdfs/py-pdf-sample-files, the PDF manuals Debian installs under
/usr/share/doc (if any), and PDFs made here (a 2,000-page ledger, slides, a textless scan).

``speed``: pages per second, kbase (pypdfium2 in this process, the text as kbase stores it)
against ``pdftotext FILE -`` (a process per file, as a user or a peer tool runs it), side by side:
the two alternate file by file (A B, then B A the next round), wall and CPU time each (CPU:
this process's for kbase, the children's for pdftotext). Then ``kbase index`` of all of them
(extraction in the workers, chunking, writing; keyword index only) as a whole, wall and CPU.

``pages``: the done-when check. Indexes the PDFs (and hostile files made here: password,
truncated, damaged, not a PDF, empty; none may crash the run, each must cost one stderr line;
tests/test_pdf.py also makes one hang and one crash the reader) with the CLI; then draws a PDF at
random, one of its pages with text, and 6 consecutive words of that page as kbase stores it, and
searches for them (keyword mode, plain words). A phrase counts when its PDF is in the top 3 with
the page the words came from.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kbase
from bench.common import REPO
from kbase.ingest import pdf
from tests.pdfgen import make_pdf

SHARED = REPO.parent / "shared" / "data" / "pdfs" / "py-pdf-sample-files"
SYSTEM_DOCS = Path("/usr/share/doc")
WORD = re.compile(r"\w[\w'’-]*")
PHRASE_WORDS = 6
LEDGER_WORDS = "invoice ledger account credit debit balance payment vendor audit period".split()


def made(into: Path, seed: int = 7) -> list[Path]:
    """PDFs made here: a 2,000-page ledger, a 40-slide deck, a textless scan."""
    rng = random.Random(seed)
    out = []

    def page(i: int) -> str:
        words = [rng.choice(LEDGER_WORDS) + str(rng.randrange(10_000)) for _ in range(60)]
        return f"Entry {i}\n" + "\n".join(" ".join(words[k : k + 10]) for k in range(0, 60, 10))

    for name, pages in (
        ("ledger-2000-pages.pdf", [page(i) for i in range(2000)]),
        ("slides.pdf", [f"Slide {i}\n{page(i).splitlines()[1]}" for i in range(40)]),
        ("scan.pdf", [None] * 3),
    ):
        path = into / name
        path.write_bytes(make_pdf(pages, info={"Title": name}))
        out.append(path)
    return out


def gather(folders: list[Path], into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for folder in folders:
        files = [folder] if folder.is_file() else sorted(folder.rglob("*.pdf"))
        for f in files:
            dest = into / f"{len(out):03d}-{f.name}"
            shutil.copyfile(f, dest)
            out.append(dest)
    return out + made(into)


def default_folders() -> list[Path]:
    return [p for p in [SHARED, *sorted(SYSTEM_DOCS.rglob("*.pdf"))] if p.exists()]


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def kbase_one(path: Path) -> int:
    try:
        return len(pdf.extract(path.read_bytes()).pages)
    except pdf.PdfError:
        return 0


def poppler_one(path: Path) -> None:
    subprocess.run(
        ["pdftotext", "-q", str(path), "-"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def speed(args) -> None:
    if shutil.which("pdftotext") is None:
        sys.exit("pdftotext is not installed (Debian: apt-get install poppler-utils)")
    with tempfile.TemporaryDirectory() as tmp:
        files = gather(args.folders or default_folders(), Path(tmp) / "v")
        pages = sum(kbase_one(f) for f in files)  # also warms the caches
        print(f"{len(files)} PDFs, {pages:,} pages readable; load: {os.getloadavg()[0]:.1f}")
        totals = {"kbase": [0.0, 0.0], "pdftotext": [0.0, 0.0]}
        counts = {f: kbase_one(f) for f in files}
        big = [f for f in files if counts[f] >= 100]
        per_file = {(f, who): 0.0 for f in big for who in totals}
        for r in range(args.rounds):
            for f in files:
                order = ("kbase", "pdftotext") if r % 2 == 0 else ("pdftotext", "kbase")
                for who in order:
                    t, c = time.perf_counter(), (cpu_self() if who == "kbase" else cpu_children())
                    kbase_one(f) if who == "kbase" else poppler_one(f)
                    wall = time.perf_counter() - t
                    totals[who][0] += wall
                    totals[who][1] += (cpu_self() if who == "kbase" else cpu_children()) - c
                    if f in big:
                        per_file[f, who] += wall
        print(f"{'':12} {'pages/s wall':>13} {'pages/s CPU':>12} {'wall s':>8} {'CPU s':>7}")
        for who, (wall, cpu) in totals.items():
            n = pages * args.rounds
            print(f"{who:12} {n / wall:>13,.0f} {n / cpu:>12,.0f} {wall:>8.2f} {cpu:>7.2f}")
        ratio = totals["pdftotext"][0] / totals["kbase"][0]
        print(f"kbase / pdftotext: {ratio:.1f}x the pages per second (wall)")
        for f in big:
            n = counts[f] * args.rounds
            k, p = per_file[f, "kbase"], per_file[f, "pdftotext"]
            print(
                f"  {f.name}: {counts[f]:,} pages, kbase {n / k:,.0f} pages/s,"
                f" pdftotext {n / p:,.0f} pages/s (wall)"
            )
        for r in range(args.rounds):
            db = Path(tmp) / f"kb{r}.db"
            t, c = time.perf_counter(), cpu_self() + cpu_children()
            report = kbase.open(db).index([Path(tmp) / "v"], embed=False)
            wall, cpu = time.perf_counter() - t, cpu_self() + cpu_children() - c
            print(
                f"kbase index (fresh, keyword only): {report.new} PDFs, {pages / wall:,.0f} pages/s"
                f" wall ({wall:.2f} s, CPU {cpu:.2f} s; {len(report.skipped)} skipped)"
            )
        # Memory of one enormous PDF, alone, in a fresh process: the indexer's and its workers'.
        ledger = next(f for f in files if f.name == "ledger-2000-pages.pdf")
        code = (
            "import resource, sys, kbase; kbase.open(sys.argv[1]).index([sys.argv[2]],"
            " embed=False); s = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss;"
            " c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; print(s, c)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(Path(tmp) / "mem.db"), str(ledger)],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout.split()
        print(
            f"{ledger.name} ({ledger.stat().st_size / 1e6:.1f} MB) alone: peak RSS indexer"
            f" {int(out[0]) / 1024:.0f} MiB, PDF worker {int(out[1]) / 1024:.0f} MiB"
        )
        print(f"load after: {os.getloadavg()[0]:.1f}")


def hostile(into: Path) -> dict[str, str]:
    """Files that must each cost one line and no crash: name -> what the line must say."""
    good = make_pdf(["A page that is fine"])
    files = {
        "hostile-password.pdf": (make_pdf(["secret"], user_password="sesame"), "encrypted"),
        "hostile-truncated.pdf": (good[: len(good) // 2], "truncated"),
        "hostile-damaged.pdf": (b"%PDF-1.7\n" + os.urandom(5000) + b"\n%%EOF\n", "damaged"),
        "hostile-not-a-pdf.pdf": (b"<html>a web page saved as .pdf</html>\n", "not a PDF"),
        "hostile-empty.pdf": (b"", "not a PDF"),
    }
    for name, (data, _) in files.items():
        (into / name).write_bytes(data)
    return {name: why for name, (_, why) in files.items()}


def pages_check(args) -> None:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "v"
        files = gather(args.folders or default_folders(), vault)
        expect = hostile(vault)
        db = Path(tmp) / "kb.db"
        t = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "kbase", "--db", str(db), "index", str(vault), "--no-embed"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        seconds = time.perf_counter() - t
        lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
        print(f"{len(files) + len(expect)} files indexed in {seconds:.2f} s, exit {run.returncode}")
        print(run.stdout.strip())
        crashes = int(run.returncode != 0) + sum("Traceback" in ln for ln in lines)
        for ln in lines:
            print("  stderr:", ln)
        named = {n for n in expect if sum(n in ln for ln in lines) == 1}
        print(
            f"hostile files with exactly one stderr line: {len(named)}/{len(expect)};"
            f" crashes: {crashes}; stderr lines: {len(lines)}"
        )
        kb = kbase.open(db)
        rows = kb.sql("SELECT path, page, text FROM pdf_pages", max_rows=10_000_000).rows
        by_pdf: dict[str, list[tuple[int, list[str]]]] = {}
        for path, page, text in rows:
            if len(words := WORD.findall(text)) >= PHRASE_WORDS:
                by_pdf.setdefault(path, []).append((page, words))
        names = sorted(by_pdf)
        # Where each run of six words occurs (several sample PDFs share their filler text, and
        # some pages repeat a paragraph): a phrase found at more than one place is ambiguous.
        places: dict[tuple[str, ...], set[tuple[str, int]]] = {}
        for path, pages in by_pdf.items():
            for page, words in pages:
                low = [w.lower() for w in words]
                for i in range(len(low) - PHRASE_WORDS + 1):
                    places.setdefault(tuple(low[i : i + PHRASE_WORDS]), set()).add((path, page))
        found = unique = unique_found = lenient = 0
        misses = []
        per_file: dict[str, list[int]] = {}
        for _ in range(args.phrases):
            path = rng.choice(names)  # a PDF, then one of its pages: the 2,000 pages do not rule
            page, words = rng.choice(by_pdf[path])
            i = rng.randrange(len(words) - PHRASE_WORDS + 1)
            phrase = " ".join(words[i : i + PHRASE_WORDS])
            where = places[tuple(w.lower() for w in words[i : i + PHRASE_WORDS])]
            hits = kb.search(phrase, mode="keyword", limit=3)
            ok = any(h.path == path and h.page == page for h in hits)
            found += ok
            lenient += any((h.path, h.page) in where for h in hits)
            if len(where) == 1:
                unique += 1
                unique_found += ok
            per_file.setdefault(path, [0, 0])[ok] += 1
            if not ok:
                got = [(h.path, h.page) for h in hits]
                misses.append(
                    {"path": path, "page": page, "phrase": phrase, "got": got, "places": len(where)}
                )
        share = found / args.phrases
        print(
            f"{found}/{args.phrases} phrases ({share:.1%}) found their PDF in the top 3 at the"
            f" right page ({sum(map(len, by_pdf.values())):,} pages with 6 words or more in"
            f" {len(names)} PDFs; a PDF drawn at random, then one of its pages)"
        )
        print(
            f"  phrases found at one place only: {unique_found}/{unique}"
            f" ({unique_found / max(1, unique):.1%}); any phrase, a hit at any page that has it:"
            f" {lenient}/{args.phrases} ({lenient / args.phrases:.1%})"
        )
        for path, (miss, hit) in sorted(per_file.items()):
            print(f"  {path}: {hit}/{hit + miss}")
        for m in [m for m in misses if m["places"] == 1][:15]:
            print(f"  miss {m['path']} p.{m['page']}: {m['phrase']!r} -> {m['got']}")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "share": share,
                        "unique_share": unique_found / max(1, unique),
                        "lenient_share": lenient / args.phrases,
                        "phrases": args.phrases,
                        "crashes": crashes,
                        "stderr": lines,
                        "misses": misses,
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
        kb.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("folders", nargs="*", type=Path)
    s.add_argument("--rounds", type=int, default=5)
    p = sub.add_parser("pages")
    p.add_argument("folders", nargs="*", type=Path)
    p.add_argument("--phrases", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = ap.parse_args()
    speed(args) if args.cmd == "speed" else pages_check(args)


if __name__ == "__main__":
    main()
