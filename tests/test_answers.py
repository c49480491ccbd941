"""Issue 23 parts 1-2: fusion that never loses to its halves, and the passage that answers.

Unit tests fix the two ranked lists and check the real fusion; the slow ones run the real model
on a shared vault and on long notes written here."""

from __future__ import annotations

from dataclasses import replace

import pytest

import kbase
from bench.questions import first_rank, load_questions, question_files, scores, shows_answer
from kbase.embed import embedder
from kbase.search import cjk, fusion, hits, hybrid, snippet
from kbase.search.hybrid import passage_chunks
from kbase.search.keyword import keyword_ranked
from kbase.search.query import parse_query
from tests.conftest import write


# --- part 1: fusion --------------------------------------------------------------------------
def test_each_list_is_scaled_between_its_best_and_its_span_th_best():
    values = {i: 1.0 - i / 100 for i in range(100)}  # 1.00, 0.99, ... 0.01
    scaled = fusion.spanned(values, 20)
    assert scaled[0] == 1.0 and scaled[19] == 0.0 and scaled[99] == 0.0  # clipped below
    assert scaled[10] == pytest.approx(9 / 19)
    # a list shorter than the span: between its best and its last
    assert fusion.spanned({1: 0.8, 2: 0.5, 3: 0.2}, 20) == {1: 1.0, 2: pytest.approx(0.5), 3: 0.0}
    assert fusion.spanned({1: 0.4}, 20) == {1: 1.0}


@pytest.fixture
def two_notes(tmp_path):
    kb = kbase.open(tmp_path / "t.db")
    kb.index([write(tmp_path / "v", {"A.md": "alpha\n", "B.md": "beta\n"})], embed=False)
    con = kb.reader
    doc = dict(con.execute("SELECT path, id FROM documents").fetchall())
    chunk = dict(con.execute("SELECT doc_id, min(id) FROM chunks GROUP BY doc_id").fetchall())
    yield con, doc["A.md"], doc["B.md"], chunk
    kb.close()


def _sem(doc, chunk, sim, second):
    return hits.Ranked(doc, chunk, sim, 2, None, {"similarity": sim, "second": second, "chunks": 2})


def test_a_second_passage_close_to_the_query_is_evidence(two_notes, monkeypatch):
    """Two notes equally near by their nearest passage: the one with a second passage about the
    question ranks first (a note that merely mentions it has one such passage)."""
    con, a, b, chunk = two_notes
    sem = [_sem(b, chunk[b], 0.6, 0.2), _sem(a, chunk[a], 0.6, 0.55)]
    monkeypatch.setattr(hybrid, "keyword_ranked", lambda *x, **k: [])
    monkeypatch.setattr(hybrid, "semantic_ranked", lambda *x, **k: sem)
    got = hybrid.hybrid_search(con, "question", b"", limit=2)
    assert [h.doc_id for h in got] == [a, b]
    assert got[0].explain["semantic"]["second"] == 0.55


def test_without_a_semantic_list_hybrid_keeps_the_keyword_order(two_notes, monkeypatch):
    """A query the model cannot read (CJK with the English model): the keyword list alone, its
    tiers still steps, so all words in a passage stays ahead of some words with more bm25."""
    con, a, b, chunk = two_notes
    kw = [
        hits.Ranked(a, chunk[a], 3.2, 1, '"x"', {"tier": "all words", "bm25": 2.0, "chunks": 1}),
        hits.Ranked(b, chunk[b], 1.9, 1, '"x"', {"tier": "some words", "bm25": 9.0, "chunks": 1}),
    ]
    monkeypatch.setattr(hybrid, "keyword_ranked", lambda *x, **k: kw)
    monkeypatch.setattr(hybrid, "semantic_ranked", lambda *x, **k: [])
    assert [h.doc_id for h in hybrid.hybrid_search(con, "x", b"", limit=2)] == [a, b]


def test_a_query_the_model_reads_in_part_weighs_its_meaning_by_the_square_of_that_part():
    """blind/react-docs-th, "เขียนonclickหรือonClick" (write onclick or onClick): the English
    model reads 2/3 of its letters, and its nearest passages (cosine 0.33) are about components
    and forms. The keyword list's all-words note, handling-events, stays ahead of the notes the
    model's reading of "onclick onClick" prefers (the lists as kbase made them, top 6)."""

    def kw(doc, tier, score, bm25):
        return hits.Ranked(doc, doc, score, 1, None, {"tier": tier, "bm25": bm25, "chunks": 20})

    def sem(doc, cos, second):
        return hits.Ranked(doc, doc, cos, 1, None, {"similarity": cos, "second": second})

    tutorial, events, conditional, lifting, forms, props = range(1, 7)
    words = [
        kw(tutorial, "all words, apart", 2.460, 9.15),
        kw(events, "all words, apart", 2.419, 7.21),
        kw(conditional, "some words", 1.364, 5.73),
        kw(lifting, "some words", 1.348, 5.34),
        kw(forms, "some words", 1.348, 5.34),
        kw(props, "some words", 1.343, 5.22),
    ]
    meaning = [
        sem(tutorial, 0.345, 0.339),
        sem(props, 0.332, 0.288),
        sem(forms, 0.304, 0.296),
        sem(lifting, 0.260, 0.213),
        sem(conditional, 0.240, 0.200),
    ]
    # the rest of the lists, to each list's span: notes holding some words, a little near
    words += [kw(100 + i, "some words", 1.34 - 0.002 * i, 4.0) for i in range(44)]
    meaning += [sem(100 + i, 0.235 - 0.003 * i, 0.235 - 0.003 * i) for i in range(15)]
    share = 2 / 3
    fused = fusion.fuse(words, meaning, fusion.reading(fusion.PARAMS, share))
    assert [f.key for f in fused][:2] == [tutorial, events]
    assert fused[0].explain["semantic"]["contribution"] == pytest.approx(0.5 * share**2)
    # weighed by the share itself, the model's reading moved events down to fourth
    linear = fusion.fuse(words, meaning, replace(fusion.PARAMS, alpha=0.5 * share))
    assert [f.key for f in linear].index(events) == 3
    # a query it reads whole is fused as before
    assert fusion.reading(fusion.PARAMS, 1.0) is fusion.PARAMS


def test_semantic_explain_gives_the_second_nearest_passage(tmp_path):
    model = embedder.default_embedder()
    v = write(
        tmp_path / "v",
        {
            "Long.md": "# Long\n\n"
            + "\n\n".join(f"## Part {i}\n\n" + f"Topic {i}. " * 80 for i in range(4)),
            "Short.md": "# Short\n\nOne line about sourdough bread.\n",
        },
    )
    kb = kbase.open(tmp_path / "s.db", embedder=model)
    kb.index([v])
    got = {h.path: h.explain for h in kb.search("bread", mode="semantic", limit=5)}
    assert got["Short.md"]["second"] == got["Short.md"]["similarity"]  # one chunk: itself
    assert got["Long.md"]["chunks"] > 1 and got["Long.md"]["second"] <= got["Long.md"]["similarity"]
    kb.close()


def test_a_note_near_the_question_as_a_whole_outranks_one_with_a_single_near_passage():
    """Note-level evidence: two notes whose nearest and second passages are equally near; the
    one whose passages together (the mean of its chunk vectors) are nearer ranks first."""
    about, mentions = 1, 2
    sem = [
        hits.Ranked(mentions, 20, 0.62, 2, None, {"similarity": 0.62, "second": 0.4, "note": 0.3}),
        hits.Ranked(about, 10, 0.62, 2, None, {"similarity": 0.62, "second": 0.4, "note": 0.55}),
        hits.Ranked(3, 30, 0.4, 1, None, {"similarity": 0.4, "second": 0.4, "note": 0.4}),
    ]
    assert [f.key for f in fusion.fuse([], sem)][:2] == [about, mentions]
    no_note = replace(fusion.PARAMS, note_vector=0.0)
    assert [f.key for f in fusion.fuse([], sem, no_note)][:2] == [mentions, about]  # first seen


def test_a_notes_similarity_as_a_whole_is_the_query_against_its_mean_chunk_vector(tmp_path):
    import numpy as np

    model = embedder.default_embedder()
    v = write(
        tmp_path / "v",
        {
            "Bread.md": "# Bread\n\n"
            + "\n\n".join(
                f"## {part}\n\n" + f"Sourdough bread: {part.lower()}, step by step. " * 30
                for part in ("Starter", "Dough", "Proofing", "Baking")
            ),
            "Travel.md": "# Travel\n\n"
            + "\n\n".join(
                f"## Day {i}\n\n" + f"Trains and museums, day {i}. " * 30 for i in range(3)
            )
            + "\n\n## Food\n\nWe ate sourdough bread in San Francisco.\n",
            "Short.md": "# Short\n\nOne line about sourdough bread.\n",
        },
    )
    kb = kbase.open(tmp_path / "n.db", embedder=model)
    kb.index([v])
    try:
        got = {h.path: h.explain["semantic"] for h in kb.search("how to bake sourdough bread")}
        assert got["Bread.md"]["note"] > got["Travel.md"]["note"]  # all of it is about bread
        assert got["Short.md"]["note"] == pytest.approx(got["Short.md"]["similarity"], abs=2e-4)
        con = kb.reader
        doc = dict(con.execute("SELECT path, id FROM documents").fetchall())
        q = np.frombuffer(kb.query_vector("how to bake sourdough bread"), dtype=np.float32)
        rows = con.execute(
            "SELECT v.embedding FROM chunks AS c JOIN chunks_vec AS v ON v.rowid = c.id"
            " WHERE c.doc_id = ?",
            (doc["Travel.md"],),
        ).fetchall()
        mean = np.mean([np.frombuffer(r[0], dtype=np.float32) for r in rows], axis=0)
        assert len(rows) > 1
        assert got["Travel.md"]["note"] == pytest.approx(
            float(q @ mean / np.linalg.norm(mean)), abs=2e-4
        )
        # the vectors in memory (a KB's cache) and one statement over chunks_vec agree
        from kbase.search.semantic import note_similarities

        ids = list(doc.values())
        held = note_similarities(con, q.tobytes(), ids, kb.vector_cache)
        assert kb.vector_cache is not None and kb.vector_cache.note_similarities(
            con, q.tobytes(), ids
        )
        assert held == pytest.approx(note_similarities(con, q.tobytes(), ids), abs=1e-5)
        assert set(held) == set(ids)
    finally:
        kb.close()


ENGLISH_SETS = ("foam-docs",)


@pytest.fixture
def foam(foam_kb):
    return foam_kb


@pytest.mark.slow
def test_on_a_question_set_the_default_mode_is_at_least_its_better_half(foam):
    """foam-docs's 96 questions (bench/questions): hybrid >= the better of keyword and semantic at
    top-1 and MRR@10 (before issue 23: top-1 0.71 against semantic 0.69, keyword 0.62; a fixed
    tier step for "all words" let a long note that holds every word of a short question win)."""
    qset = load_questions(next(f for f in question_files() if f.stem == "foam-docs"))
    got = {}
    for mode in ("keyword", "semantic", "hybrid"):
        ranks = [
            first_rank([h.path for h in foam.search(q["question"], mode=mode)], set(q["answers"]))
            for q in qset["questions"]
        ]
        got[mode] = scores(ranks)
    for measure in ("top1", "mrr10"):
        assert got["hybrid"][measure] >= max(got["keyword"][measure], got["semantic"][measure])
    assert got["hybrid"]["top1"] >= 0.74


@pytest.mark.slow
@pytest.mark.parametrize(
    "question, answer",
    [
        # semantic mode had these first and hybrid did not: a long note that holds every word
        # of a short question (navigation.md) took the tier step; a note that mentions the
        # question once outranked one with several passages about it
        ("add tags to a note", "user/features/tags.md"),
        (
            "style links to missing notes differently in the preview",
            "user/features/custom-markdown-preview-styles.md",
        ),
        # and a name still comes first
        ("graph view", "user/features/graph-view.md"),
    ],
)
def test_questions_semantic_got_right_are_right_by_default(foam, question, answer):
    assert foam.search(question, mode="semantic")[0].path == answer
    assert foam.search(question)[0].path == answer


# --- part 2: the passage that answers --------------------------------------------------------
def test_the_passage_is_chosen_by_what_each_list_gave_the_fused_score():
    """Meaning weighs, in choosing a hit's passage, the semantic list's share of the note's fused
    evidence (its name step aside), kept between passage_floor and 1 - passage_floor."""
    p = fusion.PARAMS

    def fused(kw=None, sem=None):
        explain = {}
        if kw is not None:
            explain["keyword"] = {"contribution": kw}
        if sem is not None:
            explain["semantic"] = {"contribution": sem}
        return fusion.Fused(1, (kw or 0) + (sem or 0), explain)

    assert fusion.passage_meaning(fused(sem=0.4)) == pytest.approx(1 - p.passage_floor)
    assert fusion.passage_meaning(fused(kw=0.4)) == pytest.approx(p.passage_floor)
    assert fusion.passage_meaning(fused(kw=0.25, sem=0.25)) == pytest.approx(0.5)
    assert fusion.passage_meaning(fused(kw=0.1, sem=0.3)) > fusion.passage_meaning(
        fused(kw=0.3, sem=0.1)
    )
    # a note whose name starts with the query: the step is not evidence of a passage
    step = (1 - p.alpha) * p.step("name prefix")
    assert fusion.passage_meaning(fused(kw=step + 0.1, sem=0.1), p, "name prefix") == (
        pytest.approx(0.5)
    )


def test_passages_are_sentences_of_paragraphs_and_lines_of_lists_tables_and_headings():
    text = (
        "## Heading\n\nFirst sentence is here and long enough to count. Second one follows it"
        "\nafter a wrapped line. Short.\n\n- item one\n- item two\n\n| a | b |\n\n```\ncode\n```\n"
    )
    got = [text[a:b] for a, b in snippet.passages(text)]
    assert got == [
        "## Heading",
        "First sentence is here and long enough to count.",
        "Second one follows it\nafter a wrapped line.",
        "Short.",
        "- item one",
        "- item two",
        "| a | b |",
        "code",
    ]


def _ranges(text: str, words: list[str]) -> list[tuple[int, int]]:
    return sorted((m, m + len(w)) for w in words for m in _all(text.lower(), w))


def test_the_snippet_starts_where_it_shows_the_most_query_words():
    """The start: the passage from which the snippet shows the most distinct query words, the
    first of equals; the line: the passage in view that holds the most of them itself."""
    words = ["spell", "check", "turn", "off"]
    near = "Spell it out. Check the box.\n\nTo turn off spell check, open Editor settings.\n"
    start, line = snippet.focus(near, _ranges(near, words))
    # both sentences in one snippet: it starts at the first, the line is the second's
    assert start == 0 and near[line:].startswith("To turn off spell check")
    shown, _, anchor = snippet.snippet(near, _ranges(near, words), focus=start, anchor_at=line)
    assert shown.startswith("Spell it out. Check the box. To turn off spell check")
    assert anchor == line + len("To ")
    far = near.replace("\n\n", "\n\n" + "Nothing to see in this long sentence here. " * 6 + "\n\n")
    start, line = snippet.focus(far, _ranges(far, words))
    assert far[start:].startswith("To turn off spell check") and line == start
    assert snippet.focus(near, []) is None
    # a heading is shown beside the snippet (the heading path): the text under it comes first
    headed = "## Turn off spell check\n\nIn Editor settings, switch spell check off.\n"
    start, line = snippet.focus(headed, _ranges(headed, words))
    assert headed[start:].startswith("In Editor settings") and line == start
    heading_only = "## Turn off spell check\n\nNothing else here.\n"
    assert snippet.focus(heading_only, _ranges(heading_only, words)) is None


def test_what_rendering_hides_does_not_choose_the_start():
    """A match inside a link's target is not shown: it counts for no passage."""
    text = (
        "See [the guide](https://x.org/spell-check-turn-off) for more on this page.\n\n"
        "Turn it off in settings.\n"
    )
    ranges = _ranges(text, ["spell", "check", "turn", "off"])
    shown = snippet.Shown.of(text)
    start, line = snippet.focus(text, ranges, shown)
    assert text[start:].startswith("Turn it off") and line == start
    # counted in the source's characters (a chunk too long to render whole), the link counts
    assert snippet.focus(text, ranges)[0] == 0


def test_a_rendered_column_is_where_the_snippet_shows_the_character():
    text = "# Title\n\nSome  [link](http://example.com/a/b) text.\n\n\n- item   two\n"
    shown = snippet.Shown.of(text)
    reading = " ".join(shown.rendered.split())  # as the snippet folds whitespace
    for word in ("Title", "Some", "link", "text.", "item", "two"):
        offset = text.index(word)
        assert reading[shown.column(offset) :].startswith(word), word
    plain_text = snippet.Shown.of("a  b\n\n c", markdown=False)
    assert plain_text.column(3) == len("a ") and plain_text.column(7) == len("a b ")


def _all(text, word):
    i = text.find(word)
    while i >= 0:
        yield i
        i = text.find(word, i + 1)


SETTINGS = "# Settings\n\n" + "\n\n".join(
    [
        "## Editor\n\nThe editor shows your notes. Check the font size here; it changes every "
        "open note at once.\n\n" + "Editor text that says little about anything. " * 12,
        "## Files\n\nNew files go to the vault root unless you choose a folder. "
        + "Files text about attachments and folders. " * 12,
        "## Spelling\n\nThe spelling options are few. Languages come from the system list. "
        + "Spelling text about dictionaries and languages. " * 10
        + "\n\nTo turn off spell check, switch off Spell check under Editor.\n",
    ]
)


@pytest.mark.slow
def test_default_snippets_show_the_answer_at_least_as_often_as_semantic_ones(foam):
    """The hit's passage is the one the fused evidence ranks first (each list weighing what it
    gave the note's fused score): on foam-docs's questions with an answer line (bench/questions
    and its blind set), default mode's snippet of the best answer shows the answer at least as
    often as semantic mode's (issue 32 item 5: on a docs site 4 against 9 of 15)."""
    qs = [
        q
        for f in sorted(question_files()[0].parent.rglob("foam-docs.json"))
        for q in load_questions(f)["questions"]
        if "answer" in q
    ]
    assert len(qs) >= 120
    shown = {}
    for mode in ("semantic", "hybrid"):
        hits = {q["id"]: foam.search(q["question"], mode=mode) for q in qs}
        shown[mode] = sum(
            shows_answer(h.snippet, q["answer"])
            for q in qs
            for h in hits[q["id"]]
            if h.path == q["answers"][0]
        )
    assert shown["hybrid"] >= shown["semantic"] >= 40, shown


def test_keyword_snippet_and_line_come_from_the_passage_with_the_query_words(tmp_path):
    """A long note whose answer is deep: the snippet used to start at the first match of any
    query word ('Check the font size', line 5); it is the sentence that holds them all."""
    v = write(tmp_path / "v", {"Settings.md": SETTINGS, "Other.md": "# Other\n\nNothing.\n"})
    kb = kbase.open(tmp_path / "k.db")
    kb.index([v], embed=False)
    h = kb.search("turn off spell check", mode="keyword")[0]
    want = SETTINGS.splitlines().index(
        "To turn off spell check, switch off Spell check under Editor."
    )
    assert h.path == "Settings.md" and h.line == want + 1
    assert shows_answer(h.snippet, "To turn off spell check, switch off Spell check")
    kb.close()


@pytest.mark.slow
def test_hybrid_shows_the_passage_that_answers_in_a_long_note(tmp_path):
    v = write(
        tmp_path / "v",
        {
            "Settings.md": SETTINGS,
            "Themes.md": "# Themes\n\nSwitch to dark mode under Appearance: pick Dark.\n",
            "Backups.md": "# Backups\n\nKeep three copies of your notes on two devices.\n",
        },
    )
    kb = kbase.open(tmp_path / "h.db", embedder=embedder.default_embedder())
    kb.index([v])
    want = SETTINGS.splitlines().index(
        "To turn off spell check, switch off Spell check under Editor."
    )
    h = next(h for h in kb.search("turn off spell check") if h.path == "Settings.md")
    assert h.line == want + 1, (h.line, h.snippet)
    assert shows_answer(h.snippet, "switch off Spell check under Editor")
    # few words of the answer ("spell"): meaning picks the chunk, the words its sentence
    h = next(h for h in kb.search("how do I disable the spell checker") if h.path == "Settings.md")
    ref = hits.chunk_ref(kb.reader, h.chunk_id)
    assert ref.line <= want + 1 <= ref.end_line
    kb.close()


# A Korean note: its words carry particles ("설정에서", "동기화를"), which chunks_fts sees as other
# words; the intro holds "설정" alone many times, the answer both words with particles.
_KO_INTRO = "이 문서는 설정 화면을 소개합니다. 설정 메뉴는 왼쪽에 있고 설정 항목이 많습니다. " * 12
_KO_NOTES = {
    "안내.md": "# 안내\n\n## 소개\n\n"
    + _KO_INTRO
    + "\n\n## 계정\n\n동기화를 켜려면 계정 설정에서 스위치를 누르세요. 동기화는 몇 초 걸립니다.\n",
    "다른.md": "# 다른\n\n다른 내용입니다.\n",
}
_KO_ANSWER = "동기화를 켜려면 계정 설정에서 스위치를 누르세요"


def test_the_passage_of_a_note_found_by_character_pairs_is_chosen_by_them(tmp_path):
    """Hybrid's passage words for a note the keyword list found through chunks_cjk (words in
    a script without spaces, or with particles attached) are that match in chunks_cjk, as
    keyword mode scores its chunks; chunks_fts's words chose the intro (issue 32 item 5:
    blind/vue-docs-ko showed the answer line 10 times in default mode against 15 in keyword)."""
    kb = kbase.open(tmp_path / "k.db")
    kb.index([write(tmp_path / "v", _KO_NOTES)], embed=False)
    con = kb.reader
    q = "설정 동기화"
    top = keyword_ranked(con, q, 10)[0]
    assert top.match is not None and cjk.is_pair_match(top.match)
    answer = hits.chunk_ref(con, top.chunk_id)
    assert answer.seq > 0 and _KO_ANSWER in _KO_NOTES["안내.md"][answer.start : answer.end]
    words = parse_query(q).to_fts(match_any=True)
    chosen = passage_chunks(con, [top.doc_id], words, None, 0.0, {top.doc_id: top.match})
    assert chosen == {top.doc_id: top.chunk_id}
    kb.close()


@pytest.mark.slow
def test_default_mode_shows_the_passage_keyword_mode_shows_for_a_korean_query(tmp_path):
    kb = kbase.open(tmp_path / "k.db", embedder=embedder.default_embedder())
    kb.index([write(tmp_path / "v", _KO_NOTES)])
    q = "설정 동기화"
    kw, default = kb.search(q, mode="keyword")[0], kb.search(q, mode="hybrid")[0]
    assert (default.path, default.chunk_id, default.line, default.snippet) == (
        kw.path,
        kw.chunk_id,
        kw.line,
        kw.snippet,
    )
    assert shows_answer(default.snippet, _KO_ANSWER), default.snippet
    kb.close()
