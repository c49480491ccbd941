"""The one-command evaluation (bench/eval.py): which collections it finds, how it scores, the
plain BM25 baseline, and a real run on a small collection with its index cached."""

from __future__ import annotations

import json

import pytest

from bench import eval as ev
from bench.questions import load_questions
from tests.conftest import shared


def test_every_question_file_whose_notes_are_here_is_a_collection_on_their_index():
    shared("vaults", "foam-docs")
    found = {c.name: c for c in ev.question_sets()}
    for f in sorted(ev.QUESTIONS.rglob("*.json")):
        folder = ev.question_folder(load_questions(f))
        if folder is not None:
            name = f.relative_to(ev.QUESTIONS).with_suffix("").as_posix()
            assert found[name].folder == folder
    # a set in a folder (bench/questions/blind/) searches the same index as the first set
    assert found["blind/foam-docs"].material == found["foam-docs"].material == "foam-docs"
    assert found["rust-book-zh"].spaceless and not found["foam-docs"].spaceless


def test_a_new_set_file_is_found_by_its_vault_or_material_field(tmp_path, monkeypatch):
    notes = tmp_path / "repo" / "bench" / "material" / "mine"
    notes.mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    qdir = tmp_path / "questions"
    qdir.mkdir()
    q = {"id": "q1", "question": "alpha", "answers": ["a.md"]}
    (qdir / "by-material.json").write_text(
        json.dumps({"vault": "x", "material": "bench/material/mine", "questions": [q]})
    )
    (qdir / "nowhere.json").write_text(json.dumps({"vault": "nowhere", "questions": [q]}))
    monkeypatch.setattr(ev, "QUESTIONS", qdir)
    monkeypatch.setattr(ev, "REPO", tmp_path / "repo")
    found = {c.name: c for c in ev.question_sets()}
    assert set(found) == {"by-material"}  # the set whose notes are absent is skipped
    c = found["by-material"]
    assert c.folder == notes and [x.gains for x in c.queries] == [{"a.md": 1}]
    assert not c.spaceless


def test_scores_top_1_top_3_mrr_and_ndcg():
    q = ev.Query("q", "text", {"b.md": 1})
    assert ev.query_scores(["a.md", "b.md"], q, "mrr10") == {"top1": 0.0, "top3": 1.0, "main": 0.5}
    assert ev.query_scores([f"{i}.md" for i in range(20)] + ["b.md"], q, "mrr10")["main"] == 0
    graded = ev.Query("q", "text", {"a.md": 2, "b.md": 1})
    assert ev.query_scores(["a.md", "b.md"], graded, "ndcg10")["main"] == pytest.approx(1.0)
    assert ev.query_scores(["b.md", "a.md"], graded, "ndcg10")["main"] < 1.0


def test_the_bootstrap_interval_holds_the_mean_and_is_the_same_every_run():
    values = [1.0] * 30 + [0.0] * 10
    lo, hi = ev.interval(values)
    assert lo < 0.75 < hi and 0.5 < lo and hi < 1.0
    assert ev.interval(values) == (lo, hi)
    assert ev.interval([1.0] * 5) == (1.0, 1.0)


def test_the_baseline_reads_scripts_without_spaces_as_character_pairs():
    assert ev.baseline_tokens("Rust 所有权的规则", bigrams=True) == [
        "rust",
        "所有",
        "有权",
        "权的",
        "的规",
        "规则",
    ]
    assert ev.baseline_tokens("Rust 所有权", bigrams=False) == ["rust", "所有权"]
    base = ev.Baseline(
        {"own.md": "所有权的规则是什么", "err.md": "错误处理", "en.md": "ownership rules"},
        bigrams=True,
    )
    assert base.ranked("所有权规则")[0] == "own.md"
    assert base.ranked("ownership")[0] == "en.md"
    assert base.ranked("nothing here") == []


def test_naive_rrf_puts_a_note_both_lists_hold_first():
    lists = ev.Lists(
        "q",
        [(1, 0, 3.5, 1, None, {}), (2, 0, 3.4, 1, None, {})],
        [(3, 0, 0.9, 1, None, {}), (2, 0, 0.8, 1, None, {})],
    )
    assert ev.naive_rrf(lists) == [2, 1, 3]


def test_quick_takes_queries_spread_over_the_collection():
    qs = [ev.Query(str(i), "t", {}) for i in range(100)]
    picked = ev.sample(qs, 10)
    assert [q.id for q in picked] == [str(i) for i in range(0, 100, 10)]
    assert ev.sample(qs[:5], 10) == qs[:5]


@pytest.mark.slow
def test_a_run_writes_the_table_and_reuses_its_cached_index(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ev, "CACHE", tmp_path / "cache")
    out = tmp_path / "out"
    assert ev.main(["--only", "ko", "--no-embed", "--out", str(out)]) == 0
    first = capsys.readouterr()
    assert "built fixture-ko-" in first.err
    report = json.loads((out / "eval.json").read_text())
    [ko] = report["collections"]
    assert ko["collection"] == "ko" and ko["queries"] == 13 and ko["baseline"] == "bigram BM25"
    assert set(ko["modes"]) == {"keyword", "bm25"}  # no vectors: keyword mode and the baseline
    assert ko["modes"]["keyword"]["main"] >= 0.9  # 13 questions on 8 notes written for them
    assert ko["limit_unstable"] == {"keyword": 0}
    assert "| ko (MRR@10) | 13 | keyword |" in (out / "eval.md").read_text()
    assert ev.main(["--only", "ko", "--no-embed", "--out", str(out)]) == 0
    assert "built" not in capsys.readouterr().err  # the second run only searches
    assert list((tmp_path / "cache" / "lists").glob("fixture-ko-*.pickle"))


def test_leave_one_out_picks_the_setting_best_on_the_others_and_headlines_the_worst():
    from bench import loco

    def coll(grid_mains, kw, sem, rrf, reads=10):
        return {
            "metric": "MRR@10",
            "reads": reads,
            "refs": {
                "keyword": {"main": kw},
                "semantic": {"main": sem},
                "naive rrf": {"main": rrf},
                "shipped": {"main": grid_mains[0]},
            },
            "grid": [{"main": m, "top1": m} for m in grid_mains],
        }

    table = {
        "settings": [{"alpha": 0.3}, {"alpha": 0.7}],
        "collections": {
            "a": coll([0.50, 0.90], 0.6, 0.6, 0.6),  # likes alpha 0.7
            "b": coll([0.55, 0.85], 0.6, 0.6, 0.6),  # likes alpha 0.7
            "c": coll([0.80, 0.40], 0.55, 0.5, 0.5),  # likes 0.3, but is outvoted when held out
        },
    }
    rows = {r["held_out"]: r for r in loco.leave_one_out(table, "mean")}
    assert rows["c"]["setting"] == {"alpha": 0.7} and rows["c"]["held_out_main"] == 0.4
    assert rows["c"]["margin"] == pytest.approx(-0.15)
    assert rows["a"]["setting"] == {"alpha": 0.3}  # b (0.85) + c (0.40) < b (0.55) + c (0.80)
    text = loco.report(list(rows.values()), {"alpha": (0.3, 0.7)}, "mean")
    assert text.startswith("Worst held-out collection: **c**")  # the worst, not the mean
    # --fit worst: the setting whose worst margin over the others is best
    rows = {r["held_out"]: r for r in loco.leave_one_out(table, "worst")}
    assert rows["a"]["setting"] == {"alpha": 0.3}


def test_a_grid_is_fields_of_the_fusion_constants():
    fusion = pytest.importorskip("kbase.search.fusion")
    if not hasattr(fusion, "FusionParams"):
        pytest.skip("kbase.search.fusion.FusionParams is not here yet")
    from bench import loco

    assert loco.parse_grid(["alpha=0.4,0.6", "semantic_span=10,20"]) == {
        "alpha": (0.4, 0.6),
        "semantic_span": (10, 20),
    }
    with pytest.raises(SystemExit, match="field of FusionParams"):
        loco.parse_grid(["nonsense=1"])


def test_the_pair_mix_is_picked_on_the_other_collections():
    from bench import pairs

    def per(*mains):
        return [{"main": m, "top1": m} for m in mains]

    results = {  # settings "0.5/4" and "1.5/4"; bigram BM25 as "bm25"
        "docs": {"0.5/4": per(0.9, 0.9), "1.5/4": per(0.7, 0.7), "bm25": per(0.6, 0.6)},
        "notes": {"0.5/4": per(0.8), "1.5/4": per(0.7), "bm25": per(0.5)},
        "squad": {"0.5/4": per(0.94), "1.5/4": per(0.96), "bm25": per(0.95)},
    }
    keys = ["0.5/4", "1.5/4"]
    pick, measures = pairs.picker(results, keys, "mean")
    assert pick(["docs", "notes"]) == "0.5/4" and pick(["squad"]) == "1.5/4"
    assert pick(list(results)) == "0.5/4"  # the mean of the three, each weighing the same
    assert measures["squad"]["bm25"] == pytest.approx(0.95)
    worst, _ = pairs.picker(results, keys, "worst")
    assert worst(["docs", "squad"]) == "1.5/4"  # the best worst margin: squad's +0.01


def test_a_pair_window_of_one_chunk_is_kbases_own_pair_score(tmp_path):
    import kbase
    from bench import pair_windows
    from kbase.search import cjk
    from kbase.search.query import parse_query
    from tests.conftest import write

    para = "野马队在分区赛中打败了匹兹堡钢人队，比赛的最终比分是二十三比十六。"
    notes = {
        "long.md": "# 比赛\n\n" + "\n\n".join(f"第{i}段：{para * 6}" for i in range(6)) + "\n",
        "short.md": "# 钢人队\n\n钢人队的主场在匹兹堡。\n",
        "other.md": "# 黑豹队\n\n黑豹队来自卡罗莱纳。\n",
    }
    kb = kbase.open(tmp_path / "w.db")
    try:
        kb.index([write(tmp_path / "v", notes)], embed=False)
        con = kb.reader
        ids = [d for (d,) in con.execute("SELECT id FROM documents")]
        (chunks,) = con.execute(
            "SELECT count(*) FROM chunks JOIN documents AS d ON d.id = doc_id"
            " WHERE d.path = 'long.md'"
        ).fetchone()
        assert chunks > 2  # (the premise: a note of several chunks)
        match = cjk.pairs_query(parse_query("钢人队比赛的比分")).to_fts(match_any=True)
        fts5 = dict(
            con.execute(
                f"WITH m AS MATERIALIZED (SELECT rowid AS cid, bm25({cjk.TABLE}) AS s"
                f" FROM {cjk.TABLE} WHERE {cjk.TABLE} MATCH ?)"
                " SELECT c.doc_id, min(m.s) FROM m JOIN chunks AS c ON c.id = m.cid"
                " GROUP BY c.doc_id",
                (match,),
            ).fetchall()
        )
        ones = pair_windows.window_scores(con, ids, match, 1, 1.2, 0.75)
        assert set(ones) == set(fts5) and len(ones) == 2
        assert all(ones[d] == pytest.approx(fts5[d], rel=1e-9) for d in fts5)
        # a window of the whole note counts its pairs in every chunk, not in the best one alone
        whole = pair_windows.window_scores(con, ids, match, chunks, 1.2, 0.75)
        assert whole.keys() == ones.keys() and whole != ones
    finally:
        kb.close()
    assert pair_windows._varints_total(bytes([0x82, 0x2C, 0x05])) == 300 + 5
