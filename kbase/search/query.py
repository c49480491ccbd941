"""Pure: user search text -> a safe FTS5 MATCH expression.

Supported syntax: words, "phrases" (an unclosed quote runs to the end), prefix*, -exclusion
(a word or a phrase), and OR between two terms. Everything else is punctuation: words joined by
punctuation (``e.g.``, ``foo-bar``, ``user@example.com``) become a phrase of their parts, which is
exactly how the FTS5 tokenizer splits the indexed text; ``c++`` finds ``c``; FTS5 keywords
(``AND``, ``NOT``, ``NEAR``) are ordinary words. The output never raises a syntax error.

Obsidian's search operators: ``path:``, ``file:`` and ``tag:`` (``tag:#x``) restrict the notes
(``Query.operators``: each group must hold, a group is an OR of operators; ``-path:x`` leaves notes
out), ``content:x`` is the word x; values may be quoted (``path:"Daily notes"``). Obsidian's other
operators (``line:``, ``section:``, ``task:``...) and an operator without a value are not searched
as words: ``Query.error`` says what is wrong, for the caller to raise.
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
# Obsidian's search operators: those kbase reads, and those it does not (an error names them).
OPERATORS = ("path", "file", "tag", "content")
UNSUPPORTED = (
    "line",
    "block",
    "section",
    "task",
    "task-todo",
    "task-done",
    "match-case",
    "ignore-case",
)
_OP_NAMES = "|".join(sorted(OPERATORS + UNSUPPORTED, key=len, reverse=True))
_TOKEN = re.compile(
    r'(?P<neg>-)?"(?P<phrase>[^"]*)("|$)'
    rf'|\(*(?P<opneg>-)?(?P<op>(?i:{_OP_NAMES})):(?:"(?P<opquoted>[^"]*)(?:"|$)|(?P<opvalue>[^\s"]*))'
    r'|(?P<bare>[^\s"]+)'
)
SYNTAX_HINT = (
    'kbase reads words, "phrases", prefix*, -word, a OR b, path:x, file:x, tag:#x, content:x'
)


@dataclass(frozen=True)
class Operator:
    """An Obsidian search operator on the note: ``name`` is 'path' (the path inside its root
    contains ``value``), 'file' (the file name contains it) or 'tag' (the note has the tag or a
    tag nested under it); ``negated`` (``-tag:x``): the note must not match."""

    name: str
    value: str
    negated: bool = False

    def __str__(self) -> str:
        value = f'"{self.value}"' if " " in self.value else self.value
        return f"{'-' if self.negated else ''}{self.name}:{value}"


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
    unchanged, one that is not as its kept terms joined by spaces, cut at MAX_QUERY_CHARS. The
    notice tells of repeats when a word other than STOPWORDS and single letters repeats, or when
    more than MAX_QUERY_TERMS repeats were left out."""
    notes = []
    cut = early = len(text) > 16 * MAX_QUERY_CHARS  # (what no kept term could come from)
    if cut:
        text = text[: 16 * MAX_QUERY_CHARS]
    kept: list[str] = []
    seen: set[str] = set()
    repeated = dropped = 0
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
            dropped += 1
            # Said only of words that count: 'the' or 'a' twice in a question is no news.
            repeated += key.strip('"') not in STOPWORDS and len(key) > 1
            continue
        if len(seen) == MAX_QUERY_TERMS:
            notes.append(f"searched for its first {MAX_QUERY_TERMS} distinct terms")
            break
        seen.add(key)
        kept.append(token)
    if repeated or dropped > MAX_QUERY_TERMS:  # ('the' twice in a question is no news)
        notes.insert(0, f"{dropped:,} repeated term{'s' if dropped > 1 else ''} counted once")
    if notes or dropped:
        while kept and kept[-1] == "OR":
            kept.pop()
        text = " ".join(kept)
    if len(text) > MAX_QUERY_CHARS:
        space = text.rfind(" ", MAX_QUERY_CHARS - 100, MAX_QUERY_CHARS)
        text = text[: space if space > 0 else MAX_QUERY_CHARS]
        cut = True
    if cut:  # (the bound, not what is left of it after repeats: 'word word ...' is 4)
        notes.append(f"cut to its first {MAX_QUERY_CHARS if early else len(text):,} characters")
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
    """Parsed search text: ``clauses`` must all match (each is an OR of terms), ``excluded``
    none: a note that holds an excluded term anywhere is left out (kbase.search.filters.Filters
    .without), not only its chunks that do."""

    clauses: tuple[tuple[Term, ...], ...] = ()
    excluded: tuple[Term, ...] = ()
    explicit_or: bool = False
    words: tuple[str, ...] = field(default=())  # every positive word, for display and fallbacks
    # Obsidian operators on the note: every group must hold; a group holds when one of its
    # operators does (``tag:a OR tag:b``).
    operators: tuple[tuple[Operator, ...], ...] = ()
    error: tuple[str, str] | None = None  # (message, hint): an operator kbase cannot read
    text: str = ""  # the search text without its operators (what the embedding model reads)

    @property
    def empty(self) -> bool:
        """No words to search for (there may be operators: see ``filters_only``)."""
        return not self.clauses

    @property
    def filters_only(self) -> bool:
        """Operators, and nothing else to search for: the notes they keep are the results."""
        return not self.clauses and bool(self.operators)

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
    groups: list[list[Operator]] = []
    error: tuple[str, str] | None = None
    dropped: list[tuple[int, int]] = []  # spans of operators (and the ORs between them)
    or_span = (0, 0)
    last = ""  # what the previous term was: 'word' or 'operator' (for OR)
    pending_or = explicit_or = False
    for m in _TOKEN.finditer(text):
        neg = bool(m.group("neg"))
        prefix = False
        if m.group("op") is not None:
            op = _operator(m)
            if isinstance(op, tuple):
                error = error or op
                dropped.append(m.span())
                continue
            if op is None:  # an unsupported operator's name followed by a space: plain words
                found, neg = _WORD.findall(m.group(0)), False
            elif op.name == "content":
                found, neg = _WORD.findall(op.value), op.negated
                value_at = (
                    m.start("opvalue") if m.group("opquoted") is None else m.start("opquoted") - 1
                )
                dropped.append((m.start("op"), value_at))  # content:x reads as x
            else:
                dropped.append(m.span())
                if pending_or:
                    dropped.append(or_span)
                if pending_or and last == "word":
                    error = error or _mixed_or(op)
                if pending_or and last == "operator" and groups:
                    groups[-1].append(op)
                else:
                    groups.append([op])
                pending_or, last = False, "operator"
                continue
        elif m.group("bare") is not None:
            raw = m.group("bare")
            if raw == "OR":
                pending_or = bool(clauses) or bool(groups)
                or_span = m.span()
                if last == "operator":
                    dropped.append(or_span)  # between operators, or an error
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
        if pending_or and last == "operator" and groups:
            error = error or _mixed_or(groups[-1][-1])
        if pending_or and last == "word" and clauses:
            clauses[-1].append(term)
            explicit_or = True
        else:
            clauses.append([term])
        pending_or, last = False, "word"
    kept, pos = [], 0
    for start, end in sorted(set(dropped)):
        kept.append(text[pos : max(pos, start)])
        pos = max(pos, end)
    kept.append(text[pos:])
    return Query(
        tuple(tuple(c) for c in clauses),
        tuple(excluded),
        explicit_or,
        tuple(words),
        tuple(tuple(g) for g in groups),
        error,
        " ".join("".join(kept).split()),
    )


def _operator(m: re.Match) -> Operator | tuple[str, str] | None:
    """The operator a token names, an error (message, hint), or None: the name of an operator
    kbase does not read, followed by a space, is plain words ('task: call Bob')."""
    name = m.group("op").lower()
    quoted = m.group("opquoted")
    value = (quoted if quoted is not None else m.group("opvalue") or "").strip()
    if quoted is None:
        value = value.rstrip(")")
    if name in UNSUPPORTED:
        if not value and quoted is None:
            return None
        return (
            f"kbase does not support Obsidian's {name}: operator",
            f"{SYNTAX_HINT}; search for the words without {name}:",
        )
    if name == "tag":
        value = value.lstrip("#")
    if not value or (name == "tag" and not _WORD.search(value)):
        example = {"path": "path:journal/", "file": "file:2024", "tag": "tag:#project"}.get(
            name, f"{name}:word"
        )
        return (f"{name}: needs a value, e.g. {example}", SYNTAX_HINT)
    if name != "tag" and (error := glob_error(value, f"{name}:{value}")):
        return error
    return Operator(name, value, bool(m.group("opneg")))


def glob_error(pattern: str, what: str) -> tuple[str, str] | None:
    """(message, hint) when the glob ``pattern`` (``what`` names it) has a '[' that is never
    closed: SQLite's GLOB then matches no path at all, so the search would find nothing."""
    at = 0
    while (at := pattern.find("[", at)) >= 0:
        close = at + 1 + pattern.startswith("^", at + 1)
        close = pattern.find("]", close + pattern.startswith("]", close))  # '[]ab]' holds ']'
        if close < 0:
            return (
                f"{what}: the '[' is never closed",
                "close it, as in [ab] (a or b), or write [[] for a '[' in a file name",
            )
        at = close + 1
    return None


def _mixed_or(op: Operator) -> tuple[str, str]:
    return (
        f"OR joins two words or two operators, not a word and {op}",
        "write a OR b, or path:x OR path:y; words and operators side by side must all match",
    )


def correctable_words(text: str) -> list[tuple[int, int]]:
    """(start, end) of each word a spelling correction may replace: the words of plain terms, not
    of "phrases" (exact, as typed), -excluded terms, prefix* terms, operators or OR."""
    spans: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(text):
        raw = m.group("bare")
        if raw is None or raw == "OR" or raw.startswith("-") or raw.endswith("*"):
            continue
        base = m.start("bare")
        spans.extend((base + w.start(), base + w.end()) for w in _WORD.finditer(raw))
    return spans
