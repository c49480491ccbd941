"""Notes by name: resolving names and regions, the link graph, related notes, reading."""
