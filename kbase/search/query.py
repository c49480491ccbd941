"""Pure: user search text -> a safe FTS5 MATCH expression.

Supported syntax: words, "phrases" (an unclosed quote runs to the end), prefix*, -exclusion
(a word or a phrase), and OR between two terms. Everything else is punctuation: words joined by
punctuation (``e.g.``, ``foo-bar``, ``user@example.com``) become a phrase of their parts, which is
exactly how the FTS5 tokenizer splits the indexed text; ``c++`` finds ``c``; FTS5 keywords
(``AND``, ``NOT``, ``NEAR``) are ordinary words. The output never raises a syntax error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A word: letters and digits, with the vowel signs and tone marks of Thai, Lao, Myanmar and Khmer
# (combining marks, which \w leaves out: 'เว้น' would split in two at its tone mark).
_WORD = re.compile(r"(?:\w|[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff])+")

# English function words. The any-word query leaves them out: with them, it matches nearly every
# chunk (bm25 is then computed for each) and ranks notes up for sharing "the" and "of" with a
# question. SciFact keyword nDCG@10: 0.675 -> 0.678 with the same weights (BENCHMARKS.md).
STOPWORDS = frozenset(
    "a about after all also am an and any are as at be been before being between both but by can "
    "could did do does doing during each few for from had has have having he her here hers him "
    "his how i if in into is it its itself just me more most my no nor not of off on once only or "
    "other our ours out over own same she should so some such than that the their theirs them "
    "then there these they this those through to too under until up very was we were what when "
    "where which while who whom why will with would you your yours".split()
)
_TOKEN = re.compile(r'(?P<neg>-)?"(?P<phrase>[^"]*)("|$)|(?P<bare>[^\s"]+)')

# Bounds on a query (every mode and face: kbase search, the API, the TUI, MCP, kbase_search in
# SQL). The model reads 256 tokens, about 1,500 characters of English: longer text adds nothing
# to a semantic query. FTS5 evaluates each term of a query over every chunk that holds it, so the
# cost grows with the terms (``'tasks ' * 2000``, the same word 2,000 times, took 50 s): repeated
# terms count once, and the first MAX_QUERY_TERMS distinct ones are searched for.
MAX_QUERY_CHARS = 4000
MAX_QUERY_TERMS = 32


def bound_query(text: str) -> tuple[str, str | None]:
    """``text`` within the bounds above, and a one-line notice saying what was left out (None
    when nothing was). Repeated terms (any case) count once; a query within the bounds comes back
    unchanged, one that is not as its kept terms joined by spaces, cut at MAX_QUERY_CHARS."""
    notes = []
    cut = len(text) > 16 * MAX_QUERY_CHARS  # (what no kept term could come from: not parsed)
    if cut:
        text = text[: 16 * MAX_QUERY_CHARS]
    kept: list[str] = []
    seen: set[str] = set()
    repeated = 0
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if m.group("bare") == "OR":
            if kept and kept[-1] != "OR":
                kept.append(token)
            continue
        if not _WORD.search(token):
            continue  # punctuation alone: parse_query ignores it anyway
        key = token.casefold()
        if key in seen:
            repeated += 1
            continue
        if len(seen) == MAX_QUERY_TERMS:
            notes.append(f"searched for its first {MAX_QUERY_TERMS} distinct terms")
            break
        seen.add(key)
        kept.append(token)
    if repeated:
        notes.insert(0, f"{repeated:,} repeated term{'s' if repeated > 1 else ''} counted once")
    if notes:
        while kept and kept[-1] == "OR":
            kept.pop()
        text = " ".join(kept)
    if len(text) > MAX_QUERY_CHARS:
        space = text.rfind(" ", MAX_QUERY_CHARS - 100, MAX_QUERY_CHARS)
        text = text[: space if space > 0 else MAX_QUERY_CHARS]
        cut = True
    if cut:
        notes.append(f"cut to its first {len(text):,} characters")
    return text, ("query " + ", ".join(notes)) if notes else None


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]
    prefix: bool = False
    quoted: bool = field(default=False, compare=False)  # typed in quotes: a phrase, kept whole

    def fts(self) -> str:
        quoted = '"' + " ".join(self.words).replace('"', '""') + '"'
        return quoted + ("*" if self.prefix else "")


@dataclass(frozen=True)
class Query:
    """Parsed search text: ``clauses`` must all match (each is an OR of terms),
    ``excluded`` none."""

    clauses: tuple[tuple[Term, ...], ...] = ()
    excluded: tuple[Term, ...] = ()
    explicit_or: bool = False
    words: tuple[str, ...] = field(default=())  # every positive word, for display and fallbacks

    @property
    def empty(self) -> bool:
        return not self.clauses

    def to_fts(self, match_any: bool = False) -> str:
        """The MATCH expression: all clauses (AND), or with ``match_any`` any of them (OR), leaving
        out clauses that are a single stop word (unless nothing else is left)."""
        if self.empty:
            return ""
        clauses = self.clauses
        if match_any:
            clauses = tuple(c for c in clauses if not _is_stopword(c)) or clauses
        parts = []
        for clause in clauses:
            inner = " OR ".join(t.fts() for t in clause)
            parts.append(f"({inner})" if len(clause) > 1 else inner)
        expr = (" OR " if match_any else " AND ").join(parts)
        if self.excluded:
            expr = f"({expr})" + "".join(f" NOT {t.fts()}" for t in self.excluded)
        return expr


def _is_stopword(clause: tuple[Term, ...]) -> bool:
    """A clause of one stop word, or of one Latin letter (the "s" of "today's")."""
    if len(clause) != 1 or len(clause[0].words) != 1 or clause[0].prefix:
        return False
    word = clause[0].words[0].lower()
    return word in STOPWORDS or (len(word) == 1 and "a" <= word <= "z")


def parse_query(text: str) -> Query:
    clauses: list[list[Term]] = []
    excluded: list[Term] = []
    words: list[str] = []
    pending_or = explicit_or = False
    for m in _TOKEN.finditer(text):
        neg = bool(m.group("neg"))
        prefix = False
        if m.group("bare") is not None:
            raw = m.group("bare")
            if raw == "OR":
                pending_or = bool(clauses)
                continue
            if raw.startswith("-") and len(raw) > 1:
                neg, raw = True, raw[1:]
            prefix = raw.endswith("*") and bool(_WORD.search(raw[-2:-1] or ""))
            found = _WORD.findall(raw)
        else:
            found = _WORD.findall(m.group("phrase"))
        if not found:
            continue
        term = Term(tuple(found), prefix, quoted=m.group("bare") is None)
        if neg:
            excluded.append(term)
            pending_or = False
            continue
        words.extend(found)
        if pending_or and clauses:
            clauses[-1].append(term)
            explicit_or = True
        else:
            clauses.append([term])
        pending_or = False
    return Query(tuple(tuple(c) for c in clauses), tuple(excluded), explicit_or, tuple(words))
