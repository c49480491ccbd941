import json
import os

import apsw
import pytest
from click.testing import CliRunner

from kbase.cli.app import cli
from kbase.errors import InputError
from tests.conftest import bump_mtime, write


def paths(hits):
    return [h.path for h in hits]


def test_hits_are_grouped_per_document_with_line_and_snippet(kb, vault):
    write(
        vault,
        {
            "Long.md": "# Long\n\n"
            + "\n\n".join(f"## Part {i}\n\nwater " * 1 + "x " * 400 for i in range(5))
        },
    )
    kb.index([vault], embed=False)
    hits = kb.search("water")
    assert len(paths(hits)) == len(set(paths(hits)))
    long = next(h for h in hits if h.path == "Long.md")
    assert long.matched_chunks > 1
    garden = next(h for h in hits if h.path == "Garden.md")
    assert garden.line == 3 and garden.title == "Garden"
    a, b = garden.highlights[0]
    assert garden.snippet[a:b] == "water"
    assert garden.abspath == str(vault / "Garden.md") and not garden.stale


def test_line_number_points_at_the_match_inside_the_chunk(kb, vault):
    (vault / "Lines.md").write_text("# Lines\n\none\ntwo\nthree\nneedle here\n")
    kb.index([vault], embed=False)
    (hit,) = kb.search("needle")
    assert hit.line == 6


def test_all_words_first_then_any(kb):
    hits = kb.search("tomatoes water")
    assert paths(hits)[0] == "Garden.md"  # has both words
    assert "tech/notes.txt" in paths(hits)  # has one of them: still listed, after


def test_phrase_prefix_exclusion_or(kb):
    assert paths(kb.search('"raised beds"')) == ["Garden.md"]
    assert paths(kb.search('"drain raised"')) == []
    assert paths(kb.search("checkpo*")) == ["tech/notes.txt"]
    assert "Garden.md" not in paths(kb.search("tomatoes -sun"))
    assert set(paths(kb.search("cucumber OR checkpoints"))) == {"tech/notes.txt"}


def test_title_weighs_more_than_body(kb, vault):
    write(
        vault,
        {
            "Mention.md": "# Other\n\nA garden garden is mentioned here in passing"
            " among many other words.\n"
        },
    )
    kb.index([vault], embed=False)
    assert paths(kb.search("garden"))[0] == "Garden.md"


def test_filters(kb, vault):
    assert paths(kb.search("tomatoes", path="tech")) == ["tech/notes.txt"]
    assert paths(kb.search("tomatoes", path="*.md")) == ["Garden.md"]
    assert paths(kb.search("readers", tags=["db"])) == ["tech/SQLite.md"]  # nested tag db/sqlite
    assert paths(kb.search("readers", tags=["#db/sqlite"])) == ["tech/SQLite.md"]
    assert paths(kb.search("readers", tags=["d"])) == []
    assert paths(kb.search("garden", since="2024-04-01", until="2024-05-31")) == ["Welcome.md"]
    old = vault / "Garden.md"
    os.utime(old, (1_000_000_000, 1_000_000_000))
    kb.index([vault], embed=False)
    assert "Garden.md" not in paths(kb.search("garden", since="2020-01-01"))
    assert "Garden.md" in paths(kb.search("garden", until="2001-09-09"))
    with pytest.raises(InputError, match="--since"):
        kb.search("garden", since="last tuesday")


def test_limit_and_empty_queries(kb):
    assert len(kb.search("the OR a OR tomatoes OR readers OR start", limit=2)) == 2
    for query in ("", "   ", ":", "!!!", "!!! ???", "🎉", "-tomatoes", '-"raised beds"', "OR"):
        for mode in (
            "keyword",
            "semantic",
            "hybrid",
        ):  # one rule in every mode, before any model is asked
            with pytest.raises(InputError) as e:
                kb.search(query, mode=mode)
            assert e.value.message == f"no words to search for in {query!r}"
    assert kb.search("zzzz") == []  # words that match nothing: no error


def test_stale_hit_is_flagged(kb, vault):
    (vault / "Garden.md").write_text("# Garden\n\nTomatoes, rewritten.\n")
    os.utime(vault / "Garden.md", (2_000_000_000, 2_000_000_000))
    (hit,) = kb.search("raised")
    assert hit.stale


def test_chunk_and_document_refs_for_a_hit(kb, vault):
    (hit,) = kb.search("raised", mode="keyword")
    ref = kb.chunk(hit.chunk_id)
    doc = kb.document(hit.path)
    assert doc.kind == "markdown" and ref.doc_id == doc.id
    assert "Raised beds" in doc.body[ref.start : ref.end] and ref.line <= hit.line <= ref.end_line
    assert kb.document("tech/notes.txt").kind == "text"
    with pytest.raises(InputError, match="no chunk"):
        kb.chunk(10**9)


def test_a_title_repeated_by_the_first_heading_is_indexed_once(tmp_path):
    from kbase.indexer import pipeline
    from kbase.store import db

    v = write(
        tmp_path / "v",
        {
            "alpha.md": "# Alpha Notes\n\n"
            + "intro words here. " * 60
            + "\n\n## Beta Part\n\n"
            + "more words there. " * 60,
            "other.md": "---\ntitle: Gamma\n---\n# Delta\n\n## Epsilon\n\nwords\n",
        },
    )
    con = db.connect(tmp_path / "t.db", create=True)
    pipeline.index(con, [v])
    rows = con.execute(
        "SELECT c.heading_path, f.headings FROM chunks c JOIN chunks_fts_content f ON f.id = c.id"
        " ORDER BY c.id"
    ).fetchall()
    # the H1 that is the title leaves the heading path; one that is not the title stays
    assert ("Alpha Notes", "") in rows and ("Alpha Notes > Beta Part", "Beta Part") in rows
    assert ("Delta > Epsilon", "Delta > Epsilon") in rows

    def match(q):
        return [
            r for (r,) in con.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (q,))
        ]

    assert match("headings:alpha") == [] and match("title:alpha") and match("headings:beta")
    (v / "alpha.md").write_text(
        "# Alpha Notes\n\nrewritten\n"
    )  # FTS5 deletes with the view's values
    pipeline.index(con, [v])
    con.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
    assert match("beta") == []


def test_ranking_from_the_best_chunks_equals_ranking_every_match(tmp_path):
    from kbase.indexer import pipeline
    from kbase.search import keyword
    from kbase.search.query import parse_query
    from kbase.store import db
    from tests.conftest import shared

    con = db.connect(tmp_path / "r.db", create=True)
    pipeline.index(con, [shared("vaults", "obsidian-tasks-docs")])
    titles = [t for (t,) in con.execute("SELECT title FROM documents ORDER BY id")]
    for title in titles + ["task", "query filter", "status done", "the"]:
        q = parse_query(title)
        for match in (q.to_fts(), q.to_fts(match_any=True)):
            for n in (1, 10, 100):
                fast = keyword._ranked_docs(con, match, "1", [], n)  # FTS5's ordering, best chunks
                full = keyword._ranked_docs(con, match, "1 = 1", [], n)  # every match grouped
                key = lambda rows: sorted((d, round(s, 9), count) for d, _, s, count, _ in rows)  # noqa: E731
                assert key(fast) == key(full), (match, n)
                assert [round(s, 9) for _, _, s, _, _ in fast] == [
                    round(s, 9) for _, _, s, _, _ in full
                ]


def test_best_chunks_ranking_looks_further_when_one_note_holds_all_the_best_chunks(tmp_path):
    from kbase.indexer import pipeline
    from kbase.ingest.chunk import ChunkSettings
    from kbase.search import keyword
    from kbase.store import db

    big = "\n\n".join(f"## Part {i}\n\nzebra zebra zebra stripes number {i}." for i in range(150))
    files = {
        "big.md": "# Big\n\n" + big,
        **{
            f"small{i}.md": f"# Small {i}\n\n" + "filler words here. " * 40 + "one zebra.\n"
            for i in range(5)
        },
    }
    con = db.connect(tmp_path / "w.db", create=True)
    pipeline.index(
        con, [write(tmp_path / "v", files)], settings=ChunkSettings(max_tokens=24, min_tokens=4)
    )
    assert (
        con.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path = 'big.md'"
        ).get
        > 64
    )  # more strong chunks than the first look takes
    fast = keyword._ranked_docs(con, '"zebra"', "1", [], 4)
    full = keyword._ranked_docs(con, '"zebra"', "1 = 1", [], 4)
    assert [(d, round(s, 9), n) for d, _, s, n, _ in fast] == [
        (d, round(s, 9), n) for d, _, s, n, _ in full
    ]
    assert (
        len(fast) == 4 and fast[0][3] > 64
    )  # the big note first, with all of its matching chunks counted


def test_hits_carry_every_field_the_readme_lists(kb):
    """The manual's field table (docs/cli.md) describes the Hit records the API returns: each
    field is an attribute of Hit, and rank is the hit's place in the list."""
    import dataclasses
    import re

    from kbase.records import HIT_FIELDS, Hit
    from tests.conftest import REPO

    table = (
        (REPO / "docs" / "cli.md")
        .read_text(encoding="utf-8")
        .split("## Output formats", 1)[1]
        .split("\n## ", 1)[0]
    )
    listed = re.findall(
        r"`(\w+)`",
        "".join(line.split("|")[1] for line in table.splitlines() if line.startswith("| `")),
    )
    assert {"rank", "score", "doc_id", "chunk_id"} <= set(listed) and set(HIT_FIELDS) <= set(listed)
    assert set(listed) <= {f.name for f in dataclasses.fields(Hit)}
    hits = kb.search("tomatoes OR raised OR readers")
    assert len(hits) >= 2 and [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert hits[0].rank == 1


def test_the_machine_formats_carry_every_field_of_a_hit():
    """A field added to Hit reaches --json, --csv and MCP unless it is named here on purpose."""
    import dataclasses

    from kbase.records import HIT_FIELDS, Hit

    assert set(HIT_FIELDS) == {f.name for f in dataclasses.fields(Hit)} - {"explain"}
    hit = Hit(1, "a.md", "/v/a.md", "A", 0.1234567, 2, 3, "", "s", ((0, 1),), tags=("t",), rank=1)
    assert list(hit.record()) == list(HIT_FIELDS) and hit.record()["highlights"] == [[0, 1]]
    assert "explain" not in hit.record(explain=True)  # nothing to explain


def test_a_filter_holding_a_lone_surrogate_matches_nothing_instead_of_failing(kb):
    """A tag or path Python decoded with surrogateescape (a file name's stray byte) cannot be
    encoded for SQLite; the search answers (no note has it) rather than raising."""
    assert kb.search("garden", mode="keyword", tags=["\ud800"]) == []
    assert kb.search("garden", mode="keyword", path="\udcff/notes") == []
    assert kb.search("garden", mode="keyword", exclude=["\udcff"])


def test_hits_of_a_missing_file_say_missing(run, moved):
    r = run("search", "tomatoes")
    assert "[missing]" in r.stdout and "[changed on disk]" not in r.stdout
    hit = json.loads(run("search", "tomatoes", "--json").stdout)[0]
    assert hit["missing"] is True and hit["stale"] is True
    assert "is missing on disk" in run("show", "Garden").stderr


def test_a_changed_file_is_not_missing(run, vault):
    run("index", "--no-embed", vault)
    (vault / "Garden.md").write_text("# Garden\n\nTomatoes need sun, water and patience.\n")
    r = run("search", "tomatoes")
    assert "Garden" in r.stdout and "[changed on disk]" in r.stdout and "[missing]" not in r.stdout


def test_a_file_changed_after_indexing_gives_a_stale_hit(tmp_path, vault):
    dbp = tmp_path / "s.db"
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["--db", str(dbp), "index", str(vault), "--no-embed", "-q"]).exit_code
        == 0
    )
    garden = vault / "Garden.md"
    garden.write_text(garden.read_text() + "\nA line added after indexing.\n")
    bump_mtime(garden)
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes", "--json"])
    hits = {h["path"]: h for h in json.loads(r.stdout)}
    assert hits["Garden.md"]["stale"] is True and hits["tech/notes.txt"]["stale"] is False
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes"])
    lines = {
        line.split(". ", 1)[1].split("  ")[0]: line
        for line in r.stdout.splitlines()
        if line[:1].isdigit()
    }
    assert "[changed on disk]" in lines["Garden"] and "[changed on disk]" not in lines["notes"]
    (vault / "tech" / "notes.txt").unlink()  # a vanished file is stale too
    r = runner.invoke(cli, ["--db", str(dbp), "search", "tomatoes", "--json"])
    assert all(h["stale"] for h in json.loads(r.stdout))


def test_a_match_of_a_heading_alone_shows_the_section_where_its_words_are(tmp_path):
    """bm25 counts a heading word in every chunk under the heading and favours the shortest:
    the Vue docs' 'simple routing from scratch' showed a chunk holding only '</div>'. The
    passage is a chunk whose text holds a word of the query, or the section's first chunk."""
    import kbase

    code = "```js\n" + "const view = computed(() => routes[currentPath.value])\n" * 40 + "```\n"
    v = write(
        tmp_path / "v",
        {
            "routing.md": "# Routing\n\n## Official Router\n\nUse the official router.\n\n"
            "## Simple Routing from Scratch\n\nIf you only need very simple routing, listen"
            ' to the hashchange event.\n\n<div class="demo">\n\n' + code + "\n</div>\n",
            "other.md": "# Other\n\nNothing about it here.\n",
        },
    )
    with kbase.open(tmp_path / "t.db") as kb:
        kb.index([v], embed=False)
        body = dict(
            apsw.Connection(str(tmp_path / "t.db")).execute(
                "SELECT id, body FROM chunks_fts_content"
            )
        )
        assert "</div>" in body.values()  # (the chunk bm25 would show)
        for query in ("simple routing from scratch", "scratch"):
            (hit,) = kb.search(query, mode="keyword", limit=1)
            assert "hashchange" in body[hit.chunk_id], query


def test_a_note_whose_name_only_starts_with_the_word_is_found_without_an_error(tmp_path):
    """'react' in the Vue docs: 'Reactivity Fundamentals' starts with it, and no chunk of that
    note holds the word; the passage step found no chunk for it and raised a TypeError."""
    import kbase

    v = write(
        tmp_path / "v",
        {
            "reactivity-fundamentals.md": "# Reactivity Fundamentals\n\nState is tracked.\n",
            "react.md": "# Other frameworks\n\nCompared with react, Vue tracks state.\n",
        },
    )
    with kbase.open(tmp_path / "t.db") as kb:
        kb.index([v], embed=False)
        hits = kb.search("react", mode="keyword")
        assert {h.path for h in hits} == {"react.md", "reactivity-fundamentals.md"}
        (fund,) = [h for h in hits if h.path == "reactivity-fundamentals.md"]
        assert fund.snippet.startswith("Reactivity Fundamentals")


def test_a_passage_of_link_definitions_alone_gives_way_to_one_a_person_can_read(tmp_path):
    """MkDocs pages end sections with '[label]: url' lines: short, their labels' words match,
    and they render to nothing, so the hit showed '[Linked content tabs enabled]: ../x.png'.
    The note's passage is its best readable chunk, in keyword and in default mode."""
    import kbase

    section = (
        "## Linked content tabs\n\nWhen enabled, all content tabs across the site are linked and"
        " switch together when a user clicks one.\n\n```yaml\ntheme:\n  features:\n"
        + "    - content.tabs.link.option\n" * 14
        + "```"
    )
    defs = "\n\n" + "".join(
        f"[Linked content tabs enabled {i}]: ../assets/screenshots/content-tabs-link-{i}.png\n"
        for i in range(4)
    )
    v = write(
        tmp_path / "v",
        {
            "tabs.md": "# Content tabs\n\n" + section + defs + "\n## Usage\n\n" + "Group it. " * 30,
            "other.md": "# Other\n\nNothing here.\n",
        },
    )
    with kbase.open(tmp_path / "t.db") as kb:
        kb.index([v])
        body = dict(
            apsw.Connection(str(tmp_path / "t.db")).execute(
                "SELECT id, body FROM chunks_fts_content"
            )
        )
        assert any(b.startswith("[Linked content tabs enabled") for b in body.values())
        for mode in ("keyword", "hybrid"):
            (hit,) = kb.search("linked content tabs enabled", mode=mode, limit=1)
            assert "When enabled" in body[hit.chunk_id] and "[Linked" not in hit.snippet, mode
