"""Numbered schema steps after version 1 (``schema.sql``).

Each step is SQL that takes the schema from version ``n - 1`` to ``n``; ``db.connect`` runs the
missing ones in order, each in its own transaction together with the ``user_version`` bump.
"""

from __future__ import annotations

# version -> SQL script. Version 1 is schema.sql itself.
MIGRATIONS: dict[int, str] = {}

SCHEMA_VERSION = 1 + len(MIGRATIONS)
