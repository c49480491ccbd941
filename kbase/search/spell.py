"""Typos: query words the index has never seen, and names a letter away from a note's name.

Words. A query word that no chunk holds (its FTS5 token, a porter stem, is not in the keyword
index) is corrected to the nearest word of the index's own vocabulary: within one edit for words
of 4 to 7 letters, two from 8 on (an edit: a letter dropped, added or changed, or two neighbours
swapped; rapidfuzz's OSA distance), the most frequent of the nearest. The vocabulary is FTS5's,
read through ``apsw.fts5.Table`` (an fts5vocab table in the connection's temp schema). The word
shown is the form nearest to what was typed among the stem's own forms: the typed ending on the
corrected stem ('borowing' -> 'borrowing'), the form the notes use most, the stem. Words of fewer
than four letters, words with digits, words in "phrases", -excluded words and prefix* are never
corrected; neither are scripts without spaces (kbase.search.cjk), nor English words: a word that
is a whole word of the embedding model's vocabulary (22,501 of them: 'make', 'loaf') is what the
person meant even when no note holds it (else 'how to make a loaf' searched 'bake').

``apsw.fts5.Table.query_suggest`` was measured first (BENCHMARKS.md, "Typos"): it replaces any
unknown word by the closest *popular* token however far it is ('calender' -> 'and',
'kubernetes' -> 'benefits'), so kbase takes the vocabulary and the surface forms from apsw and
bounds the distance itself.

Names. ``near_names`` finds the notes whose name (title, file name or alias) is within the same
number of edits of the whole query: the quick switcher's tolerance, for keyword search (a tier
of its own) and for ``kbase show``'s "did you mean".
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import apsw

from kbase.search import cjk
from kbase.search.query import correctable_words

# Words shorter than this are never corrected: three letters are one edit from dozens of words.
MIN_LETTERS = 4
# From this many letters on, two edits are allowed (one below).
TWO_EDITS_FROM = 8
# How many of the vocabulary's nearest stems are looked at closely (their surface forms).
CANDIDATES = 16

_LETTERS_ONLY = re.compile(r"[^\W\d_]+")
_WORD = re.compile(r"\w+")


def edit_budget(text: str) -> int:
    """How many edits a typo of ``text`` (its letters and digits) may be: 0, 1 or 2."""
    n = sum(ch.isalnum() for ch in text)
    return 0 if n < MIN_LETTERS else 1 if n < TWO_EDITS_FROM else 2


@dataclass(frozen=True)
class Correction:
    """A query with its misspelt words replaced: ``text`` is what was searched."""

    text: str
    words: tuple[tuple[str, str], ...]  # (as typed, as searched), in query order


def correct(con: apsw.Connection, text: str) -> Correction | None:
    """``text`` with each word that no note holds replaced by the nearest frequent word of the
    index's vocabulary; None when no word needed it (or none had a near word)."""
    out: list[str] = []
    changes: list[tuple[str, str]] = []
    pos = 0
    for start, end in correctable_words(text):
        word = text[start:end]
        if (
            _LETTERS_ONLY.fullmatch(word) is None
            or edit_budget(word) == 0
            or cjk.has_runs(word)
            or _known(con, word)
            or word.lower() in english_words()
        ):
            continue
        new = _nearest_word(con, word)
        if new is None:
            continue
        if word[0].isupper():
            new = new[0].upper() + new[1:]
        out.append(text[pos:start] + new)
        pos = end
        changes.append((word, new))
    if not changes:
        return None
    return Correction("".join(out) + text[pos:], tuple(changes))


@functools.cache
def english_words() -> frozenset[str]:
    """The whole words (letters only) of the embedding model's WordPiece vocabulary: words English
    has, which a spelling correction leaves alone. Read once (0.15 s), and only when a query word
    is not in the index."""
    import json

    from kbase.paths import TOKENIZER_DIR

    vocab = json.loads((TOKENIZER_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    return frozenset(w for w in vocab["model"]["vocab"] if w.isalpha())


def _known(con: apsw.Connection, word: str) -> bool:
    """Does any chunk hold the word (as the keyword index tokenizes it)?"""
    match = '"' + word.replace('"', '""') + '"'
    return (
        con.execute(
            "SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (match,)
        ).fetchone()
        is not None
    )


_tables: weakref.WeakKeyDictionary[apsw.Connection, Any] = weakref.WeakKeyDictionary()


def _table(con: apsw.Connection) -> Any:
    """chunks_fts as apsw sees it (an ``apsw.fts5.Table``), one per connection: apsw caches the
    vocabulary in it until the index changes. (apsw.fts5 loads on first use: its import costs a
    quarter of a second, which a query whose words the index holds never pays.)"""
    from apsw import fts5

    table = _tables.get(con)
    if table is None:
        table = _tables[con] = fts5.Table(con, "chunks_fts")
    return table


@contextlib.contextmanager
def _temp_writes(con: apsw.Connection) -> Iterator[None]:
    """apsw reads the vocabulary through fts5vocab tables it creates in the temp schema: a
    read-only connection (PRAGMA query_only) lets those through (its file is opened read-only all
    the same, so nothing else can be written)."""
    query_only = con.execute("PRAGMA query_only").fetchone()[0]
    if query_only:
        con.execute("PRAGMA query_only = OFF")
    try:
        yield
    finally:
        if query_only:
            con.execute("PRAGMA query_only = ON")


def _stem(table: Any, word: str) -> str | None:
    tokens = table.tokenize(
        word.encode("utf-8"),
        apsw.FTS5_TOKENIZE_QUERY,
        None,
        include_offsets=False,
        include_colocated=False,
    )
    return tokens[0] if len(tokens) == 1 else None


def _nearest_word(con: apsw.Connection, word: str) -> str | None:
    """The vocabulary word nearest to ``word`` within its edit budget (fewest edits, then the most
    chunks), as a form of it that is nearest to what was typed; None if there is none."""
    table = _table(con)
    stem = _stem(table, word)
    if stem is None:
        return None
    with _temp_writes(con):
        return _nearest_in(table, table.tokens, word, stem)


def _nearest_in(table: Any, tokens: dict[str, int], word: str, stem: str) -> str | None:
    """The nearest form, within the budget, of the vocabulary's stems near ``stem``: fewest edits,
    then a word the notes or English have, then a letter left out or two swapped (the likeliest
    typos: 'limt' is 'limit' before 'list', 'macors' 'macros' before 'macos'), then fewest letters
    added or dropped, then the stem in the most chunks."""
    from rapidfuzz import process  # loaded for a word no note holds only (start-up)
    from rapidfuzz.distance import OSA, Indel

    budget = edit_budget(word)
    typed = word.lower()
    english = english_words()
    # Stems are compared more loosely than words (porter cuts a typo's ending its own way:
    # 'continuaton' stays whole, 'continuation' is 'continu'); the forms are held to the budget.
    near = process.extract(
        stem, list(tokens), scorer=OSA.distance, score_cutoff=budget + 2, limit=None
    )
    ranked = sorted((d, -tokens[c], c) for c, d, _ in near if c != stem)[:CANDIDATES]
    tail = typed[len(stem) :] if typed.startswith(stem) else ""
    best: tuple[int, int, int, int, int, str] | None = None
    for _, minus_docs, candidate in ranked:
        try:
            usual = table.text_for_token(candidate, 2).lower()  # the form the notes use most
        except ValueError:
            continue
        # Other forms of the stem: the typed ending on it ('borowing' -> 'borrowing') or on the
        # usual form ('placeholdrs' -> 'placeholders'), with an 'e' ('toggl' -> 'toggle'), the
        # stem itself; a tie goes to a form the notes or English have.
        endings = [e for e in ("s", "es", "d", "ed", "ing") if typed.endswith(e)]
        forms = [usual, candidate + tail, *(usual + e for e in endings), candidate + "e", candidate]
        # forms made of the stem, maybe not words (the typed ending on the usual form is one)
        made = {candidate + tail, candidate + "e"} - {usual, *(usual + e for e in endings)}
        for form in dict.fromkeys(forms):
            if not _LETTERS_ONLY.fullmatch(form) or (
                form != usual and _stem(table, form) != candidate
            ):
                continue
            word_class = 2 if form == candidate else 1 if form in made else 0
            if form in english:
                word_class = 0
            key = (
                OSA.distance(typed, form),
                word_class,  # a word the notes or English have, then one made of the stem
                # a letter left out or two swapped (the usual typos), before a letter too many
                0 if _subsequence(typed, form) or sorted(typed) == sorted(form) else 1,
                Indel.distance(typed, form),
                minus_docs,
                form,
            )
            if key[0] <= budget and (best is None or key < best):
                best = key
    return best[5] if best else None


def _subsequence(short: str, long: str) -> bool:
    """Is ``short`` ``long`` with letters left out?"""
    letters = iter(long)
    return all(ch in letters for ch in short)


# --- names ----------------------------------------------------------------------------------------
def name_key(name: str) -> str:
    """A name as compared: its words, casefolded, one space apart ('Tasks-API' -> 'tasks api')."""
    # (casefold maps each character on its own, so folding the joined words is folding each)
    return " ".join(_WORD.findall(name)).casefold()


def _file_stem(path: str) -> str:
    """``PurePosixPath(path).stem``, 10x quicker: a cold search reads every note's name."""
    name = path.rpartition("/")[2]
    if name in ("", "."):  # (a trailing '/' or '/.': pathlib's own reading)
        return PurePosixPath(path).stem
    i = name.rfind(".")
    return name[:i] if 0 < i < len(name) - 1 else name


@dataclass(frozen=True)
class NearName:
    doc_id: int
    name: str  # the name as the note has it (title, file name or alias)
    distance: int  # edits between it and what was asked


_names: weakref.WeakKeyDictionary[apsw.Connection, tuple[tuple, list[str], list[tuple], tuple]] = (
    weakref.WeakKeyDictionary()
)


def _all_names(con: apsw.Connection) -> tuple[list[str], list[tuple[int, str]]]:
    """(keys, [(doc_id, name)]) for every title, file name and alias, kept per connection until
    the index changes (a long-lived process asks again and again)."""
    _, keys, owners, _ = _name_table(con)
    return keys, owners


def _name_table(con: apsw.Connection) -> tuple[tuple, list[str], list[tuple[int, str]], tuple]:
    """(the index's stamp, _all_names's keys and owners, the keys sorted by length, stably: their
    lengths, each one's index in the keys, the keys), kept per connection until the index
    changes."""
    stamp = (con.execute("PRAGMA data_version").fetchone()[0], con.total_changes())
    cached = _names.get(con)
    if cached is not None and cached[0] == stamp:
        return cached
    owners: list[tuple[int, str]] = []
    add = owners.append
    for doc_id, title, path, aliases in con.execute(
        "SELECT d.id, d.title, d.path,"
        " (SELECT group_concat(alias, char(31)) FROM aliases WHERE doc_id = d.id)"
        " FROM documents AS d"
    ):
        stem = _file_stem(path) if path else ""
        if aliases:
            for name in dict.fromkeys((title, stem, *aliases.split("\x1f"))):
                if name:
                    add((doc_id, name))
        else:  # (most notes: the title, and the file name when it is another name)
            if title:
                add((doc_id, title))
            if stem and stem != title:
                add((doc_id, stem))
    keys = [name_key(n) for _, n in owners]
    lengths = [len(k) for k in keys]
    order = sorted(range(len(keys)), key=lengths.__getitem__)
    table = (stamp, keys, owners, ([lengths[i] for i in order], order, [keys[i] for i in order]))
    _names[con] = table
    return table


def near_names(con: apsw.Connection, asked: str, budget: int | None = None) -> list[NearName]:
    """The notes one typo (or, for longer names, two) from a name: fewest edits first, one entry
    per note. An exact name is distance 0."""
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    key = name_key(asked)
    if budget is None:
        budget = edit_budget(key)
    if not key or budget == 0:
        return []
    _, _, owners, (lengths, order, by_length) = _name_table(con)
    # A name more than ``budget`` characters longer or shorter is more than ``budget`` edits
    # away: only names of the lengths in between are compared (12,010 names: 1.9 -> 0.3 ms),
    # in the order rapidfuzz gives for the whole list (fewest edits, then the list's order).
    lo = bisect.bisect_left(lengths, len(key) - budget)
    hi = bisect.bisect_right(lengths, len(key) + budget)
    found = process.extract(
        key, by_length[lo:hi], scorer=OSA.distance, score_cutoff=budget, limit=None
    )
    best: dict[int, NearName] = {}
    for d, i in sorted((d, order[lo + j]) for _, d, j in found):
        doc_id, name = owners[i]
        if doc_id not in best or d < best[doc_id].distance:
            best[doc_id] = NearName(doc_id, name, int(d))
    return sorted(best.values(), key=lambda n: (n.distance, n.name.casefold()))


def similar_names(con: apsw.Connection, asked: str, limit: int = 3) -> list[NearName]:
    """The names most like ``asked`` when none is a typo away (for 'did you mean'): rapidfuzz's
    WRatio (partial and word-order matches count) of 70 or more, best first; a partial match
    only when one holds the other whole or their words mostly agree (token_set_ratio 60 or more):
    'nonexist' holds 'xist', a letter away from 'list', which is no reason to suggest 'list'."""
    from rapidfuzz import fuzz, process

    key = name_key(asked)
    if not key:
        return []
    keys, owners = _all_names(con)
    out: dict[int, NearName] = {}
    for _, score, i in process.extract(
        key, keys, scorer=fuzz.WRatio, score_cutoff=70, limit=4 * limit
    ):
        doc_id, name = owners[i]
        short, long = sorted((key, keys[i]), key=len)
        if short not in long and fuzz.token_set_ratio(key, keys[i]) < 60:
            continue
        if doc_id not in out:
            out[doc_id] = NearName(doc_id, name, round(100 - score))
    return list(out.values())[:limit]
