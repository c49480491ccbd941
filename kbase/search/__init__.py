"""Queries to ranked hits: query parsing, keyword, semantic, fusion, snippets."""
