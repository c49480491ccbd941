"""Whether an index run embeds (KB.auto_embed): a new index does; `kbase index --no-embed` makes
it keyword-only until `kbase embed` or `kbase index --embed`, and every face respects that."""

from __future__ import annotations

import json

import pytest

import kbase
from kbase.records import EmbedReport
from kbase.store import db


def embedded(db_path) -> int:
    con = db.connect(db_path, readonly=True)
    try:
        return con.execute("SELECT count(*) FROM chunks WHERE embedded").get
    finally:
        con.close()


def test_no_embed_sticks_until_embed_or_index_embed(run, vault, db_path, fake_model):
    assert run("index", "--no-embed", vault).exit_code == 0
    assert "embedding  off" in run("status").stdout
    r = run("index")  # a plain update: nothing changed, and nothing is embedded
    assert r.exit_code == 0 and "embedding" not in r.stderr and "embedded" not in r.stdout
    (vault / "new.md").write_text("# New\n\nA new note about marmalade.\n")
    assert "1 new" in run("index").stdout
    assert fake_model.embedded == 0 and embedded(db_path) == 0
    assert json.loads(run("status", "--json").stdout)["auto_embed"] is False
    # the API's long-lived callers (watch, browse, an MCP server while idle) leave it alone too
    assert kbase.open(db_path, embedder=fake_model).embed_step() == EmbedReport()
    assert run("index", "--embed").exit_code == 0  # embeds, and turns embedding back on
    assert embedded(db_path) > 0 and "embedding  on" in run("status").stdout
    (vault / "new.md").write_text("# New\n\nA new note about marmalade, edited.\n")
    before = fake_model.embedded
    run("index")
    assert fake_model.embedded > before  # the changed chunk, at once


def test_kbase_embed_turns_embedding_on(run, vault, db_path, fake_model):
    run("index", "--no-embed", vault)
    assert run("embed", "-q").exit_code == 0
    assert "embedding  on" in run("status").stdout
    (vault / "later.md").write_text("# Later\n\nWritten after kbase embed.\n")
    run("index")
    assert embedded(db_path) == kbase.open(db_path).coverage()[1]


def test_an_index_built_with_no_embed_before_the_setting_stays_keyword_only(
    run, vault, db_path, fake_model
):
    run("index", "--no-embed", vault)
    con = db.connect(db_path)
    with con:
        con.execute("DELETE FROM meta WHERE key = 'auto_embed'")  # as an older kbase left it
    con.close()
    assert "embedding  off" in run("status").stdout
    run("index")
    assert fake_model.embedded == 0


def test_a_new_index_embeds_by_default(tmp_path, vault, fake_model):
    k = kbase.open(tmp_path / "fresh.db")
    k.index([vault])
    assert k.auto_embed() and fake_model.embedded > 0


def test_remember_embed_keeps_the_choice_from_before_the_first_file(
    tmp_path, vault, fake_model, monkeypatch
):
    from kbase.indexer import pipeline

    k = kbase.open(tmp_path / "a.db", embedder=fake_model)
    k.index([vault], embed=False)
    assert k.auto_embed()  # embed=False alone decides for that run only

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C before the first file

    with monkeypatch.context() as m:
        m.setattr(pipeline, "index", interrupted)
        with pytest.raises(KeyboardInterrupt):
            k.index([vault], embed=False, remember_embed=True)
    assert not k.auto_embed()  # recorded before the run was stopped
    fresh = kbase.open(tmp_path / "b.db", embedder=fake_model)
    fresh.index([vault], embed=False, remember_embed=True)
    assert not fresh.auto_embed() and fake_model.embedded == 0
