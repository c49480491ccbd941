"""Documentation sites as well as vaults (issue 34): what a new user of a docs site sees.

    python -m bench.docsites                 # the table over bench/material's sites
    python -m bench.docsites --verbose       # + the broken anchors and unresolved links
    python -m bench.docsites --vaults OUT    # titles, link targets, unresolved per shared vault
                                             # as JSON (compare two runs: --compare A B)
    python -m bench.docsites --compare A B   # what changed between two --vaults files

Each site is indexed keyword-only (--no-embed) into a temporary index; then, from the index:
titles and heading paths still showing a heading attribute (``{#id}``, ``{ #id .class }``),
broken anchors (links whose heading or id the target lacks), unresolved links and how many of
them name a folder (``/examples/``, ``../guide/``, ``./``), chunks that are mostly not text
(base64: see ``base64_share``) and their share of all chunks, and what
``kbase search zzzqqq`` prints.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import kbase
from bench.common import REPO

MATERIAL = REPO / "bench" / "material"
SITES = {
    "vue-docs (VitePress)": MATERIAL / "vue-docs" / "src",
    "mkdocs-material (MkDocs)": MATERIAL / "mkdocs-material-docs" / "docs",
    "mkdocs (MkDocs)": MATERIAL / "mkdocs-docs" / "docs",
}
VAULTS = REPO.parent / "shared" / "data" / "vaults"

# A heading attribute left in a title or heading path: '{#id', '{: #id', '{ #id', '{ .class'.
_ATTR_LEFT = re.compile(r"\{:?\s*[#.][\w-]")
# Base64: a run of 32+ characters of its alphabet ('/' aside, which paths have too) with upper
# case, lower case and digits (a playground link's state, a data URI); hex hashes are not.
_BASE64 = re.compile(r"[A-Za-z0-9+]{32,}={0,2}")


def base64_share(text: str) -> float:
    """The share of ``text``'s non-space characters in base64 runs (an independent measure:
    kbase.ingest.junk is what kbase uses)."""
    chars = sum(1 for c in text if not c.isspace())
    if not chars:
        return 0.0
    junk = sum(
        len(s)
        for m in _BASE64.finditer(text)
        if re.search(r"\d", s := m.group()) and re.search(r"[A-Z]", s) and re.search(r"[a-z]", s)
    )
    return junk / chars


def index(folder: Path, db: Path) -> kbase.KB:
    kb = kbase.KB(db, cache_vectors=False)
    kb.index([folder], embed=False)
    return kb


def measure(folder: Path, tmp: Path, verbose: bool = False) -> dict:
    kb = index(folder, tmp / (folder.parent.name + ".db"))
    con = kb.reader
    docs = con.execute("SELECT count(*) FROM documents").fetchone()[0]
    titles = [t for (t,) in con.execute("SELECT title FROM documents")]
    paths = [p for (p,) in con.execute("SELECT heading_path FROM chunks")]
    heads = [t for (t,) in con.execute("SELECT text FROM headings")]
    slug_titles = sum(
        title == Path(path).stem for path, title in con.execute("SELECT path, title FROM documents")
    )
    bodies = {i: b for i, b in con.execute("SELECT id, body FROM documents")}
    chunks = con.execute("SELECT doc_id, start_char, end_char FROM chunks").fetchall()
    junk = [c for c in chunks if base64_share(bodies[c[0]][c[1] : c[2]]) > 0.5]
    broken = kb.broken_anchors()
    unresolved = [lk for lk in kb.unresolved() if not _is_asset(lk.target)]
    folder_links = [lk for lk in unresolved if _names_folder(lk.target)]
    hits = kb.search("zzzqqq", mode="keyword", limit=10)
    out = {
        "documents": docs,
        "titles with {#": sum(bool(_ATTR_LEFT.search(t)) for t in titles),
        "heading paths with {#": sum(bool(_ATTR_LEFT.search(p)) for p in paths),
        "headings with {#": sum(bool(_ATTR_LEFT.search(h)) for h in heads),
        "titled by file name": slug_titles,
        "links": con.execute("SELECT count(*) FROM links").fetchone()[0],
        "broken anchors": len(broken),
        "unresolved (notes)": len(unresolved),
        "unresolved folder links": len(folder_links),
        "chunks": len(chunks),
        "chunks mostly base64": len(junk),
        "their share": f"{len(junk) / max(1, len(chunks)):.1%}",
        "search zzzqqq": "No matches." if not hits else f"{len(hits)} hits",
    }
    if verbose:
        for lk in broken:
            print(f"  broken anchor: {lk.source_path}:{lk.line} -> {lk.target}#{lk.anchor}")
        for lk in unresolved:
            print(f"  unresolved: {lk.source_path}:{lk.line} -> {lk.target}")
        for doc_id, a, _ in junk[:5]:
            print(f"  junk chunk: {bodies[doc_id][a : a + 80]!r}")
    kb.close()
    return out


def _is_asset(target: str) -> bool:
    """A link to something a docs site builds or serves (an image, a .vue file, a page outside
    the docs folder): not a note, so not counted among unresolved notes here."""
    name = target.rstrip("/").rsplit("/", 1)[-1]
    return "." in name and not name.lower().endswith((".md", ".html", ".htm"))


def _names_folder(target: str) -> bool:
    return target.endswith("/") or target in (".", "..") or target.endswith(("/.", "/.."))


def vault_state(folder: Path, tmp: Path) -> dict:
    """Titles, each link's resolved target and anchor verdict, and unresolved counts of a vault."""
    kb = index(folder, tmp / (folder.name + ".db"))
    con = kb.reader
    titles = dict(con.execute("SELECT path, title FROM documents ORDER BY path"))
    links = [
        f"{s}:{a} {t}#{an} -> {tp} {ok}"
        for s, a, t, an, tp, ok in con.execute(
            "SELECT s.path, l.start_char, l.target, l.anchor, coalesce(d.path, l.target_path),"
            " l.anchor_ok FROM links l JOIN documents s ON s.id = l.doc_id"
            " LEFT JOIN documents d ON d.id = l.target_id ORDER BY s.path, l.start_char"
        )
    ]
    state = {
        "titles": titles,
        "links": links,
        "unresolved": len(kb.unresolved()),
        "broken anchors": len(kb.broken_anchors()),
    }
    kb.close()
    return state


def compare(a: dict, b: dict) -> int:
    changed = 0
    for vault in sorted(set(a) | set(b)):
        va, vb = a.get(vault, {}), b.get(vault, {})
        ta, tb = va.get("titles", {}), vb.get("titles", {})
        titles = [
            (p, ta.get(p), tb.get(p)) for p in sorted(set(ta) | set(tb)) if ta.get(p) != tb.get(p)
        ]
        la, lb = set(va.get("links", [])), set(vb.get("links", []))
        print(
            f"{vault}: {len(titles)} titles changed, {len(la ^ lb)} link rows differ,"
            f" unresolved {va.get('unresolved')} -> {vb.get('unresolved')},"
            f" broken anchors {va.get('broken anchors')} -> {vb.get('broken anchors')}"
        )
        for p, x, y in titles[:10]:
            print(f"  title {p}: {x!r} -> {y!r}")
        for row in sorted(la - lb)[:10]:
            print(f"  - {row}")
        for row in sorted(lb - la)[:10]:
            print(f"  + {row}")
        changed += len(titles) + len(la ^ lb)
    return 1 if changed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--vaults", metavar="OUT", help="write the shared vaults' state to OUT")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        return compare(a, b)
    with tempfile.TemporaryDirectory() as tmp:
        if args.vaults:
            state = {
                v.name: vault_state(v, Path(tmp)) for v in sorted(VAULTS.iterdir()) if v.is_dir()
            }
            Path(args.vaults).write_text(json.dumps(state, indent=1, ensure_ascii=False))
            return 0
        rows = {}
        for name, folder in SITES.items():
            if not folder.is_dir():
                print(f"skipped {name}: {folder} is missing", file=sys.stderr)
                continue
            if args.verbose:
                print(name)
            rows[name] = measure(folder, Path(tmp), args.verbose)
    keys = list(next(iter(rows.values())))
    print("| | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in keys:
        print(f"| {k} | " + " | ".join(str(r[k]) for r in rows.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
