"""kbase in Datasette (the ``kbase[datasette]`` extra): a face like the CLI, the TUI and the MCP
server. ``kbase.datasette.plugin`` holds the plugin's hooks; pyproject.toml registers it with
Datasette (entry point group ``datasette``), so ``datasette kb.db`` finds it once installed."""
