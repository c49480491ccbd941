"""all-MiniLM-L6-v2's tokenization of one query without the ``tokenizers`` library.

Importing tokenizers and loading the model's tokenizer.json costs about 0.1 s of CPU: more than
the rest of a one-shot query's embedding. The model's tokenizer is BERT's (tokenizer.json:
BertNormalizer with lowercasing and accent stripping, BertPreTokenizer, WordPiece with "##",
[CLS] ... [SEP]), simple enough to run here from tables the real tokenizer writes once into
kbase's model cache (``tables``):

- what the normalizer makes of each character of the Basic Multilingual Plane on its own
  (lowercased, accents stripped, control characters removed, CJK ideographs spaced). Every step
  is per character but NFD's reordering of combining marks, and the marks it reorders are
  removed (a mark kept that could be reordered makes the query the real tokenizer's);
- which characters the pre-tokenizer splits at (white space) or keeps apart (punctuation);
- the vocabulary, for WordPiece's longest-match-first split of each word.

A query with a character beyond the BMP, or with a special token's text ("[MASK]"), is left to
the real tokenizer (``ids`` returns None). tests/test_query_capi.py checks both agree on every
paragraph of the shared vaults and on every character of the BMP.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

TABLE_VERSION = 2
MAX_TOKENS = 256  # kbase.embed.onnx_graph.MAX_TOKENS: [CLS], 254 pieces, [SEP]
MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def folder(cache_dir: Path, tokenizer_json: Path) -> Path:
    """Where the tables of this tokenizer.json are kept."""
    digest = hashlib.sha256(tokenizer_json.read_bytes()).hexdigest()[:16]
    return cache_dir / f"minilm-query-tokens-{digest}-v{TABLE_VERSION}"


class QueryWordPiece:
    """The model tokenizer's ids for a query, from ``tables`` (built first when missing)."""

    def __init__(self, cache_dir: Path, tokenizer_json: Path, load_tokenizer) -> None:
        self.dir = folder(cache_dir, tokenizer_json)
        self._load_tokenizer = load_tokenizer
        try:
            data = json.loads((self.dir / "ascii.json").read_text(encoding="utf-8"))
            vocab = (self.dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        except (OSError, ValueError):
            write_tables(load_tokenizer(), self.dir, full=False)
            data = json.loads((self.dir / "ascii.json").read_text(encoding="utf-8"))
            vocab = (self.dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        if len(vocab) != data["size"]:
            raise ValueError(f"{self.dir / 'vocab.txt'} is not the vocabulary")
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.cls, self.sep, self.unk = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[UNK]"))
        self.ascii = {int(k): v for k, v in data["charmap"].items()}
        self.space, self.punct = set(data["space"]), set(data["punct"])
        self._unicode: dict | None = None

    def _tables(self) -> dict:
        """The tables of the rest of the BMP (read on the first query that needs them)."""
        if self._unicode is None:
            path = self.dir / "unicode.json"
            try:
                self._unicode = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                write_tables(self._load_tokenizer(), self.dir, full=True)
                self._unicode = json.loads(path.read_text(encoding="utf-8"))
            self.space |= set(self._unicode["space"])
            self.punct |= set(self._unicode["punct"])
        return self._unicode

    def _charmap(self, text: str) -> dict[int, str] | None:
        """What the normalizer makes of each character of ``text`` it changes, or None when
        ``text`` is for the real tokenizer."""
        if text.isascii():
            return self.ascii
        import bisect

        t = self._tables()
        keys, values, spaced = t["keys"], t["values"], t["spaced"]
        out = dict(self.ascii)
        for ch in set(text):
            cp = ord(ch)
            if cp < 128:
                continue
            if cp > 0xFFFF or ch in t["unsafe"]:
                return None
            at = keys.find(ch)
            if at >= 0:
                out[cp] = values[at]
            elif bisect.bisect_right(spaced, cp) % 2:  # within a run of spaced ideographs
                out[cp] = f" {ch} "
        return out

    def ids(self, text: str) -> list[int] | None:
        """[CLS], the pieces' ids, [SEP] (at most MAX_TOKENS), or None: ``text`` is for the real
        tokenizer (a character beyond the BMP or one its tables leave out, a special token)."""
        if "[" in text and any(s in text for s in SPECIALS):
            return None
        charmap = self._charmap(text)
        if charmap is None:
            return None
        norm = text.translate(charmap)
        out = [self.cls]
        word: list[str] = []
        for ch in norm + " ":
            if ch in self.space or ch in self.punct:
                if word:
                    out += self._pieces("".join(word))
                    word = []
                if ch in self.punct:
                    out += self._pieces(ch)
            else:
                word.append(ch)
            if len(out) > MAX_TOKENS:
                break
        return out[: MAX_TOKENS - 1] + [self.sep]

    def _pieces(self, word: str) -> list[int]:
        """WordPiece: the longest piece in the vocabulary at each place ("##" after the first);
        a word with a place no piece fits is one [UNK]."""
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        out = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk]
            out.append(found)
            start = end
        return out


def write_tables(tokenizer, dst: Path, *, full: bool) -> None:
    """vocab.txt (the vocabulary in id order, a token a line) and ascii.json (the normalizer's
    mapping of the ASCII characters it changes; the ASCII characters the pre-tokenizer splits
    at or keeps apart), or with ``full`` unicode.json: the same for the rest of the BMP (the
    characters it changes as ``keys`` and ``values``; the runs of ideographs it puts spaces
    around as ``spaced``, the first and one past the last of each run), and the characters left
    to the real tokenizer. Each file written atomically."""
    import unicodedata

    norm, pre = tokenizer.normalizer, tokenizer.pre_tokenizer
    chars = [chr(c) for c in (range(128) if not full else range(128, 0x10000))]
    chars = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]
    charmap: dict[str, str] = {}
    spaced: list[int] = []
    for ch in chars:
        got = norm.normalize_str(ch)
        if got == f" {ch} " and full:
            if spaced and spaced[-1] == ord(ch):
                spaced[-1] += 1
            else:
                spaced += [ord(ch), ord(ch) + 1]
        elif got != ch:
            charmap[ch] = got
    seen = {ch for ch in chars if ch not in charmap}
    seen |= {c for v in charmap.values() for c in v if ord(c) > 127 or not full}
    space, punct, unsafe = [], [], []
    for ch in sorted(seen):
        parts = [w for w, _ in pre.pre_tokenize_str(f"a{ch}b")]
        if parts == ["a", "b"]:
            space.append(ch)
        elif parts == ["a", ch, "b"]:
            punct.append(ch)
        elif parts != [f"a{ch}b"]:
            unsafe.append(ch)
    files: dict[str, str] = {}
    if full:  # marks the normalizer keeps, which NFD may reorder with the marks around them
        unsafe += [ch for ch in chars if any(unicodedata.combining(c) for c in charmap.get(ch, ch))]
        keys = "".join(charmap)
        files["unicode.json"] = json.dumps(
            {
                "keys": keys,
                "values": [charmap[k] for k in keys],
                "spaced": spaced,
                "space": "".join(space),
                "punct": "".join(punct),
                "unsafe": "".join(unsafe),
            },
            ensure_ascii=False,
        )
    else:
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        tokens = sorted(vocab, key=vocab.__getitem__)
        if [vocab[t] for t in tokens] != list(range(len(tokens))) or any("\n" in t for t in tokens):
            raise ValueError("the vocabulary is not one token a line for ids 0..n-1")
        if unsafe:
            raise ValueError(f"the pre-tokenizer splits {unsafe!r} in an unexpected way")
        files["vocab.txt"] = "\n".join(tokens)
        files["ascii.json"] = json.dumps(  # (last: its presence says vocab.txt is there)
            {
                "charmap": {str(ord(k)): v for k, v in charmap.items()},
                "space": "".join(space),
                "punct": "".join(punct),
                "size": len(tokens),
            }
        )
    dst.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        tmp = dst / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dst / name)
