import json
import random
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kbase.ingest import pdf
from kbase.ingest.chunk import (
    _IDEOGRAPHS,
    _TOKEN_RUN,
    _UNSURE,
    IN_LONGER_TOKENS,
    OVERSIZED,
    ChunkSettings,
    ModelTokenCounter,
    WordCounter,
    _junk,
    chunk,
    in_longer_tokens,
)
from kbase.ingest.parse import parse
from kbase.paths import TOKENIZER_DIR
from kbase.text import line_of, line_starts
from tests.conftest import examples, shared
from tests.pdfgen import make_pdf

WORDS = WordCounter()
PROTECTED_BLOCKS = ("code", "table", "math", "html")


def chunks_of(text, path="n.md", max_tokens=40, overlap=0.12, min_tokens=8, counter=WORDS):
    doc = parse(text, path)
    return doc, chunk(doc, counter, ChunkSettings(max_tokens, overlap, min_tokens))


def check_invariants(doc, result, s: ChunkSettings, counter=WORDS):
    text, chunks = doc.text, result.chunks
    hr = [(b.start, b.end) for b in doc.blocks if b.kind == "hr"]
    # offsets exact, trimmed, in order
    for a, b in zip(chunks, chunks[1:]):
        assert a.start <= b.start and a.end < b.end
        if (
            b.start < a.end
        ):  # overlap: only between prose chunks, never more than the overlap budget
            assert counter.count(text[b.start : a.end]) <= s.overlap_tokens
    starts = line_starts(text)
    for c in chunks:
        piece = text[c.start : c.end]
        assert piece and piece == piece.strip() or c.kind in ("code", "mixed")
        assert c.line == line_of(starts, c.start)
        assert c.end_line == line_of(starts, max(c.start, c.end - 1)) >= c.line
    # every non-blank character outside front matter, thematic breaks and runs that are not
    # text (kbase.ingest.junk) is in a chunk; no chunk holds any of such a run; beside one, only
    # what has no letter or digit (a link's ')') may be left out
    junk = _junk(doc)
    for c in chunks:
        assert not any(a < c.end and b > c.start for a, b in junk), text[c.start : c.end]
    covered = bytearray(len(text))
    for c in chunks:
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    for a, b in hr + junk:
        covered[a:b] = b"\x01" * (b - a)
    missing = next(
        (i for i in range(doc.body_start, len(text)) if not covered[i] and not text[i].isspace()),
        None,
    )
    if missing is not None and junk:  # left out beside a run: no word character up to one
        gap = re.match(r"[^\w]*", text[missing:]).group()
        if any(a == missing + len(gap.rstrip()) or a <= missing < b for a, b in junk) or any(
            b <= missing and not text[b:missing].strip("()[]<>\"'`.,;: \t\r\n") for a, b in junk
        ):
            covered[missing : missing + len(gap)] = b"\x01" * len(gap)
            missing = next(
                (
                    i
                    for i in range(doc.body_start, len(text))
                    if not covered[i] and not text[i].isspace()
                ),
                None,
            )
    assert missing is None, repr(text[missing : missing + 40])
    # budget, unless flagged
    for c in chunks:
        if not c.flags & OVERSIZED:
            assert counter.count(text[c.start : c.end]) <= s.max_tokens, text[c.start : c.end]
    # protected blocks are never cut, but at a run that is not text: a chunk inside one ends
    # at its end or at such a run, and starts at its start or after one
    for blk in doc.blocks:
        if blk.kind in PROTECTED_BLOCKS:
            for c in chunks:
                whole = (
                    c.end <= blk.start
                    or c.start >= blk.end
                    or (c.start <= blk.start and blk.end <= c.end)
                )
                assert whole or (
                    (c.start <= blk.start or any(blk.start < b <= c.start for _, b in junk))
                    and (c.end >= blk.end or any(c.end <= a < blk.end for a, _ in junk))
                ), (blk, c)
    # no heading-only chunk, except for headings with no content after them at the document's end
    heads = [(b.start, b.end) for b in doc.blocks if b.kind == "heading"]
    last_content = max((b.end for b in doc.blocks if b.kind not in ("heading", "hr")), default=-1)
    if last_content >= 0:
        for c in chunks:
            if c.start > last_content:
                continue
            rest = text[c.start : c.end]
            for a, b in heads:
                if c.start <= a and b <= c.end:
                    rest = rest.replace(text[a:b], "", 1)
            assert rest.strip(), f"heading-only chunk {text[c.start : c.end]!r}"


# --- generated Markdown ------------------------------------------------------------------------
word = st.sampled_from(
    "alpha beta gamma delta sqlite notes index token river stone cloud e.g. v1.2 naïve 東京".split()
)
sentence = st.lists(word, min_size=1, max_size=14).map(lambda ws: " ".join(ws).capitalize() + ".")
paragraph = st.lists(sentence, min_size=1, max_size=12).map(" ".join)
wrapped = paragraph.map(lambda p: re.sub(r"(\S+ \S+ \S+ \S+ \S+ \S+) ", r"\1\n", p))
heading = st.tuples(st.integers(1, 4), st.lists(word, min_size=1, max_size=4)).map(
    lambda t: "#" * t[0] + " " + " ".join(t[1])
)
code_body = st.lists(
    st.sampled_from(["x = 1", "", "# comment", "print(x)", "```", "~~~", "- not a list"]),
    max_size=30,
)
fence = st.tuples(
    st.sampled_from(["```", "````", "~~~", "~~~~~"]),
    st.sampled_from(["", "py", "rust,ignore"]),
    code_body,
).map(
    lambda t: (
        f"{t[0]}{t[1]}\n"
        + "\n".join(ln for ln in t[2] if not ln.startswith(t[0][:3]) or len(t[0]) > 3)
        + f"\n{t[0]}"
    )
)
indented = code_body.map(lambda ls: "\n".join("    " + (ln or "y") for ln in ls) or "    z")
table = st.integers(1, 25).map(
    lambda n: "| a | b |\n|---|---|\n" + "\n".join(f"| r{i} | value {i} |" for i in range(n))
)
lst = st.lists(paragraph, min_size=1, max_size=8).map(
    lambda items: "\n".join(f"- {i}" for i in items)
)
quote = paragraph.map(lambda p: "> " + p)
callout = paragraph.map(lambda p: "> [!note] Title\n> " + p)
math = st.lists(word, min_size=1, max_size=40).map(
    lambda ws: "$$\n" + " + ".join(ws) + "\n\n= x\n$$"
)
html = st.just("<div>\n<p>raw html block</p>\n</div>")
hr = st.just("---")
block = st.one_of(
    paragraph, wrapped, heading, fence, indented, table, lst, quote, callout, math, html, hr
)
front = st.sampled_from(["", "---\ntitle: T\ntags: [a]\n---\n"])
document = st.tuples(front, st.lists(block, min_size=1, max_size=15)).map(
    lambda t: t[0] + "\n\n".join(t[1]) + "\n"
)


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document, st.sampled_from([24, 40, 120]))
def test_markdown_chunk_invariants(text, budget):
    s = ChunkSettings(budget, 0.12, budget // 5)
    doc = parse(text, "gen.md")
    check_invariants(doc, chunk(doc, WORDS, s), s)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.one_of(paragraph, wrapped), min_size=1, max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
@pytest.mark.slow
def test_text_chunk_invariants_and_line_endings(paras, nl):
    lf = "\n\n".join(paras) + "\n"
    s = ChunkSettings(30, 0.12, 6)
    base = chunk(parse(lf, "t.txt"), WORDS, s)
    text = lf.replace("\n", nl)
    doc = parse(text, "t.txt")
    result = chunk(doc, WORDS, s)
    check_invariants(doc, result, s)
    # the same cuts as with LF, with offsets into this text
    assert [text[c.start : c.end].replace(nl, "\n") for c in result.chunks] == [
        lf[c.start : c.end] for c in base.chunks
    ]


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400))
@example(
    "\t0\x1f"
)  # a code block ending in a character Python calls whitespace and Markdown does not
def test_any_text_chunks_without_error(text):
    for path in ("x.md", "x.txt"):
        doc = parse(text, path)
        check_invariants(
            doc, chunk(doc, WORDS, ChunkSettings(20, 0.12, 4)), ChunkSettings(20, 0.12, 4)
        )


# --- specific rules ------------------------------------------------------------------------------
def test_heading_path_and_headings_travel_with_content():
    text = "# Guide\n\nIntro words here.\n\n## Install\n\n### Linux\n\nRun the installer now.\n"
    doc, r = chunks_of(text, max_tokens=14, min_tokens=0)
    assert [(text[c.start : c.end], c.heading_path) for c in r.chunks] == [
        ("# Guide\n\nIntro words here.", "Guide"),
        ("## Install\n\n### Linux\n\nRun the installer now.", "Guide > Install > Linux"),
    ]


def test_thematic_break_is_a_strong_boundary_and_front_matter_is_not_chunked():
    text = "---\ntitle: x\n---\nFirst part.\n\n---\n\nSecond part.\n"
    doc, r = chunks_of(text, max_tokens=100, min_tokens=50)
    assert [text[c.start : c.end] for c in r.chunks] == ["First part.", "Second part."]


def test_tiny_sections_merge():
    text = "# A\n\none.\n\n## B\n\ntwo.\n\n## C\n\nthree.\n"
    doc, r = chunks_of(text, max_tokens=100, min_tokens=20)
    assert len(r.chunks) == 1 and r.chunks[0].heading_path == "A"


def test_oversized_code_block_is_whole_flagged_and_diagnosed():
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(50)) + "\n```"
    text = f"# Code\n\nIntro.\n\n{code}\n\nAfter.\n"
    doc, r = chunks_of(text, max_tokens=30)
    (big,) = [c for c in r.chunks if c.flags & OVERSIZED]
    assert text[big.start : big.end].endswith(code) and big.kind in ("code", "mixed")
    assert [d.kind for d in r.diagnostics] == ["oversized"]


def test_unclosed_fence_is_a_diagnostic():
    doc, r = chunks_of("# T\n\n```py\nx = 1\n", max_tokens=100)
    assert [d.kind for d in r.diagnostics] == ["unclosed_fence"]


def test_long_paragraph_splits_at_sentences_with_overlap():
    sentences = [f"Sentence number {i} has exactly seven words." for i in range(12)]
    text = "# S\n\n" + " ".join(sentences) + "\n"
    doc, r = chunks_of(text, max_tokens=40, overlap=0.25, min_tokens=0)
    assert len(r.chunks) > 2
    for a, b in zip(r.chunks, r.chunks[1:]):
        assert b.start < a.end  # overlapping
        assert text[b.start : b.end].startswith("Sentence number")  # whole sentences
        assert b.heading_path == "S"
    assert r.diagnostics == []  # no sentence was cut


def test_no_overlap_across_sections_or_into_code():
    para = " ".join(f"Word{i} and more words here." for i in range(20))
    text = f"# A\n\n{para}\n\n```\ncode\n```\n\n# B\n\n{para}\n"
    doc, r = chunks_of(text, max_tokens=30, overlap=0.2)
    code_chunk = next(c for c in r.chunks if "```" in text[c.start : c.end])
    assert text[code_chunk.start : code_chunk.end].startswith("```")
    b_first = next(c for c in r.chunks if c.heading_path == "B")
    assert text[b_first.start : b_first.end].startswith("# B")


def test_giant_word_is_cut_with_a_diagnostic(model_counter):
    # WordPiece counts any 100+ character word as one [UNK]; the chunk still has a size cap.
    doc, r = chunks_of("x" * 5000 + "\n", path="big.txt", max_tokens=20, counter=model_counter)
    assert len(r.chunks) >= 5000 // (20 * 16)
    assert all(c.end - c.start <= 20 * 16 for c in r.chunks)
    assert "".join(doc.text[c.start : c.end] for c in r.chunks) == "x" * 5000
    assert {d.kind for d in r.diagnostics} == {"cut_word"}


@pytest.mark.parametrize(
    "block,kind",
    [
        ("$ ls -la\ntotal 8\ndrwxr-xr-x 2 me me 4096 .\n$ echo done\ndone", "cli"),
        (">>> import sys\n>>> sys.version\n'3.11'", "cli"),
        ("[server]\nhost = example.org\nport = 8080\n; comment", "config"),
        ("    listen 80;\n    server_name example.org;\n    root /var/www;", "config"),
        ("+-----+-----+\n| a   | b   |\n+=====+=====+\n| 1   | 2   |\n+-----+-----+", "table"),
        ("┌───┬───┐\n│ a │ b │\n└───┴───┘", "table"),
    ],
)
def test_plain_text_protected_blocks_stay_whole(block, kind):
    text = "Intro paragraph about the session.\n\n" + block + "\n\nClosing words.\n"
    doc, r = chunks_of(text, path="s.txt", max_tokens=6, min_tokens=0)
    (c,) = [c for c in r.chunks if block.splitlines()[0].strip() in doc.text[c.start : c.end]]
    assert doc.text[c.start : c.end].strip() == block.strip() and c.kind == kind


def test_callout_kept_whole_when_it_fits():
    text = (
        "# C\n\n> [!warning] Careful\n> Line one of the callout.\n> Line two of the callout.\n\n"
        "After it.\n"
    )
    doc, r = chunks_of(text, max_tokens=20, min_tokens=0)
    assert any(
        doc.text[c.start : c.end].endswith("Line two of the callout.")
        and "[!warning]" in doc.text[c.start : c.end]
        for c in r.chunks
    )


# --- the model's tokenizer -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_counter():
    return ModelTokenCounter()


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "naïve café déjà-vu",
        "snake_case and camelCase and CONSTANT_CASE",
        "東京都の天気は晴れ",
        "emoji 🎉🎉 and € signs",
        "url https://example.com/a/b?c=d&e=f#x",
        "x" * 300,
        "a.b.c/d-e_f:g;h",
        "[[t123456]] [[T999999|Alias]] ABC123def " + "Q" * 100 + " " + "z9" * 60,
        # New runs are tokenized together, joined by spaces: each run's own count comes back.
        "ガギグ・データベース、「所有権」とは？ ガギグ・データベース Ünïcödé—naïve…«ok»",
        "\u0301x é\u0301 ＡＢＣ１２３ ﬁne ½ ⁵ x\u200by 한국어 문장 Ελληνικά русский",
        # Kana, a token each, but a word with one not in the vocabulary (わ, ソ) is one [UNK],
        # and so is a word of over 100 characters.
        "あ" * 100 + " " + "ア" * 101 + " わたし ソース データ がぎぐ ーー・ー",
    ],
)
def test_model_counter_matches_the_tokenizer(model_counter, text):
    expected = len(model_counter._tok.encode(text, add_special_tokens=False).ids)
    assert model_counter.count(text) == expected


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.text(
        st.characters(categories=["L", "Nd"])
        | st.characters(min_codepoint=32, max_codepoint=126)
        | st.sampled_from("\n\t\r\u3000\u00a0"),
        max_size=120,
    )
)
def test_model_counter_matches_the_tokenizer_on_any_text(model_counter, text):
    # Letters and digits of every script, ASCII punctuation, spaces. (Characters whose Unicode
    # decomposition brings a space or a combining mark, like '¯' or a lone accent, can differ
    # by a token: the tokenizer splits or merges them after normalising.)
    expected = len(model_counter._tok.encode(text, add_special_tokens=False).ids)
    assert model_counter.count(text) == expected


def test_model_counter_takes_cjk_ideographs_one_by_one_as_the_tokenizer_does(model_counter):
    # The model's normaliser puts spaces around each CJK ideograph; the counter's runs must split
    # at exactly the same characters, or a count of Chinese or Japanese text would be off.
    normalize = model_counter._tok.normalizer.normalize_str
    differ = []
    for c in range(0x30000):
        ch = chr(c)
        if 0xD800 <= c <= 0xDFFF or ch.isspace():
            continue
        padded = " " in normalize(ch * 2).strip()
        alone = _TOKEN_RUN.findall(ch * 2) == [ch, ch]
        if padded != alone:
            differ.append(f"U+{c:04X}")
    assert not differ, differ[:20]


def _run_counts(counter, runs):
    """The counter's count of each run (the runs of words it has not met), against the
    tokenizer's own: len(encode(run))."""
    cache: dict[str, int] = {}
    counter._count_runs(dict.fromkeys(runs), cache)
    encodings = counter._tok.encode_batch(list(runs), add_special_tokens=False)
    expected = {r: len(e.ids) for r, e in zip(runs, encodings, strict=True)}
    return [(r, cache[r], expected[r]) for r in runs if cache[r] != expected[r]]


_EVERY_CHARACTER = "".join(chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF)


@pytest.mark.slow  # (the fast loop: 6-14 s each on a 2-core machine)
def test_model_counter_counts_every_character_as_the_tokenizer_does(model_counter):
    # Runs are counted without the tokenizer's encode: normalised and split character by
    # character (kbase.ingest.chunk._Pieces), then cut into word pieces. Every code point below
    # U+30000 alone, then in runs of four with its neighbours in code point order (marks of one
    # script together, whose order NFD would change) and in a shuffled order.
    chars = _EVERY_CHARACTER
    shuffled = list(chars)
    random.Random(36).shuffle(shuffled)
    mixed = "".join(shuffled)
    runs = list(chars) + [chars[i : i + 4] for i in range(0, len(chars), 4)]
    runs += [mixed[i : i + 4] for i in range(0, len(mixed), 4)]
    differ = _run_counts(model_counter, list(dict.fromkeys(runs)))
    assert not differ, differ[:10]
    # Most characters are counted so; the rest (unassigned code points, combining marks that
    # NFD could reorder) are left to the tokenizer.
    pieces = model_counter._pieces
    unsure = sum(1 for c in chars if c.translate(pieces) == _UNSURE)
    assert 0 < unsure < len(chars) / 3
    assert all(c.translate(pieces) != _UNSURE for c in "あデータ漢字한국어éÅßΣσ«»。、！？")


@pytest.mark.slow
def test_model_counter_counts_every_character_between_others_as_the_tokenizer_does(
    model_counter,
):
    runs = []
    for c in _EVERY_CHARACTER:
        runs += [c * 2, "a" + c, c + "a", "あ" + c + "ア", "é" + c + "x", "\u0301" + c + "\u3099"]
    differ = _run_counts(model_counter, list(dict.fromkeys(runs)))
    assert not differ, differ[:10]


@settings(
    max_examples=examples(2000),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.text(max_size=12)
        | st.text(
            st.characters(categories=["Mn", "Mc", "Me", "Lo", "Lm", "P", "S", "Cf", "Zs"]),
            max_size=12,
        )
        | st.text(
            st.sampled_from("データがパ゙ゔ\u0301\u0308\u302e\u302f\u0f39IİΣςaé漢字_・ー"),
            max_size=12,
        ),
        min_size=1,
        max_size=8,
    )
)
def test_model_counter_counts_any_run_as_the_tokenizer_does(model_counter, runs):
    assert not _run_counts(model_counter, list(dict.fromkeys(runs)))


@pytest.mark.parametrize(
    "name", ["rust-book", "rust-book-ja", "rust-book-zh", "obsidian-tasks-docs", "foam-docs"]
)
def test_model_counter_counts_every_run_of_the_real_vaults_as_the_tokenizer_does(name):
    # A fresh counter, which meets each run as it would while indexing the vault; and each word's
    # count is the sum of its runs' (an ideograph's found without a run of its own).
    folder = shared("vaults", name)
    words: dict[str, None] = {}
    for path in sorted(folder.rglob("*.md")):
        words.update(dict.fromkeys(path.read_text(encoding="utf-8").split()))
    runs = {w: _TOKEN_RUN.findall(w) for w in words}
    every_run = list(dict.fromkeys(r for w in words for r in runs[w]))
    assert len(every_run) > 1000
    counter = ModelTokenCounter()
    assert not _run_counts(counter, every_run)
    encodings = counter._tok.encode_batch(every_run, add_special_tokens=False)
    tokens = {r: len(e.ids) for r, e in zip(every_run, encodings, strict=True)}
    counter = ModelTokenCounter()
    differ = [w for w in words if counter.count(w) != sum(tokens[r] for r in runs[w])]
    assert not differ, differ[:10]


def test_the_characters_of_longer_tokens_are_the_vocabularys(model_counter):
    # The counter takes a piece of other characters (kana, Hangul) one character at a time, as
    # WordPiece does when no token of two characters or more holds them.
    found = in_longer_tokens(model_counter._tok)
    assert found == IN_LONGER_TOKENS
    assert "ß" in found and "あ" not in found and "한" not in found


def test_a_tokenizer_other_than_berts_has_each_run_counted_by_its_encode(tmp_path):
    # The counter's table of characters holds for BERT's normalizer and pre-tokenizer only:
    # with another normaliser, every run is left to the tokenizer's encode, as before the table.
    config = json.loads((TOKENIZER_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    config["normalizer"] = {"type": "NFC"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(config), encoding="utf-8")
    counter = ModelTokenCounter(tmp_path)
    text = "データ e\u0301 東京の所有権 Ünïcödé «ok» ガギグ"
    tok = counter._tok
    runs = [r for w in text.split() for r in _TOKEN_RUN.findall(w)]
    expected = sum(len(tok.encode(r, add_special_tokens=False).ids) for r in runs)
    assert counter.count(text) == expected
    assert all(c.translate(counter._pieces) == _UNSURE for c in "データé")
    assert ModelTokenCounter().count(text) != expected  # BERT's lowercases and drops accents


def test_model_counter_takes_each_cjk_ideograph_for_one_token(model_counter):
    ideographs = re.findall(f"[{_IDEOGRAPHS}]", _EVERY_CHARACTER)
    assert len(ideographs) > 80_000
    encodings = model_counter._tok.encode_batch(ideographs, add_special_tokens=False)
    assert {len(e.ids) for e in encodings} == {1}
    assert model_counter.count("".join(ideographs[::7])) == len(ideographs[::7])


def test_default_budget_fits_the_model_with_its_context(model_counter):
    s = ChunkSettings()
    assert s.max_tokens + 32 + 2 <= 256
    assert 0.10 <= s.overlap_ratio <= 0.15


# --- real vaults ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["rust-book", "obsidian-tasks-docs", "foam-docs"])
def test_real_vaults_never_split_fences_or_tables(name, model_counter):
    folder = shared("vaults", name)
    s = ChunkSettings()
    n_chunks = 0
    for path in sorted(folder.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        doc = parse(text, path.name)
        result = chunk(doc, model_counter, s)
        check_invariants(doc, result, s, model_counter)
        n_chunks += len(result.chunks)
    assert n_chunks > 100


def _assert_chunks_exact(doc, chunking) -> None:
    for c in chunking.chunks:
        assert 0 <= c.start < c.end <= len(doc.text)
        assert doc.text[c.start : c.end].strip()
    starts = [c.start for c in chunking.chunks]
    assert starts == sorted(starts)


def test_a_table_of_a_million_cells_is_one_block_with_a_diagnostic():
    from kbase.ingest.chunk import chunk
    from kbase.ingest.parse import MAX_TABLE_CELLS, parse

    cols = 20_000
    table = (
        "|"
        + "|".join(f"c{i}" for i in range(cols))
        + "|\n"
        + "|"
        + "|".join("-" for _ in range(cols))
        + "|\n"
        + ("|" + "|".join("x" for _ in range(cols)) + "|\n") * 48
    )
    text = "# Table\n\nBefore.\n\n" + table + "\nAfter the table.\n"
    doc = parse(text, "t.md")
    kinds = [b.kind for b in doc.blocks]
    assert kinds == ["heading", "paragraph", "table", "paragraph"], kinds
    t = doc.blocks[2]
    assert text[t.start : t.end] == table.rstrip("\n")
    (d,) = [d for d in doc.diagnostics if d.kind == "too_large"]
    assert f"over {MAX_TABLE_CELLS:,}" in d.detail and "1,000,050 cells" in d.detail
    chunking = chunk(doc)
    assert any(d.kind == "too_large" for d in chunking.diagnostics)  # stored with the note
    _assert_chunks_exact(doc, chunking)
    small = parse("|a|b|\n|-|-|\n|1|2|\n", "s.md")  # a normal table is parsed as before
    assert [b.kind for b in small.blocks] == ["table"] and not small.diagnostics


def test_a_list_larger_than_the_window_is_cut_at_an_item(monkeypatch):
    from kbase.ingest import parse as p
    from kbase.ingest.chunk import chunk

    monkeypatch.setattr(p, "PARSE_WINDOW", 4096)
    text = "# List\n\n" + "".join(f"- item {i} of a long list\n" for i in range(2000)) + "\nEnd.\n"
    doc = p.parse(text, "l.md")
    lists = [b for b in doc.blocks if b.kind == "list"]
    assert len(lists) > 5 and sum(len(b.parts) for b in lists) == 2000
    assert all(text[a:b].startswith("- item ") for blk in lists for a, b in blk.parts)
    assert doc.blocks[-1].kind == "paragraph" and text[doc.blocks[-1].start :].startswith("End.")
    assert any("cut into blocks at an item" in d.detail for d in doc.diagnostics)
    _assert_chunks_exact(doc, chunk(doc))


def test_nested_callouts_and_long_lines_chunk_within_the_budget():
    from kbase.ingest.chunk import chunk
    from kbase.ingest.parse import parse

    text = "".join("> " * i + f"[!note] level {i}\n" for i in range(1, 801))
    doc = parse(text, "c.md")
    chunking = chunk(doc)
    _assert_chunks_exact(doc, chunking)
    assert max(c.tokens for c in chunking.chunks) <= 200
    assert chunking.chunks[0].start == 0 and chunking.chunks[-1].end == len(text.rstrip())


def test_a_chunk_ends_at_a_page_break():
    sentence = "The committee reviewed the proposal and asked for more data on costs. "
    pages = [f"Page {i} heading\n" + sentence * 12 for i in range(1, 6)]
    text = pdf.extract(make_pdf(pages))
    doc = pdf.document(text.text, text.pages, "report.pdf", pdf.info_record(text))
    chunks = chunk(doc, WordCounter(), ChunkSettings(max_tokens=200))
    starts = [a for a, _ in text.pages]

    def page(offset):
        return sum(1 for s in starts if s <= offset)

    assert chunks.chunks
    for c in chunks.chunks:
        assert page(c.start) == page(c.end - 1), "a chunk never spans two pages"
    # without the page breaks the same text would be cut elsewhere: pages are what decides
    assert {page(c.start) for c in chunks.chunks} == {1, 2, 3, 4, 5}


def test_abbreviation_check_reads_the_word_before_the_dot_as_it_always_did():
    """_is_abbreviation looks back only as far as the longest abbreviation: the same answers as
    walking back to the last whitespace, on mixed text with and without spaces."""
    import random

    from kbase.ingest import chunk as C

    def walking_back(text, start, dot):
        word_start = dot
        while word_start > start and not text[word_start - 1].isspace():
            word_start -= 1
        word = text[word_start:dot].rstrip(".\"')]”’").lower()
        return word in C._ABBREVIATIONS or (len(word) == 1 and word.isalpha())

    rnd = random.Random(11)
    pieces = [*"abcegimnoprstvxEGIMPRSİ.\"')]”’ \t\n\u3000。日本ａ", "e.g", "etc", "approx", "Mr"]
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 20)))
        for dot in range(len(text) + 1):
            start = rnd.randint(0, dot)
            assert C._is_abbreviation(text, start, dot) == walking_back(text, start, dot), text


def test_a_primed_counter_counts_every_span_of_the_note_without_learning_again(monkeypatch):
    from kbase.ingest import chunk as ch

    text = (
        "# Zwölf Boxkämpfer\n\nJagen Viktor quer über den großen Sylter Deich, 東京タワー!\n"
        "- item [[Link|alias]] `code()` 3.14 naïve café\n" * 3
    )
    plain, primed = ModelTokenCounter(), ModelTokenCounter()
    primed.prime(text)
    learnt: list[list[str]] = []
    learn = ch.ModelTokenCounter._learn
    monkeypatch.setattr(
        ch.ModelTokenCounter,
        "_learn",
        lambda self, words: (self is primed and learnt.append(words)) or learn(self, words),
    )
    rng = random.Random(7)
    spans = [sorted(rng.sample(range(len(text) + 1), 2)) for _ in range(200)]
    # Spans cut at whitespace hold only whole words: the primed counter knows them all.
    cuts = [0] + [i for i, c in enumerate(text) if c.isspace()] + [len(text)]
    whole = [sorted(rng.sample(cuts, 2)) for _ in range(200)]
    for a, b in whole:
        assert primed.count(text[a:b]) == plain.count(text[a:b])
    assert learnt == [], "a primed note's words were learnt again"
    for a, b in spans:  # any span (words cut in two are learnt then): the same counts
        assert primed.count(text[a:b]) == plain.count(text[a:b])


def test_a_note_of_too_many_new_words_is_not_primed(monkeypatch):
    from kbase.ingest import chunk as ch

    monkeypatch.setattr(ch, "PRIME_WORDS", 10)
    counter = ModelTokenCounter()
    counter.prime(" ".join(f"w{i}" for i in range(11)))
    assert counter._words == {}
    counter.prime(" ".join(f"w{i}" for i in range(10)))
    assert len(counter._words) == 10


@pytest.mark.parametrize(
    ("text", "unseen", "path"),
    [
        # mdBook's anchor of an old heading, before the heading it names (rust-book): it joins
        # the chunk after it, and takes that chunk's heading path
        (
            '<a id="old-name"></a>\n\n## Message Passing\n\n'
            + "Threads send each other messages over a channel. " * 4,
            '<a id="old-name"></a>',
            "Message Passing",
        ),
        # VitePress' closing tag after a paragraph (Vue docs): it joins the chunk before it
        (
            '## Routing\n\n<div class="demo">\n\n'
            + "Routes map a path to a view. " * 7
            + "\n\n</div>\n\n---\n\n## Next\n\nMore words.",
            "</div>",
            "Routing",
        ),
    ],
)
def test_a_small_chunk_that_shows_no_word_joins_a_neighbour(text, unseen, path):
    """Alone, such a chunk is a passage search could show and a person could not read: it joins
    the chunk before it in its section, else the one after, up to min_tokens over the budget."""
    settings = ChunkSettings(40, 0.12, 20)
    doc = parse(text, "n.md")
    r = chunk(doc, WORDS, settings)
    check_invariants(doc, r, settings)
    (holder,) = [c for c in r.chunks if unseen in text[c.start : c.end]]
    assert text[holder.start : holder.end] != unseen and holder.heading_path == path
