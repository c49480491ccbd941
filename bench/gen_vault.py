"""Deterministic synthetic Obsidian-like vault for benchmarks (stdlib only).

    python -m bench.gen_vault OUT_DIR [--notes 10000] [--seed 1] [--size 2000]

Same (notes, seed, size) -> byte-identical files. Each note (about ``size`` bytes) has YAML
front matter (title, tags, date; aliases on about 1 in 5), an H1 on half of them, H2/H3 sections,
prose drawn from a Zipf-distributed vocabulary (a few hundred real English words at the head, a
long tail of made-up words), [[wikilinks]] (some ``|alias``, some ``#heading``), inline #tags,
lists and task lists, fenced code blocks and tables. Notes sit in nested folders.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

HEAD = """the of and to a in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when if so no will can
more other its into only some could them than then may these also about time any most use first new
like between over such very where just through each must before should those how after both well
even because same still while much own under however here again without during data system note
notes index search query file files work project design model process value table result results
page link links idea ideas read write change version user users method code server memory question
source text number list example problem order point set level form case group part test tests review
plan team meeting draft summary topic research paper book article chapter theory language network
function class object type state event message error build release feature issue history structure
pattern schema store cache storage key record field column row database engine layer service client
request response api graph node edge tree path folder document library tool tools workflow habit
daily weekly journal goal task tasks priority status decision context reference concept principle
argument evidence observation experiment measure metric benchmark latency throughput budget cost
risk""".split()

SYLLABLES = [
    c + v for c in "bcdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")
]
CODAS = ["", "", "", "n", "r", "s", "l", "t", "x", "m", "nd", "st", "ck"]
LANGS = ["python", "bash", "sql", "js", "rust", "yaml", ""]


def make_vocab(rng: random.Random, size: int) -> list[str]:
    """HEAD words first, then made-up words; rank order = frequency order."""
    vocab, seen = list(HEAD), set(HEAD)
    while len(vocab) < size:
        w = "".join(
            rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))
        ) + rng.choice(CODAS)
        if len(w) > 2 and w not in seen:
            seen.add(w)
            vocab.append(w)
    return vocab


class Zipf:
    """Draws items with probability proportional to 1 / rank**s."""

    def __init__(self, rng: random.Random, items: list, s: float = 1.05) -> None:
        self.rng, self.items = rng, items
        self.cum = list(itertools.accumulate(1 / (r**s) for r in range(1, len(items) + 1)))

    def __call__(self, k: int = 1) -> list:
        return self.rng.choices(self.items, cum_weights=self.cum, k=k)


class Vault:
    def __init__(self, notes: int, seed: int, size: int) -> None:
        self.rng = rng = random.Random(seed)
        self.n, self.size = notes, size
        self.vocab = make_vocab(rng, 20_000)
        self.words = Zipf(rng, self.vocab)
        content = self.vocab[150:3000]  # title and heading words: not the very common ones
        self.content = Zipf(rng, content, 0.8)
        tags = sorted({"/".join(self.content(rng.choice((1, 1, 2)))) for _ in range(300)})
        self.tags = Zipf(rng, tags, 1.0)
        folders = [""]
        for a in sorted(set(self.content(12))):
            folders.append(a)
            for b in sorted(set(self.content(rng.randint(2, 6)))):
                folders.append(f"{a}/{b}")
                if rng.random() < 0.3:
                    folders += [
                        f"{a}/{b}/{c}" for c in sorted(set(self.content(rng.randint(1, 3))))
                    ]
        self.folders = folders
        # Plan every note first so that links can point at real titles and headings.
        self.titles: list[str] = []
        taken: set[str] = set()
        for i in range(notes):
            t = " ".join(self.content(rng.randint(2, 4))).capitalize()
            if t.lower() in taken:
                t = f"{t} {i}"
            taken.add(t.lower())
            self.titles.append(t)
        self.headings = [
            [self._words_title(rng.randint(1, 4)) for _ in range(rng.randint(2, 5))]
            for _ in range(notes)
        ]
        self.link_target = Zipf(rng, list(range(notes)), 0.9)  # a few hub notes get most links
        self.hub = list(range(notes))
        rng.shuffle(self.hub)  # link popularity independent of the file order

    def _words_title(self, k: int) -> str:
        return " ".join(self.content(k)).capitalize()

    def sentence(self, links: bool = True) -> str:
        rng = self.rng
        words = self.words(rng.randint(6, 18))
        if rng.random() < 0.25:
            words[rng.randrange(1, len(words) - 1)] += ","
        if links and rng.random() < 0.18:
            words.insert(rng.randrange(len(words)), self.wikilink())
        if rng.random() < 0.06:
            words.append("#" + self.tags()[0])
        s = " ".join(words)
        return s[0].upper() + s[1:] + rng.choice(".........?!")

    def wikilink(self) -> str:
        rng = self.rng
        target = self.hub[self.link_target()[0]]
        title = self.titles[target]
        r = rng.random()
        if r < 0.2:
            return f"[[{title}|{' '.join(self.words(rng.randint(1, 3)))}]]"
        if r < 0.35:
            return f"[[{title}#{rng.choice(self.headings[target])}]]"
        return f"[[{title}]]"

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(2, 6)))

    def block(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.62:
            return self.paragraph()
        if r < 0.80:
            bullet = rng.choice(("- ", "* ", "1. ", "- [ ] "))
            items = []
            for i in range(rng.randint(2, 6)):
                mark = (
                    f"{i + 1}. "
                    if bullet == "1. "
                    else ("- [x] " if bullet == "- [ ] " and rng.random() < 0.4 else bullet)
                )
                items.append(mark + self.sentence().rstrip(".?!"))
            return "\n".join(items)
        if r < 0.91:
            lang = rng.choice(LANGS)
            lines = []
            for _ in range(rng.randint(2, 8)):
                a, b, c = self.words(3)
                lines.append(
                    rng.choice(
                        (
                            f"{a}_{b} = {c}({a}, {rng.randint(0, 99)})",
                            f"if {a} > {b}: return {c}",
                            f"# {' '.join(self.words(4))}",
                            f"{a}.{b}({c!r})",
                        )
                    )
                )
            return f"```{lang}\n" + "\n".join(lines) + "\n```"
        cols = rng.randint(2, 4)
        head = [self._words_title(1) for _ in range(cols)]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * cols]
        for _ in range(rng.randint(2, 5)):
            rows.append(
                "| "
                + " | ".join(" ".join(self.words(rng.randint(1, 3))) for _ in range(cols))
                + " |"
            )
        return "\n".join(rows)

    def note(self, i: int) -> str:
        rng = self.rng
        title = self.titles[i]
        tags = sorted(set(self.tags(rng.randint(1, 4))))
        date = f"20{rng.randint(18, 25)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        fm = ["---", f"title: {title}", f"tags: [{', '.join(tags)}]", f"date: {date}"]
        if rng.random() < 0.2:
            fm.append(f"aliases: [{self._words_title(rng.randint(1, 3))}]")
        parts = ["\n".join(fm + ["---"])]
        if rng.random() < 0.5:
            parts.append(f"# {title}")
        parts.append(self.paragraph())
        target = max(500, int(rng.gauss(self.size, self.size * 0.25)))
        length = sum(len(p) + 2 for p in parts)
        headings = iter(self.headings[i])
        while length < target - 250:  # a section adds about 500 bytes: stop near the target
            level = "###" if rng.random() < 0.35 else "##"
            heading = next(headings, None) or self._words_title(rng.randint(1, 4))
            section = [f"{level} {heading}"] + [self.block() for _ in range(rng.randint(1, 3))]
            parts += section
            length += sum(len(p) + 2 for p in section)
        return "\n\n".join(parts) + "\n"

    def path(self, i: int) -> str:
        folder = self.rng.choice(self.folders)
        name = self.titles[i].replace("/", "-") + ".md"
        return f"{folder}/{name}" if folder else name


def generate(out: str | Path, notes: int = 10_000, seed: int = 1, size: int = 2000) -> dict:
    """Write the vault under ``out`` (which must not hold another vault); return its stats."""
    out = Path(out)
    vault = Vault(notes, seed, size)
    total = 0
    for i in range(notes):
        rel = vault.path(i)
        data = vault.note(i).encode("utf-8")
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        total += len(data)
    return {
        "notes": notes,
        "seed": seed,
        "size": size,
        "bytes": total,
        "folders": len(vault.folders),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output folder (created)")
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", type=int, default=2000, help="mean note size in bytes")
    a = ap.parse_args()
    print(json.dumps(generate(a.out, a.notes, a.seed, a.size)))


if __name__ == "__main__":
    main()
