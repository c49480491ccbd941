"""QA findings of 2026-12-01 (notes/qa.md), each on real files and the real index."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.commands import cli
from kbase.sqlapi import ReadOnlyViolation
from tests.conftest import shared, write

SAMPLES = ("pdfs", "py-pdf-sample-files")


def run(db_path, *args):
    return CliRunner().invoke(cli, ["--db", str(db_path), *args], catch_exceptions=False)


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
    plain = run(db_path, "show", "pdflatex-4-pages.pdf#page=3")
    assert plain.exit_code == 0 and plain.output.strip()
    for link in (
        "[[pdflatex-4-pages.pdf#page=3]]",
        "![[pdflatex-4-pages.pdf#page=3]]",
        "[[pdflatex-4-pages.pdf#page=3|the third page]]",
    ):
        res = run(db_path, "show", link)
        assert res.exit_code == 0, res.output
        assert res.output == plain.output
    res = run(db_path, "show", "[[pdflatex-4-pages.pdf#page=9]]")
    assert res.exit_code == 1 and "has pages 1-4, not 9" in res.output


def test_show_says_a_skipped_file_was_skipped_and_why(pdfs, db_path):
    for name in (
        "libreoffice-writer-password.pdf",
        "libreoffice-writer-password",
        "[[libreoffice-writer-password.pdf]]",
        str(pdfs / "libreoffice-writer-password.pdf"),
    ):
        res = run(db_path, "show", name)
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
    res = run(db_path, "links", "fake.pdf")
    assert res.exit_code == 1 and "kbase index skipped it: not a PDF" in res.output
    res = run(db_path, "show", "nothing-like-it.pdf")  # an unknown name is still unknown
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
    res = run(db_path, "sql", sql)
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: kbase sql is read-only; refused: {sql}\n")
    assert "because it is a view" not in res.output
