"""The index file: connections, schema migrations, writes, maintenance."""
