"""The process that answers the Datasette plugin's kbase_search() and kbase_embed() for one index
(``python -m kbase.datasette.worker INDEX``): kbase's search runs on kbase's SQLite (apsw's),
Datasette's queries on Datasette's, and each loads sqlite-vec. In one process the two libraries
would share the extension's one pointer to SQLite's routines (SQLite loads extensions with
RTLD_GLOBAL), which the last load sets: kbase's searches then failed with 'vec0 constructor
error: ... API misuse'. So the plugin starts this worker and talks to it in JSON lines.

First line out: ``{"ready": true}``, or ``{"error": ...}`` (not a kbase index) and exit. Then per
line in, ``{"fn": "search", "args": [query, mode, lim]}`` -> ``{"rows": [{...}, ...]}``
(KB.sql_search) or ``{"fn": "embed", "args": [text]}`` -> ``{"vector": base64}`` (KB.sql_embed);
a bad argument -> ``{"error": message, "hint": hint}``. It ends when its input closes."""

from __future__ import annotations

import base64
import json
import sys

from kbase.api import KB
from kbase.errors import KbaseError


def _answer(kb: KB, request: dict) -> dict:
    args = [
        base64.b64decode(a["blob"]) if isinstance(a, dict) and set(a) == {"blob"} else a
        for a in request.get("args") or []
    ]
    if request.get("fn") == "search":
        return {"rows": kb.sql_search(*args[:3])}
    if request.get("fn") == "embed":
        return {"vector": base64.b64encode(kb.sql_embed(*args[:1])).decode("ascii")}
    return {"error": f"unknown request {request.get('fn')!r}", "hint": None}


def main(argv: list[str]) -> int:
    out, sys.stdout = sys.stdout, sys.stderr  # the answers alone on stdout
    kb = KB(argv[0], cache_vectors=True)  # long-lived: the vectors stay in memory
    try:
        mode = kb.default_mode()
        if mode != "keyword":
            kb.embedder.embed_query("warm up")  # the model loads now, not in the first query
    except KbaseError as e:
        out.write(json.dumps({"error": e.message, "hint": e.hint}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True, "mode": mode}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            answer = _answer(kb, json.loads(line))
        except KbaseError as e:
            answer = {"error": e.message, "hint": e.hint}
        except Exception as e:  # one bad request must not end the worker
            answer = {"error": f"{type(e).__name__}: {e}", "hint": None}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()
    kb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
