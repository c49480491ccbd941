"""Titles as Obsidian shows them (issue 23 part 4): how every shared vault's notes are titled.

    python -m bench.titles            # the table (BENCHMARKS.md, "Titles")
    python -m bench.titles --verbose  # + every note not titled by its file name

The rule (kbase.ingest.parse): the file name, as Obsidian shows it; where the file name is a slug
(lowercase ASCII words and digits joined by - _ or ., not a date), the front matter title, else
the heading that opens the note (any level, HTML comments before it aside), else the file name.
For each vault: notes, how many are titled by their file name, by a heading, by front matter, and
how many are slugs; "Obsidian" is the share of notes titled as Obsidian would (the file name) in
the vaults that are Obsidian vaults. Reads the files; no index is needed.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from bench.common import REPO
from kbase.ingest.parse import is_slug, parse

DATA = REPO.parent / "shared" / "data"
VAULTS = [DATA / "vaults" / v for v in ("obsidian-tasks-docs", "foam-docs", "rust-book")] + [
    DATA / "vaults" / v for v in ("rust-book-zh", "rust-book-ja")
]
OBSIDIAN = [DATA / "vaults" / "obsidian-tasks-docs"] + sorted(
    (DATA / "wikilinks" / "obsidian-export" / "input").glob("*")
)


def survey(folder: Path) -> tuple[Counter, list[tuple[str, str]]]:
    counts: Counter = Counter()
    other = []
    for p in sorted(folder.rglob("*.md")):
        rel = p.relative_to(folder).as_posix()
        doc = parse(p.read_text(encoding="utf-8", errors="replace"), rel)
        counts["notes"] += 1
        counts["slug"] += is_slug(p.stem)
        fm = str((doc.frontmatter or {}).get("title", "")) or None
        how = (
            "file name" if doc.title == p.stem else "front matter" if doc.title == fm else "heading"
        )
        counts[how] += 1
        if how != "file name":
            other.append((rel, doc.title))
    return counts, other


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    print("| vault | notes | slugs | titled by file name | by opening heading | by front matter |")
    print("|---|---:|---:|---:|---:|---:|")
    for folder in dict.fromkeys(VAULTS + OBSIDIAN):
        if not folder.is_dir():
            print(f"| {folder.name} | absent | | | | |")
            continue
        c, other = survey(folder)
        if not c["notes"]:
            continue
        name = folder.name if folder.parent.name == "vaults" else f"obsidian-export/{folder.name}"
        print(
            f"| {name} | {c['notes']} | {c['slug']} | {c['file name']} | {c['heading']}"
            f" | {c['front matter']} |"
        )
        if args.verbose:
            for rel, title in other:
                print(f"|   {rel} | {title} |")
    ob = [survey(f)[0] for f in OBSIDIAN if f.is_dir()]
    notes = sum(c["notes"] for c in ob)
    by_name = sum(c["file name"] for c in ob)
    print(
        f"\nObsidian vaults: {by_name} of {notes} notes titled by their file name"
        f" ({100 * by_name / notes:.1f}%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
