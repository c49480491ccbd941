from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
# The shared test material (../shared/data; KBASE_SHARED_DATA points elsewhere): tests that read
# it skip with one reason when it is absent, which pytest's summary lists once with their count.
SHARED_DATA = Path(os.environ.get("KBASE_SHARED_DATA") or REPO.parent / "shared" / "data")
SHARED_ABSENT = (
    f"needs the shared test material, and {SHARED_DATA} is absent"
    " (put it beside the repository as ../shared/data, or set KBASE_SHARED_DATA)"
)


# Hypothesis: CI (the CI environment variable, or HYPOTHESIS_PROFILE=ci) runs every property with
# its full example count; a run on a developer's machine with a tenth of it, for a fast loop.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=20)
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """A property's example count under the current profile: ``n`` in CI, a tenth locally."""
    return n if PROFILE == "ci" else max(10, n // 10)


def shared(*parts: str) -> Path:
    """A folder of ../shared/data, or skip the test with the reason: one reason for every test
    when the material is absent altogether (the summary counts them on one line)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(SHARED_ABSENT)
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent from the shared test material (an older copy?)")
    return path


@pytest.fixture(scope="session")
def foam_kb(tmp_path_factory):
    """foam-docs (86 real notes) indexed and embedded with the real model, once per run: the
    question-set and limit tests only read it."""
    import kbase
    from kbase.embed import embedder

    vault = shared("vaults", "foam-docs")
    kb = kbase.open(
        tmp_path_factory.mktemp("foam") / "foam.db", embedder=embedder.default_embedder()
    )
    kb.index([vault])
    yield kb
    kb.close()


def pytest_terminal_summary(terminalreporter) -> None:
    """The tests skipped for want of the shared material, said once with their count (before
    pytest's short summary, which would list them test by test) and counted apart in the last
    line ('15 skipped, no shared material')."""
    stats = terminalreporter.stats
    ours = [r for r in stats.get("skipped", []) if SHARED_ABSENT in str(r.longrepr)]
    if ours:
        stats["skipped"] = [r for r in stats["skipped"] if r not in ours]
        if not stats["skipped"]:
            del stats["skipped"]
        stats["skipped, no shared material"] = ours
        terminalreporter.write_sep("-", f"{len(ours)} tests skipped: {SHARED_ABSENT}")


def pytest_report_header(config) -> str:
    """Said before the run: whether the tests that read the shared material can run."""
    if SHARED_DATA.is_dir():
        return f"shared test material: {SHARED_DATA}"
    return f"shared test material: {SHARED_DATA} is absent: the tests that read it are skipped"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Keep every test away from the user's real index and data folder."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))  # no user's config.toml
    monkeypatch.delenv("KBASE_CONFIG", raising=False)
    monkeypatch.delenv("KBASE_DB", raising=False)
    # The graph derived from the model file is built once for the whole run, not once per test.
    monkeypatch.setenv("KBASE_MODEL_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
    # The sockets of kbase mcp/watch/browse started by tests (kbase.handoff): not the user's.
    monkeypatch.setenv("KBASE_RUNTIME_DIR", str(tmp_path_factory.getbasetemp() / "run"))


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "index.db"


def kbase_cli(db: Path, *args, input: str | None = None, catch_exceptions: bool = False):
    """``kbase --db DB ARGS...`` in this process, through click's test runner: the one CLI runner
    of the suite (a test that needs the real executable runs ``python -m kbase`` instead)."""
    from click.testing import CliRunner

    from kbase.cli.app import cli

    return CliRunner().invoke(
        cli, ["--db", str(db), *map(str, args)], input=input, catch_exceptions=catch_exceptions
    )


@pytest.fixture
def run(db_path):
    """``run(*args)``: kbase_cli on the test's own index."""
    return lambda *args, input=None: kbase_cli(db_path, *args, input=input)


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8", newline="")
    return root


@pytest.fixture
def vault(tmp_path) -> Path:
    return write(
        tmp_path / "vault",
        {
            "Welcome.md": "---\ntitle: Welcome home\ntags: [start, meta]\ndate: 2024-05-01\n---\n"
            "# Welcome\n\nStart with the [[Garden]] note. #inbox\n",
            "Garden.md": "# Garden\n\nTomatoes need sun and water.\n\n"
            "## Beds\n\nRaised beds drain well.\n",
            "tech/SQLite.md": "# SQLite\n\n"
            "Write-ahead logging lets readers and writers work at once.\n\n"
            "```sql\nPRAGMA journal_mode = WAL;\n```\n\n#db/sqlite\n",
            "tech/notes.txt": "Plain text note about checkpoints.\n\n"
            "Second paragraph mentions tomatoes.\n",
        },
    )


@pytest.fixture
def kb(db_path, vault):
    """The test vault indexed without embeddings (tests about embeddings define their own)."""
    import kbase

    k = kbase.open(db_path)
    k.index([vault], embed=False)
    yield k
    k.close()


def bump_mtime(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


@pytest.fixture
def moved(run, vault, tmp_path):
    """The test vault indexed, then moved away: its documents are missing on disk."""
    assert run("index", "--no-embed", vault).exit_code == 0
    shutil.move(vault, tmp_path / "elsewhere")
    return vault


SAMPLES = ("pdfs", "py-pdf-sample-files")  # PDFs of the shared material


@pytest.fixture
def pdfs(tmp_path, db_path):
    """pdflatex-4-pages.pdf, an encrypted PDF and a text file called .pdf, indexed."""
    import kbase

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


@pytest.fixture
def fake_model(monkeypatch):
    """Every KB the CLI opens embeds with a counting stand-in (no model load)."""
    from tests.helpers import CountingEmbedder

    embedder = CountingEmbedder()
    monkeypatch.setattr("kbase.embed.catalog.for_index", lambda fingerprint=None: embedder)
    return embedder
