"""The core (everything but the faces: CLI, output, TUI, MCP server) imports no presentation or
protocol library."""

import ast
from pathlib import Path

import kbase

PRESENTATION = {"click", "textual", "rich", "mcp", "mcp_types", "starlette", "uvicorn", "datasette"}
ALLOWED = {"__main__.py"}
FACES = {"cli", "tui", "mcp", "datasette"}


def test_core_does_not_import_presentation_libraries():
    pkg = Path(kbase.__file__).parent
    offenders = []
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg)
        if rel.name in ALLOWED or rel.parts[0] in FACES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] in PRESENTATION]
    assert offenders == []


def _without_type_checking(tree: ast.Module) -> ast.Module:
    """``tree`` without its ``if TYPE_CHECKING:`` blocks: names imported for annotations only are
    never imported when the program runs, so they cannot make a cycle."""
    tree.body = [
        node
        for node in tree.body
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    ]
    return tree


def _imports_of(path: Path, module: str, modules: set[str]) -> set[str]:
    """The kbase modules ``module`` (at ``path``) imports anywhere in its code, including inside
    functions: a lazy import is still a dependency."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(_without_type_checking(ast.parse(path.read_text(encoding="utf-8")))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in modules and n != module}
    return found


def import_graph() -> dict[str, set[str]]:
    pkg = Path(kbase.__file__).parent
    paths = {}
    for path in pkg.rglob("*.py"):
        parts = path.relative_to(pkg.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {m: _imports_of(p, m, set(paths)) for m, p in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    """Lower modules never import higher ones: no module reaches itself through imports, lazy
    ones included (the package's __init__, which only re-exports, is left out)."""
    graph = {m: deps - {"kbase"} for m, deps in import_graph().items() if m != "kbase"}
    assert cycles(graph) == []


# What a face (kbase/cli, kbase/tui, kbase/mcp) may import of kbase besides its own modules and
# another face's entry point: the public API, its errors and records, and plain text helpers.
FACE_API = {"kbase", "kbase.api", "kbase.errors", "kbase.records", "kbase.text", "kbase.paths"}


def _face(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FACES else None


def test_faces_reach_the_engine_only_through_the_api():
    offenders = [
        f"{m} -> {d}"
        for m, deps in import_graph().items()
        if _face(m)
        for d in sorted(deps)
        if d not in FACE_API and not _face(d)
    ]
    assert offenders == []


def test_the_engine_never_imports_a_face():
    offenders = [
        f"{m} -> {d}"
        for m, deps in import_graph().items()
        if not _face(m) and m not in ("kbase", "kbase.__main__")
        for d in sorted(deps)
        if _face(d)
    ]
    assert offenders == []


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


MODULES = set(import_graph())


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


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


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
