"""QA findings of 2026-12-01 (notes/qa.md), each on real files and the real index."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.sqlapi import ReadOnlyViolation
from tests.conftest import kbase_cli, shared, write

SAMPLES = ("pdfs", "py-pdf-sample-files")


@pytest.fixture
def pdfs(tmp_path, db_path):
    """pdflatex-4-pages.pdf, an encrypted PDF and a text file called .pdf, indexed."""
    vault = write(tmp_path / "v", {"fake.pdf": "not a pdf", "Reading.md": "# Reading\n\nx\n"})
    for folder, name in [
        ("004-pdflatex-4-pages", "pdflatex-4-pages.pdf"),
        ("005-libreoffice-writer-password", "libreoffice-writer-password.pdf"),
    ]:
        shutil.copy(shared(*SAMPLES, folder, name), vault / name)
    with kbase.open(db_path) as kb:
        report = kb.index([vault], embed=False)
    assert sorted(p.rsplit("/", 1)[-1] for p, _ in report.skipped) == [
        "fake.pdf",
        "libreoffice-writer-password.pdf",
    ]
    return vault


def test_show_takes_a_pasted_link_to_a_pdf_page(pdfs, db_path):
    plain = kbase_cli(db_path, "show", "pdflatex-4-pages.pdf#page=3")
    assert plain.exit_code == 0 and plain.output.strip()
    for link in (
        "[[pdflatex-4-pages.pdf#page=3]]",
        "![[pdflatex-4-pages.pdf#page=3]]",
        "[[pdflatex-4-pages.pdf#page=3|the third page]]",
    ):
        res = kbase_cli(db_path, "show", link)
        assert res.exit_code == 0, res.output
        assert res.output == plain.output
    res = kbase_cli(db_path, "show", "[[pdflatex-4-pages.pdf#page=9]]")
    assert res.exit_code == 1 and "has pages 1-4, not 9" in res.output


def test_show_says_a_skipped_file_was_skipped_and_why(pdfs, db_path):
    for name in (
        "libreoffice-writer-password.pdf",
        "libreoffice-writer-password",
        "[[libreoffice-writer-password.pdf]]",
        str(pdfs / "libreoffice-writer-password.pdf"),
    ):
        res = kbase_cli(db_path, "show", name)
        assert res.exit_code == 1
        lines = res.output.strip().splitlines()
        assert lines[0] == (
            "Error: libreoffice-writer-password.pdf is not in the index: kbase index skipped it:"
            " encrypted; cannot read (it needs a password)"
        ), res.output
        assert (
            len(lines) == 2 and "hint: kbase index reads it again once the file changes" in lines[1]
        )
        assert "did you mean" not in res.output
    res = kbase_cli(db_path, "links", "fake.pdf")
    assert res.exit_code == 1 and "kbase index skipped it: not a PDF" in res.output
    res = kbase_cli(db_path, "show", "nothing-like-it.pdf")  # an unknown name is still unknown
    assert res.exit_code == 1 and "no indexed document matches" in res.output


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM notes",
        "INSERT INTO notes(path) VALUES ('x')",
        "UPDATE notes SET path = 'x'",
        "DELETE FROM kbase_search",
        "DELETE FROM documents",  # a table: the authorizer's refusal, as before
    ],
)
def test_every_write_on_a_view_gets_the_read_only_message(pdfs, db_path, sql):
    with kbase.open(db_path) as kb:
        with pytest.raises(ReadOnlyViolation, match=r"^kbase sql is read-only; refused: "):
            kb.sql(sql)
        assert kb.sql("SELECT count(*) FROM notes").rows == [(2,)]  # nothing was changed
    res = kbase_cli(db_path, "sql", sql)
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: kbase sql is read-only; refused: {sql}\n")
    assert "because it is a view" not in res.output


def test_mcp_sql_counts_every_row_it_left_out(tmp_path, db_path):
    from kbase.mcp import tools

    vault = write(
        tmp_path / "big",
        {f"n{i:03}.md": f"# Note {i}\n\n" + "word " * 60 + "\n" for i in range(300)},
    )
    with kbase.open(db_path) as kb:
        kb.index([vault], embed=False)
        total = kb.sql("SELECT count(*) FROM chunk_texts").rows[0][0]
        assert total >= 300
        reply = tools.sql(kb, "SELECT * FROM chunk_texts", max_rows=250, budget=2_000)
        shown = len(reply.structured.rows)
        assert 0 < shown < 250  # the budget cut the page of 250 rows asked for
        assert reply.structured.next_offset == shown
        left = f"{total - shown:,} more rows left out to keep within the 2,000-token budget"
        assert reply.structured.left_out.startswith(left), reply.structured.left_out
        assert left in reply.text
        # A query that cannot be counted again (a ';' in it) says "at least".
        reply = tools.sql(kb, "SELECT *, ';' FROM chunk_texts", max_rows=250, budget=2_000)
        assert reply.structured.left_out.startswith(
            f"at least {250 - shown + 1} more rows left out"
        )


def test_the_readme_mcp_table_names_each_tools_arguments_as_they_are(db_path):
    import asyncio
    import re

    from kbase.mcp.backend import Backend
    from kbase.mcp.server import build_server
    from tests.conftest import REPO

    kbase.open(db_path).close()
    tools = asyncio.run(build_server(Backend(db_path)).list_tools())
    readme = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(\w+)` \| ([^|]*(?:\\\|[^|]*)*) \|", readme, re.M)
    }
    assert {t.name for t in tools} <= set(rows)
    for tool in tools:
        props = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        args = rows[tool.name]
        for name in props:
            if name == "budget":  # said once, in the table's heading
                continue
            want = f"**`{name}`**" if name in required else f"`{name}`"
            assert want in args, f"docs/mcp.md's `{tool.name}` row does not name {want}: {args}"


@pytest.fixture
def fake_model(monkeypatch):
    """Every KB the CLI opens embeds with a counting stand-in (no model load)."""
    from tests.test_watch import CountingEmbedder

    embedder = CountingEmbedder()
    monkeypatch.setattr("kbase.embed.catalog.for_index", lambda fingerprint=None: embedder)
    return embedder


def test_skips_are_told_when_keyword_search_is_ready_before_embedding(
    tmp_path, db_path, fake_model
):
    vault = write(
        tmp_path / "v",
        {"fake.pdf": "not a pdf", **{f"n{i}.md": f"# Note {i}\n\nwords {i}\n" for i in range(5)}},
    )
    events: list[str] = []

    def ready(report):
        events.append("ready: " + ", ".join(r for _, r in report.skipped))

    with kbase.open(db_path) as kb:
        report = kb.index(
            [vault],
            embed=True,
            on_keyword_ready=ready,
            embed_progress=lambda d, t: events.append("embed"),
        )
    assert events[0] == "ready: not a PDF (no %PDF- header)" and "embed" in events[1:]
    assert report.embedding is not None and fake_model.embedded >= 5

    (vault / "other.pdf").write_text("not one either", encoding="utf-8")
    (vault / "n9.md").write_text("# Note 9\n\nnew words\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["--db", str(db_path), "index", str(vault)])
    assert res.exit_code == 0, res.output
    err = res.stderr.splitlines()
    skip = next(
        i for i, line in enumerate(err) if line.startswith("skipped ") and "other.pdf" in line
    )
    ready_line = next(i for i, line in enumerate(err) if line.startswith("keyword search is ready"))
    assert skip < ready_line, err  # told before embedding starts, not after it ends
    assert sum("other.pdf" in line for line in err) == 1  # once, not again at the end
    assert "indexed in" in res.stdout
