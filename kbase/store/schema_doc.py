"""The column lists of docs/SCHEMA.md, generated from the schema itself.

    python -m kbase.store.schema_doc            # print the section
    python -m kbase.store.schema_doc --write    # put it into docs/SCHEMA.md (between its markers)

Every table and view of a new index (``schema.sql``, plus the two tables kbase makes once it has
vectors: ``chunks_vec`` and ``chunks_codes``) with its columns as SQLite reports them (``PRAGMA
table_xinfo``) and, for tables, the comment ``schema.sql`` gives each column.
tests/test_schema_docs.py checks that docs/SCHEMA.md holds exactly this, so the list cannot drift.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BEGIN = (
    "<!-- columns: generated from schema.sql by `python -m kbase.store.schema_doc --write`;"
    " tests/test_schema_docs.py checks it -->"
)
END = "<!-- end of the generated columns -->"

# Made by kbase once the model's dimension is known (kbase.embed.vectors), so not in schema.sql.
_LATER = {
    "chunks_vec": (
        "CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[384] distance_metric=cosine)",
        {
            "rowid": "chunks.id of the embedded chunk",
            "embedding": "the chunk's vector: 384 little-endian float32 (all-MiniLM-L6-v2)",
        },
    ),
    "chunks_codes": (
        None,  # kbase.embed.vectors.CODES_TABLE
        {
            "id": "row id",
            "ids": "little-endian int64 chunk ids of the block",
            "codes": "the sign of each dimension of their vectors, column-major (48 bytes each)",
        },
    ),
}


# Full-text tables: what each column holds (their DDL lists names only).
_FTS = {
    "chunks_fts": {
        "body": "the chunk's text (external content: chunks_fts_content, from documents.body)",
        "title": "the note's names: its title, its file name when that differs, its aliases",
        "headings": "the chunk's heading path, less a first heading that repeats the title",
    },
    "chunks_cjk": {
        "body": "chunks_fts's body with each run of CJK/Thai/... characters as its pairs",
        "title": "chunks_fts's title, the same way",
        "headings": "chunks_fts's headings, the same way",
    },
}


def _comments(schema: str) -> dict[str, dict[str, str]]:
    """table -> column -> the comment at the end of its line in ``schema.sql``."""
    out: dict[str, dict[str, str]] = {}
    for name, body in re.findall(r"CREATE TABLE (\w+) \((.+?)\n\)", schema, re.S):
        cols = out.setdefault(name, {})
        for line in body.splitlines():
            m = re.match(r"\s+([a-z_]+)\s+[A-Z].*?--\s*(.+)$", line)
            if m:
                cols[m.group(1)] = m.group(2).strip()
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def generate() -> str:
    """The generated section of docs/SCHEMA.md, markers included."""
    from kbase.embed.vectors import CODES_TABLE
    from kbase.store.db import schema_sql, scratch_connection

    schema = schema_sql()
    con = scratch_connection(vectors=True)
    try:
        con.execute(schema)
        con.execute(_LATER["chunks_vec"][0])
        con.execute(CODES_TABLE)
        comments = _comments(schema)
        for name, (_, cols) in _LATER.items():
            comments[name] = cols
        comments.update(_FTS)
        order = re.findall(r"^CREATE (?:VIRTUAL )?TABLE (\w+)", schema, re.M)
        order[order.index("chunks") + 1 : order.index("chunks") + 1] = list(_LATER)
        views = re.findall(r"^CREATE VIEW (\w+)", schema, re.M)
        lines = [BEGIN, "", "### Columns of each table", ""]
        for table in order:
            cols = con.execute(f"PRAGMA table_xinfo({table})").fetchall()
            notes = comments.get(table, {})
            lines += [f"`{table}`", "", "| column | type | meaning |", "|---|---|---|"]
            if table == "chunks_vec" and not any(c[1] == "rowid" for c in cols):
                lines.append(f"| `rowid` | INTEGER | {_cell(notes['rowid'])} |")
            for _cid, col, ctype, notnull, _default, pk, hidden in cols:
                if hidden == 1:  # a virtual table's hidden column (FTS5 rank, vec0 distance)
                    continue
                kind = (ctype or "").upper() or "(any)"
                if pk:
                    kind += ", primary key"
                elif notnull:
                    kind += ", not null"
                lines.append(f"| `{col}` | {kind} | {_cell(notes.get(col, ''))} |")
            lines.append("")
        lines += ["### Columns of each view", ""]
        for view in views:
            names = [r[1] for r in con.execute(f"PRAGMA table_xinfo({view})")]
            lines.append(f"- `{view}`: " + ", ".join(f"`{c}`" for c in names))
        lines += ["", END]
        return "\n".join(lines)
    finally:
        con.close()


def write(doc: Path) -> bool:
    """Put the generated section into ``doc`` (replacing the one there); True if it changed."""
    text = doc.read_text(encoding="utf-8")
    new = generate()
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        end = text.index(END) + len(END)
        updated = text[:start] + new + text[end:]
    else:
        updated = text.rstrip("\n") + "\n\n" + new + "\n"
    if updated != text:
        doc.write_text(updated, encoding="utf-8")
    return updated != text


def section(doc_text: str) -> str | None:
    """The generated section as ``doc_text`` holds it (None without the markers)."""
    if BEGIN not in doc_text or END not in doc_text:
        return None
    return doc_text[doc_text.index(BEGIN) : doc_text.index(END) + len(END)]


if __name__ == "__main__":  # pragma: no cover
    if "--write" in sys.argv[1:]:
        target = Path(__file__).resolve().parents[2] / "docs" / "SCHEMA.md"
        print(f"{target}: {'updated' if write(target) else 'already current'}")
    else:
        print(generate())
