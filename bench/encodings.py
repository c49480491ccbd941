"""Decoding accuracy on three corpora of files with a known encoding (issue 13).

    python -m bench.encodings [--chardet DIR] [--json OUT]

- CPython's test/cjkencodings: 15 CJK encodings, each file with a UTF-8 twin (byte-exact check).
  Found in the interpreter's test package or Debian's libpython3.X-testsuite.
- ../shared/data/encodings/charset-normalizer-samples (EXPECTED.tsv names each file's encoding).
- chardet 5.2.0's tests/ folder, if given (``pip download --no-deps --no-binary :all:
  chardet==5.2.0`` and unpack): the folder name is the encoding; files that do not decode with it
  strictly, and encodings Python has no codec for (EUC-TW), are left out.

A file counts as right when kbase's text equals the reference text (a superset codec that gives
the same text is right). Prints the counts and the wrong files; ``--json`` writes per-file results
so that two revisions can be compared.
"""

from __future__ import annotations

import argparse
import codecs
import csv
import json
import re
import sys
from pathlib import Path

from bench.common import REPO
from kbase.ingest.decode import UndecodableError, decode

SHARED = REPO.parent / "shared" / "data" / "encodings" / "charset-normalizer-samples"
_CHARDET_NAMES = {
    "MacCyrillic": "mac_cyrillic",
    "MacRoman": "mac_roman",
    "IBM855": "cp855",
    "IBM866": "cp866",
    "UTF-16": "utf_16",
    "UTF-32": "utf_32",
    "utf-8-sig": "utf_8_sig",
}


def cjkencodings() -> Path | None:
    try:
        import test

        folder = Path(test.__file__).parent / "cjkencodings"
    except ImportError:
        folder = Path(f"/usr/lib/python3.{sys.version_info.minor}/test/cjkencodings")
    return folder if folder.is_dir() else None


def cases_cjk(folder: Path):
    for f in sorted(folder.glob("*.txt")):
        if not f.stem.endswith("-utf8"):
            yield (
                f"cjkencodings/{f.name}",
                f.read_bytes(),
                f.with_name(f.stem + "-utf8.txt").read_text("utf-8"),
            )


def cases_shared(folder: Path):
    for row in csv.DictReader((folder / "EXPECTED.tsv").open(encoding="utf-8"), delimiter="\t"):
        data = (folder / row["file"]).read_bytes()
        yield (
            f"shared/{row['file']}",
            data,
            data.decode("utf_8_sig" if row["encoding"] == "utf_8" else row["encoding"]),
        )


def cases_chardet(folder: Path):
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        name = re.sub(
            r"-(croatian|czech|hungarian|polish|slovak|slovene|romanian|bulgarian|russian|arabic|greek"
            r"|turkish|hebrew)$",
            "",
            sub.name,
        )
        name = _CHARDET_NAMES.get(name, name)
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        for f in sorted(sub.iterdir()):
            data = f.read_bytes()
            try:
                want = data.decode(name)
            except UnicodeDecodeError:
                continue
            yield f"chardet/{sub.name}/{f.name}", data, want.removeprefix("\ufeff")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chardet", type=Path, help="chardet 5.2.0's tests/ folder")
    ap.add_argument("--json", type=Path, help="write per-file results here")
    args = ap.parse_args()
    corpora = {}
    if (folder := cjkencodings()) is not None:
        corpora["cjkencodings"] = cases_cjk(folder)
    else:
        print("CPython's test/cjkencodings not found (Debian: apt install libpython3.11-testsuite)")
    if SHARED.is_dir():
        corpora["charset-normalizer-samples"] = cases_shared(SHARED)
    if args.chardet:
        corpora["chardet-5.2.0"] = cases_chardet(args.chardet)
    results: dict[str, str] = {}
    for corpus, cases in corpora.items():
        right = total = 0
        for key, data, want in cases:
            try:
                d = decode(data)
                verdict = "ok" if d.text == want else f"wrong: {d.encoding}"
            except UndecodableError as e:
                verdict = f"refused: {e}"
            results[key] = verdict
            total += 1
            right += verdict == "ok"
        print(f"{corpus:28} {right:4} / {total:<4} right")
    for key, verdict in results.items():
        if verdict != "ok":
            print(f"  {key}: {verdict}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
