"""Numbered schema steps after version 1 (``schema.sql``).

Each step is SQL that takes the schema from version ``n - 1`` to ``n``; ``db.connect`` runs the
missing ones in order, each in its own transaction together with the ``user_version`` bump.
"""

from __future__ import annotations

# version -> SQL script. Version 1 is schema.sql itself.
MIGRATIONS: dict[int, str] = {
    # roots.relpath: the root relative to the index file's folder, so that when the notes and the
    # index move together kbase finds the notes again (kbase roots, kbase index).
    2: "ALTER TABLE roots ADD COLUMN relpath TEXT;",
    # Size (BENCHMARKS.md): chunks.hash was never read (vectors are reused by embed_hash), and no
    # query looks documents up by hash (renames are matched in memory during a run).
    3: "ALTER TABLE chunks DROP COLUMN hash; DROP INDEX documents_hash;",
    # kbase writes a chunk's keyword-index row itself (store.write_document), with the values it
    # already has: through this trigger and the view it cost 150 us a chunk, directly 25 us.
    # Deleting still goes through chunks_before_delete, which reads the same view.
    4: "DROP TRIGGER chunks_after_insert;",
}

SCHEMA_VERSION = 1 + len(MIGRATIONS)
