"""kbase.search.keyword.range_bm25 (hybrid's passages: bm25 with its row counts worked out once)
scores every row as FTS5's own bm25() does, and forgets its counts when the index changes."""

import random

import pytest

import kbase
from kbase.search.keyword import BM25_WEIGHTS, range_bm25
from tests.conftest import write

WORDS = "garden tomato tomatoes sun water raised beds drain sqlite writer writes log".split()
MATCHES = [
    '"garden"',
    '"tomato" OR "sun"',
    '"raised beds" OR "water"',
    '"writ"*',
    '"writ"* OR "garden" OR "log"',
    '("garden" OR "sun") NOT "water"',
    '"garden" AND "sun"',
    '("garden" OR "sqlite") AND "log"',
    '"nowhere"',
    '"nowhere" OR "garden"',
    '"-" OR "garden"',  # a phrase with no token
    '{title} : "garden"',  # (a column filter: FTS5's own bm25)
    'NEAR("garden" "sun")',
]


def c_bm25(con, match: str, ranges) -> dict[int, float]:
    w = ", ".join(str(x) for x in BM25_WEIGHTS)
    return {
        rowid: score
        for lo, hi in ranges
        for rowid, score in con.execute(
            f"SELECT rowid, -bm25(chunks_fts, {w}) FROM chunks_fts"
            " WHERE chunks_fts MATCH ? AND rowid BETWEEN ? AND ?",
            (match, lo, hi),
        )
    }


@pytest.fixture
def index(tmp_path):
    rnd = random.Random(7)
    notes = {}
    for i in range(60):
        paras = [
            " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 40)))
            for _ in range(rnd.randint(1, 6))
        ]
        notes[f"n{i}.md"] = f"# {rnd.choice(WORDS)} {i}\n\n" + "\n\n## part\n\n".join(paras)
    vault = write(tmp_path / "v", notes)
    kb = kbase.open(tmp_path / "k.db")
    kb.index([vault], embed=False)
    yield kb, vault
    kb.close()


def ranges(con, n: int, seed: int) -> list[tuple[int, int]]:
    rows = con.execute("SELECT doc_id, min(id), max(id) FROM chunks GROUP BY doc_id").fetchall()
    return [(lo, hi) for _, lo, hi in random.Random(seed).sample(rows, n)]


def test_it_scores_as_fts5_does(index):
    kb, _ = index
    con = kb.reader
    for seed, match in enumerate(MATCHES):
        rs = ranges(con, 10, seed)
        mine, theirs = range_bm25(con, match, rs), c_bm25(con, match, rs)
        assert mine.keys() == theirs.keys(), match
        assert [mine[r] for r in theirs] == pytest.approx(list(theirs.values()), abs=1e-9), match
        assert range_bm25(con, match, rs) == mine  # (again, from the counts kept)
    assert any(c_bm25(con, m, ranges(con, 10, 1)) for m in MATCHES)  # (it compared something)
    assert range_bm25(con, '"garden"', []) == {}


def test_it_forgets_its_counts_when_the_index_changes(index):
    kb, vault = index
    con = kb.reader
    rs = ranges(con, 10, 3)
    before = range_bm25(con, '"garden" OR "sun"', rs)
    (vault / "more.md").write_text("# More\n\n" + "garden " * 50 + "\n", encoding="utf-8")
    kb.index([vault], embed=False)  # another connection writes: the reader sees data_version move
    after, theirs = range_bm25(con, '"garden" OR "sun"', rs), c_bm25(con, '"garden" OR "sun"', rs)
    assert [after[r] for r in theirs] == pytest.approx(list(theirs.values()), abs=1e-9)
    assert after != before  # (the counts and the average length moved)


def test_it_scores_the_pair_index_as_fts5_does(tmp_path):
    """For a note found by character pairs (kbase.search.cjk), hybrid's passages score the pair
    index's rows: the same bm25 as FTS5's, its counts kept apart from chunks_fts's."""
    from kbase.search import cjk

    rnd = random.Random(11)
    words = ["同步", "设置", "笔记", "手机", "电脑", "garden", "sun"]
    notes = {
        f"n{i}.md": f"# 笔记 {i}\n\n"
        + "\n\n## 部分\n\n".join(
            "".join(rnd.choice(words) for _ in range(rnd.randint(3, 30)))
            for _ in range(rnd.randint(1, 4))
        )
        for i in range(30)
    }
    kb = kbase.open(tmp_path / "k.db")
    kb.index([write(tmp_path / "v", notes)], embed=False)
    con = kb.reader
    rs = ranges(con, 8, 5)
    for match in ('"同步" OR "设置"', '"手机" AND "电脑"', '"笔记" OR "garden"', '"sun"'):
        mine = range_bm25(con, match, rs, cjk.TABLE)
        theirs = {
            rowid: score
            for lo, hi in rs
            for rowid, score in con.execute(
                f"SELECT rowid, -bm25({cjk.TABLE}, 1.0, 1.0, 1.0) FROM {cjk.TABLE}"
                f" WHERE {cjk.TABLE} MATCH ? AND rowid BETWEEN ? AND ?",
                (match, lo, hi),
            )
        }
        assert mine.keys() == theirs.keys() and mine, match
        assert [mine[r] for r in theirs] == pytest.approx(list(theirs.values()), abs=1e-9), match
    # the same phrase in the other table: its own counts ("garden" is one word in chunks_fts,
    # inside a run in none of chunks_fts's rows but as itself in chunks_cjk's)
    assert range_bm25(con, '"garden"', rs) == c_bm25(con, '"garden"', rs)
    kb.close()
