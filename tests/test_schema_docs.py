"""docs/SCHEMA.md's examples run against a real index, so they cannot drift; the schema has a
comment on every column; the keyword parts work in stock SQLite (Python's sqlite3 module)."""

import re
import sqlite3

import pytest

import kbase
from kbase.store.db import schema_sql
from tests.conftest import REPO

DOC = (REPO / "docs" / "SCHEMA.md").read_text(encoding="utf-8")
EXAMPLES = re.findall(r"```sql\n(.+?)```", DOC, re.S)
NEEDS_KBASE = ("kbase_embed", "kbase_search")  # functions only kbase provides


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    k = kbase.open(tmp_path_factory.mktemp("schema") / "index.db")
    report = k.index([REPO / "examples" / "notes"])
    assert report.embedding.embedded > 0
    yield k
    k.close()


def test_there_are_examples_for_every_promised_topic():
    joined = "\n".join(EXAMPLES)
    for needle in (
        "note_tags",
        "modified DESC",
        "chunk_texts",
        "backlinks",
        "unresolved_links",
        "bm25(",
        "snippet(",
        "chunks_vec",
        "kbase_search(",
        "1.0 / (60 + rank_no)",
        "chunks_cjk MATCH",
        "chunk_pages",
        "pdf_pages",
        "canvas_cards",
    ):
        assert needle in joined, needle


@pytest.mark.parametrize("sql", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_example_runs(kb, sql):
    result = kb.sql(sql)
    assert result.columns
    if not any(
        empty_here in sql
        for empty_here in (
            "broken_anchors",
            "diagnostics",
            "unresolved_links",
            "frontmatter_warnings",
            "unreadable",
        )
    ):
        assert result.rows, f"example returned nothing:\n{sql}"


def test_examples_answer_what_they_say(kb):
    by_tag = kb.sql(EXAMPLES[0]).rows
    assert ("Backups.md", "Backups") in by_tag and (
        "SQLite WAL mode.md",
        "SQLite WAL mode",
    ) in by_tag
    chunks = kb.sql(next(e for e in EXAMPLES if "FROM chunk_texts WHERE path" in e)).rows
    assert chunks[0][0] == 0 and chunks[0][-1].startswith("# SQLite WAL mode")
    backlinks = kb.sql(next(e for e in EXAMPLES if "FROM backlinks" in e)).rows
    assert {r[0] for r in backlinks} >= {"Welcome.md", "journal/2026-03-14.md"}
    nearest = kb.sql(next(e for e in EXAMPLES if "kbase_embed('how do readers" in e)).rows
    assert nearest[0][0] == "SQLite WAL mode.md"
    fused = kb.sql(next(e for e in EXAMPLES if "60 + rank_no" in e)).rows
    assert fused[0][0] == "SQLite WAL mode.md"
    cjk = kb.sql(next(e for e in EXAMPLES if "FROM chunks_cjk" in e)).rows
    assert [(r[0], r[1]) for r in cjk] == [("同步设置.md", 1)] and "同步设置" in cjk[0][3]
    found = kb.sql(next(e for e in EXAMPLES if "instr(text, '同步')" in e)).rows
    assert {r[0] for r in found} == {"同步设置.md"}


def test_keyword_examples_work_in_stock_sqlite(kb):
    con = sqlite3.connect(f"file:{kb.path}?mode=ro", uri=True)
    for sql in EXAMPLES:
        if any(f in sql for f in NEEDS_KBASE):
            continue
        con.execute(sql).fetchall()
    keyword = next(e for e in EXAMPLES if "snippet(" in e)
    rows = con.execute(keyword).fetchall()
    assert rows and "[checkpoint" in rows[0][3].lower()


def test_every_column_is_commented():
    schema = (REPO / "schema.sql").read_text(encoding="utf-8")
    missing = []
    for table in re.findall(r"CREATE TABLE (\w+) \((.+?)\n\)", schema, re.S):
        for line in table[1].splitlines():
            if re.match(r"\s+[a-z_]+\s+(INTEGER|TEXT|REAL|BLOB)", line) and "--" not in line:
                missing.append(f"{table[0]}: {line.strip()}")
    assert missing == []
    for view in re.findall(r"CREATE VIEW (\w+)", schema):
        before = schema.split(f"CREATE VIEW {view}")[0].rstrip().splitlines()[-1]
        assert before.startswith("--"), f"view {view} has no comment"


def test_schema_md_lists_every_column_as_the_schema_has_it():
    """The column lists in docs/SCHEMA.md are generated from schema.sql (python -m
    kbase.store.schema_doc --write): every table's columns with their comments, every view's."""
    from kbase.store import schema_doc

    assert schema_doc.section(DOC) == schema_doc.generate(), (
        "docs/SCHEMA.md's column lists are out of date: python -m kbase.store.schema_doc --write"
    )
    for table in re.findall(r"^CREATE (?:VIRTUAL )?TABLE (\w+)", schema_sql(), re.M):
        assert f"`{table}`\n\n| column |" in DOC, table
    assert "| `doc_id` | INTEGER, not null | the note the link is in (documents.id) |" in DOC
