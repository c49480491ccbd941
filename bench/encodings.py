"""Decoding accuracy on three corpora of files with a known encoding (issue 13).

    python -m bench.encodings [--chardet DIR] [--json OUT]

- CPython's test/cjkencodings: 15 CJK encodings, each file with a UTF-8 twin (byte-exact check).
  Found in the interpreter's test package or Debian's libpython3.X-testsuite.
- ../shared/data/encodings/charset-normalizer-samples (EXPECTED.tsv names each file's encoding).
- chardet 5.2.0's tests/ folder, if given (``pip download --no-deps --no-binary :all:
  chardet==5.2.0`` and unpack): the folder name is the encoding; files that do not decode with it
  strictly, and encodings Python has no codec for (EUC-TW), are left out.

- Snippets (``--snippets N``): N runs each of 1, 2, 3, 5, 8, 12, 20 and 40 words cut from each
  file of the corpora above in a code page (not UTF or the escape encodings), written in it
  again: notes are often a line or two, where the guess is hardest. A seeded draw, the same for
  every revision.

A file counts as right when kbase's text equals the reference text (a superset codec that gives
the same text is right). Prints the counts and the wrong files; ``--json`` writes per-file results
so that two revisions can be compared.
"""

from __future__ import annotations

import argparse
import codecs
import csv
import json
import random
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
                f.stem,
            )


def cases_shared(folder: Path):
    for row in csv.DictReader((folder / "EXPECTED.tsv").open(encoding="utf-8"), delimiter="\t"):
        data = (folder / row["file"]).read_bytes()
        yield (
            f"shared/{row['file']}",
            data,
            data.decode("utf_8_sig" if row["encoding"] == "utf_8" else row["encoding"]),
            row["encoding"],
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
            yield f"chardet/{sub.name}/{f.name}", data, want.removeprefix("\ufeff"), name


SNIPPET_WORDS = (1, 2, 3, 5, 8, 12, 20, 40)
_NOT_A_GUESS = ("utf", "ascii", "iso2022", "hz")  # a BOM, NULs or escapes tell these apart


def cases_snippets(files: list, per_length: int):
    rng = random.Random(13)
    for key, _, want, codec in files:
        if codec.lower().replace("-", "_").startswith(_NOT_A_GUESS):
            continue
        words = want.split()
        for n in SNIPPET_WORDS:
            for k in range(per_length):
                i = rng.randrange(max(1, len(words) - n))
                data = " ".join(words[i : i + n]).encode(codec, "ignore")
                if not data.isascii():
                    yield f"snippets/{n}/{key}#{k}", data, data.decode(codec), codec


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chardet", type=Path, help="chardet 5.2.0's tests/ folder")
    ap.add_argument("--json", type=Path, help="write per-file results here")
    ap.add_argument(
        "--snippets", type=int, default=0, metavar="N", help="N snippets of each length a file"
    )
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
    if args.snippets:
        corpora = {name: list(cases) for name, cases in corpora.items()}
        files = [case for cases in corpora.values() for case in cases]
        corpora["snippets"] = cases_snippets(files, args.snippets)
    results: dict[str, str] = {}
    for corpus, cases in corpora.items():
        right = total = 0
        for key, data, want, _ in cases:
            try:
                d = decode(data)
                verdict = "ok" if d.text == want else f"wrong: {d.encoding}"
            except UndecodableError as e:
                verdict = f"refused: {e}"
            results[key] = verdict
            total += 1
            right += verdict == "ok"
        print(f"{corpus:28} {right:4} / {total:<4} right")
    for n in SNIPPET_WORDS if args.snippets else ():
        got = [v == "ok" for k, v in results.items() if k.startswith(f"snippets/{n}/")]
        print(f"  snippets of {n:2} words      {sum(got):4} / {len(got):<4} right")
    for key, verdict in results.items():
        if verdict != "ok" and not key.startswith("snippets/"):
            print(f"  {key}: {verdict}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
