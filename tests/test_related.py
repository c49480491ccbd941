"""kbase related: notes nearest in meaning (real model, stored vectors), the keyword fallback,
the CLI and the idle embedder's newest-first batches."""

import json

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.embed import embedder
from tests.conftest import bump_mtime, write

NOTES = {
    "Bread.md": "# Bread\n\nKnead the dough, let it rise overnight and bake it in a hot oven."
    " See [[Soup]].\n",
    "Soup.md": "# Soup\n\nSimmer onions, carrots and lentils in stock for forty minutes.\n",
    "Pizza.md": "# Pizza\n\nStretch the risen dough thin, add tomato sauce and bake"
    " in a very hot oven.\n",
    "Backups.md": "# Backups\n\nKeep three copies of your data on two media, one off site.\n\n"
    "## Restore\n\nTest a restore from the off-site copy every month.\n",
    "Sqlite.md": "# SQLite\n\nWrite-ahead logging lets readers continue while a writer appends.\n",
    "Disks.md": "# Disks\n\nA failing disk loses data; copy your files to a second drive"
    " and to the cloud.\n",
}


@pytest.fixture(scope="module")
def model():
    return embedder.default_embedder()


@pytest.fixture
def vault(tmp_path):
    return write(tmp_path / "v", NOTES)


@pytest.fixture
def embedded(tmp_path, vault, model):
    k = kbase.open(tmp_path / "e.db", embedder=model)
    k.index([vault])
    yield k
    k.close()


def paths(result):
    return [h.path for h in result.hits]


def test_nearest_in_meaning_leaving_out_linked_notes(embedded):
    r = embedded.related("Bread", limit=2)
    assert r.method == "semantic" and r.terms == ()
    assert paths(r)[0] == "Pizza.md"  # dough, baking, a hot oven: no link between them
    assert "Soup.md" not in paths(r) and "Bread.md" not in paths(r)  # linked, and the note itself
    r = embedded.related("Backups", limit=1)
    assert paths(r) == ["Disks.md"]
    assert 0 < r.hits[0].score <= 1 and r.hits[0].line == 1  # one chunk, heading included


def test_all_includes_linked_notes_and_says_which(embedded):
    r = embedded.related("Bread", limit=5, include_linked=True)
    assert "Soup.md" in paths(r)
    soup = next(h for h in r.hits if h.path == "Soup.md")
    assert soup.doc_id in r.links_to and soup.doc_id not in r.linked_from
    back = embedded.related("Soup", limit=5)
    assert "Bread.md" in paths(back)  # Soup does not link to Bread: only Bread links to Soup
    bread = next(h for h in back.hits if h.path == "Bread.md")
    assert bread.doc_id in back.linked_from


def test_without_embeddings_the_distinctive_terms_are_searched(tmp_path, vault):
    k = kbase.open(tmp_path / "k.db")
    k.index([vault], embed=False)
    r = k.related("Backups", limit=3)
    assert r.method == "keyword"
    assert "restore" in r.terms and "copies" in r.terms or "copy" in r.terms
    assert "the" not in r.terms and "of" not in r.terms  # stop words are not distinctive
    assert paths(r)[0] == "Disks.md" and "Backups.md" not in paths(r)
    # a word only this note has cannot find another note: it is not a query term
    assert "month" not in r.terms


def test_a_note_not_yet_embedded_falls_back_to_keywords(embedded, vault):
    (vault / "Cake.md").write_text(
        "# Cake\n\nBake the sponge in a hot oven, then let it rise.\n", encoding="utf-8"
    )
    embedded.index([vault], embed=False)
    r = embedded.related("Cake", limit=2)
    assert r.method == "keyword" and r.hits


def test_cli_related_formats(tmp_path, vault):
    db = str(tmp_path / "c.db")
    kbase.open(db).index([vault], embed=False)
    r = CliRunner().invoke(cli, ["--db", db, "related", "Backups", "-n", "2"])
    assert r.exit_code == 0 and r.stdout.startswith("1. Disks  Disks.md:3")
    assert "keyword similarity on" in r.stderr and "kbase embed" in r.stderr
    r = CliRunner().invoke(cli, ["--db", db, "related", "Bread", "--all", "--json"])
    rows = json.loads(r.stdout)
    soup = next(x for x in rows if x["path"] == "Soup.md")
    assert soup["linked"] is True and soup["links_here"] is False and soup["method"] == "keyword"
    assert list(rows[0]) == [
        "rank",
        "score",
        "title",
        "path",
        "abspath",
        "line",
        "page",
        "card",
        "heading_path",
        "snippet",
        "tags",
        "stale",
        "doc_id",
        "chunk_id",
        "linked",
        "links_here",
        "method",
    ]
    r = CliRunner().invoke(cli, ["--db", db, "related", "Bread", "--csv"])
    assert r.stdout.splitlines()[0].startswith("rank,score,title,path")
    r = CliRunner().invoke(cli, ["--db", db, "related", "Nothing"])
    assert r.exit_code == 1 and "no indexed document matches 'Nothing'" in r.stderr


def _embedded(step) -> int:
    return step.embedded + step.reused


def test_embed_step_takes_the_newest_notes_first(tmp_path, vault, model):
    k = kbase.open(tmp_path / "n.db", embedder=model)
    k.index([vault], embed=False)
    bump_mtime(vault / "Soup.md", 100)
    bump_mtime(vault / "Disks.md", 50)
    k.index([vault], embed=False)
    assert _embedded(k.embed_step(limit=1)) == 1
    done = [
        p
        for (p,) in k.reader.execute(
            "SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE c.embedded"
        )
    ]
    assert done == ["Soup.md"]
    assert _embedded(k.embed_step(limit=1)) == 1
    done = {
        p
        for (p,) in k.reader.execute(
            "SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE c.embedded"
        )
    }
    assert done == {"Soup.md", "Disks.md"}
    while _embedded(k.embed_step(limit=8)):
        pass
    assert k.status().embedded_chunks == k.status().chunks
    assert _embedded(k.embed_step(limit=8)) == 0
