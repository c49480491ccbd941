"""Pure: ParsedDoc -> chunks with exact character offsets, sized in the embedding model's tokens.

How a document is cut, in order of preference:
1. Sections: a heading starts one (and travels with the content after it; a heading is never a
   chunk's only content, nor left dangling at a chunk's end); a thematic break ``---`` ends one.
   The one exception: headings at the very end of a document, with no content after them, join
   the last chunk if it has room, else form the last chunk.
2. Blocks inside a section, packed greedily up to the budget. Protected blocks are never split:
   code (fenced, any fence length, or indented), tables (pipe or ASCII/box-drawing grid), HTML,
   math, CLI sessions and config stanzas in plain text, and Obsidian callouts (and the
   containers of docs sites, ``::: tip``, ``!!! note``) that fit the budget.
   A protected block larger than the budget becomes a chunk of its own, flagged oversized.
3. A block that is too big is split at its list items or inner blocks, then sentences, then
   lines, then words, then (for a giant "word") characters; every cut inside a sentence or word
   is recorded as a diagnostic.
4. Consecutive prose chunks of one section overlap by about ``overlap_ratio`` of the budget
   (whole sentences where possible); nothing overlaps across sections or into protected blocks,
   nor repeats a link reference definition (which would open the chunk inside its line).
5. A chunk smaller than ``min_tokens`` merges with a neighbour when the two fit the budget; one
   that renders to no word (an anchor before a heading, a closing ``</div>``) may take the
   two up to ``min_tokens`` over the budget, within what the model reads (flagged oversized).

Offsets index ``doc.text``: ``text[chunk.start:chunk.end]`` is the chunk, whatever the line
endings (LF, CRLF, lone CR). Front matter and thematic break lines belong to no chunk, nor do runs
that are not text (``kbase.ingest.junk``: base64, data URIs, URLs carrying encoded state, hex
dumps, minified code), even inside a protected block: a chunk ends before each and the next
starts after it, so that they are neither embedded nor matched by keyword search; what is left
beside one without a letter or digit (a link's ``)``) goes with it.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kbase.errors import InputError
from kbase.ingest import junk
from kbase.ingest.columns import Records, Strings, ints
from kbase.ingest.markup import FENCED_BLOCK, ends_in_definition, render
from kbase.ingest.parse import heading_attributes, short_label
from kbase.paths import TOKENIZER_DIR
from kbase.records import Block, Chunk, Diagnostic, ParsedDoc
from kbase.records.defaults import MAX_TOKENS, MIN_TOKENS, OVERLAP_RATIO
from kbase.text import lines_of

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# A WordPiece tokenizer turns any "word" over 100 characters into one [UNK] token, so a blob
# without spaces (base64, a minified file) would count as a few tokens however long it is. A
# chunk's size is therefore at least its length / 16 characters: no real token is longer.
MAX_CHARS_PER_TOKEN = 16
OVERSIZED = 1  # chunk flag
# A piece of text with more than WORD_GROUPS_ABOVE budgets' worth of words and no sentence or line
# boundary is cut at every WORD_GROUP-th word first, not at every word (chunks of such text end
# at most WORD_GROUP words short of the budget; measured with bench/hostile.py).
WORD_GROUPS_ABOVE = 2
WORD_GROUP = 16
# A piece of text of more than MAX_CHARS_PER_TOKEN x COUNT_BUDGETS budgets' characters (200 KB at
# the default budget) is sized by its characters, not counted (see _Chunker.size).
COUNT_BUDGETS = 64
# Headings wait for their content; a run of empty headings longer than this many budgets is an
# outline, and becomes chunks of its own.
MAX_HEADING_RUN = 4
# Bump when what is derived from a stored text changes for the same settings: the next index run
# then derives it again (ingest.rechunk_all), without reading the files. 3: parse.py's title rule;
# 4: titles as Obsidian shows them (the file name; a slug's opening heading); 5: heading
# attributes ('## Props {#props}': the text 'Props', the anchor 'props'); 6: a slug's title is
# the heading after <script setup> and <style> blocks; 7: runs that are not text (base64, data
# URIs, hex dumps, minified code: kbase.ingest.junk) belong to no chunk; 8: containers ('::: tip',
# '!!! note') are callouts; 9: a small chunk that renders to no word joins a neighbour; 10:
# and takes that neighbour's heading path; 11: no overlap from a link reference definition; 12:
# a task's checkbox ('- [x] done') is no shortcut reference link; 13: headings in quotes are
# headings ('> ## Heading': anchors; a quote's headings are no sections of the chunker's); 14:
# the ids of a note's elements ('<a id="x">', '{ #x }': html_ids) are derived; 15: a title and
# each heading of a heading path at most parse.LABEL_CHARS (500) characters.
CHUNKER_VERSION = 15

PROTECTED = frozenset({"code", "table", "html", "math", "cli", "config"})
PROSE_LIKE = frozenset({"prose", "list", "quote"})
HEADISH = frozenset({"heading", "hr"})  # units that never make a chunk on their own
_BLOCK_KIND = {"paragraph": "prose", "callout": "quote", "quote": "quote", "list": "list"}

_WORD = re.compile(r"\w+|[^\w\s]")
_WORD_CHAR = re.compile(r"[^\W_]")
# The CJK ideographs the model's normalizer surrounds with spaces, so that each is a word (and one
# token) of its own: the ranges of tokenizers' BertNormalizer, which skips U+2B820-U+2B91F.
_IDEOGRAPHS = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b81f"
    "\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f"
)
# Runs that tokenize alike alone and in context: an ideograph, word characters, other symbols.
_TOKEN_RUN = re.compile(rf"[{_IDEOGRAPHS}]|[^\W{_IDEOGRAPHS}]+|[^\w\s{_IDEOGRAPHS}]+")
# The runs that are not an ideograph (twice as fast to find in Chinese text, with a tenth of the
# runs; ModelTokenCounter counts each ideograph of a word as one token).
_OTHER_RUN = re.compile(rf"[^\W{_IDEOGRAPHS}]+|[^\w\s{_IDEOGRAPHS}]+")
# The same runs of an ASCII word, found without the ideographs' ranges (twice as fast).
_ASCII_TOKEN_RUN = re.compile(r"[A-Za-z0-9_]+|[^A-Za-z0-9_\s]+")
# A blank line. (A CR must not pair with the LF of the same CRLF into a "blank line".)
_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r(?!\n)|\n)\s*")
# A sentence ends at . ! ? … (and CJK 。！？), maybe followed by closing quotes or brackets, then
# whitespace; or right after CJK full stops. Common abbreviations do not end sentences.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[。！？])\s*)(?=\S)")
_ABBREVIATIONS = frozenset("e.g i.e etc vs mr mrs ms dr prof fig no st cf al approx".split())
_LONGEST_ABBREVIATION = max(map(len, _ABBREVIATIONS))
_CLOSING = ".\"')]”’"  # taken off the end of the word before a full stop
_LINE_END = re.compile(r"(?:\r\n|\r|\n)\s*(?=\S)")
_SPACE_RUN = re.compile(r"\s+(?=\S)")
_PROMPT = re.compile(
    r"[ \t]*(?:\$|#|>|>>>|\.\.\.|PS [^>\n]*>|[A-Za-z]:\\[^>\n]*>|[\w.-]+@[\w.-]+:[^\n$#]*[$#])[ \t]"
)
_CONFIG_LINE = re.compile(
    r"[ \t]*(?:[\w.\-\"']+[ \t]*[=:][ \t]*\S.*|\[[^\]\n]+\]|[#;].*|[\w.\-]+[ \t]+\S.*;)$"
)
_GRID_LINE = re.compile(r"[ \t]*[+|┌┬┐├┼┤└┴┘│─═║╔╦╗╠╬╣╚╩╝]")


class TokenCounter(Protocol):
    """Counts tokens of a piece of text. ``name`` identifies it in the index's fingerprint."""

    name: str

    def count(self, text: str) -> int: ...


class WordCounter:
    """Words and punctuation marks: a cheap stand-in for a model tokenizer (tests, tools)."""

    name = "words"

    def count(self, text: str) -> int:
        return len(_WORD.findall(text))


class ModelTokenCounter:
    """Counts in the embedding model's own WordPiece tokens.

    The text is split into runs of word characters and runs of other symbols, about the way
    BERT's pre-tokenizer splits it, and each distinct run is counted once, as the real tokenizer
    counts it (normalised and split as the tokenizer does, then cut into the model's own word
    pieces: _count_runs), and remembered: three times faster than tokenizing whole passages,
    with the same count (tests compare the two). A CJK ideograph is one token, as it is to the
    tokenizer, and no run: Chinese and Japanese text has few spaces, and its runs would
    otherwise be whole sentences, each new to the cache. A second cache holds whole words (what
    ``str.split()`` gives, which runs never cross): splitting at whitespace is three times
    faster than the run pattern. ``prime`` learns a note's words at once, before its spans are
    counted.
    """

    # Distinct words (and runs) remembered before each cache starts over: some 20 MB each (a
    # note of a million distinct words held 500,000 of each, 180 MB, in every worker).
    CACHE_LIMIT = 100_000

    def __init__(self, tokenizer_dir: Path = TOKENIZER_DIR) -> None:
        self._dir = tokenizer_dir
        self._tokenizer: Tokenizer | None = (
            None  # loaded on first use: a run with nothing to chunk never pays for it
        )
        self.name = f"{tokenizer_dir.name}/wordpiece"
        self._cache: dict[str, int] = {}  # run -> tokens
        self._words: dict[
            str, int
        ] = {}  # whitespace-separated word -> tokens (the sum of its runs')
        self._pieces_table: _Pieces | None = None

    @property
    def _pieces(self) -> _Pieces:
        if self._pieces_table is None:
            tok = self._tok
            in_longer = IN_LONGER_TOKENS if self._dir == TOKENIZER_DIR else in_longer_tokens(tok)
            self._pieces_table = _Pieces(tok, in_longer)
        return self._pieces_table

    @property
    def _tok(self):
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(self._dir / "tokenizer.json"))
            tok.no_truncation()
            tok.no_padding()
            self._tokenizer = tok
        return self._tokenizer

    def count(self, text: str) -> int:
        words = text.split()
        known = self._words
        try:
            return sum(map(known.__getitem__, words))  # the common case, all in C
        except KeyError:
            pass
        if len(known) > self.CACHE_LIMIT:
            known.clear()
        self._learn(words)
        return sum(map(known.__getitem__, words))

    def prime(self, text: str) -> None:
        """Learn the words of a whole note at once, before its spans are counted. Otherwise each
        span with a word not seen yet is walked word by word again to find it: the chunker
        counts a note's text some 50 times over (blocks, sentences, overlaps, merged spans), and
        on a fresh index, with every cache cold, those walks were a fifth of the chunker's time.
        A note of more than PRIME_WORDS new words is left to the counts (their caches' bound)."""
        if len(text) > PRIME_CHARS:
            return
        known = self._words
        new = set(text.split()).difference(known)  # (in C; the order does not matter)
        if not new or len(new) > PRIME_WORDS:
            return
        if len(known) + len(new) > self.CACHE_LIMIT:
            known.clear()
        self._learn(list(new))

    def _learn(self, words: list[str]) -> None:
        """Count the tokens of the words not known yet, run by run."""
        known, cache = self._words, self._cache
        if len(cache) > self.CACHE_LIMIT:
            cache.clear()
        tok = self._tok
        wordpiece = tok.model.tokenize
        findall, ascii_findall = _OTHER_RUN.findall, _ASCII_TOKEN_RUN.findall
        new: list[tuple[str, int, Sequence[str]]] = []  # words, their ideographs, their other runs
        pending: dict[str, None] = {}  # runs for _count_runs, in order
        for w in words:
            if w in known:
                continue
            if w.isascii():
                if w.isalnum():  # the commonest new word: a run of its own, counted at once
                    c = cache.get(w)
                    if c is None:
                        c = cache[w] = len(wordpiece(w.lower()))
                    known[w] = c
                    continue
                runs = ascii_findall(w)
                ideographs = 0
            else:
                # An ideograph is a run of one token (tests check each), counted without a list
                # of them: what the other runs leave of the word (Chinese text: a tenth of runs).
                runs = findall(w)
                ideographs = len(w) - sum(map(len, runs))
            for r in runs:
                if r not in cache and r not in pending:
                    if r.isascii() and r.isalnum():
                        # What the tokenizer does to such a run is to lowercase it (BERT's
                        # normalizer) and cut it into word pieces: done so, six times as fast
                        # (a note of 1,000,000 distinct [[t123]] is 1,000,000 new runs).
                        cache[r] = len(wordpiece(r.lower()))
                    else:
                        pending[r] = None
            new.append((w, ideographs, runs))
            known[w] = -1  # a word twice in ``words`` is counted once
        if pending:
            self._count_runs(pending, cache)
        for w, ideographs, word_runs in new:
            known[w] = ideographs + sum(map(cache.__getitem__, word_runs))

    def _count_runs(self, runs: dict[str, None], cache: dict[str, int]) -> None:
        """Each run's tokens, as the tokenizer counts the run alone: its characters normalised
        and split one by one as the tokenizer does (_Pieces), then each piece cut into word pieces
        by the model itself; five times as fast as the tokenizer's ``encode``. A run with a
        character whose treatment could depend on its neighbours is left to ``encode``."""
        if self._pieces_table is not None and len(self._pieces_table) > self.CACHE_LIMIT:
            self._pieces_table = None
        pieces = self._pieces
        alone, first, later, longest = pieces.alone, pieces.first, pieces.later, pieces.longest
        wordpiece = self._tok.model.tokenize
        rest = []
        for r in runs:
            n = r.translate(pieces)
            if _UNSURE in n:
                rest.append(r)
                continue
            c = 0
            for piece in n.split():
                if len(piece) == 1:  # one token, or [UNK]
                    c += 1
                elif len(piece) <= longest and alone.issuperset(piece):
                    # Characters that no longer token holds (kana, Hangul): a token each, or one
                    # [UNK] if one is not in the vocabulary (as WordPiece counts it, without the
                    # token objects that were half of the time on rust-book-ja).
                    c += len(piece) if piece[0] in first and later.issuperset(piece[1:]) else 1
                else:
                    c += len(wordpiece(piece))
            cache[r] = c
        if rest:
            self._encode_runs(rest, cache)

    def _encode_runs(self, runs: list[str], cache: dict[str, int]) -> None:
        """Each run's tokens, from one call of the tokenizer on the runs joined by spaces: a
        token never crosses a space (the pre-tokenizer splits there first), so the tokens
        starting within a run's span are exactly those of the run alone (tests compare). One
        call instead of one a run: a Japanese note has hundreds of new runs, each call ~35 us."""
        starts = []
        at = 0
        for r in runs:
            starts.append(at)
            at += len(r) + 1
        counts = [0] * len(runs)
        i, n, next_start = 0, len(runs), starts[1] if len(runs) > 1 else at
        for s, _e in self._tok.encode(" ".join(runs), add_special_tokens=False).offsets:
            while s >= next_start:
                i += 1
                next_start = starts[i + 1] if i + 1 < n else at
            counts[i] += 1
        for r, c in zip(runs, counts, strict=True):
            cache[r] = c


def in_longer_tokens(tok: Tokenizer) -> frozenset[str]:
    """The characters, not ASCII, of the vocabulary's tokens of two characters or more (without
    the "##" of a word's later pieces)."""
    prefix = getattr(tok.model, "continuing_subword_prefix", "##")
    out: set[str] = set()
    for token in tok.get_vocab():
        token = token.removeprefix(prefix)
        if len(token) > 1 and not token.isascii():
            out.update(c for c in token if not c.isascii())
    return frozenset(out)


# in_longer_tokens of the model's own tokenizer (TOKENIZER_DIR; a test compares): reading the
# vocabulary took 10 ms a process.
IN_LONGER_TOKENS = frozenset("£°²³´¹ßøłʻαηιοςυавеикночяابدن⁄₂₄−")

# Stands for a character that _Pieces leaves to the tokenizer. (No character becomes a NUL: the
# normaliser drops it.)
_UNSURE = "\x00"


class _Pieces(dict[int, str]):
    """A table for ``str.translate``: each character (its code point) -> what the tokenizer makes
    of it before its word pieces, as text whose ``split()`` gives the pieces: its normalised form
    (BertNormalizer: control characters dropped, whitespace to a space, spaces around CJK
    ideographs, NFD without nonspacing marks, lowercase), a space for whitespace, and spaces
    around punctuation (BertPreTokenizer isolates each mark). Learnt from the tokenizer itself,
    one character at a time, when first met.

    All of that is done character by character, so a run's pieces are the concatenation of its
    characters', but for one step: NFD puts combining marks next to each other in the order of
    their combining classes. Marks that are dropped do not matter; a character that leaves a
    mark of a class other than 0 (or one Python's Unicode does not know, whose class it cannot
    tell), and one whose normalised form Python would split differently, maps to _UNSURE."""

    def __init__(self, tok: Tokenizer, in_longer: frozenset[str]) -> None:
        from tokenizers import models, normalizers, pre_tokenizers

        super().__init__()
        # What this table knows holds for BERT's normalizer, pre-tokenizer and WordPiece only:
        # with another tokenizer every character is left to it.
        self._bert = (
            isinstance(tok.normalizer, normalizers.BertNormalizer)
            and isinstance(tok.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
            and isinstance(tok.model, models.WordPiece)
        )
        self._normalize = tok.normalizer.normalize_str if self._bert else None
        self._pre_tokenize = tok.pre_tokenizer.pre_tokenize_str if self._bert else None
        self._token_id = tok.token_to_id
        self._prefix: str = tok.model.continuing_subword_prefix if self._bert else "##"
        self._in_longer = in_longer
        # The characters of pieces met, not ASCII, that no token of two characters or more holds
        # (in_longer_tokens): WordPiece takes a piece of them one character at a time. Those of
        # them that are a token at a word's start, and those that are one after it ("##x").
        self.alone: set[str] = set()
        self.first: set[str] = set()
        self.later: set[str] = set()
        # A longer word is one [UNK].
        self.longest: int = tok.model.max_input_chars_per_word if self._bert else 0

    def _learn_alone(self, x: str) -> None:
        if not x.isascii() and x not in self._in_longer:
            self.alone.add(x)
            if self._token_id(x) is not None:
                self.first.add(x)
            if self._token_id(self._prefix + x) is not None:
                self.later.add(x)

    def __missing__(self, code: int) -> str:
        try:
            if self._normalize is None or self._pre_tokenize is None:
                raise ValueError("not BERT's tokenizer")
            out = []
            for x in self._normalize(chr(code)):
                if x == _UNSURE or unicodedata.combining(x) or unicodedata.category(x) == "Cn":
                    raise ValueError(x)
                split = self._pre_tokenize(f"a{x}a")
                if len(split) == 2 and split[1][1][0] == 2:  # whitespace: a space
                    out.append(" ")
                elif x.isspace():  # Python's split would cut where the tokenizer does not
                    raise ValueError(x)
                elif len(split) == 1:  # part of a word
                    out.append(x)
                    self._learn_alone(x)
                elif len(split) == 3 and split[1][0] == x:  # punctuation: a piece of its own
                    out.append(f" {x} ")
                else:
                    raise ValueError(x)
            piece = "".join(out)
        except Exception:  # a surrogate, a mark, a surprise: left to the tokenizer
            piece = _UNSURE
        self[code] = piece
        return piece


# A note is primed (ModelTokenCounter.prime) when it is at most this long and has at most this
# many words not counted before: a few hundred for most notes.
PRIME_CHARS = 1_000_000
PRIME_WORDS = 20_000


@functools.lru_cache(maxsize=1)
def default_counter() -> ModelTokenCounter:
    return ModelTokenCounter()


@dataclass(frozen=True)
class ChunkSettings:
    """The chunker's tunables; stored in the index so a change is detected."""

    max_tokens: int = MAX_TOKENS
    overlap_ratio: float = OVERLAP_RATIO
    min_tokens: int = MIN_TOKENS

    def __post_init__(self) -> None:
        if self.max_tokens < 4:
            raise ValueError(f"max_tokens must be at least 4, not {self.max_tokens}")
        if not 0 <= self.overlap_ratio <= 0.5:
            raise ValueError(f"overlap_ratio must be between 0 and 0.5, not {self.overlap_ratio}")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"min_tokens must be between 0 and max_tokens, not {self.min_tokens}")

    @property
    def overlap_tokens(self) -> int:
        return round(self.max_tokens * self.overlap_ratio)

    def fingerprint(self, counter: TokenCounter) -> str:
        return json.dumps(
            {"version": CHUNKER_VERSION, "counter": counter.name, **asdict(self)}, sort_keys=True
        )

    def with_changes(
        self,
        *,
        max_tokens: int | None = None,
        overlap: float | None = None,
        min_tokens: int | None = None,
    ) -> ChunkSettings:
        """These settings with the ones given changed. A smaller budget without a minimum keeps
        the minimum a small part of it (a quarter at most)."""
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("max_tokens", max_tokens),
                ("overlap_ratio", overlap),
                ("min_tokens", min_tokens),
            )
            if v is not None
        }
        if max_tokens is not None and min_tokens is None:
            changes["min_tokens"] = min(self.min_tokens, max_tokens // 4)
        try:
            return replace(self, **changes)
        except ValueError as e:
            raise InputError(
                f"chunk settings: {e}",
                "--max-tokens is at least 4, --overlap between 0 and 0.5,"
                " --min-tokens at most --max-tokens",
            ) from None

    @classmethod
    def from_fingerprint(cls, fingerprint: str | None) -> ChunkSettings:
        """The settings an index was chunked with (defaults if none or unreadable)."""
        try:
            data = json.loads(fingerprint or "{}")
            return cls(
                **{k: data[k] for k in ("max_tokens", "overlap_ratio", "min_tokens") if k in data}
            )
        except (ValueError, TypeError):
            return cls()


@dataclass
class Chunking:
    chunks: Sequence[Chunk]  # a list, or columns (kbase.ingest.derive.chunk_columns)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass(slots=True)  # slots: a long paragraph is cut into a unit per line or word
class _Unit:
    start: int
    end: int
    kind: str  # heading, prose, list, quote, code, table, html, math, cli, config
    tokens: int
    parts: tuple[tuple[int, int], ...] = ()
    level: int = (
        0  # split granularity reached: 0 block, 1 parts, 2 sentences, 3 lines, 4 words, 5 chars
    )
    overlap: bool = False  # repeated from the previous chunk

    @property
    def protected(self) -> bool:
        return self.kind in PROTECTED


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    path: str
    kinds: frozenset[str]  # one object for each set of kinds (_kind_set)
    tokens: int
    flags: int = 0
    section: int = 0
    hard_break_after: bool = False
    only_headings: bool = False


def chunk(
    doc: ParsedDoc, counter: TokenCounter | None = None, settings: ChunkSettings | None = None
) -> Chunking:
    """Cut ``doc`` into chunks (see the module docstring for the rules)."""
    return _Chunker(doc, counter or default_counter(), settings or ChunkSettings()).run()


class _Chunker:
    def __init__(self, doc: ParsedDoc, counter: TokenCounter, settings: ChunkSettings) -> None:
        self.doc, self.text, self.counter, self.s = doc, doc.text, counter, settings
        self.spans: list[_Span] = []
        self.diagnostics: list[Diagnostic] = list(doc.diagnostics)  # the parser's cuts first
        self.cur: list[_Unit] = []
        self.cur_tokens = 0
        self.headish = 0  # how many of cur are headings or breaks
        self.path = ""
        self.section = 0
        # Runs that are not text, which no chunk holds (kbase.ingest.junk), and their ends.
        self.junk = _junk(doc)
        self.junk_ends = [b for _, b in self.junk]
        prime = getattr(counter, "prime", None)  # (a model's counter; not the word counter)
        if prime is not None:
            prime(doc.text)

    # --- units ---------------------------------------------------------------------------------
    def unit(self, start: int, end: int, kind: str, parts=(), level: int = 0) -> _Unit | None:
        text = self.text
        if kind not in ("code", "math"):  # leading indentation of code is content
            while start < end and text[start].isspace():
                start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start >= end:
            return None
        return _Unit(start, end, kind, self.size(start, end), parts, level)

    def size(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]``, at least one per MAX_CHARS_PER_TOKEN characters. Text
        whose floor alone is over COUNT_BUDGETS budgets is not counted: it is far over the budget
        whatever the count (a 7 MB block of 300,000 config lines took 6 s of tokenizing to learn
        it), so the floor stands for it."""
        floor = -(-(end - start) // MAX_CHARS_PER_TOKEN)
        if floor > COUNT_BUDGETS * self.s.max_tokens:
            return floor
        return max(self.counter.count(self.text[start:end]), floor)

    def blocks(self) -> Iterator[tuple[str, Block | None, int, int]]:
        """(kind, block, start, end) in order, with gaps between blocks (markdown-it drops link
        reference definitions, for one) returned as prose so that no text is lost."""
        doc = self.doc
        if doc.kind == "pdf":  # page text as laid out: prose (no Markdown, no CLI or config)
            for b in doc.blocks:
                yield "prose", b, b.start, b.end
            return
        if doc.kind not in ("markdown", "canvas"):
            for b in _text_blocks(self.text):
                yield _classify_text(self.text[b.start : b.end]), b, b.start, b.end
            return
        pos = doc.body_start
        for b in doc.blocks:
            if b.start > pos and self.text[pos : b.start].strip():
                yield "prose", None, pos, b.start
            if b.kind == "paragraph":
                kind = _classify_text(self.text[b.start : b.end])
            else:
                kind = b.kind if b.kind in ("heading", "hr") else _BLOCK_KIND.get(b.kind, b.kind)
            yield kind, b, b.start, b.end
            pos = max(pos, b.end)
        if self.text[pos:].strip():
            yield "prose", None, pos, len(self.text)

    # --- driver --------------------------------------------------------------------------------
    def run(self) -> Chunking:
        headings: list[tuple[int, str]] = []
        # Segments (a PDF's pages, a canvas's cards): a chunk ends where one ends, and never
        # spans two (not even two short pages: a hit then names its page, and a six-word
        # phrase lands on the page it came from); each card starts with no headings above it.
        seg_starts = [a for a, _ in self.doc.segments]
        segment = 0
        canvas = self.doc.kind == "canvas"
        # A PDF's outline: the heading path of each page (the bookmarks pointing at it or before).
        page_paths = _page_paths(self.doc) if self.doc.kind == "pdf" else []
        if page_paths:
            self.path = page_paths[0]
        for kind, block, start, end in self.blocks():
            if seg_starts:
                at = bisect_right(seg_starts, start) - 1
                if at != segment:
                    segment = at
                    self.flush(hard_break=True, final=True)
                    if canvas:
                        headings.clear()
                        self.path = ""
                        self.section += 1
                    elif page_paths:
                        self.path = page_paths[at]
            if kind == "hr":
                if self.cur and self.only_headings():
                    # Headings before a break wait for their content after it; the break counts.
                    if self.spans:
                        self.spans[-1].hard_break_after = True
                    u = self.unit(start, end, "hr")
                    if u:
                        self.append(u)
                else:
                    self.flush(hard_break=True)
                continue
            if kind == "heading":
                assert block is not None
                if not self.only_headings():
                    self.flush()
                elif self.cur_tokens > MAX_HEADING_RUN * self.s.max_tokens:
                    self.flush(final=True)  # a long run of empty headings (an outline) is content
                while headings and headings[-1][0] >= block.level:
                    headings.pop()
                headings.append((block.level, _heading_text(self.text[start:end])))
                self.path = " > ".join(t for _, t in headings)
                self.section += 1
                u = self.unit(start, end, "heading")
                if u:
                    self.append(u)
                continue
            if block is not None and block.unclosed:
                self.diagnostics.append(
                    Diagnostic("unclosed_fence", start, end, "code fence never closes")
                )
            k = bisect_right(self.junk_ends, start)
            if k == len(self.junk) or self.junk[k][0] >= end:
                self.content(kind, block, start, end)
                continue
            # Runs that are not text (kbase.ingest.junk) belong to no chunk: a chunk ends before
            # each and the next starts after it; what is left beside one without a letter or a
            # digit (the ')' of a link) goes with it.
            pos = start
            while k < len(self.junk) and self.junk[k][0] < end:
                a, b = self.junk[k]
                if a > pos and _has_word(self.text, pos, a):
                    self.content(kind, block, pos, a)
                self.flush(hard_break=True)
                pos, k = max(pos, b), k + 1
            if pos < end and _has_word(self.text, pos, end):
                self.content(kind, block, pos, end)
        self.flush(final=True)
        return self.finish()

    def content(self, kind: str, block: Block | None, start: int, end: int) -> None:
        """Place ``text[start:end]``, a content block or the part of one between junk runs."""
        parts = block.parts if block else ()
        if parts and (start > block.start or end < block.end):  # type: ignore[union-attr]
            parts = tuple((max(a, start), min(b, end)) for a, b in parts if a < end and b > start)
        unit = self.unit(start, end, kind, parts)
        if unit is None:
            return
        if (
            kind == "quote"
            and block is not None
            and block.kind == "callout"
            and unit.tokens <= self.s.max_tokens
        ):
            unit.kind = "callout"  # kept whole: it fits
        self.place(unit)

    def only_headings(self) -> bool:
        return self.headish == len(self.cur)  # O(1): a run of 40,000 empty headings stays linear

    def place(self, u: _Unit) -> None:
        budget = self.s.max_tokens
        content = any(not (x.kind in HEADISH or x.overlap) for x in self.cur)
        if self.cur_tokens + u.tokens <= budget or (
            not content and (u.protected or u.kind == "callout")
        ):
            self.append(u)
            return
        if u.protected or u.kind == "callout":
            self.flush()
            self.append(u)
            return
        # Splittable and too big for what is left: start a new chunk if it fits a fresh one ...
        fresh_room = budget - self.overlap_tokens_for(u) - self.heading_tokens()
        if content and u.tokens <= fresh_room:
            self.flush(continued=u)
            self.append(u)
            return
        # ... else cut it at the next finer boundary and place the pieces one by one.
        pieces = self.split(u)
        if len(pieces) <= 1:  # cannot be cut further (a single character)
            if content:
                self.flush(continued=u)
            self.append(u)
            return
        if content and pieces[0].level >= 3:
            self.flush(continued=u)  # a sentence that must be cut starts a chunk, not ends one
        for p in pieces:
            self.place(p)

    def heading_tokens(self) -> int:
        return self.cur_tokens if self.only_headings() else 0

    def overlap_tokens_for(self, u: _Unit) -> int:
        return self.s.overlap_tokens if u.kind in PROSE_LIKE else 0

    def append(self, u: _Unit) -> None:
        self.cur.append(u)
        self.cur_tokens += u.tokens
        self.headish += u.kind in HEADISH

    def flush(
        self, hard_break: bool = False, continued: _Unit | None = None, final: bool = False
    ) -> None:
        cur = self.cur
        only_headings = self.only_headings()
        if not cur or (only_headings and not final):
            if hard_break and self.spans:
                self.spans[-1].hard_break_after = True
            return  # headings wait for their content
        start, end = cur[0].start, cur[-1].end
        kinds = _kind_set(u.kind for u in cur if u.kind not in HEADISH and not u.overlap)
        tokens = self.cur_tokens
        span = _Span(
            start, end, self.path, kinds, tokens, section=self.section, only_headings=only_headings
        )
        if tokens > self.s.max_tokens:
            span.flags |= OVERSIZED
            self.diagnostics.append(
                Diagnostic(
                    "oversized",
                    start,
                    end,
                    f"{'+'.join(sorted(kinds)) or 'block'} of"
                    f" {'at least ' if tokens > COUNT_BUDGETS * self.s.max_tokens else ''}"
                    f"{tokens} tokens kept whole "
                    f"(budget {self.s.max_tokens})",
                )
            )
        span.hard_break_after = hard_break
        self.spans.append(span)
        self.cur, self.cur_tokens, self.headish = [], 0, 0
        if continued is not None and continued.kind in PROSE_LIKE:
            # The trailing run of prose units (pieces of one paragraph, say) supplies the overlap.
            # Not from a unit that ends with a link reference definition ('[label]: url' lines
            # between blocks, prose here, or at the end of a list item): it shows nothing, and an
            # overlap, cut at a space, began inside it.
            tail = []
            for u in reversed(cur):
                if u.kind not in PROSE_LIKE or u.overlap:
                    break
                if ends_in_definition(self.text, u.start, u.end):
                    break
                tail.append(u)
            if tail:
                ov = self.overlap(tail[-1].start, tail[0].end, tail[0].kind)
                if ov is not None:
                    self.append(ov)

    def overlap(self, start: int, end: int, kind: str) -> _Unit | None:
        """The tail of ``text[start:end]`` (whole sentences, else words) within the overlap
        budget, after the last code block in it (a list item's, a quote's): an overlap from
        inside one opens its chunk in the middle of the code, and its closing fence then reads
        as an opening one, showing the prose after it as code."""
        room = self.s.overlap_tokens
        if room <= 0:
            return None
        text = self.text
        if "```" in text[start:end] or "~~~" in text[start:end]:
            for m in FENCED_BLOCK.finditer(text, start, end):
                start = m.end()
        for pattern in (_SENTENCE_END, _SPACE_RUN):
            # Walk the boundaries back from the end, adding up segment sizes, while they fit.
            best, total, stop = None, 0, end
            for pos in reversed(list(_iter_boundaries(pattern, text, start, end))):
                total += self.size(pos, stop)
                if total > room:
                    break
                best, stop = (pos, total), pos
            if best is not None and best[1] > 0:
                return _Unit(best[0], end, kind, best[1], overlap=True)
        return None

    # --- splitting -----------------------------------------------------------------------------
    def split(self, u: _Unit) -> list[_Unit]:
        """``u`` cut at the finest boundary level it has not reached yet."""
        text = self.text
        for level in range(u.level + 1, 6):
            if level == 1:
                cuts = [a for a, _ in u.parts[1:]]
            elif level == 5:
                # A "word" longer than the budget (a URL, base64, a 50 MB line): cut characters.
                # A token covers at least one character, so half the budget in characters leaves
                # room for the overlap and a heading.
                step = max(1, self.s.max_tokens // 2)
                cuts = list(range(u.start + step, u.end, step))
            else:
                pattern = {2: _SENTENCE_END, 3: _LINE_END, 4: _SPACE_RUN}[level]
                cuts = [m for m in _iter_boundaries(pattern, text, u.start, u.end) if m > u.start]
            cuts = [c for c in cuts if u.start < c < u.end]
            if not cuts:
                continue
            if level >= 3:
                kind = "cut_word" if level == 5 else "cut_sentence"
                self.diagnostics.append(
                    Diagnostic(
                        kind,
                        u.start,
                        u.end,
                        f"no {'word' if level == 5 else 'sentence'} "
                        f"boundary within the budget of {self.s.max_tokens} tokens",
                    )
                )
            piece_level = level
            if level == 4 and len(cuts) > WORD_GROUPS_ABOVE * self.s.max_tokens:
                # Thousands of words without a sentence or line break (2,000 nested callouts: a
                # line of 2,000 '>'): placed one by one they cost 7 us each, 15 s for 4 MB.
                # Runs of words are placed instead, each cut again at its words only if it does
                # not fit (its level stays at lines).
                cuts = cuts[WORD_GROUP - 1 :: WORD_GROUP]
                piece_level = 3
            pieces = []
            bounds = [u.start, *cuts, u.end]
            kind = u.kind if u.kind != "callout" else "quote"
            for a, b in zip(bounds, bounds[1:]):
                p = self.unit(a, b, kind, level=piece_level)
                if p is not None:
                    pieces.append(p)
            return pieces
        return [u]

    # --- finishing -----------------------------------------------------------------------------
    def finish(self) -> Chunking:
        spans = self.merge_small(self.spans)
        self.spans = []
        if self.junk:
            spans = [piece for sp in spans for piece in self.without_junk(sp)]
        if self.doc.kind == "markdown":
            spans = self.join_unseen(spans)
        if not spans and self.doc.kind == "pdf":
            # A PDF without any text (scanned pages) still answers to its names and metadata: one
            # chunk holds its keyword row, over the whole (blank) text; it may be empty.
            spans = [_Span(0, len(self.text), "", frozenset(("prose",)), 0)]
        # Columns, each span let go once read: a canvas of 1,000,000 cards has as many chunks,
        # and a Chunk each beside its span held 200 MB.
        cols: dict[str, array] = {f: array("q") for f in _CHUNK_INTS}
        paths: list[str] = []
        kinds: list[str] = []
        spans.reverse()
        while spans:
            sp = spans.pop()
            cols["start"].append(sp.start)
            cols["end"].append(sp.end)
            cols["tokens"].append(sp.tokens)
            cols["flags"].append(sp.flags)
            paths.append(sp.path)
            kinds.append(_chunk_kind(sp.kinds))
        # Lines from the offsets in order (counted, without a table of every line's start).
        starts, ends = cols["start"], cols["end"]
        cols["line"].extend(lines_of(self.text, starts))
        last = array("q", map(max, starts, map((1).__rsub__, ends)))  # max(start, end - 1)
        cols["end_line"].extend(lines_of(self.text, last))
        columns: dict[str, Sequence] = {f: ints(c) for f, c in cols.items()}
        columns.update(seq=range(len(paths)), heading_path=Strings(paths), kind=Strings(kinds))
        chunks = Records(Chunk, [columns[f] for f in _CHUNK_FIELDS])
        return Chunking(chunks, self.diagnostics)

    def merge_small(self, spans: list[_Span]) -> list[_Span]:
        """Tiny chunks join a neighbour (not across a thematic break) when the two fit; trailing
        heading-only chunks join the chunk before them."""
        budget, small = self.s.max_tokens, self.s.min_tokens
        out: list[_Span] = []
        for sp in spans:
            prev = out[-1] if out else None
            if prev is not None and (
                sp.only_headings
                or (
                    not prev.hard_break_after
                    and not (prev.flags or sp.flags)
                    and (prev.tokens < small or sp.tokens < small)
                    and prev.tokens + sp.tokens <= budget
                )
            ):
                joined = self.joined(prev, sp)
                if joined.tokens <= budget:  # the real count, with what lies between the two
                    out[-1] = joined
                    continue
            out.append(sp)
        return out

    def join_unseen(self, spans: list[_Span]) -> list[_Span]:
        """A small chunk that shows no word when rendered (an anchor and an HTML comment before
        a heading, a '</div>' after a code sample) joins the chunk before it in its section,
        else the one after it, when the two come to at most min_tokens over the budget (within
        what the model reads) and no junk run lies between them: alone, it was a passage a
        search could show and a person could not read."""
        out: list[_Span] = []
        waiting: _Span | None = None  # an unseen chunk that found no home before it
        for sp in spans:
            if waiting is not None:
                joined = self.joined_within(waiting, sp, seen=sp)
                if joined is None:
                    out.append(waiting)
                sp, waiting = joined or sp, None
            if sp.tokens < self.s.min_tokens and not _shows_a_word(self.text, sp.start, sp.end):
                prev = out[-1] if out and out[-1].section == sp.section else None
                joined = self.joined_within(prev, sp, seen=prev) if prev is not None else None
                if joined is None:
                    waiting = sp
                else:
                    out[-1] = joined
                continue
            out.append(sp)
        if waiting is not None:
            out.append(waiting)
        return out

    def joined_within(self, a: _Span, b: _Span, seen: _Span) -> _Span | None:
        """``a`` and the chunk after it, ``b``, as one when that is at most min_tokens over the
        budget and no thematic break or junk run lies between them (join_unseen), else None;
        its heading path, section and kinds are those of ``seen``, the one that shows words (an
        anchor before a heading is that heading's)."""
        limit = self.s.max_tokens + self.s.min_tokens
        if a.hard_break_after or a.tokens + b.tokens > limit:
            return None
        k = bisect_right(self.junk_ends, a.end)
        if k < len(self.junk) and self.junk[k][0] < b.start:
            return None
        joined = self.joined(a, b)
        if joined.tokens > limit:
            return None
        flags = joined.flags | (OVERSIZED if joined.tokens > self.s.max_tokens else 0)
        return replace(joined, path=seen.path, section=seen.section, kinds=seen.kinds, flags=flags)

    def without_junk(self, sp: _Span) -> list[_Span]:
        """``sp``, or its parts around the junk runs inside it (headings that waited for their
        content across one, or a merge: chunks never hold one)."""
        k = bisect_right(self.junk_ends, sp.start)
        if k == len(self.junk) or self.junk[k][0] >= sp.end:
            return [sp]
        out, pos = [], sp.start
        while True:
            a, b = self.junk[k] if k < len(self.junk) and self.junk[k][0] < sp.end else (sp.end, 0)
            x, y = pos, a
            while x < y and self.text[x].isspace():
                x += 1
            while y > x and self.text[y - 1].isspace():
                y -= 1
            if y > x and _has_word(self.text, x, y):
                tokens = self.size(x, y)
                flags = sp.flags if tokens > self.s.max_tokens else sp.flags & ~OVERSIZED
                out.append(replace(sp, start=x, end=y, tokens=tokens, flags=flags))
            if a >= sp.end:
                return out
            pos, k = b, k + 1

    def joined(self, a: _Span, b: _Span) -> _Span:
        tokens = self.size(a.start, b.end)
        return _Span(
            a.start,
            max(a.end, b.end),
            _common_path(a.path, b.path),
            _kind_set(a.kinds | b.kinds),
            tokens,
            a.flags | b.flags,
            a.section,
            b.hard_break_after,
            a.only_headings and b.only_headings,
        )


_CHUNK_FIELDS = [f.name for f in fields(Chunk)]
_CHUNK_INTS = ("start", "end", "line", "end_line", "tokens", "flags")


def _page_paths(doc: ParsedDoc) -> list[str]:
    """For each page of a PDF, its heading path from the outline (``doc.headings``, each at the
    start of the page it points at): the bookmarks on pages up to and including this one."""
    if not doc.headings:
        return []
    starts = [a for a, _ in doc.segments]
    out: list[str] = []
    stack: list[tuple[int, str]] = []
    marks = sorted(doc.headings, key=lambda h: h.start)  # stable: the PDF's order within a page
    k = 0
    for a in starts:
        while k < len(marks) and marks[k].start <= a:
            h = marks[k]
            while stack and stack[-1][0] >= h.level:
                stack.pop()
            stack.append((h.level, short_label(h.text)))
            k += 1
        out.append(" > ".join(t for _, t in stack))
    return out


def _iter_boundaries(pattern: re.Pattern, text: str, start: int, end: int) -> Iterator[int]:
    """Offsets in (start, end) where a new sentence/line/word begins."""
    if pattern is not _SENTENCE_END:  # (words and lines: a list made in one go, twice as fast)
        ends = [m.end() for m in pattern.finditer(text, start, end)]
        if ends and ends[-1] >= end:
            ends.pop()
        return iter(ends)
    return _sentence_boundaries(text, start, end)


def _sentence_boundaries(text: str, start: int, end: int) -> Iterator[int]:
    for m in _SENTENCE_END.finditer(text, start, end):
        pos = m.end()
        if pos >= end:
            continue
        if _is_abbreviation(text, start, m.start()):
            continue
        yield pos


def _is_abbreviation(text: str, start: int, dot: int) -> bool:
    """Is the word before the sentence end at ``dot`` (from the last whitespace after ``start``,
    without closing marks) a common abbreviation, or one letter? Only as many characters are
    looked at as the longest abbreviation has: text without spaces (Chinese, Japanese) has its
    last whitespace a paragraph back, and walking there at every full stop cost a tenth of
    rust-book-ja's chunking."""
    end = dot
    while end > start and text[end - 1] in _CLOSING:  # what the word ends with is not the word
        end -= 1
    word_start = end
    limit = max(start, end - _LONGEST_ABBREVIATION - 1)
    while word_start > limit and not text[word_start - 1].isspace():
        word_start -= 1
    if word_start > start and not text[word_start - 1].isspace():
        return False  # longer than any abbreviation (lower() never shortens it), not one letter
    word = text[word_start:end].lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _text_blocks(text: str) -> list[Block]:
    """Paragraphs of plain text, separated by blank lines."""
    blocks, pos = [], 0
    for m in _PARAGRAPH_BREAK.finditer(text):
        if text[pos : m.start()].strip():
            blocks.append(Block("paragraph", pos, m.start()))
        pos = m.end()
    if text[pos:].strip():
        blocks.append(Block("paragraph", pos, len(text)))
    return blocks


def _classify_text(para: str) -> str:
    """prose, or a protected kind for a CLI session, a config stanza or a grid table."""
    lines = [ln for ln in para.splitlines() if ln.strip()]
    if not lines:
        return "prose"
    if (
        len(lines) >= 2
        and all(_GRID_LINE.match(ln) for ln in lines)
        and any(c in para for c in "+┼─═-")
    ):
        return "table"
    if _PROMPT.match(lines[0]) and (len(lines) == 1 or _looks_like_command(lines[0])):
        return "cli"
    if (
        len(lines) >= 2
        and all(_CONFIG_LINE.match(ln) for ln in lines)
        and not para.rstrip().endswith(".")
    ):
        return "config"
    if len(lines) >= 2 and all(ln[:1] in " \t" for ln in lines):
        return "config"  # an indented stanza in plain text
    return "prose"


def _looks_like_command(line: str) -> bool:
    rest = _PROMPT.sub("", line, count=1).strip()
    return bool(rest) and not rest.endswith(".") and len(rest.split()) <= 20


_KIND_SETS: dict[frozenset[str], frozenset[str]] = {}


def _kind_set(kinds) -> frozenset[str]:
    """The kinds of a span, as one shared frozenset for each distinct set (a canvas of
    1,000,000 cards held a set for each of its spans until the end: 200 MB)."""
    found = frozenset(kinds)
    return _KIND_SETS.setdefault(found, found) if len(_KIND_SETS) < 1024 else found


def _chunk_kind(span_kinds: frozenset[str]) -> str:
    kinds = {
        "quote" if k == "callout" else "code" if k == "math" else "prose" if k == "html" else k
        for k in span_kinds
    }
    if not kinds:
        return "prose"
    return next(iter(kinds)) if len(kinds) == 1 else "mixed"


def _junk(doc: ParsedDoc) -> list[tuple[int, int]]:
    """The runs of ``doc`` that are not text (kbase.ingest.junk): hex dumps are looked for in
    code blocks, or in the whole of a plain text file."""
    runs = junk.junk_runs(doc.text, doc.body_start)
    if doc.kind != "markdown":
        return junk.merged(runs + junk.hex_dumps(doc.text))
    dumps = [
        r for b in doc.blocks if b.kind == "code" for r in junk.hex_dumps(doc.text, b.start, b.end)
    ]
    return junk.merged(runs + dumps) if dumps else runs


def _has_word(text: str, start: int, end: int) -> bool:
    return _WORD_CHAR.search(text, start, end) is not None


def _shows_a_word(text: str, start: int, end: int) -> bool:
    """Does ``text[start:end]`` show a word once rendered (kbase.ingest.markup)?"""
    rendered, _ = render(text, start, end)
    return _WORD_CHAR.search(rendered) is not None


def _heading_text(source: str) -> str:
    """The heading as it reads in a heading path: its first line without the '#' markers and
    without a trailing attribute list (``## Props {#props}`` is 'Props')."""
    first = source.splitlines()[0] if source else ""
    if first.lstrip().startswith("#"):
        first = first.strip().strip("#")
    return short_label(heading_attributes(first.strip())[0])


def _common_path(a: str, b: str) -> str:
    pa, pb = a.split(" > "), b.split(" > ")
    common = []
    for x, y in zip(pa, pb):
        if x != y:
            break
        common.append(x)
    return " > ".join(common)
