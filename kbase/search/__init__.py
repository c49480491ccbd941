"""Queries to ranked hits: query parsing, keyword, semantic, fusion, snippets."""

# Every search stops after this many seconds (one line says so): here, not in kbase.search.run, so
# that a search handed to a running kbase (kbase.cli.quick) knows it without importing the engine.
SEARCH_TIMEOUT = 10.0
# ... and returns at most this many results (here for the faces, as kbase.api.MAX_SEARCH_LIMIT).
MAX_SEARCH_LIMIT = 1000
