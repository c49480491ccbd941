"""The link graph through the whole pipeline: storage, resolution as files come and go, queries."""

import json
import shutil

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.indexer import pipeline
from kbase.store import db
from tests.conftest import bump_mtime, shared, write


def graph_rows(con):
    return sorted(
        con.execute(
            "SELECT s.path, l.start_char, l.end_char, l.line, l.kind, l.embed, l.target, l.anchor,"
            " l.alias, coalesce(l.target_path, t.path), t.path, l.anchor_ok"
            " FROM links l JOIN documents s ON s.id = l.doc_id"
            " LEFT JOIN documents t ON t.id = l.target_id"
        ).fetchall(),
        key=repr,
    )


@pytest.fixture
def vault(tmp_path):
    return write(
        tmp_path / "v",
        {
            "Home.md": '---\naliases: [Start]\nrelated: "[[Projects/Plan]]"\n---\n# Home\n\n'
            "See [[Plan#Goals]], [[plan#Nope]], [[Missing note]] and ![[diagram.png|200]].\n"
            "Also [the log](Journal/Log.md) and [[#Home]].\n",
            "Projects/Plan.md": "# Plan\n\n## Goals\n\nShip it. ^goal1\n\n"
            "Back to [[Home]] and [[Start|the start]].\n",
            "Journal/Log.md": "# Log\n\nNothing links out. "
            "See [[Plan#^goal1]] and [[Plan#^nope]].\n",
            "diagram.png": b"\x89PNG\r\n\x1a\n",
            "Lonely.md": "# Lonely\n\nNo links to me.\n",
        },
    )


def test_links_resolve_with_anchors_aliases_and_attachments(tmp_path, vault):
    con = db.connect(tmp_path / "g.db", create=True)
    pipeline.index(con, [vault])
    rows = {(r[0], r[6], r[7]): (r[9], r[11]) for r in graph_rows(con)}
    assert rows[("Home.md", "Plan", "Goals")] == ("Projects/Plan.md", 1)
    assert rows[("Home.md", "plan", "Nope")] == ("Projects/Plan.md", 0)
    assert rows[("Home.md", "Missing note", None)] == (None, None)
    assert rows[("Home.md", "diagram.png", None)] == ("diagram.png", None)
    assert rows[("Home.md", "Journal/Log.md", None)] == ("Journal/Log.md", None)
    assert rows[("Home.md", "", "Home")] == ("Home.md", 1)
    assert rows[("Home.md", "Projects/Plan", None)] == ("Projects/Plan.md", None)  # front matter
    assert rows[("Projects/Plan.md", "Start", None)] == ("Home.md", None)  # an alias
    assert rows[("Journal/Log.md", "Plan", "^goal1")] == ("Projects/Plan.md", 1)
    assert rows[("Journal/Log.md", "Plan", "^nope")] == ("Projects/Plan.md", 0)
    for path, start, end, *_ in graph_rows(con):
        body = con.execute("SELECT body FROM documents WHERE path = ?", (path,)).get
        assert body[start:end].lstrip("!").startswith("[")


def test_links_resolved_all_at_once_are_the_same_and_keep_their_index(tmp_path, vault, monkeypatch):
    from kbase.indexer import writes

    one_by_one = db.connect(tmp_path / "a.db", create=True)
    pipeline.index(one_by_one, [vault])
    monkeypatch.setattr(writes, "MASS_UPDATE", 1)  # the target index rebuilt after the update
    at_once = db.connect(tmp_path / "b.db", create=True)
    pipeline.index(at_once, [vault])
    assert graph_rows(at_once) == graph_rows(one_by_one)
    index = "SELECT sql FROM sqlite_schema WHERE name = 'links_target'"
    assert at_once.execute(index).get == one_by_one.execute(index).get is not None
    plan = "EXPLAIN QUERY PLAN SELECT id FROM links WHERE target_id = 1"
    assert "links_target" in str(at_once.execute(plan).fetchall())


def test_graph_follows_files_coming_and_going(tmp_path, vault):
    con = db.connect(tmp_path / "g.db", create=True)
    pipeline.index(con, [vault])
    missing = lambda: [r[6] for r in graph_rows(con) if r[0] == "Home.md" and r[9] is None]  # noqa: E731
    assert missing() == ["Missing note"]
    write(vault, {"Notes/Missing note.md": "# Here now\n"})
    pipeline.index(con, [vault])
    assert missing() == []  # resolved by itself when the target appeared
    (vault / "Notes" / "Missing note.md").unlink()
    pipeline.index(con, [vault])
    assert missing() == ["Missing note"]
    shutil.move(vault / "Projects" / "Plan.md", vault / "Plan renamed.md")
    pipeline.index(con, [vault])
    assert sorted(missing()) == ["Missing note", "Plan", "Projects/Plan", "plan"]
    shutil.move(vault / "Plan renamed.md", vault / "Archive" / "Plan.md") if (
        vault / "Archive"
    ).mkdir() is None else None
    pipeline.index(con, [vault])
    assert sorted(missing()) == [
        "Missing note",
        "Projects/Plan",
    ]  # a path link stays bound to its path
    (vault / "Projects" / "Plan.md").parent.mkdir(exist_ok=True)
    (vault / "Archive" / "Plan.md").write_text("# Plan\n\nNo goals heading any more.\n")
    bump_mtime(vault / "Archive" / "Plan.md")
    pipeline.index(con, [vault])
    oks = {r[7]: r[11] for r in graph_rows(con) if r[0] == "Home.md" and r[6] == "Plan"}
    assert oks == {"Goals": 0}  # the heading went: the anchor is now broken


def test_incremental_graph_equals_fresh_index(tmp_path, vault):
    con = db.connect(tmp_path / "inc.db", create=True)
    pipeline.index(con, [vault])
    write(
        vault,
        {
            "Added.md": "# Added\n\n[[Lonely]] [[Home#Home]] [[Missing note]]\n",
            "Missing note.md": "x\n",
        },
    )
    (vault / "Journal" / "Log.md").unlink()
    shutil.move(vault / "Lonely.md", vault / "Projects" / "Lonely.md")
    (vault / "Home.md").write_text("# Home\n\n[[Plan]] [[Lonely]] ![[gone.png]]\n")
    bump_mtime(vault / "Home.md")
    (vault / "diagram.png").unlink()
    pipeline.index(con, [vault])
    fresh = db.connect(tmp_path / "fresh.db", create=True)
    pipeline.index(fresh, [vault])
    assert graph_rows(con) == graph_rows(fresh)


def test_views_and_api(tmp_path, vault):
    kb = kbase.open(tmp_path / "g.db")
    kb.index([vault], embed=False)
    con = kb.reader
    assert con.execute("SELECT count(*) FROM unresolved_links").get == 1
    assert con.execute("SELECT count(*) FROM broken_anchors").get == 2
    assert {
        r[0] for r in con.execute("SELECT source_path FROM backlinks WHERE path = 'Home.md'")
    } == {"Projects/Plan.md"}
    stats = dict(con.execute("SELECT path, backlinks FROM document_stats"))
    assert stats["Projects/Plan.md"] == 2 and stats["Lonely.md"] == 0
    back = kb.backlinks("plan")
    assert {(b.source_path, b.line) for b in back} == {
        ("Home.md", 3),
        ("Home.md", 7),
        ("Journal/Log.md", 3),
    }
    assert back[0].context == 'related: "[[Projects/Plan]]"'  # front matter links count
    assert back[1].context.startswith("See [[Plan#Goals]]")
    assert [n.path for n in kb.orphans()] == ["Lonely.md"]
    assert [(n.path, n.distance) for n in kb.neighbors("Lonely")] == []
    assert [(n.path, n.distance) for n in kb.neighbors("Log", depth=2)] == [
        ("Home.md", 1),
        ("Projects/Plan.md", 1),
    ]
    assert kb.note("Start").path == "Home.md"  # by alias, the way a link would
    g = kb.graph()
    assert len(g["nodes"]) == 4 and {(e["source"], e["target"]) for e in g["edges"]}


def test_cli_graph_commands(tmp_path, vault):
    db_path = str(tmp_path / "g.db")
    run = lambda *a: CliRunner().invoke(cli, ["--db", db_path, *a])  # noqa: E731
    assert run("index", "--no-embed", str(vault)).exit_code == 0
    out = run("links", "Home").stdout
    assert "-> Projects/Plan.md#Goals" in out and "Missing note (unresolved)" in out
    assert "(no such heading or block)" in out
    back = json.loads(run("backlinks", "Home", "--json").stdout)
    assert [b["source_path"] for b in back] == ["Projects/Plan.md", "Projects/Plan.md"]
    assert run("unresolved").stdout.startswith("Home.md:7 -> Missing note (unresolved)")
    assert [(o["path"], o["title"]) for o in json.loads(run("orphans", "--json").stdout)] == [
        ("Lonely.md", "Lonely")
    ]
    assert [
        n["path"] for n in json.loads(run("neighbors", "Plan", "--depth", "2", "--json").stdout)
    ] == ["Home.md", "Journal/Log.md"]
    dot = run("graph", "--format", "dot").stdout
    assert dot.startswith("digraph kbase {") and "->" in dot
    r = run("backlinks", "Nobody")
    assert r.exit_code == 1 and r.stderr.startswith("Error: no indexed document matches 'Nobody'")


def test_obsidian_tasks_docs_graph(tmp_path):
    folder = shared("vaults", "obsidian-tasks-docs")
    con = db.connect(tmp_path / "t.db", create=True)
    pipeline.index(con, [folder])
    one = lambda sql: con.execute(sql).get  # noqa: E731
    assert one("SELECT count(*) FROM links WHERE kind = 'wiki' AND NOT embed") == 1108
    assert one("SELECT count(*) FROM links WHERE kind = 'wiki' AND embed") == 28
    assert one("SELECT count(*) FROM unresolved_links WHERE NOT embed AND kind = 'wiki'") == 0
    assert one("SELECT count(*) FROM broken_anchors") == 0
    assert (
        one("SELECT count(*) FROM links WHERE anchor IS NOT NULL AND anchor NOT LIKE '^%'") >= 400
    )


def test_same_file_name_in_two_folders(tmp_path):
    folder = shared("wikilinks", "obsidian-export", "input", "same-filename-different-directories")
    con = db.connect(tmp_path / "s.db", create=True)
    pipeline.index(con, [folder])
    rows = con.execute(
        "SELECT s.path, l.target, t.path FROM links l JOIN documents s ON s.id = l.doc_id"
        " LEFT JOIN documents t ON t.id = l.target_id ORDER BY 1, 2"
    ).fetchall()
    assert rows and all(tp is not None for _, _, tp in rows)
    assert len({tp for _, _, tp in rows}) > 1 or len(rows) == 1


def test_neighbors_say_which_way_each_link_goes(tmp_path, vault):
    write(vault, {"Projects/Sub.md": "# Sub\n\nPart of the [[Plan]].\n"})
    kb = kbase.open(tmp_path / "g.db")
    kb.index([vault], embed=False)
    assert [(n.path, n.distance, n.direction, n.via) for n in kb.neighbors("Home", depth=2)] == [
        ("Journal/Log.md", 1, "out", "Home.md"),  # Home links to the log; the log not back
        ("Projects/Plan.md", 1, "both", "Home.md"),
        ("Projects/Sub.md", 2, "in", "Projects/Plan.md"),  # Sub links to Plan
    ]
    assert [(n.path, n.direction) for n in kb.neighbors("Plan")] == [
        ("Home.md", "both"),
        ("Journal/Log.md", "in"),
        ("Projects/Sub.md", "in"),
    ]
    run = lambda *a: CliRunner().invoke(cli, ["--db", str(kb.path), *a])  # noqa: E731
    assert run("neighbors", "Home", "-d", "2").stdout == (
        "1  out   Journal/Log.md  (Log)\n"
        "1  both  Projects/Plan.md  (Plan)\n"
        "2  in    Projects/Sub.md  (Sub)  via Projects/Plan.md\n"
    )
    rows = json.loads(run("neighbors", "Log", "--json").stdout)
    assert [(r["path"], r["direction"], r["via"]) for r in rows] == [
        ("Home.md", "in", "Journal/Log.md"),
        ("Projects/Plan.md", "out", "Journal/Log.md"),
    ]
    kb.close()


def test_graph_of_a_neighbourhood_with_path_filters(tmp_path, vault):
    write(vault, {"Projects/Sub.md": "# Sub\n\nPart of the [[Plan]].\n"})
    db_path = str(tmp_path / "g.db")
    run = lambda *a: CliRunner().invoke(cli, ["--db", db_path, *a])  # noqa: E731
    assert run("index", "--no-embed", str(vault)).exit_code == 0

    def graph(*args):
        r = run("graph", *args)
        assert r.exit_code == 0, r.output
        g = json.loads(r.stdout)
        path = {n["id"]: n["path"] for n in g["nodes"]}
        return (
            {n["path"]: n.get("distance") for n in g["nodes"]},
            sorted((path[e["source"]], path[e["target"]]) for e in g["edges"]),
        )

    nodes, edges = graph("Home")
    assert nodes == {"Home.md": 0, "Journal/Log.md": 1, "Projects/Plan.md": 1}
    assert edges == [
        ("Home.md", "Journal/Log.md"),
        ("Home.md", "Projects/Plan.md"),
        ("Journal/Log.md", "Projects/Plan.md"),
        ("Projects/Plan.md", "Home.md"),
    ]
    assert graph("Home", "--depth", "2")[0]["Projects/Sub.md"] == 2
    # Links through a note left out are not followed: Sub is only reachable through Plan.
    assert graph("Home", "-d", "2", "--exclude", "Projects/Plan.md")[0] == {
        "Home.md": 0,
        "Journal/Log.md": 1,
    }
    assert graph("Home", "--path", "Projects")[0] == {
        "Home.md": 0,
        "Projects/Plan.md": 1,
    }  # the start stays
    assert graph("--path", "Projects") == (
        {"Projects/Plan.md": None, "Projects/Sub.md": None},
        [("Projects/Sub.md", "Projects/Plan.md")],
    )
    assert set(graph("--exclude", "Journal", "--exclude", "Projects/S*")[0]) == {
        "Home.md",
        "Lonely.md",
        "Projects/Plan.md",
    }
    assert len(graph()[0]) == 5
    dot = run("graph", "Home", "--format", "dot").stdout
    assert dot.count("penwidth=2") == 1 and dot.count(" -> ") == 4
    r = run("graph", "--depth", "2")
    assert r.exit_code == 1 and r.stderr.startswith("Error: --depth needs a NOTE to count from")


def test_unresolved_anchors_accepts_a_block_id_written_right_after_an_embed(tmp_path):
    # As in Obsidian's help vault: '![[image.png]]^id' names the block;
    # an embed of it is not broken.
    vault = write(
        tmp_path / "v",
        {
            "Collaborate.md": "# Collaborate\n\n"
            "![[version-history-collaboration.png]]^version-history-image\n",
            "Version history.md": "# Version history\n\n![[Collaborate#^version-history-image]]\n"
            "![[Collaborate#^no-such-block]]\n",
            "version-history-collaboration.png": b"\x89PNG\r\n",
        },
    )
    dbp = tmp_path / "i.db"
    kbase.open(dbp).index([vault], embed=False)
    r = CliRunner().invoke(cli, ["--db", str(dbp), "unresolved", "--anchors"])
    assert r.exit_code == 0
    assert "^no-such-block" in r.stdout and "version-history-image" not in r.stdout


def test_no_orphans_says_so(run, tmp_path):
    v = tmp_path / "linked"
    v.mkdir()
    (v / "a.md").write_text("# A\n\nSee [[b]].\n")
    (v / "b.md").write_text("# B\n\nSee [[a]].\n")
    run("index", "--no-embed", v)
    r = run("orphans")
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "No orphans.\n"
    r = run("orphans", "--path", "nosuch/", "--tag", "x")  # a filter that keeps no note: why
    assert r.stderr == (
        "No orphans: no note's path matches 'nosuch/'; no note has the tag 'x' (or one under it).\n"
    )
    r = run("unresolved", "--tag", "x")
    assert r.stderr == "No unresolved links: no note has the tag 'x' (or one under it).\n"
    assert run("orphans", "--json").stdout.strip() == "[]"
    (v / "c.md").write_text("# C\n\nAlone.\n")
    run("index")
    r = run("neighbors", "c")
    assert r.stdout == "" and r.stderr == "No neighbors.\n"


def test_cli_links_to_a_missing_note_with_a_heading_read_note_heading_then_unresolved(tmp_path):
    notes = write(tmp_path / "v", {"A.md": "See [[Gone#Setup]] and [[Gone]].\n"})
    db_path = str(tmp_path / "g.db")
    run = lambda *a: CliRunner().invoke(cli, ["--db", db_path, *a])  # noqa: E731
    assert run("index", "--no-embed", str(notes)).exit_code == 0
    heads = [line for line in run("links", "A").stdout.splitlines() if "->" in line]
    assert heads == ["   1 -> Gone#Setup (unresolved)", "   1 -> Gone (unresolved)"]
    heads = [line for line in run("unresolved").stdout.splitlines() if "->" in line]
    assert heads == ["A.md:1 -> Gone#Setup (unresolved)", "A.md:1 -> Gone (unresolved)"]
