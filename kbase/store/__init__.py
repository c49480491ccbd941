"""The index file itself: connections (``db``), schema versions (``migrations``), the CJK keyword
table's index half (``cjk_table``) and the schema's documentation (``schema_doc``)."""
