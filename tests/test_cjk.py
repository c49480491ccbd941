"""Search in scripts without spaces between words (kbase/search/cjk.py):
Chinese, Japanese, Korean, Thai."""

import random

import pytest

import kbase
from kbase.search import cjk
from kbase.search.query import parse_query
from kbase.store import db
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
        ("所有権 borrow", ["ja/所有権.md", "en/Sync.md"]),  # porter stemming on the Latin word
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
        cjk.index_text("Rust的所有権borrowing。서울은")
        == "Rust 的所 所有 有権 borrowing。 서울 울은 "
    )
    assert not cjk.applies(parse_query("sync -同步"))


def test_hybrid_does_not_push_keyword_hits_down_for_a_query_the_model_cannot_read(tmp_path):
    k = kbase.open(tmp_path / "h.db")
    k.index([write(tmp_path / "v", NOTES)])
    try:
        for q in ("同步", "서울", "所有権", "ภาษา"):
            assert [h.path for h in k.search(q, mode="hybrid")] == paths(k, q)
        # A query with Latin words still fuses both lists.
        assert "semantic" in k.search("Obsidian 同步", mode="hybrid")[0].explain
    finally:
        k.close()


def test_an_index_from_before_the_pair_index_migrates(tmp_path):
    k = kbase.open(tmp_path / "m.db")
    k.index([write(tmp_path / "v", NOTES)], embed=False)
    k.close()
    con = db.connect(tmp_path / "m.db")
    con.execute(
        "DROP TABLE chunks_cjk; DROP TRIGGER chunks_cjk_before_delete; PRAGMA user_version = 7"
    )
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
