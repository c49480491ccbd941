"""kbase's layers hold: the import-linter contracts in pyproject.toml (each part imports only the
parts below it, the engine imports no face library, the faces reach the engine through kbase.api),
no module uses another's private names, and the public API is typed."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kbase

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(package_root: Path) -> subprocess.CompletedProcess:
    """import-linter with the contracts of pyproject.toml, over the kbase found in
    ``package_root`` (a fresh process, so that it reads those files and no other copy)."""
    code = (
        "from importlinter.cli import lint_imports;"
        f"raise SystemExit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r},"
        " no_cache=True, no_logo=True))"
    )
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=package_root, env=env, capture_output=True, text=True
    )


def test_the_import_contracts_hold():
    r = lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 kept, 0 broken" in r.stdout


def test_an_import_upward_breaks_the_layers(tmp_path):
    """The contracts can fail: ingest (a pure step) importing search is caught, and so is the
    engine importing click."""
    shutil.copytree(ROOT / "kbase", tmp_path / "kbase", ignore=shutil.ignore_patterns("assets"))
    chunk = tmp_path / "kbase" / "ingest" / "chunk.py"
    chunk.write_text(chunk.read_text() + "\nfrom kbase.search import cjk  # noqa\nimport click\n")
    r = lint_imports(tmp_path)
    assert r.returncode == 1
    assert "kbase.ingest.chunk -> kbase.search.cjk" in r.stdout
    assert "kbase.ingest.chunk -> click" in r.stdout


def _modules() -> set[str]:
    pkg = Path(kbase.__file__).parent
    out = set()
    for path in pkg.rglob("*.py"):
        parts = path.relative_to(pkg.parent).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def private_uses(path: Path, module: str) -> list[str]:
    """Names with a leading underscore that ``module`` takes from another kbase module: imported
    (``from kbase.x import _y``) or reached as an attribute of an imported module (``x._y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = set()  # local names bound to kbase modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kbase"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{module}: from {node.module} import {a.name}")
                elif f"{node.module}.{a.name}" in MODULES:
                    aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.asname and a.name.startswith("kbase.")}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{module}: {node.value.id}.{node.attr}")
    return found


MODULES = _modules()


def test_no_module_uses_another_modules_privates():
    pkg = Path(kbase.__file__).parent
    found = []
    for path in pkg.rglob("*.py"):
        parts = path.relative_to(pkg.parent).with_suffix("").parts
        found += private_uses(path, ".".join(parts))
    assert found == []


def test_the_private_finder_finds_both_forms(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "from kbase.search.keyword import _ranked_docs\nfrom kbase.search import hits\n"
        "hits._x\nhits.hit\n"
    )
    assert private_uses(f, "m") == [
        "m: from kbase.search.keyword import _ranked_docs",
        "m: hits._x",
    ]


def test_the_public_api_is_typed():
    """Every public method and property of KB, and kbase.open, declares its parameters' and its
    result's types, so that an editor and a type checker can follow a script's use of them."""
    import inspect

    from kbase.api import KB

    untyped = []
    members = [("kbase.open", kbase.open)] + [
        (f"KB.{name}", member.fget if isinstance(member, property) else member)
        for name, member in vars(KB).items()
        if (not name.startswith("_") or name == "__init__")
        and (inspect.isfunction(member) or isinstance(member, property))
    ]
    for name, fn in members:
        sig = inspect.signature(fn)
        untyped += [
            f"{name}({p})"
            for p in sig.parameters
            if p != "self" and sig.parameters[p].annotation is inspect.Parameter.empty
        ]
        if sig.return_annotation is inspect.Signature.empty and not name.endswith("__init__"):
            untyped.append(f"{name} -> ?")
    assert len(members) > 30 and untyped == []
