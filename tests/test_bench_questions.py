"""The question-set benchmark's own material: question files that parse, answers that exist, and
the markup list that snippet tests share (bench/questions.py, bench/markup.py)."""

from __future__ import annotations

import json
import re

import pytest

from bench.markup import MARKUP_PATTERNS, markup_in
from bench.questions import (
    check_answer_lines,
    first_rank,
    load_questions,
    pooled,
    question_files,
    scores,
    shows_answer,
    split,
)
from tests.conftest import shared

FILES = question_files()


def test_the_english_question_sets_are_there_with_at_least_30_questions():
    sets = {load_questions(f)["vault"]: load_questions(f) for f in FILES}
    assert {"obsidian-tasks-docs", "foam-docs", "rust-book"} <= set(sets)
    for qset in sets.values():
        assert len(qset["questions"]) >= 30
    # issue 23: at least 30 new questions on each of the three vaults beyond the first 101
    assert len(sets["obsidian-tasks-docs"]["questions"]) >= 50 + 30
    assert len(sets["foam-docs"]["questions"]) >= 51 + 30
    assert len(sets["rust-book"]["questions"]) >= 30


@pytest.mark.parametrize(
    "path", [f for f in FILES if f.stem in ("obsidian-tasks-docs", "foam-docs", "rust-book")]
)
def test_every_english_question_has_an_answer_line_that_is_in_its_vault(path):
    qset = load_questions(path)
    vault = shared("vaults", qset["vault"])
    assert all("line" in q and "answer" in q for q in qset["questions"])
    check_answer_lines(qset, vault)
    halves = [split(q["id"]) for q in qset["questions"]]
    assert abs(halves.count("tune") - halves.count("held")) <= 2  # two halves of the same size


def test_a_moved_answer_line_is_refused_with_the_question_named(tmp_path):
    (tmp_path / "note.md").write_text("# Note\n\nThe answer is here.\n", encoding="utf-8")
    qset = {
        "vault": "v",
        "questions": [
            {"id": "q1", "answers": ["note.md"], "line": 3, "answer": "the answer is HERE"}
        ],
    }
    check_answer_lines(qset, tmp_path)  # case and spacing aside
    qset["questions"][0]["line"] = 2
    with pytest.raises(ValueError, match="q1: 'the answer is HERE' is not on line 2 of note.md"):
        check_answer_lines(qset, tmp_path)


def test_a_snippet_shows_the_answer_with_five_words_of_it_in_a_row_as_read():
    answer = "Use the query string `limit to <number> tasks`."
    assert shows_answer("…results. Use the query string limit to <number> tasks. This…", answer)
    assert not shows_answer("Use the query to limit the tasks", answer)  # words, not in a row
    assert shows_answer("run rustup update now", "`rustup update`")  # a short excerpt: all of it
    assert split("t01") == "tune" and split("f52") == "held"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_answer_is_a_note_of_its_vault_and_every_section_a_heading_of_the_best(path):
    qset = load_questions(path)
    vault = shared("vaults", qset["vault"])
    for q in qset["questions"]:
        for answer in q["answers"]:
            assert (vault / answer).is_file(), f"{q['id']}: {answer} is not in {vault}"
        if "section" in q:
            best = (vault / q["answers"][0]).read_text(encoding="utf-8")
            heading = re.compile(rf"^#{{1,6}} +{re.escape(q['section'])} *$", re.MULTILINE)
            assert heading.search(best), (
                f"{q['id']}: no heading {q['section']!r} in {q['answers'][0]}"
            )


@pytest.mark.parametrize(
    "broken, message",
    [
        ({"id": "x1", "question": "how?", "answers": []}, "non-empty list of note paths"),
        ({"id": "x1", "question": "how?", "answers": ["/abs/path.md"]}, "relative to the vault"),
        ({"id": "x1", "question": "", "answers": ["a.md"]}, '"question" must be'),
        ({"id": "x1", "question": "how?", "answers": ["a.md"], "kind": "rant"}, '"kind" must be'),
        ({"id": "x1", "question": "how?", "answers": ["a.md"], "line": 3}, '"line" and "answer"'),
        ({"id": "x1", "question": "how?", "answers": ["a.md"], "line": 0, "answer": "x"}, "from 1"),
    ],
)
def test_a_broken_question_is_refused_with_the_file_and_question_named(tmp_path, broken, message):
    path = tmp_path / "some-vault.json"
    path.write_text(json.dumps({"vault": "some-vault", "questions": [broken]}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        load_questions(path)
    assert "some-vault.json: question x1" in str(e.value)


def test_duplicate_ids_and_a_vault_name_unlike_the_file_are_refused(tmp_path):
    path = tmp_path / "v.json"
    q = {"id": "a", "question": "q", "answers": ["n.md"]}
    path.write_text(json.dumps({"vault": "v", "questions": [q, q]}), encoding="utf-8")
    with pytest.raises(ValueError, match="unique"):
        load_questions(path)
    path.write_text(json.dumps({"vault": "other", "questions": [q]}), encoding="utf-8")
    with pytest.raises(ValueError, match="name the file after its vault"):
        load_questions(path)


def test_scores_are_document_level_top1_top3_and_mrr_at_10():
    assert first_rank(["a.md", "b.md", "c.md"], {"c.md", "z.md"}) == 3
    assert first_rank(["a.md"], {"b.md"}) is None
    s = scores([1, 3, 4, None])
    assert (s["n"], s["top1"], s["top3"]) == (4, 0.25, 0.5)
    assert s["mrr10"] == pytest.approx((1 + 1 / 3 + 1 / 4 + 0) / 4, abs=1e-4)
    two_sets = {
        "a": {"hybrid": {"questions": [{"rank": 1}, {"rank": None}]}},
        "b": {"hybrid": {"questions": [{"rank": 2}]}},
    }
    both = pooled(two_sets)["hybrid"]
    assert {k: both[k] for k in scores([1])} == scores([1, None, 2])  # over questions, not sets


SAMPLES = {
    "heading marker": "…## Install Rust",
    "bold **": "a **bold** word",
    "bold __": "a __bold__ word",
    "wikilink [[": "see [[Dates",
    "wikilink ]]": "Dates]] for more",
    "embed ![[": "![[diagram.png]]",
    "callout > [!": "> [!tip] Callouts can have titles",
    "code fence ```": "```tasks not done ```",
    "code fence ~~~": "~~~ code ~~~",
    "comment %%": "%% hidden %%",
    "comment <!--": "<!-- include: x.md",
    "comment -->": "end -->",
    "block id ^id": "the key finding ^key-finding",
    "html tag": '<span class="caption">Settings</span>',
    "table pipe": "| Action | Behaviour |",
    "link to a url ](http": "[Reminders](https://example.org)",
    "image ![": "![Create or Edit Modal](../images/modal.png)",
}


def test_each_markup_pattern_finds_its_markup_and_plain_text_has_none():
    assert set(SAMPLES) == set(MARKUP_PATTERNS)
    for name, text in SAMPLES.items():
        assert name in markup_in(text), (name, text)
    plain = (
        "Recurring tasks: when you complete one, a new task is created with the next date. "
        "Use a trailing backslash to continue a line; C# and 5 ^ 2 are not markup."
    )
    assert markup_in(plain) == []
