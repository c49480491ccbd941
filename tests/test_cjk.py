"""Search in scripts without spaces between words (kbase/search/cjk.py):
Chinese, Japanese, Korean, Thai."""

import json
import random
from pathlib import Path

import apsw
import pytest

import kbase
from bench.questions import first_rank, load_questions, scores
from kbase.search import cjk, segment
from kbase.search.query import parse_query
from kbase.store import cjk_table, db, migrations
from tests.conftest import shared, write

NOTES = {
    "zh/同步.md": "# 同步设置\n\n我们用 Obsidian 同步笔记，手机和电脑保持一致。\n\n"
    "冲突时保留较新的版本。\n",
    "zh/插件.md": "# 插件\n\n社区插件可以扩展编辑器的功能。\n\n设置页面列出所有插件。\n",
    "zh/备份.md": "# 备份\n\n备份笔记库到外部硬盘，每周一次。\n",
    "ja/所有権.md": "# 所有権\n\n所有権は Rust の中心的な機能です。\n\n"
    "借用 (borrowing) では所有権を移さずに値を参照します。\n",
    "ja/型.md": "# データ型\n\nRust は静的型付け言語です。コンパイラが型を推論します。\n",
    "ko/서울.md": "# 서울\n\n서울은 한국의 수도입니다. 서울에서 지하철을 탑니다.\n",
    "ko/부산.md": "# 부산\n\n부산은 항구 도시입니다.\n",
    "th/ไทย.md": "# ภาษาไทย\n\nภาษาไทยเขียนติดกันโดยไม่เว้นวรรคระหว่างคำ\n",
    "en/Sync.md": "# Sync\n\nObsidian sync keeps the vault the same on every device; "
    "borrowing a laptop works too.\n",
}


@pytest.fixture
def kb(tmp_path):
    k = kbase.open(tmp_path / "cjk.db")
    k.index([write(tmp_path / "v", NOTES)], embed=False)
    yield k
    k.close()


def paths(kb, q, limit=10):
    return [h.path for h in kb.search(q, mode="keyword", limit=limit)]


@pytest.mark.parametrize(
    "query,path",
    [
        ("同步", "zh/同步.md"),  # two characters inside a run
        ("手机和电脑", "zh/同步.md"),
        ("中心的", "ja/所有権.md"),
        ("推論", "ja/型.md"),  # kanji pair inside a kanji-kana run
        ("서울", "ko/서울.md"),  # Korean word with a particle attached (서울은, 서울에서)
        ("지하철", "ko/서울.md"),
        ("เว้นวรรค", "th/ไทย.md"),  # Thai with vowel and tone marks
        ("ภาษา", "th/ไทย.md"),
    ],
)
def test_a_word_inside_a_run_finds_its_note(kb, query, path):
    assert paths(kb, query) == [path]


def test_english_has_no_rows_in_the_pair_index(kb):
    con = kb.reader
    rows = dict(
        con.execute(
            "SELECT d.path, count(k.rowid) FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " LEFT JOIN chunks_cjk k ON k.rowid = c.id GROUP BY d.path"
        ).fetchall()
    )
    assert rows["en/Sync.md"] == 0 and all(n > 0 for p, n in rows.items() if p != "en/Sync.md")


def test_english_queries_are_unchanged(kb):
    assert paths(kb, "sync") == [
        "en/Sync.md"
    ]  # porter, chunks_fts: the Chinese note says 'Obsidian 同步'
    assert sorted(paths(kb, "borrow")) == ["en/Sync.md", "ja/所有権.md"]


@pytest.mark.parametrize(
    "query,expected",
    [
        # all words first, then notes with some of them (English ones too)
        ("Obsidian 同步 设置", ["zh/同步.md", "en/Sync.md", "zh/插件.md"]),
        # porter stemming on the Latin word; then some words: 所有権 is 所有 + 権 to the
        # segmenter, and 所有 ('all') is in the Chinese note on plugins
        ("所有権 borrow", ["ja/所有権.md", "en/Sync.md", "zh/插件.md"]),
        ('"同步笔记"', ["zh/同步.md"]),
        ('"笔记 同步"', []),  # a phrase keeps its order
        ("插件 -社区", []),  # excluded word in the same chunk
        ("设置 -同步", ["zh/插件.md"]),
        ("备份 OR 插件", ["zh/备份.md", "zh/插件.md"]),
        ("sync -同步", ["en/Sync.md"]),  # English query, excluded Chinese word
    ],
)
def test_mixed_queries_phrases_exclusion_and_or(kb, query, expected):
    found = paths(kb, query)
    assert found[:1] == expected[:1] and sorted(found) == sorted(expected)


def test_all_words_rank_before_some_words_and_across_chunks(kb):
    # 同步 and 版本 are in different paragraphs (chunks) of one note: it still comes first.
    assert paths(kb, "同步 版本")[0] == "zh/同步.md"
    assert set(paths(kb, "插件 硬盘")) == {"zh/插件.md", "zh/备份.md"}  # some words: each has one


@pytest.mark.parametrize(
    "query,word",
    [("版本", "版本"), ("借用 borrow", "borrowing"), ("서울", "서울"), ("เว้นวรรค", "เว้นวรรค")],
)
def test_highlights_and_line_numbers_point_at_the_words(kb, query, word):
    hit = kb.search(query, mode="keyword")[0]
    marked = [hit.snippet[a:b] for a, b in hit.highlights]
    assert word in marked
    body = kb.reader.execute("SELECT body FROM documents WHERE id = ?", (hit.doc_id,)).fetchone()[0]
    assert marked[0] in body.splitlines()[hit.line - 1]  # the line of the first highlight


def test_sql_face_and_kbase_search(kb):
    rows = kb.sql("SELECT path, line FROM kbase_search('推論', 'keyword', 5)").rows
    assert rows == [("ja/型.md", 3)]


def test_pair_queries():
    q = cjk.pair_query(parse_query('Obsidian 同步设置 "所有権 borrow" -除外 的'))
    assert (
        q.to_fts()
        == '("Obsidian" AND "同步 步设 设置" AND "所有 有権 borrow" AND "的"*) NOT "除外"'
    )
    assert (
        cjk_table.index_text("Rust的所有権borrowing。서울은")
        == "Rust 的所 所有 有権 borrowing。 서울 울은 "
    )
    assert not cjk.applies(parse_query("sync -同步"))


def test_index_text_is_each_run_as_its_pairs_between_spaces():
    """index_text must write what it always wrote (chunks_cjk is rebuilt only by a migration):
    each run as " ".join(pairs(run)) between spaces, over mixed scripts, astral ideographs,
    single characters and runs at either end."""
    rnd = random.Random(5)
    chars = [chr(c) for c in [*range(0x20, 0x7F), *range(0x3000, 0x3100), *range(0x4E00, 0x4E10)]]
    chars += ["\U00020000", "\U0003ffff", "\U00040000", "\u0e00", "\u0e31", "\uac00", "\uff66"]
    for _ in range(5000):
        text = "".join(rnd.choice(chars) for _ in range(rnd.randint(0, 25)))
        want = cjk_table.RUN.sub(lambda m: " " + " ".join(cjk_table.pairs(m.group())) + " ", text)
        assert cjk_table.index_text(text) == want, text


def test_write_rows_writes_a_row_for_each_chunk_with_a_run_in_any_value():
    # The values each chunks_cjk row gets are index_text of the three, for exactly the chunks
    # that have a run in one of them (titles and headings are made once, for many chunks).
    rnd = random.Random(7)
    values = ["", "Rust", "所有権", "Rust の所有権", "# 同步 > Sync", "서울", "ภาษา", "a。b"]
    rows = [(i, *(rnd.choice(values) for _ in range(3))) for i in range(1, 400)]
    want = [
        (cid, *map(cjk_table.index_text, (body, title, headings)))
        for cid, title, headings, body in rows
        if any(map(cjk_table.has_runs, (title, headings, body)))
    ]
    assert 100 < len(want) < len(rows)
    con = apsw.Connection(":memory:")
    con.execute("CREATE TABLE chunks_cjk (rowid INTEGER PRIMARY KEY, body, title, headings)")
    cjk_table.write_rows(con, rows)
    assert con.execute("SELECT * FROM chunks_cjk ORDER BY rowid").fetchall() == want


@pytest.mark.slow
def test_hybrid_does_not_push_keyword_hits_down_for_a_query_the_model_cannot_read(tmp_path):
    k = kbase.open(tmp_path / "h.db")
    k.index([write(tmp_path / "v", NOTES)])
    try:
        for q in ("同步", "서울", "所有権", "ภาษา"):
            assert [h.path for h in k.search(q, mode="hybrid")] == paths(k, q)
        # A query most of whose letters are Latin still fuses both lists, the semantic one
        # weighing by the share the English model reads (8 of 10 letters): alpha 0.5 * 0.8².
        hits = {h.path: h for h in k.search("Obsidian 同步", mode="hybrid")}
        assert "semantic" in hits["en/Sync.md"].explain
        kw = hits["zh/同步.md"].explain["keyword"]
        assert kw["contribution"] == pytest.approx(0.68 * kw["normalised"], abs=1e-5)
        # nothing found for such a query: the notice says the model could not read it
        assert not k.notices
        assert not k.search("火山爆发", mode="hybrid")
        (said,) = k.notices
        assert "reads English only" in said and "--model multilingual-e5-small" in said
        k.search("zzqqxxyy volcano", mode="hybrid")  # a query it reads: no notice
        assert len(k.notices) == 1
    finally:
        k.close()


def test_an_index_from_before_the_pair_index_migrates(tmp_path):
    """Migrations 8 and 12 on an index without chunks_cjk fill it from the chunks already there (the
    steps themselves: faking a whole version-7 file breaks with every later migration)."""
    k = kbase.open(tmp_path / "m.db")
    k.index([write(tmp_path / "v", NOTES)], embed=False)
    k.close()
    con = db.connect(tmp_path / "m.db")
    con.execute("DROP TABLE chunks_cjk; DROP TRIGGER chunks_cjk_before_delete")
    with con:
        migrations.MIGRATIONS[8](con)  # type: ignore[operator]
        migrations.MIGRATIONS[12](con)  # type: ignore[operator]
    con.close()
    k = kbase.open(tmp_path / "m.db")
    assert paths(k, "推論") == ["ja/型.md"]
    assert k.reader.execute("SELECT count(*) FROM chunks_cjk").fetchone()[0] == 8  # not en/Sync.md
    k.close()


def test_deleting_a_note_removes_its_pair_rows(kb, tmp_path):
    (tmp_path / "v" / "ja" / "型.md").unlink()
    kb.index(embed=False)
    assert paths(kb, "推論") == []
    assert kb.reader.execute("SELECT count(*) FROM chunks_cjk").fetchone()[0] == 7


# ---- the Rust book in Chinese and Japanese (../shared/data/vaults) -------------------------


@pytest.fixture(scope="module", params=["rust-book-zh", "rust-book-ja"])
def book(request, tmp_path_factory):
    root = shared("vaults", request.param)
    k = kbase.open(tmp_path_factory.mktemp("book") / "book.db")
    k.index([root], embed=False)
    yield k
    k.close()


@pytest.mark.slow
def test_book_phrases_find_their_chapter_in_the_top_3_with_exact_highlights(book):
    """4 characters of a run that occur in at most 3 chapters (seeded sample)."""
    bodies = dict(book.reader.execute("SELECT path, body FROM documents").fetchall())
    rng = random.Random(13)
    checked = 0
    for path in rng.sample(sorted(bodies), 40):
        runs = [m.group(0) for m in cjk.RUN.finditer(bodies[path]) if len(m.group(0)) >= 6]
        if not runs:
            continue
        run = rng.choice(runs)
        phrase = run[1:5]
        if sum(phrase in b for b in bodies.values()) > 3:
            continue
        hits = book.search(phrase, mode="keyword", limit=3)
        assert path in [h.path for h in hits], phrase
        hit = next(h for h in hits if h.path == path)
        assert phrase in [hit.snippet[a:b] for a, b in hit.highlights]
        assert phrase in bodies[path].splitlines()[hit.line - 1]
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize(
    "zh,ja,chapter",
    [
        ("所有权", "所有権", "ch04-01-what-is-ownership.md"),
        ("生命周期", "ライフタイム", "ch10-03-lifetime-syntax.md"),
        ("智能指针 Box", "スマートポインタ Box", "ch15-01-box.md"),
    ],
)
def test_book_words_and_mixed_queries(book, zh, ja, chapter):
    query = zh if _is_zh(book) else ja
    assert chapter in [h.path for h in book.search(query, mode="keyword", limit=5)]


def _is_zh(kb) -> bool:
    return (
        kb.reader.execute("SELECT count(*) FROM documents WHERE body LIKE '%所有权%'").fetchone()[0]
        > 0
    )


@pytest.mark.slow
def test_book_two_words_from_different_lines(book):
    """Two 2-character words from different lines of a chapter, each in at most 10 chapters and
    together in at most 5 (seeded sample): the chapter is in the top 10."""
    bodies = dict(book.reader.execute("SELECT path, body FROM documents").fetchall())
    rng = random.Random(7)
    checked = tries = 0
    while checked < 20 and tries < 5000:
        tries += 1
        path = rng.choice(sorted(bodies))
        lines = [
            ln for ln in bodies[path].splitlines() if any(len(r) >= 2 for r in cjk.RUN.findall(ln))
        ]
        if len(lines) < 2:
            continue
        a, b = rng.sample(lines, 2)
        wa, wb = _pair(rng, a), _pair(rng, b)
        with_both = [p for p, t in bodies.items() if wa in t and wb in t]
        if (
            wa == wb
            or len(with_both) > 5
            or any(sum(w in t for t in bodies.values()) > 10 for w in (wa, wb))
        ):
            continue  # a pair in many notes: no ranking can put this one in the top 10
        assert path in [h.path for h in book.search(f"{wa} {wb}", mode="keyword", limit=10)], (
            wa,
            wb,
        )
        checked += 1
    assert checked == 20


def _pair(rng, line):
    run = rng.choice([m.group(0) for m in cjk.RUN.finditer(line) if len(m.group(0)) >= 2])
    i = rng.randrange(len(run) - 1)
    return run[i : i + 2]


# ---- questions typed without spaces (issue 24): segmented into words ------------------------


@pytest.mark.parametrize(
    "run,present,absent",
    [
        ("所有权的规则是什么", ["规则"], ["的", "是", "什么"]),
        ("如何处理可恢复的错误", ["处理", "恢复", "错误"], ["如何", "的"]),
        (
            "多个线程怎么共享数据",
            ["线程", "共享", "数据"],
            ["怎么"],
        ),  # ICU's 线|程 put back together
        ("エラーを処理する方法", ["エラー", "処理"], ["を", "する", "方法"]),
        (
            "クロージャはどうやって環境をキャプチャするのか",
            ["クロージャ", "環境", "キャプチャ"],
            ["は"],
        ),
        ("環境変数を読み込むには", ["環境", "変数", "読み込"], ["には"]),  # okurigana cut
        ("ติดตั้งปลั๊กอินจากชุมชน", ["ปลั๊กอิน", "ชุมชน"], ["จาก"]),
        ("소유권의", ["소유권"], []),  # Korean: the particle cut
        ("처리하는", ["처리"], []),
        ("추가하려면", ["추가"], []),  # 가 is part of the word: one syllable would be left
        ("결과를", ["결과"], []),
        ("권한이", ["권한"], []),
        ("값을", ["값"], []),
        ("무엇인가요", [], []),  # a question word alone: nothing to look for
        ("同步", ["同步"], []),  # two characters are looked for as typed
    ],
)
def test_a_query_run_is_cut_into_the_words_a_note_would_hold(run, present, absent):
    words = segment.words(run)
    assert all(w in words for w in present), words
    assert not any(w in words for w in absent), words
    if not present:
        assert words == []


def test_a_question_without_spaces_becomes_one_clause_per_word():
    q = cjk.segmented(parse_query("所有权的规则是什么"))
    assert q is not None and [t.words for (t,) in q.clauses][-1] == ("规则",)
    assert q.words == ("所有权的规则是什么",)  # names are still compared with what was typed
    assert cjk.segmented(parse_query('"所有权的规则是什么"')) is None  # a phrase stays whole
    assert cjk.segmented(parse_query("同步 设置")) is None  # words already
    assert cjk.segmented(parse_query("所有权的规则 OR 借用")) is None
    # Korean: a word that is only a function word (수, 있나요) is not looked for
    ko = cjk.segmented(parse_query("노트를 삭제할 수 있나요"))
    assert ko is not None and [t.words for (t,) in ko.clauses] == [("노트",), ("삭제",)]
    zh = cjk.segmented(parse_query("所有权 什么"))
    assert zh is not None and ("什么",) not in [t.words for (t,) in zh.clauses]
    only = cjk.segmented(parse_query("什么是"))  # only function words: looked for after all
    assert only is None or only.clauses == parse_query("什么是").clauses


QUESTIONS = {
    "zh/同步.md": "手机和电脑怎么同步笔记",
    "zh/插件.md": "如何扩展编辑器的功能",
    "zh/备份.md": "多久备份一次笔记库",
    "ja/所有権.md": "借用では所有権はどうなるのか",
    "ja/型.md": "コンパイラは型を推論できますか",
}


@pytest.mark.parametrize("path,question", QUESTIONS.items())
def test_a_question_typed_without_spaces_finds_its_note_first(kb, path, question):
    hits = kb.search(question, mode="keyword")
    assert hits and hits[0].path == path
    assert hits[0].highlights  # the words found are marked in the snippet


def test_a_sentence_whose_words_are_apart_still_finds_the_note_with_most_of_them(kb):
    # 冲突 and 版本 are in one paragraph, 同步 in another; 平板 ('tablet') in no note at all.
    hits = kb.search("平板同步冲突时保留哪个版本", mode="keyword")
    assert hits[0].path == "zh/同步.md"
    assert hits[0].explain["tier"] in ("all words, apart", "some words")


CJK_NOTES = Path(__file__).parent / "data" / "cjk-notes"


@pytest.mark.parametrize("lang", ["ko", "th"])
def test_korean_and_thai_questions_find_their_note_first(tmp_path, lang):
    """Small fixtures written for these tests (no Korean or Thai vault is shared): eight notes of
    an app's documentation in each language, thirteen questions typed as people type them."""
    qset = json.loads((CJK_NOTES / f"{lang}.json").read_text(encoding="utf-8"))
    k = kbase.open(tmp_path / f"{lang}.db")
    try:
        k.index([CJK_NOTES / lang], embed=False)
        for q in qset["questions"]:
            hits = k.search(q["question"], mode="keyword", limit=3)
            assert [h.path for h in hits][:1] == q["answers"], q["question"]
    finally:
        k.close()


def test_without_a_segmenter_a_run_is_ranked_by_its_character_pairs(kb, monkeypatch):
    """icu4py has no wheel for some platforms: the words of a run are then its pairs."""
    monkeypatch.setattr(segment, "_icu", lambda: None)
    assert segment.words("如何处理错误") == ["如何", "何处", "处理", "理错", "错误"]
    for path, question in QUESTIONS.items():
        assert paths(kb, question, limit=3)[0] == path, question


def test_when_no_word_is_in_any_note_the_notes_sharing_its_pairs_are_found(kb, monkeypatch):
    # A segmenter that leaves the run whole: the run is in no note, its pairs are.
    monkeypatch.setattr(segment, "words", lambda run: [run])
    hits = kb.search("手机电脑同步", mode="keyword")
    assert hits and hits[0].path == "zh/同步.md"
    assert kb.search('"手机电脑同步"', mode="keyword") == []  # a phrase asked for stays exact


ISSUE_QUESTIONS = {  # the issue's six, which printed "No matches."; the chapters that answer
    "所有权的规则是什么": {"ch04-01-what-is-ownership.md"},
    "如何处理可恢复的错误": {
        "ch09-02-recoverable-errors-with-result.md",
        "ch09-00-error-handling.md",
    },
    "什么是生命周期": {"ch10-03-lifetime-syntax.md"},
    "所有権のルールとは": {"ch04-01-what-is-ownership.md"},
    "エラーを処理する方法": {
        "ch09-00-error-handling.md",
        "ch09-02-recoverable-errors-with-result.md",
    },
    "ライフタイムとは何か": {"ch10-03-lifetime-syntax.md"},
}


def test_the_issues_questions_find_their_chapter_in_the_top_3(book):
    zh = _is_zh(book)
    for question, chapters in ISSUE_QUESTIONS.items():
        if zh != bool(segment.KANA.search(question)):
            hits = book.search(question, mode="keyword", limit=3)
            assert chapters & {h.path for h in hits}, question


@pytest.mark.slow
def test_book_question_sets_keyword_top_3_and_never_no_matches(book):
    """bench/questions/rust-book-zh.json and -ja.json (40 questions each, typed as readers type
    them): measured 1.00 and 0.97 in the top 3; this fails below 0.85 or on any "No matches."."""
    name = "rust-book-zh" if _is_zh(book) else "rust-book-ja"
    qset = load_questions(Path(__file__).parents[1] / "bench" / "questions" / f"{name}.json")
    ranks, empty = [], []
    for q in qset["questions"]:
        found = [h.path for h in book.search(q["question"], mode="keyword", limit=10)]
        empty += [q["question"]] if not found else []
        ranks.append(first_rank(found, set(q["answers"])))
    assert empty == []
    assert scores(ranks)["top3"] >= 0.85


# ---- the hint: a vault mostly in these languages, an English model (issue 24 part 5) ---------


@pytest.mark.slow  # (the fast loop: 6-14 s each on a 2-core machine)
def test_index_says_once_which_model_would_read_a_vault_mostly_in_chinese(tmp_path):
    from click.testing import CliRunner

    from kbase.cli.app import cli

    notes = {f"zh/{p}": t for p, t in NOTES.items() if p.startswith("zh/")}
    notes["en/Sync.md"] = NOTES["en/Sync.md"]  # one English note of four
    db_file = tmp_path / "zh.db"
    runner = CliRunner()
    args = ["--db", str(db_file), "index", str(write(tmp_path / "v", notes))]
    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "75% of these passages are in Chinese" in first.stderr
    assert "kbase index --model multilingual-e5-small" in first.stderr
    assert 'pip install "kbase[multilingual]"' in first.stderr
    again = runner.invoke(cli, args)
    assert again.exit_code == 0 and "multilingual" not in again.stderr  # said once


def test_a_keyword_only_index_is_told_of_the_model_when_it_is_first_embedded(tmp_path):
    from click.testing import CliRunner

    from kbase.cli.app import cli

    notes = {f"zh/{p}": t for p, t in NOTES.items() if p.startswith("zh/")}
    db = ["--db", str(tmp_path / "zh.db")]
    runner = CliRunner()
    first = runner.invoke(cli, [*db, "index", "--no-embed", str(write(tmp_path / "v", notes))])
    assert first.exit_code == 0 and "multilingual" not in first.stderr  # no search by meaning yet
    embedded = runner.invoke(cli, [*db, "embed", "-q"])
    assert embedded.exit_code == 0 and "multilingual" not in embedded.stderr  # -q: nothing
    told = runner.invoke(cli, [*db, "embed"])
    assert told.exit_code == 0 and "kbase index --model multilingual-e5-small" in told.stderr


def test_no_hint_for_english_notes_or_an_index_with_another_model(tmp_path):
    en = kbase.open(tmp_path / "en.db")
    en.index([write(tmp_path / "en", {"a.md": "# Sync\n\nKeep notes in sync.\n"})], embed=False)
    assert en.model_hint() is None
    en.close()
    k = kbase.open(tmp_path / "ja.db")
    k.index([write(tmp_path / "ja", {"a.md": NOTES["ja/所有権.md"]})], embed=False)
    k._write(db.meta_set, "embedder", '{"model": "multilingual-e5-small"}')
    assert k.model_hint() is None  # the index already reads Japanese
    k._write(db.meta_set, "embedder", '{"model": "all-MiniLM-L6-v2-int8"}')
    hint = k.model_hint()
    assert hint is not None and hint.languages == ("Japanese",) and hint.share == 1.0
    assert hint.model == "all-MiniLM-L6-v2" and hint.suggested == "multilingual-e5-small"
    assert k.model_hint() is None  # once
    k.close()


def test_what_an_index_is_written_in(kb):
    found = cjk.languages(kb.reader)
    assert set(found) == {"Chinese", "Japanese", "Korean", "Thai"}
    assert found["Chinese"] == max(found.values())  # three notes of eight


# Two paragraphs of one article (XQuAD-R zh, Super Bowl 50): the question copies the first one's
# wording but two of its words are not the note's (分区赛 for 分区轮, 打败 for 击败).
GAME_NOTES = {
    "p002.md": "野马队在分区轮以 23–16 击败了匹兹堡钢人队，在比赛的最后三分钟拿下 11 分。\n",
    "p003.md": "过去的记录是由约翰·埃尔维保持的，他在 38岁时带领野马队赢得第 33 届超级碗。\n",
    "p004.md": "黑豹队的防守在本赛季只让对手得到 308 分。\n",
}


@pytest.fixture
def game(tmp_path):
    k = kbase.open(tmp_path / "game.db")
    k.index([write(tmp_path / "v", GAME_NOTES)], embed=False)
    yield k
    k.close()


def test_a_word_no_note_holds_is_cut_into_the_pieces_the_notes_hold(game):
    con = game.reader
    assert cjk.occurs(con, "分区") and not cjk.occurs(con, "分区赛")
    assert cjk.cut_by_index(con, "分区赛") == ["分区"]
    assert cjk.cut_by_index(con, "黑豹队钢人队") == ["黑豹队", "钢人队"]
    assert cjk.cut_by_index(con, "飞机场") == []  # no piece of it in any note
    seg = cjk.segmented(parse_query("野马队在分区赛中打败了谁"))
    assert seg is not None
    words = [t.words[0] for c in cjk.recut(con, seg).clauses for t in c]
    assert "分区赛" not in words and "分区" in words and "野马" in words


def test_a_question_in_the_words_of_its_paragraph_finds_it_first(game, monkeypatch):
    question = "野马队在分区赛中打败了谁？"
    assert paths(game, question)[0] == "p002.md"
    # Without the re-cut and the bigram count, the shorter paragraph that also names 野马 won.
    from kbase.search import keyword

    monkeypatch.setattr(cjk, "recut", lambda con, seg: seg)
    monkeypatch.setattr(keyword, "PAIR_WEIGHT", 0.0)
    assert paths(game, question)[0] == "p003.md"


def test_the_bigram_count_orders_notes_inside_their_tier(game):
    hits = game.search("野马队在分区赛中打败了谁？", mode="keyword")
    assert hits[0].explain["tier"] in ("all words, apart", "some words")
    # A query every word of which is in one note keeps that note first, whatever its pairs.
    assert paths(game, "超级碗")[0] == "p003.md"
    assert game.search("超级碗", mode="keyword")[0].explain["tier"] == "all words"


# XQuAD-R zh's paragraph 5 (CC-BY-SA-4.0, as GAME_NOTES): it holds more of the question's words
# (野马队, 比赛 twice, 最终, 比分) than p002 does; p002 holds what the question says side by side
# (钢人队 in 匹兹堡钢人队, 比赛的最, ...): the question's pairs.
SCORE_NOTE = (
    "当比赛还剩 4 分 51 秒时，卡罗莱纳在自己的 24 码线上拿到了球，他们本有机会获得一记制胜球，"
    "但很快就面临第三档和第九档进攻。在接下里的比赛中，米勒把球从牛顿手中拍掉，几名球员扑过去后，"
    "球长时间向后弹回并被沃德夺回，沃德把球扔回距离黑豹队 4 码线五码的位置。"
    "尽管有几名球员冲进人堆里试图重新接球，但牛顿并没有这样做，他缺乏攻击性的行为后来招致了严厉的批评。与此同时，丹佛的进攻"
    "有三次都被挡在了禁区之外，但角卫约什·诺曼的拉人犯规给了野马队新一轮的进攻机会。接着安德森在 2 "
    "码线触地得分，曼宁将球传给本尼·福勒进行两分转换，帮助丹佛在比赛还剩 3 分 08 秒时以 24-10 "
    "领先，最终将比分拉开。卡罗莱纳还有两次以上击球，但未能在每次击球获得第一档进攻。\n"
)


def test_an_unspaced_question_whose_paragraph_only_its_pairs_rank_first(tmp_path, monkeypatch):
    from kbase.search import keyword

    k = kbase.open(tmp_path / "score.db")
    k.index([write(tmp_path / "v", {**GAME_NOTES, "p005.md": SCORE_NOTE})], embed=False)
    question = "野马队和钢人队比赛的最终比分是多少？"
    try:
        hits = k.search(question, mode="keyword")
        assert [h.path for h in hits[:2]] == ["p002.md", "p005.md"]
        assert hits[0].explain["tier"] == hits[1].explain["tier"] == "some words"
        # the same first hits whatever the limit
        assert [h.path for h in k.search(question, mode="keyword", limit=1)] == ["p002.md"]
        # by its words alone (no bigram count), the paragraph holding more of them came first
        monkeypatch.setattr(keyword, "PAIR_WEIGHT", 0.0)
        assert paths(k, question)[:2] == ["p005.md", "p002.md"]
    finally:
        k.close()
