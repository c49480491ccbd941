"""The core (everything but the faces: CLI, output, TUI, MCP server) imports no presentation or
protocol library."""

import ast
from pathlib import Path

import kbase

PRESENTATION = {"click", "textual", "rich", "mcp", "mcp_types", "starlette", "uvicorn"}
ALLOWED = {"cli.py", "output.py", "__main__.py", "mcp_server.py"}


def test_core_does_not_import_presentation_libraries():
    pkg = Path(kbase.__file__).parent
    offenders = []
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg)
        if rel.name in ALLOWED or rel.parts[0] == "tui":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] in PRESENTATION]
    assert offenders == []
