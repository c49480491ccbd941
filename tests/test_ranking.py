"""What a person sees on a real vault: titles, names first, scores in order, long notes kept in
their place, exclusions, and the hybrid hit's chunk."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.indexer import pipeline
from kbase.ingest.chunk import ChunkSettings
from kbase.ingest.parse import parse
from kbase.search import hits, hybrid, keyword
from kbase.search.fusion import PARAMS
from kbase.store.db import meta_set
from tests.conftest import write


@pytest.mark.parametrize(
    "text, title",
    [
        ("# Opening heading\n\nText.", "Opening heading"),
        ("---\ntitle: From front matter\n---\n# Heading\n", "From front matter"),
        ("---\ntags: [a]\n---\n\n# After front matter\n", "After front matter"),
        ("Intro paragraph.\n\n# A later heading\n", "file-name"),  # not the note's first block
        ("## Open Settings\n\n# H1 later\n", "Open Settings"),  # the opening heading, any level
        ("# **Bold** [[Target|alias]] `code`\n", "Bold alias code"),  # plain text
        ('---\ntitle: "{{title}}"\n---\n# Real title\n', "Real title"),  # template placeholder
        ("# {{title}}\n", "file-name"),
        ("# <% tp.file.title %>\n", "file-name"),
        ("aliases:\n===\n\ntext\n", "file-name"),  # a YAML-looking line left by broken front matter
        ("Setext title\n============\n\ntext\n", "Setext title"),
    ],
)
def test_title_rule_for_a_slug(text, title):
    assert parse(text, "folder/file-name.md").title == title


@pytest.mark.parametrize(
    "text",
    [
        "# Opening heading\n\nText.",
        "---\ntitle: From front matter\n---\n# Heading\n",
        "## Open Settings\n",
        "Setext title\n============\n\ntext\n",
    ],
)
def test_a_name_a_person_typed_is_the_title(text):
    assert parse(text, "folder/File Name.md").title == "File Name"


def test_existing_index_gets_new_titles_without_reading_files(tmp_path, monkeypatch):
    v = write(
        tmp_path / "v",
        {"Glossary.md": "Intro.\n\n## Alias\n\nAnother name.\n", "Plain.md": "# Plain\n\nx\n"},
    )
    db = tmp_path / "i.db"
    kb = kbase.open(db)
    kb.index([v], embed=False)
    # Make the index look as an older kbase left it: first heading of any level as the title.
    con = kbase.store.db.connect(db)
    with con:
        con.execute("DELETE FROM chunks")  # (the title is part of every chunk's keyword row)
        con.execute("UPDATE documents SET title = 'Alias' WHERE path = 'Glossary.md'")
        meta_set(
            con,
            "chunker",
            json.dumps(
                {
                    **json.loads(ChunkSettings().fingerprint(pipeline.default_counter())),
                    "version": 2,
                }
            ),
        )
    con.close()
    monkeypatch.setattr(pipeline, "decode", lambda *a, **k: pytest.fail("a file was read again"))
    report = kb.index([v], embed=False)
    assert report.rechunked == 2 and report.updated == 0 and report.new == 0
    assert {d.path: d.title for d in map(kb.document, ["Glossary.md", "Plain.md"])} == {
        "Glossary.md": "Glossary",
        "Plain.md": "Plain",
    }
    assert [h.path for h in kb.search("glossary", mode="keyword")] == ["Glossary.md"]


@pytest.fixture
def names(tmp_path):
    v = write(
        tmp_path / "names",
        {
            "Introduction to Obsidian Sync.md": "---\naliases: [Sync intro]\n---\n"
            "Sync keeps your vault on all devices.\n",
            "Sync settings.md": "# Sync settings\n\n"
            "Open the Introduction to Obsidian Sync note first. Obsidian Sync "
            "settings: Obsidian, Sync, introduction.\n",
            "Other.md": "# Other\n\nIntroduction to Obsidian Sync, introduction to Obsidian Sync, "
            "again Obsidian Sync.\n",
            "deep/settings.md": "---\ntitle: Preferences\n---\n"
            "Settings and more settings, all the settings.\n",
            "Settings overview.md": "# Settings overview\n\n"
            "Settings, settings, settings everywhere; settings.\n",
        },
    )
    kb = kbase.open(tmp_path / "n.db")
    kb.index([v], embed=False)
    return kb


@pytest.mark.parametrize(
    "query, first",
    [
        ("Introduction to Obsidian Sync", "Introduction to Obsidian Sync.md"),  # the file name
        ("introduction to obsidian sync", "Introduction to Obsidian Sync.md"),  # any case
        ("sync intro", "Introduction to Obsidian Sync.md"),  # an alias
        ("Settings", "deep/settings.md"),  # the file name, though the title is another
        ("preferences", "deep/settings.md"),  # the title (a slug's front matter title)
        (
            "introduction to obsid",
            "Introduction to Obsidian Sync.md",
        ),  # a prefix of the name, as typed
    ],
)
def test_a_note_named_by_the_query_comes_first(names, query, first):
    hits = names.search(query, mode="keyword")
    assert hits[0].path == first
    assert len(hits) == 1 or hits[0].score > hits[1].score


def test_a_single_finished_word_is_not_a_name_prefix(names):
    hits = names.search("settings", mode="keyword")
    assert hits[0].explain["tier"] == "name" and hits[1].explain["tier"] == "all words"


def test_scores_fall_with_rank_across_tiers(names, tmp_path):
    hits = names.search("obsidian sync settings everywhere", mode="keyword", limit=10)
    tiers = [h.explain["tier"] for h in hits]
    assert "all words" in tiers or "some words" in tiers
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(
        int(h.score)
        == {"name": 5, "name prefix": 4, "all words": 3, "some words": 1}[h.explain["tier"]]
        for h in hits
    )
    out = (
        CliRunner()
        .invoke(
            cli,
            [
                "--db",
                str(tmp_path / "n.db"),
                "search",
                "-m",
                "keyword",
                "--json",
                "obsidian sync settings everywhere",
            ],
        )
        .output
    )
    scores = [h["score"] for h in json.loads(out)]
    assert scores == sorted(scores, reverse=True) and len(scores) == len(hits)


def test_explain_in_csv_is_a_column(names, tmp_path):
    args = ["--db", str(tmp_path / "n.db"), "search", "-m", "keyword", "--csv", "settings"]
    plain = CliRunner().invoke(cli, args).output.splitlines()
    explained = CliRunner().invoke(cli, args + ["--explain"]).output.splitlines()
    assert "explain" not in plain[0] and explained[0].endswith(",explain")
    assert '""tier"": ""name""' in explained[1]


def test_a_long_note_does_not_outrank_a_short_one_by_its_length(tmp_path):
    """The same passage in a short note and in a 3,000-line list note: the list note's best chunk
    pays for the note's length (its many chances), the short note's does not."""
    passage = "Knead the dough for ten minutes, let it rise overnight, bake in a dutch oven."
    filler = (
        "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november"
    ).split()
    items = "\n".join(
        f"- {' '.join(filler[(i * 7 + j) % len(filler)] for j in range(6))} item {i}"
        for i in range(3000)
    )
    v = write(
        tmp_path / "v",
        {
            "Bread.md": f"# Bread\n\n{passage}\n",
            "Everything.md": f"# Everything\n\n{passage}\n\n{items}\n",
        },
    )
    kb = kbase.open(tmp_path / "l.db")
    kb.index([v], embed=False)
    short, long = kb.search("dough rise overnight", mode="keyword", limit=2)
    assert (short.path, long.path) == ("Bread.md", "Everything.md")

    def unpenalised(hit):  # the keyword score its best chunk's bm25 alone would give
        return 3 + hit.explain["bm25"] / (hit.explain["bm25"] + keyword.BM25_HALF)

    assert short.explain["chunks"] == 1 and short.score == pytest.approx(unpenalised(short))
    assert long.explain["chunks"] > 100 and long.score < unpenalised(long) - 0.01
    # the semantic list pays the same prior, in cosine units, on the same chunk count
    assert hits.length_units(long.explain["chunks"]) > 1 and hits.length_units(32) == 0


def test_exclude_leaves_out_paths_case_insensitively(names, tmp_path):
    every = {h.path for h in names.search("settings", mode="keyword", limit=20)}
    assert "deep/settings.md" in every
    kept = {h.path for h in names.search("settings", mode="keyword", limit=20, exclude=["DEEP/"])}
    assert kept == every - {"deep/settings.md"}
    kept = {
        h.path
        for h in names.search("settings", mode="keyword", limit=20, exclude=["settings*", "Deep/*"])
    }
    assert kept == every - {
        "deep/settings.md",
        "Settings overview.md",
    }  # GLOB: "*" also crosses "/"
    assert {h.path for h in names.search("settings", mode="keyword", path="DEEP")} == {
        "deep/settings.md"
    }
    out = (
        CliRunner()
        .invoke(
            cli,
            [
                "--db",
                str(tmp_path / "n.db"),
                "search",
                "settings",
                "-m",
                "keyword",
                "--json",
                "--exclude",
                "deep",
                "--exclude",
                "Settings overview.md",
            ],
        )
        .output
    )
    assert {h["path"] for h in json.loads(out)} == every - {
        "deep/settings.md",
        "Settings overview.md",
    }


def test_hybrid_fuses_evidence_and_a_name_step_but_no_all_words_step(names, monkeypatch):
    """The fusion is real; the two lists are fixed. Matching all words is no step in hybrid
    (issue 23): b's bm25 lead (1 against 0) loses to a's meaning (1 against 0) at alpha 0.6."""
    con = names.reader
    doc = dict(con.execute("SELECT path, id FROM documents").fetchall())
    chunk = dict(con.execute("SELECT doc_id, min(id) FROM chunks GROUP BY doc_id").fetchall())
    a, b = doc["Sync settings.md"], doc["Other.md"]
    kw = [
        hits.Ranked(
            b, chunk[b], 3.5, 1, '"sync"', {"tier": "all words", "bm25": 10.0, "chunks": 1}
        ),
        hits.Ranked(
            a, chunk[a], 1.2, 1, '"sync"', {"tier": "some words", "bm25": 2.5, "chunks": 1}
        ),
    ]
    sem = [
        hits.Ranked(a, chunk[a], 0.8, 1, None, {"similarity": 0.8, "second": 0.8, "chunks": 1}),
        hits.Ranked(b, chunk[b], 0.4, 1, None, {"similarity": 0.4, "second": 0.4, "chunks": 1}),
    ]
    monkeypatch.setattr(hybrid, "keyword_ranked", lambda *a, **k: kw)
    monkeypatch.setattr(hybrid, "semantic_ranked", lambda *a, **k: sem)
    got = hybrid.hybrid_search(con, "sync", b"", limit=2, params=replace(PARAMS, alpha=0.6))
    assert [h.doc_id for h in got] == [a, b]
    # each list scaled between its best and its last (two notes, fewer than the spans)
    assert [h.score for h in got] == [pytest.approx(0.6 * 1.0), pytest.approx(0.4 * 1.0)]
    # the same lists with b named by the query: the name step puts b first whatever the meaning
    kw[0] = hits.Ranked(b, chunk[b], 5.5, 1, '"sync"', {"tier": "name", "bm25": 10.0, "chunks": 1})
    got = hybrid.hybrid_search(con, "sync", b"", limit=2, params=replace(PARAMS, alpha=0.6))
    assert [h.doc_id for h in got] == [b, a]
    assert got[0].score == pytest.approx(0.4 * (PARAMS.step("name") + 1))


def test_a_whole_name_a_typo_away_outranks_a_longer_name_the_query_begins():
    """typos-obsidian-tasks-docs, 'Recurring Task': the keyword list has 'Recurring Tasks' (near
    name) and 'Recurring Tasks and Custom Statuses' (name prefix) level, and the longer note's
    passages are nearer in meaning (its explain: cos 0.782 against 0.760). The near name stays
    first, and an exact name stays above a near one."""
    from kbase.search.fusion import fuse

    def kw(doc, tier, score):
        return hits.Ranked(doc, doc, score, 1, None, {"tier": tier, "bm25": 4.5, "chunks": 20})

    def sem(doc, cos):
        return hits.Ranked(doc, doc, cos, 1, None, {"similarity": cos, "second": cos - 0.05})

    near, prefix, other = 1, 2, 3
    meaning = [sem(prefix, 0.782), sem(near, 0.760), sem(other, 0.729)]
    fused = fuse([kw(near, "near name", 4.31), kw(prefix, "name prefix", 4.31)], meaning)
    assert [f.key for f in fused][:2] == [near, prefix]
    fused = fuse([kw(prefix, "name", 5.31), kw(near, "near name", 4.31)], meaning)
    assert [f.key for f in fused][:2] == [prefix, near]


def test_a_renamed_note_is_found_by_its_new_name_and_titled_by_it(tmp_path):
    v = write(
        tmp_path / "v",
        {
            "Old name.md": "Just a body, no heading.\n",
            "Headed.md": "# Headed\n\nbody\n",
            "Other.md": "# Other\n\nold name, new name, headed\n",
        },
    )
    kb = kbase.open(tmp_path / "r.db")
    kb.index([v], embed=False)
    (v / "Old name.md").rename(v / "New name.md")
    (v / "Headed.md").rename(v / "Renamed heading note.md")
    report = kb.index([v], embed=False)
    assert report.renamed == 2 and report.new == 0
    assert kb.document("New name.md").title == "New name"  # titled by its file name: the new one
    # the new file name, as Obsidian shows it, though the note opens with '# Headed'
    assert kb.document("Renamed heading note.md").title == "Renamed heading note"
    for query, path in (
        ("new name", "New name.md"),
        ("renamed heading note", "Renamed heading note.md"),
    ):
        assert kb.search(query, mode="keyword")[0].path == path
    old = kb.search("old name", mode="keyword")
    assert old[0].path == "Other.md" and all(h.explain["tier"] != "name" for h in old)
    con = kbase.store.db.connect(tmp_path / "r.db")
    assert (
        con.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
        is not None
    )
    con.close()


def test_heading_paths_read_as_text(tmp_path):
    v = write(
        tmp_path / "v",
        {"Agenda.md": "# Agenda\n\n## Example **template** with [[Link|a link]]\n\nquokka\n"},
    )
    kb = kbase.open(tmp_path / "h.db")
    kb.index([v], embed=False)
    (hit,) = kb.search("quokka", mode="keyword")
    assert hit.heading_path == "Agenda > Example template with a link"


def test_a_heading_that_opens_many_notes_does_not_outrank_the_note_the_query_names(tmp_path):
    """Slugs take their opening heading as title; one that several notes share ('General') names
    none of them, so the note whose file name is the query comes first."""
    v = write(
        tmp_path / "v",
        {
            "music-notes.md": "# General\n\nGeneral remarks on general music, in general.\n",
            "sport-notes.md": "# General\n\nGeneral, general and general again.\n",
            "General.md": "Things in general.\n",
            "guide-intro.md": "# Getting around\n\nHow to find your way.\n",
        },
    )
    kb = kbase.open(tmp_path / "g.db")
    kb.index([v], embed=False)
    hits = kb.search("general", mode="keyword")
    assert hits[0].path == "General.md" and hits[0].explain["tier"] == "name"
    assert all(h.explain["tier"] != "name" for h in hits[1:])
    assert {kb.document(p).title for p in ("music-notes.md", "sport-notes.md")} == {"General"}
    # a heading title no other note has is still the note's name
    assert kb.search("getting around", mode="keyword")[0].explain["tier"] == "name"


def test_shared_vaults_titles(tmp_path):
    """rust-book-zh's ownership chapter is titled by its heading, as is the Japanese one (after
    the English original in an HTML comment); the Obsidian vault's notes by their file names."""
    from tests.conftest import shared

    zh = shared("vaults", "rust-book-zh") / "ch04-01-what-is-ownership.md"
    ja = shared("vaults", "rust-book-ja") / "ch04-01-what-is-ownership.md"
    assert parse(zh.read_text(encoding="utf-8"), zh.name).title == "什么是所有权？"
    assert parse(ja.read_text(encoding="utf-8"), ja.name).title == "所有権とは？"
    tasks = shared("vaults", "obsidian-tasks-docs")
    notes = [p for p in tasks.rglob("*.md") if not p.stem.islower()]
    assert notes and all(
        parse(p.read_text(encoding="utf-8"), p.name).title == p.stem for p in notes
    )


def test_an_existing_index_takes_the_new_titles_on_the_next_index_run(tmp_path, monkeypatch):
    """An index made with the old rule (chunker version 3: a slug chapter opening with '##' kept
    its file name) is retitled from its stored text by the next kbase index."""
    v = write(
        tmp_path / "v",
        {"ch04-01-what-is-ownership.md": "## 什么是所有权？\n\n所有权是一组规则。\n"},
    )
    db = tmp_path / "old.db"
    kb = kbase.open(db)
    kb.index([v], embed=False)
    con = kbase.store.db.connect(db)
    with con:
        con.execute("DELETE FROM chunks")
        con.execute("UPDATE documents SET title = 'ch04-01-what-is-ownership'")
        meta_set(
            con,
            "chunker",
            json.dumps(
                {
                    **json.loads(ChunkSettings().fingerprint(pipeline.default_counter())),
                    "version": 3,
                }
            ),
        )
    con.close()
    monkeypatch.setattr(pipeline, "decode", lambda *a, **k: pytest.fail("a file was read again"))
    assert kb.index([v], embed=False).rechunked == 1
    assert kb.document("ch04-01-what-is-ownership.md").title == "什么是所有权？"
    assert kb.search("什么是所有权", mode="keyword")[0].title == "什么是所有权？"
