"""PDFs in the vault (issue 25): text by page, hits with their page in every face, bad PDFs
skipped with one line each and nothing lost, incremental runs, links to PDFs and their pages."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil

import pytest
from click.testing import CliRunner

import kbase
from kbase.cli.app import cli
from kbase.errors import InputError
from kbase.indexer import pipeline, prepare
from kbase.ingest import chunk as chunking
from kbase.ingest import pdf
from kbase.store import db
from tests.conftest import bump_mtime, kbase_cli, shared, write
from tests.pdfgen import make_pdf

# Three pages of a paper: each page's words are its own, so a phrase names its page.
PAPER = [
    "Attention to detail\nThe zebrafish larva swims within days of hatching.",
    "Methods\nWe imaged the hindbrain with a light sheet microscope at cellular resolution.",
    "Results\nSpontaneous bursts preceded every tail flick by forty milliseconds.",
]
INFO = {
    "Title": "Microsoft Word - draft3.doc",
    "Author": "Ada Quimby",
    "Subject": "Larval locomotion",
    "CreationDate": "D:20220403180542+02'00'",
}


def paper(pages=PAPER, **kw) -> bytes:
    return make_pdf(pages, info=kw.pop("info", INFO), **kw)


@pytest.fixture
def pdf_vault(tmp_path):
    return write(
        tmp_path / "vault",
        {
            "papers/zebrafish.pdf": paper(),
            "reading.md": "# Reading\n\nSee [[zebrafish.pdf]], ![[zebrafish.pdf#page=3]] and"
            " [the paper](papers/zebrafish.pdf). Also [[zebrafish.pdf#page=9]].\n",
            "other.md": "# Other\n\nNothing about fish here.\n",
        },
    )


@pytest.fixture
def pkb(db_path, pdf_vault):
    k = kbase.open(db_path)
    report = k.index([pdf_vault], embed=False)
    assert report.skipped == [] and report.new == 3
    yield k
    k.close()


# --- extraction -----------------------------------------------------------------------------


def test_pages_are_joined_by_form_feeds_and_each_page_is_exactly_its_offsets():
    text = pdf.extract(paper(PAPER + [None]))
    assert text.text.count("\f") == 3
    assert [text.text[a:b] for a, b in text.pages] == [p + "\n" for p in PAPER] + [""]
    assert text.text.split("\f") == [text.text[a:b] for a, b in text.pages]
    assert text.info["title"] == "Microsoft Word - draft3.doc"
    assert text.info["author"] == "Ada Quimby"
    assert text.info["created"] == "2022-04-03T18:05:42"
    assert text.empty_pages == 1 and not text.encrypted


def test_page_text_is_cleaned_of_what_would_break_offsets_or_markers():
    # PDFium: CRLF lines, U+FFFE where a hyphen broke a word, control characters (math fonts)
    raw = "taki\ufffemata sanctus\r\nest\x02 Lorem\x0cipsum\x03\r\n\r\n"
    assert pdf.clean_page(raw) == "takimata sanctus\nest  Lorem ipsum\n"
    assert pdf.clean_page("  \r\n ") == ""


def test_progress_is_reported_page_by_page():
    seen = []
    pdf.extract(paper(), lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (make_pdf(["locked"], user_password="sesame"), "encrypted; cannot read"),
        (paper()[:-200], "truncated"),
        (paper()[:300] + b"\x00" * 4000 + b"\n%%EOF\n", "damaged or not a PDF"),
        (b"just some text\n%%EOF\n", "not a PDF"),
        (b"", "not a PDF"),
    ],
    ids=["password", "truncated", "corrupt", "not-a-pdf", "empty"],
)
def test_unreadable_pdfs_raise_one_line_reasons(data, reason):
    with pytest.raises(pdf.PdfError) as e:
        pdf.extract(data)
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_an_encrypted_pdf_with_the_empty_user_password_is_read():
    text = pdf.extract(make_pdf(["Open sesame text"], user_password=""))
    assert text.encrypted and text.text == "Open sesame text\n"


def test_the_shared_sample_pdfs_extract_or_fail_with_a_reason():
    """py-pdf's sample files (many producers): every one is read, or refused with a reason; the
    password-protected one is refused as encrypted."""
    folder = shared("pdfs", "py-pdf-sample-files")
    files = json.loads((folder / "files.json").read_text())["data"]
    read = refused = 0
    for entry in files:
        path = folder / entry["path"]
        if not path.exists():
            continue
        try:
            text = pdf.extract(path.read_bytes())
        except pdf.PdfError as e:
            refused += 1
            if entry.get("encrypted"):
                assert "encrypted" in str(e)
            continue
        read += 1
        assert len(text.pages) == entry["pages"]
        assert text.text.count("\f") == len(text.pages) - 1
    assert read >= 25 and refused <= 3


# --- chunks and pages ---------------------------------------------------------------------


def test_each_short_page_is_a_chunk_of_its_own_and_hits_name_it(db_path, tmp_path):
    write(tmp_path / "v", {"slides.pdf": make_pdf(["Intro slide", "Agenda slide", "Kumquat"])})
    k = kbase.open(db_path)
    k.index([tmp_path / "v"], embed=False)
    (hit,) = k.search("kumquat", mode="keyword")
    assert hit.page == 3
    (hit,) = k.search("agenda", mode="keyword")
    assert hit.page == 2


def test_the_stored_pages_are_recorded_and_the_views_show_them(pkb):
    rows = pkb.sql("SELECT page, text FROM pdf_pages WHERE path = 'papers/zebrafish.pdf'").rows
    assert rows == [(i, p + "\n") for i, p in enumerate(PAPER, 1)]
    (body,) = pkb.sql("SELECT body FROM documents WHERE kind = 'pdf'").rows[0]
    assert body == "\f".join(p + "\n" for p in PAPER)
    spans = pkb.sql(
        "SELECT c.start_char, c.end_char, p.page, p.end_page FROM chunk_pages AS p"
        " JOIN chunks AS c ON c.id = p.chunk_id"
    ).rows
    assert spans and all(1 <= page <= end <= 3 for _, _, page, end in spans)
    info = pkb.sql("SELECT pages, text_pages, title, author, created FROM pdf_info").rows
    assert info == [(3, 3, "Microsoft Word - draft3.doc", "Ada Quimby", "2022-04-03T18:05:42")]


# --- hits carry their page in every face ------------------------------------------------


def test_hits_from_a_pdf_carry_the_page_of_the_first_match(pkb):
    (hit,) = pkb.search("light sheet microscope hindbrain", mode="keyword")
    assert (hit.path, hit.page, hit.card) == ("papers/zebrafish.pdf", 2, None)
    (hit,) = pkb.search("tail flick milliseconds", mode="keyword")
    assert hit.page == 3 and "tail flick" in hit.snippet
    note = pkb.search("fish", mode="keyword")
    assert all(h.page is None for h in note if h.path.endswith(".md"))


def test_the_cli_shows_the_page_and_json_and_csv_give_it(pkb, db_path):
    out = kbase_cli(db_path, "search", "hindbrain", "--mode", "keyword").output
    assert "papers/zebrafish.pdf p.2" in out
    (rec,) = json.loads(kbase_cli(db_path, "search", "hindbrain", "--json").output)
    assert rec["page"] == 2 and rec["card"] is None and rec["path"] == "papers/zebrafish.pdf"
    rows = list(
        csv.DictReader(io.StringIO(kbase_cli(db_path, "search", "hindbrain", "--csv").output))
    )
    assert rows[0]["page"] == "2"
    out = kbase_cli(db_path, "search", "nothing about fish", "--json").output
    assert all(r["page"] is None for r in json.loads(out) if r["path"] == "other.md")


def test_sql_search_gives_the_page(pkb):
    rows = pkb.sql("SELECT path, page FROM kbase_search('hindbrain', 'keyword', 3)").rows
    assert rows == [("papers/zebrafish.pdf", 2)]


# --- titles and metadata ------------------------------------------------------------------


def test_a_pdf_is_titled_by_its_file_name_and_its_metadata_is_searchable(pkb):
    doc = pkb.document("zebrafish.pdf")
    assert doc.title == "zebrafish" and doc.kind == "pdf"
    # the metadata title, author and subject find it though no page holds those words
    for words in ("Quimby", "draft3", "larval locomotion"):
        hits = pkb.search(words, mode="keyword")
        assert [h.path for h in hits] == ["papers/zebrafish.pdf"], words
    (row,) = pkb.sql("SELECT date FROM notes WHERE path = 'papers/zebrafish.pdf'").rows
    assert row == ("2022-04-03T18:05:42",)


def test_the_file_name_finds_the_pdf_first(pkb):
    hits = pkb.search("zebrafish", mode="keyword")
    assert hits[0].path == "papers/zebrafish.pdf" and hits[0].explain["tier"] == "name"


# --- reading a page -------------------------------------------------------------------------


def test_show_prints_a_page_and_path_line_works(pkb, db_path):
    out = kbase_cli(db_path, "show", "zebrafish.pdf#page=2").output
    assert out == PAPER[1] + "\n"
    res = kbase_cli(db_path, "show", "papers/zebrafish.pdf#page=3", "--json")
    rec = json.loads(res.output)
    assert (rec["page"], rec["pages"], rec["text"]) == (3, 3, PAPER[2] + "\n")
    first = rec["first_line"]
    out = kbase_cli(db_path, "show", f"zebrafish.pdf:{first}", "-C", "0").output
    assert out == f"> {first} | Results\n"  # the form feed before the page is not shown
    res = kbase_cli(db_path, "show", "zebrafish.pdf#page=4")
    assert res.exit_code != 0 and "has pages 1-3, not 4" in res.output
    res = kbase_cli(db_path, "show", "other.md#page=1")
    assert res.exit_code != 0 and "not a PDF" in res.output


def test_the_api_reads_a_page(pkb):
    r = pkb.read("zebrafish.pdf", page=2)
    assert r.lines == tuple(PAPER[1].split("\n")) and (r.page, r.pages) == (2, 3)
    with pytest.raises(InputError, match="not both"):
        pkb.read("zebrafish.pdf", 1, 2, page=2)
    with pytest.raises(InputError, match="not 7"):
        pkb.read("zebrafish.pdf", page=7)


# --- links ----------------------------------------------------------------------------------


def test_links_to_a_pdf_resolve_to_it_with_the_page_as_anchor(pkb):
    links = pkb.links("reading.md")
    assert [(lk.target_path, lk.anchor, lk.anchor_ok) for lk in links] == [
        ("papers/zebrafish.pdf", None, None),
        ("papers/zebrafish.pdf", "page=3", True),
        ("papers/zebrafish.pdf", None, None),
        ("papers/zebrafish.pdf", "page=9", False),  # it has 3 pages
    ]
    pdf_id = pkb.document("zebrafish.pdf").id
    assert all(lk.target_id == pdf_id for lk in links)
    assert {lk.source_path for lk in pkb.backlinks("zebrafish.pdf")} == {"reading.md"}
    assert [n.path for n in pkb.neighbors("reading.md")] == ["papers/zebrafish.pdf"]
    graph = pkb.graph()
    assert "papers/zebrafish.pdf" in {n["path"] for n in graph["nodes"]}
    assert [lk.target for lk in pkb.broken_anchors()] == ["zebrafish.pdf"]


# --- bad PDFs: one line each, nothing lost ----------------------------------------------


def test_bad_pdfs_are_skipped_with_one_line_each_and_the_run_goes_on(db_path, tmp_path):
    vault = write(
        tmp_path / "v",
        {
            "good.pdf": paper(),
            "locked.pdf": make_pdf(["secret"], user_password="sesame"),
            "open-locked.pdf": make_pdf(["readable despite encryption"], user_password=""),
            "cut.pdf": paper()[:-300],
            "broken.pdf": b"%PDF-1.4\n" + os.urandom(2000) + b"\n%%EOF\n",
            "fake.pdf": b"this is a text file named .pdf\n",
            "scan.pdf": make_pdf([None, None], info={"Title": "Quarterly statement scan"}),
            "note.md": "# Note\n\nhello\n",
        },
    )
    res = kbase_cli(db_path, "index", str(vault), "--no-embed")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    by_file = {ln.split()[1].rsplit("/", 1)[-1].rstrip(":"): ln for ln in lines}
    assert set(by_file) == {"locked.pdf", "cut.pdf", "broken.pdf", "fake.pdf", "scan.pdf"}
    assert "encrypted; cannot read" in by_file["locked.pdf"]
    assert "truncated" in by_file["cut.pdf"]
    assert "damaged or not a PDF" in by_file["broken.pdf"]
    assert "not a PDF" in by_file["fake.pdf"]
    assert (
        by_file["scan.pdf"].startswith("warning")
        and "no text layer on 2 pages" in (by_file["scan.pdf"])
    )
    assert "4 new" in res.stdout
    k = kbase.open(db_path)
    assert [h.path for h in k.search("quarterly statement", mode="keyword")] == ["scan.pdf"]
    assert [h.path for h in k.search("readable despite", mode="keyword")] == ["open-locked.pdf"]
    assert k.sql(
        "SELECT encrypted FROM pdf_info JOIN notes ON notes.id = doc_id"
        " WHERE path = 'open-locked.pdf'"
    ).rows == [(1,)]


def test_what_was_indexed_of_a_pdf_stays_when_it_turns_unreadable(db_path, tmp_path):
    vault = write(tmp_path / "v", {"a.pdf": paper()})
    k = kbase.open(db_path)
    k.index([vault], embed=False)
    for broken in (paper()[:-300], b"%PDF-1.4\n" + b"\x00" * 500 + b"%%EOF\n"):
        (vault / "a.pdf").write_bytes(broken)
        bump_mtime(vault / "a.pdf")
        report = k.index([vault], embed=False)
        assert [r for _, r in report.skipped] and report.removed == 0
        assert [h.page for h in k.search("hindbrain", mode="keyword")] == [2]
    # once whole again it is read again
    (vault / "a.pdf").write_bytes(paper(PAPER[:1] + ["New second page about kelp"]))
    bump_mtime(vault / "a.pdf", 20)
    report = k.index([vault], embed=False)
    assert report.updated == 1 and report.skipped == []
    assert [h.page for h in k.search("kelp", mode="keyword")] == [2]
    assert k.search("hindbrain", mode="keyword") == []


def _hang(data, progress=None):
    import time

    time.sleep(60)


def _crash(data, progress=None):
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


@pytest.mark.parametrize(
    ("bad", "reason"), [(_hang, "took longer than"), (_crash, "crashed")], ids=["hang", "crash"]
)
def test_a_pdf_that_hangs_or_crashes_the_reader_costs_only_itself(
    db_path, tmp_path, monkeypatch, bad, reason
):
    """Workers are forked, so a patched extractor is what they run: one PDF hangs (or kills its
    process); it is skipped within its time limit, and the other PDFs and notes are indexed."""
    real = pdf.extract

    def extract(data, progress=None):
        if b"Hostile" in data:
            return bad(data, progress)
        return real(data, progress)

    monkeypatch.setattr(pdf, "extract", extract)
    monkeypatch.setattr(prepare, "PDF_SECONDS", 1.0)
    files = {f"ok{i}.pdf": paper([f"Fine page number {i}"]) for i in range(4)}
    files["hostile.pdf"] = make_pdf(["x"], info={"Title": "Hostile"})
    files["note.md"] = "# Note\n\nstill indexed\n"
    vault = write(tmp_path / "v", files)
    k = kbase.open(db_path)
    report = k.index([vault], embed=False)
    assert report.new == 5
    assert [(os.path.basename(p), reason in r) for p, r in report.skipped] == [
        ("hostile.pdf", True)
    ]
    assert len(k.search("fine page number", mode="keyword")) == 4


def test_an_enormous_pdf_is_read_page_by_page_with_progress(db_path, tmp_path):
    pages = [
        f"Section {i}\nThe ledger entry for item {i} reads quince{i} marmalade."
        for i in range(2000)
    ]
    vault = write(tmp_path / "v", {"ledger.pdf": make_pdf(pages)})
    seen = []
    k = kbase.open(db_path)
    k.index([vault], embed=False, progress=lambda d, t, cur: seen.append(cur))
    (hit,) = k.search("quince1234 marmalade", mode="keyword")
    assert hit.page == 1235
    assert any(s.startswith("ledger.pdf (page ") and s.endswith(" of 2,000)") for s in seen)
    assert k.sql("SELECT pages FROM pdf_info").rows == [(2000,)]


# --- incremental like notes ------------------------------------------------------------


def test_pdfs_are_incremental_unchanged_touched_renamed_updated(db_path, tmp_path, monkeypatch):
    vault = write(tmp_path / "v", {"a.pdf": paper(), "b.pdf": make_pdf(["Other text entirely"])})
    k = kbase.open(db_path)
    assert k.index([vault], embed=False).new == 2
    calls = []
    real = pipeline.prepare_pdf
    monkeypatch.setattr(
        pipeline, "prepare_pdf", lambda *a, **kw: calls.append(a[0]) or real(*a, **kw)
    )
    r = k.index([vault], embed=False)
    assert (r.unchanged, calls) == (2, [])
    bump_mtime(vault / "a.pdf")  # same bytes, new mtime: hashed, not read
    r = k.index([vault], embed=False)
    assert (r.unchanged, r.updated, calls) == (2, 0, [])
    (vault / "papers").mkdir()
    shutil.move(vault / "a.pdf", vault / "papers" / "renamed.pdf")
    r = k.index([vault], embed=False)
    assert (r.renamed, calls) == (1, [])
    (hit,) = k.search("hindbrain", mode="keyword")
    assert (hit.path, hit.page, hit.title) == ("papers/renamed.pdf", 2, "renamed")
    (vault / "b.pdf").write_bytes(make_pdf(["Changed text", "Second page of b"]))
    bump_mtime(vault / "b.pdf", 30)
    r = k.index([vault], embed=False)
    assert r.updated == 1
    assert [h.page for h in k.search("second page of b", mode="keyword")] == [2]


def test_rechunking_keeps_the_pages(db_path, pdf_vault):
    k = kbase.open(db_path)
    k.index([pdf_vault], embed=False)
    k.index([pdf_vault], embed=False, settings=k.chunk_settings(max_tokens=60))
    (hit,) = k.search("tail flick", mode="keyword")
    assert hit.page == 3
    con = db.connect(db_path)
    assert con.execute("SELECT count(*) FROM pages").fetchone()[0] == 3
    assert con.execute("SELECT names FROM pdf_info").fetchone()[0].startswith("Microsoft Word")


def test_a_pdf_larger_than_the_note_cap_is_indexed(db_path, tmp_path):
    """Notes are capped at 10 MB by default, PDFs (images, fonts) at 512 MB; --max-size caps
    both."""
    big = make_pdf(["Needle in a large file"], padding=11 * 1024 * 1024)
    vault = write(tmp_path / "v", {"big.pdf": big, "big.md": "y\n" * (11 * 512 * 1024)})
    k = kbase.open(db_path)
    report = k.index([vault], embed=False)
    assert report.new == 1 and [os.path.basename(p) for p, _ in report.skipped] == ["big.md"]
    assert [h.path for h in k.search("needle", mode="keyword")] == ["big.pdf"]
    report = kbase.open(tmp_path / "capped.db").index([vault], embed=False, max_size=1024 * 1024)
    assert sorted(os.path.basename(p) for p, _ in report.skipped) == ["big.md", "big.pdf"]


def test_kbase_chunks_reads_a_pdf(tmp_path):
    path = tmp_path / "p.pdf"
    path.write_bytes(paper())
    res = CliRunner().invoke(cli, ["chunks", str(path), "--json"])
    assert res.exit_code == 0, res.output
    texts = [c["text"] for c in json.loads(res.output)["chunks"]]
    assert any("hindbrain" in t for t in texts)


# --- MCP: search gives the page, read takes it ------------------------------------------


@pytest.mark.slow  # a server process and the SDK client: 5-11 s
def test_mcp_search_gives_the_page_and_read_takes_it(db_path, pkb):
    import asyncio

    from tests.test_mcp import stdio_session, text

    async def go():
        async with stdio_session(db_path) as c:
            r = await c.call_tool("search", {"query": "hindbrain microscope", "mode": "keyword"})
            (hit,) = r.structured_content["hits"]
            assert (hit["path"], hit["page"]) == ("papers/zebrafish.pdf", 2)
            assert "page 2" in text(r)
            r = await c.call_tool("read", {"note": hit["path"], "page": hit["page"]})
            s = r.structured_content
            assert not r.is_error and (s["page"], s["pages"]) == (2, 3)
            assert s["text"] == PAPER[1]
            assert "page 2 of 3" in text(r)
            r = await c.call_tool("read", {"note": "zebrafish.pdf", "page": 5})
            assert r.is_error and "has pages 1-3, not 5" in text(r)
            r = await c.call_tool("related", {"note": "reading.md", "include_linked": True})
            notes = r.structured_content["notes"]
            # rows: [path, line, title, snippet], then {page, linked, links_here} when any
            pdfs = [n for n in notes if n[0] == "papers/zebrafish.pdf"]
            assert pdfs and isinstance(pdfs[0][4]["page"], int), notes
            assert all(len(n) == 4 or "page" not in n[4] for n in notes if n[0].endswith(".md"))

    asyncio.run(go())


# --- TUI: the hit shows its page; the preview shows that page ---------------------------


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_tui_lists_the_page_and_previews_the_page_around_the_hit(db_path, pkb):
    from tests.test_tui import main, make_app, settle, type_query

    app = make_app(db_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await type_query(pilot, "tail flick milliseconds")
        await settle(pilot)
        screen = main(app)
        (hit,) = screen.results.hits
        assert hit.page == 3
        assert "papers/zebrafish.pdf p.3" in screen.results.get_option_at_index(0).prompt.plain
        preview = screen.preview
        assert preview.location.page == 3
        assert preview.border_subtitle == "papers/zebrafish.pdf p.3 of 3"
        view = app.query_one("#preview-text")
        assert view.display and view.text == PAPER[2] + "\n"  # that page, not the whole PDF
        first = pkb.region("zebrafish.pdf#page=3").first
        assert view.line_number_start == first  # numbered as the whole text is
        assert view.selection.start[0] <= hit.line - first <= view.selection.end[0]


@pytest.mark.asyncio
async def test_the_tui_names_a_related_pdf_by_its_page(db_path, tmp_path):
    """A related PDF under the links says 'p.2', as its hit does, not the line of its text."""
    from tests.test_tui import main, make_app, type_query

    fish = "Zebrafish larvae swim with tail flicks timed by hindbrain bursts."
    write(
        tmp_path / "v",
        {"a.pdf": make_pdf(["Cover", fish]), "b.pdf": make_pdf(["Other", "Notes", fish])},
    )
    kbase.open(db_path).index([tmp_path / "v"], embed=False)
    app = make_app(db_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await type_query(pilot, "file:a.pdf zebrafish")
        links = main(app).links
        rows = [links.get_option_at_index(i).prompt.plain for i in range(links.option_count)]
        assert any(r.startswith("b  b.pdf p.3\n") for r in rows), rows


def test_an_unreadable_file_is_not_read_again_until_it_changes(db_path, tmp_path, monkeypatch):
    """A hostile PDF costs its time limit once: later runs skip it at once with the same line,
    until the file changes."""
    vault = write(tmp_path / "v", {"hostile.pdf": make_pdf(["x"], info={"Title": "Hostile"})})
    write(vault, {"locked.pdf": make_pdf(["secret"], user_password="sesame")})
    monkeypatch.setattr(pdf, "extract", _slow_on_hostile(pdf.extract))
    monkeypatch.setattr(prepare, "PDF_SECONDS", 1.0)
    k = kbase.open(db_path)
    first = k.index([vault], embed=False)
    assert sorted(os.path.basename(p) for p, _ in first.skipped) == ["hostile.pdf", "locked.pdf"]
    calls = []
    real = pipeline.prepare_pdf
    monkeypatch.setattr(
        pipeline, "prepare_pdf", lambda *a, **kw: calls.append(a[0]) or real(*a, **kw)
    )
    again = k.index([vault], embed=False)
    assert again.skipped == first.skipped and calls == [] and again.seconds < 1.0
    (vault / "locked.pdf").write_bytes(make_pdf(["now open"]))
    bump_mtime(vault / "locked.pdf")
    third = k.index([vault], embed=False)
    assert third.new == 1 and [os.path.basename(p) for p, _ in third.skipped] == ["hostile.pdf"]
    assert k.sql("SELECT path FROM unreadable").rows == [("hostile.pdf",)]
    (vault / "hostile.pdf").unlink()
    k.index([vault], embed=False)
    assert k.sql("SELECT path FROM unreadable").rows == []


def _slow_on_hostile(real):
    def extract(data, progress=None):
        if b"Hostile" in data:
            _hang(data, progress)
        return real(data, progress)

    return extract


def test_a_pdf_without_text_on_some_pages_is_a_diagnostic_not_a_front_matter_warning(
    db_path, tmp_path
):
    vault = write(tmp_path / "v", {"mixed.pdf": make_pdf(["Typed page", None, None])})
    k = kbase.open(db_path)
    k.index([vault], embed=False)
    rows = k.sql("SELECT kind, detail FROM diagnostics").rows
    assert rows == [
        (
            "no_text",
            "no text layer on 2 pages (of 3; scanned? kbase does no OCR); its metadata is indexed",
        )
    ]
    assert k.sql("SELECT count(*) FROM frontmatter_warnings").rows == [(0,)]
    status = k.status()
    assert (status.pdfs, status.pdf_pages, status.pdf_text_pages) == (1, 3, 1)
    k.index([vault], embed=False, settings=k.chunk_settings(max_tokens=100))  # re-chunked
    assert k.sql("SELECT kind FROM diagnostics").rows == [("no_text",)]


def test_a_filled_in_form_is_searchable_by_its_values(db_path, tmp_path):
    """A tax form's figures are form fields, not page text: kbase reads them too (the page is
    flattened in memory first), as pdftotext shows them."""
    form = make_pdf(
        ["Form 1040 Individual Income Tax Return\nLine 1 Wages, salaries, tips", "Page two"],
        fields={"wages": "54,321.00", "name": "Ada Quimby"},
    )
    text = pdf.extract(form)
    assert "54,321.00" in text.text and "Ada Quimby" in text.text
    assert text.text[text.pages[0][0] : text.pages[0][1]].count("Quimby") == 1  # on page 1
    vault = write(tmp_path / "v", {"1040.pdf": form})
    k = kbase.open(db_path)
    k.index([vault], embed=False)
    (hit,) = k.search("Quimby", mode="keyword")
    assert (hit.path, hit.page) == ("1040.pdf", 1)
    sample = shared("pdfs", "py-pdf-sample-files") / "012-libreoffice-form" / "libreoffice-form.pdf"
    assert "Alice" in pdf.extract(sample.read_bytes()).text  # LibreOffice's filled-in sample


@pytest.mark.slow
def test_killing_the_indexer_mid_pdf_leaves_no_worker_and_no_lock(db_path, tmp_path):
    """kill -9 while PDF workers run: the workers leave within a second or two (they were
    busy, or blocked sending a result), and they never held the writer lock."""
    import signal
    import subprocess
    import sys
    import time

    big = make_pdf([f"page {i} " + f"word{i} " * 60 for i in range(2000)])
    vault = write(tmp_path / "v", {f"big{i}.pdf": big + b"%" + bytes([65 + i]) for i in range(6)})
    cmd = [sys.executable, "-m", "kbase", "--db", str(db_path), "index", str(vault), "--no-embed"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[int]:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    deadline = time.monotonic() + 60
    while not children() and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = children()
    assert workers, "no PDF worker started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{w}") for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if os.path.exists(f"/proc/{w}")]
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 0 and "already writing" not in again.stderr, again.stderr
    assert kbase.open(db_path).sql("SELECT count(*) FROM pdf_info").rows == [(6,)]


def test_a_custom_token_counter_chunks_pdfs_too(db_path, tmp_path):
    """The workers chunk with the run's counter (the index's fingerprint names it)."""
    vault = write(tmp_path / "v", {"a.pdf": paper()})
    con = db.connect(db_path, create=True)
    counter = chunking.WordCounter()
    pipeline.index(con, [vault], counter=counter)
    rows = con.execute("SELECT tokens, text FROM chunk_texts").fetchall()
    assert rows and all(tokens == counter.count(text) for tokens, text in rows)


def test_the_outline_gives_each_page_its_heading_path(db_path, tmp_path):
    pages = ["Title page", "Intro about kelp", "Methods about sonar", "Sonar calibration", "Kelp"]
    outline = [(1, "1 Introduction", 1), (1, "2 Methods", 2), (2, "2.1 Calibration", 3)]
    outline += [(1, "3 Results", 4)]
    vault = write(tmp_path / "v", {"survey.pdf": make_pdf(pages, outline=outline)})
    k = kbase.open(db_path)
    k.index([vault], embed=False)
    got = {h.page: h.heading_path for h in k.search("sonar", mode="keyword", limit=1)}
    assert got == {3: "2 Methods"}
    (hit,) = k.search("calibration", mode="keyword")
    assert (hit.page, hit.heading_path) == (4, "2 Methods > 2.1 Calibration")
    rows = k.sql("SELECT level, text, start_char = end_char FROM headings").rows
    assert rows == [
        (1, "1 Introduction", 1),
        (1, "2 Methods", 1),
        (2, "2.1 Calibration", 1),
        (1, "3 Results", 1),
    ]
    paths = k.sql("SELECT c.heading_path FROM chunks AS c ORDER BY c.seq").rows
    assert [p for (p,) in paths] == [
        "",
        "1 Introduction",
        "2 Methods",
        "2 Methods > 2.1 Calibration",
        "3 Results",
    ]
    k.index([vault], embed=False, settings=k.chunk_settings(max_tokens=50))  # re-chunked
    (hit,) = k.search("calibration", mode="keyword")
    assert hit.heading_path == "2 Methods > 2.1 Calibration"


def test_check_finds_pages_that_do_not_cut_the_text(pkb, db_path):
    assert pkb.check().ok
    con = db.connect(db_path)
    with con:
        con.execute("UPDATE pages SET start_char = start_char + 1 WHERE page = 2")
    problems = pkb.check().problems
    assert [(p.kind, p.count, p.fixable) for p in problems] == [("pages", 1, False)]


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


def _symbol_font_pdf(runs: list[tuple[str, str]]) -> bytes:
    """One line of text runs, each (font, text): F1 Helvetica, F2 a TeX math symbol font (CMSY10,
    without a ToUnicode entry, as pdfTeX writes it) in which '6' is the slash of \\not."""
    from tests.pdfgen import _escape, raw_pdf

    ops = b"BT 50 790 Td " + b" ".join(
        b"/%s 11 Tf (%s) Tj" % (font.encode(), _escape(text)) for font, text in runs
    )
    ops += b" ET"
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font"
            b" << /F1 4 0 R /F2 5 0 R >> >> /Contents 6 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /ABCDEF+CMSY10 >>",
            b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream",
        ]
    )


def test_tex_negated_relations_are_one_character_not_a_six():
    """pdfTeX's x \\neq y came out as 'x 6= y' (the symbol font's \\not slash read as '6'):
    the slash and the symbol it negates are the negated symbol, whichever of the two comes
    first; a '6' of another font is a digit, next to '=' or not."""
    text = pdf.extract(
        _symbol_font_pdf(
            [
                ("F1", "if x "),
                ("F2", "6"),
                ("F1", "= y and y ="),
                ("F2", "6"),
                ("F1", " z, a "),
                ("F2", "6"),
                ("F1", "< b, but x=6 and 6=6 and 16 "),
                ("F2", "6"),  # next to no symbol it negates: left as it is
                ("F1", " sides"),
            ]
        )
    ).text
    assert text == "if x ≠ y and y ≠ z, a ≮ b, but x=6 and 6=6 and 16 6 sides\n", text


def test_negations_in_a_pdf_made_by_pdflatex():
    """GeoTopo (lecture notes typeset by pdfLaTeX, in the shared material): its 88 \\neq and
    its \\not\\Leftarrow read as symbols; the digits 6 of its text fonts stay."""
    data = shared("pdfs", "py-pdf-sample-files", "009-pdflatex-geotopo") / "GeoTopo-komprimiert.pdf"
    text = pdf.extract(data.read_bytes()).text
    assert "6=" not in text and "=6" not in text
    assert text.count("≠") == 88 and text.count("⇍") == 1
    assert "1 falls x ≠ y" in text and "det(A) ≠ 0" in text
    assert text.count("6") == 184  # (273 before: 89 were slashes of \not)


def test_every_negatable_symbol_composes_with_the_slash():
    import unicodedata

    for ch in pdf._NEGATES:
        negated = unicodedata.normalize("NFC", ch + "\u0338")
        assert len(negated) == 1 and negated != ch, ch
