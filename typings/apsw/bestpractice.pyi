# apsw types every value it returns as a union of SQLite's storage classes (int | float | str |
# bytes | None), so each row that kbase reads would need a cast. kbase checks its SQL values with
# tests instead, and mypy sees apsw as untyped (this stub comes first on mypy_path).
from typing import Any

def __getattr__(name: str) -> Any: ...
