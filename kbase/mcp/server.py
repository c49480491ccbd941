"""The agent face: the index over the Model Context Protocol (``kbase mcp``).

A thin face over ``kbase.api.KB``, like ``cli/`` and ``tui/``, built on the official SDK's
``MCPServer``. Tools: search, read, links, related, sql, status (each read-only, with a JSON
schema for its arguments and for its structured result, plus readable text); resources: every
note as ``kbase://note/{path}``. Transports: stdio, or streamable HTTP on loopback with the
SDK's Host/Origin checks and an optional bearer token.

Long-lived: one read connection and the in-memory vectors, kept for the life of the server and
reopened when the index file is replaced; the vectors reload when another process changes the
file (``PRAGMA data_version``). With ``watch``, the index follows the notes (kbase.watch) and
chunks without vectors are embedded while no call is running, newest notes first, one batch at a
time: a call that needs the model waits for at most the batch in hand.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolResult,
    ListResourcesResult,
    Resource,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field, ValidationError

from kbase.api import KB
from kbase.embed.nearest import VectorCache
from kbase.errors import DatabaseError, IndexBusyError, InputError, KbaseError

SERVER_NAME = "kbase"
NOTE_URI = "kbase://note/"
RESOURCES_PAGE = 500  # notes per resources/list page
IDLE_AFTER = 2.0  # seconds without a call before idle embedding starts (or resumes)
IDLE_POLL = 0.5  # how often the idle embedder looks
SEARCH_LIMIT_MAX = 100
SQL_ROWS_DEFAULT, SQL_ROWS_MAX = 200, 5000
SQL_TIMEOUT_MAX = 60.0
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
TOKEN_ENV = "KBASE_MCP_TOKEN"

INSTRUCTIONS = """\
kbase indexes a person's notes (Markdown with [[wikilinks]], #tags and front matter, or plain text)
in one SQLite file. Start with `search` (keyword, semantic or hybrid; filters by folder, tag and
date), then `read` a hit at its line, follow `links` (outgoing and backlinks), and ask `related`
for notes close in meaning. `sql` runs read-only SQL on the documented tables (documents, chunks,
links, tags, views notes, backlinks, ...). Everything is read-only; notes are read from the index,
never from disk."""


# --- results -----------------------------------------------------------------------------------
class SearchHit(BaseModel):
    rank: int
    title: str
    path: str = Field(description="path inside its root; pass it to read, links or related")
    abspath: str
    line: int = Field(description="1-based line of the best match")
    heading_path: str = Field(description="enclosing headings, e.g. 'Guide > Install'")
    snippet: str
    score: float = Field(
        description="higher is better; bm25 (keyword), cosine (semantic) or a fusion sum (hybrid)"
    )
    stale: bool = Field(description="the file changed on disk since it was indexed")
    tags: list[str]
    matched_chunks: int


class SearchResult(BaseModel):
    query: str
    mode: str
    hits: list[SearchHit]


class ReadResult(BaseModel):
    path: str
    abspath: str
    title: str
    kind: str
    tags: list[str]
    aliases: list[str]
    date: str | None = Field(description="the front matter date, if any")
    modified: str = Field(description="the file's modification time when indexed (UTC)")
    indexed_at: str
    stale: bool = Field(description="the file changed on disk since it was indexed")
    total_lines: int
    first_line: int
    last_line: int
    truncated: bool = Field(description="more lines follow: read again with start_line")
    text: str = Field(description="lines first_line..last_line, joined with newlines")


class LinkItem(BaseModel):
    line: int = Field(description="line of the link in the note that holds it")
    context: str = Field(description="that line")
    target: str = Field(description="the link target as written")
    anchor: str | None
    path: str | None = Field(description="the other note's path (None: unresolved)")
    title: str | None
    resolved: bool


class LinksResult(BaseModel):
    path: str
    title: str
    outgoing: list[LinkItem]
    backlinks: list[LinkItem]


class RelatedNote(BaseModel):
    rank: int
    title: str
    path: str
    line: int = Field(description="line of the passage that matched best")
    heading_path: str
    snippet: str
    score: float = Field(description="cosine similarity (semantic) or bm25 (keyword)")
    linked: bool = Field(description="the note links to it (listed only with include_linked)")
    links_here: bool = Field(description="it links to the note")


class RelatedResult(BaseModel):
    path: str
    title: str
    method: Literal["semantic", "keyword"] = Field(
        description="semantic: from chunk vectors; keyword: the note has no embeddings, so its "
        "most distinctive terms were searched instead"
    )
    terms: list[str] = Field(description="the terms searched (keyword method)")
    notes: list[RelatedNote]


class SqlResult(BaseModel):
    columns: list[str]
    rows: list[list[Any]] = Field(description="blobs as base64 text")
    truncated: bool = Field(description="more rows exist than max_rows")


# --- the index, shared by every call -------------------------------------------------------------
class Backend:
    """One KB (one read connection, the vectors in memory) for the life of the server."""

    def __init__(self, db_path: Path, kb: KB | None = None) -> None:
        self.db_path = Path(db_path)
        self.kb = kb or KB(self.db_path)
        self.read_lock = threading.Lock()  # one read connection: one call at a time
        self.model_lock = threading.Lock()  # the embedding model: a query, or one idle batch
        self._identity = self._file_identity()
        self._calls = threading.Lock()  # guards the two below (calls run in worker threads)
        self._active = 0
        self._last_call = time.monotonic()
        self.stop = threading.Event()
        self.watching = False
        self.idle_embedded = 0

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.db_path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @contextmanager
    def use(self, model: bool = False):
        """The KB for one call (``model``: it may embed a query, so wait for an idle batch)."""
        with self._calls:
            self._active += 1
        try:
            with self.read_lock, self.model_lock if model else _nothing():
                identity = self._file_identity()
                if identity is None:
                    raise DatabaseError(
                        f"no index at {self.db_path}", "build it with: kbase index PATH"
                    )
                if (
                    identity != self._identity
                ):  # the file was replaced (deleted and rebuilt): reopen
                    self.kb.close()
                    if self.kb.vector_cache is not None:
                        self.kb.vector_cache = VectorCache()
                    self._identity = identity
                yield self.kb
        finally:
            with self._calls:
                self._active -= 1
                self._last_call = time.monotonic()

    def idle(self) -> bool:
        with self._calls:
            return self._active == 0 and time.monotonic() - self._last_call >= IDLE_AFTER

    def embed_while_idle(self, batch: int) -> None:
        """Thread body: embed chunks that lack vectors whenever no call has run for IDLE_AFTER."""
        wait = IDLE_POLL
        while not self.stop.wait(wait):
            wait = IDLE_POLL
            if not self.idle():
                continue
            try:
                with self.model_lock:
                    done = self.kb.embed_newest(batch)
            except IndexBusyError:
                continue  # a watch batch or a hand-run kbase index: later
            except KbaseError as e:
                _log(f"idle embedding stopped: {e}")
                return
            self.idle_embedded += done
            if not done:
                wait = 5.0  # nothing missing: look again now and then (watch adds chunks)

    def watch(self, poll: bool) -> None:
        """Thread body: keep the index in step with the notes (kbase watch, without embedding:
        the idle embedder does that between calls)."""
        from kbase.watch import watch

        def on_batch(b) -> None:
            if b.error:
                _log(f"watch: {b.error}")
            elif b.changed:
                r = b.report
                _log(
                    f"watch: {r.new} new, {r.updated} updated, {r.renamed} renamed,"
                    f" {r.removed} removed"
                )

        self.watching = True
        try:
            with KB(self.db_path, cache_vectors=False) as kb:
                watch(
                    kb,
                    stop_event=self.stop,
                    on_batch=on_batch,
                    embed=False,
                    force_polling=True if poll else None,
                )
        except KbaseError as e:
            _log(f"watch stopped: {e}")
        finally:
            self.watching = False


@contextmanager
def _nothing():
    yield


def _log(message: str) -> None:
    print(f"kbase mcp: {message}", file=sys.stderr, flush=True)


# --- the server --------------------------------------------------------------------------------
def _error(message: str, hint: str | None = None) -> CallToolResult:
    text = message + (f" (hint: {hint})" if hint else "")
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _result(structured: BaseModel | dict, text: str) -> CallToolResult:
    data = structured.model_dump(mode="json") if isinstance(structured, BaseModel) else structured
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _validation_message(error: ValidationError) -> str:
    parts = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"]) or "arguments"
        got = (
            f" (got {json.dumps(e['input'], default=str)[:60]})"
            if "input" in e and e["type"] != "missing"
            else ""
        )
        parts.append(f"{where}: {e['msg']}{got}")
    return "invalid arguments: " + "; ".join(parts)


class KbaseMCP(MCPServer):
    """MCPServer with kbase's error shape and paginated note resources."""

    def __init__(self, backend: Backend, **kwargs) -> None:
        super().__init__(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            version=_version(),
            log_level="WARNING",
            **kwargs,
        )
        self.backend = backend

    async def call_tool(self, name, arguments, context=None):
        """Arguments that fail the schema are a one-line tool error, as any other bad input."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                return _error(_validation_message(e.__cause__), "see the tool's input schema")
            raise

    async def _handle_list_resources(self, ctx, params):  # the SDK's hook, paginated here
        import anyio

        cursor = params.cursor if params is not None else None
        try:
            offset = max(0, int(cursor or 0))
        except ValueError:
            offset = 0

        def page():
            with self.backend.use() as kb:
                return kb.reader.execute(
                    "SELECT path, title, kind FROM documents ORDER BY path, id LIMIT ? OFFSET ?",
                    (RESOURCES_PAGE + 1, offset),
                ).fetchall()

        rows = await anyio.to_thread.run_sync(page)
        resources = [
            Resource(uri=note_uri(p), name=p, title=t, mime_type=_mime(k))
            for p, t, k in rows[:RESOURCES_PAGE]
        ]
        more = len(rows) > RESOURCES_PAGE
        return ListResourcesResult(
            resources=resources, next_cursor=str(offset + RESOURCES_PAGE) if more else None
        )


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kbase")
    except Exception:
        return "0"


def note_uri(path: str) -> str:
    return NOTE_URI + quote(path, safe="/")


def _mime(kind: str) -> str:
    return "text/markdown" if kind == "markdown" else "text/plain"


READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

NoteArg = Annotated[
    str,
    Field(
        min_length=1,
        description=(
            "The note: its path inside its root as search returns it ('folder/Note.md'), "
            "with or without '.md' and any unique end of the path ('Note'), "
            "or an absolute file path."
        ),
    ),
]


def build_server(backend: Backend, **server_options) -> KbaseMCP:
    """The MCP server with kbase's tools and resources over ``backend``."""
    server = KbaseMCP(backend, **server_options)

    def call(fn, model: bool = False) -> CallToolResult:
        try:
            with backend.use(model=model) as kb:
                return fn(kb)
        except KbaseError as e:
            return _error(e.message, e.hint)

    @server.tool(annotations=READ_ONLY)
    def search(
        query: Annotated[
            str,
            Field(
                description='Words, "a phrase", prefix*, -excluded, a OR b. Semantic and '
                "hybrid modes also understand a question in plain language."
            ),
        ],
        mode: Annotated[
            Literal["keyword", "semantic", "hybrid"] | None,
            Field(
                description=(
                    "keyword: exact words (bm25); semantic: meaning (embeddings); "
                    "hybrid: both fused. "
                    "Default: hybrid when the index has embeddings, else keyword."
                )
            ),
        ] = None,
        limit: Annotated[
            int, Field(ge=1, le=SEARCH_LIMIT_MAX, description="How many notes to return.")
        ] = 10,
        path: Annotated[
            str | None,
            Field(
                description="Only notes under this folder, or matching this glob "
                "('journal/', 'projects/*/notes.md')."
            ),
        ] = None,
        tags: Annotated[
            list[str],
            Field(
                description="Only notes with every one of these tags (nested tags "
                "match: 'work' matches 'work/meetings')."
            ),
        ] = [],  # noqa: B006
        since: Annotated[
            str | None,
            Field(
                description="Only notes dated on or after: YYYY-MM-DD or an age "
                "such as 7d, 2w, 3m, 1y."
            ),
        ] = None,
        until: Annotated[
            str | None, Field(description="Only notes dated on or before (same forms).")
        ] = None,
        exclude: Annotated[
            list[str],
            Field(
                description="Leave out notes whose path matches any of these "
                "globs or folders ('archive/', '*.txt')."
            ),
        ] = [],  # noqa: B006
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the notes; one hit per note, best first, each with its title, path, the line of
        the best passage, its heading path and a snippet. Use it first to find notes about
        something; then read a hit (path and line) for the full text. Prefer mode semantic or hybrid
        for questions in plain language, keyword for exact names, identifiers and phrases."""

        def run(kb):
            extra = {"exclude": list(exclude)} if exclude else {}
            used = mode or kb.default_mode()
            hits = kb.search(
                query,
                mode=used,
                limit=limit,
                path=path,
                tags=tags,
                since=since,
                until=until,
                **extra,
            )
            out = SearchResult(
                query=query,
                mode=used,
                hits=[
                    SearchHit(
                        rank=i,
                        title=h.title,
                        path=h.path,
                        abspath=h.abspath,
                        line=h.line,
                        heading_path=h.heading_path,
                        snippet=h.snippet,
                        score=round(h.score, 6),
                        stale=h.stale,
                        tags=list(h.tags),
                        matched_chunks=h.matched_chunks,
                    )
                    for i, h in enumerate(hits, 1)
                ],
            )
            return _result(out, _search_text(out))

        return call(run, model=mode != "keyword")

    @server.tool(annotations=READ_ONLY)
    def read(
        note: NoteArg,
        start_line: Annotated[
            int | None, Field(ge=1, description="First line to return (1-based).")
        ] = None,
        end_line: Annotated[
            int | None, Field(ge=1, description="Last line to return (inclusive).")
        ] = None,
    ) -> Annotated[CallToolResult, ReadResult]:
        """Read a note from the index: its text with line numbers, and its title, tags, aliases,
        dates and whether the file changed since it was indexed. Give start_line/end_line to read a
        part (e.g. around a search hit's line); without them at most 400 lines come back and
        `truncated` says whether more follow. A name that matches several notes is an
        error listing them."""

        def run(kb):
            r = kb.read(note, start_line, end_line)
            out = ReadResult(
                path=r.path,
                abspath=r.abspath,
                title=r.title,
                kind=r.kind,
                tags=list(r.tags),
                aliases=list(r.aliases),
                date=r.date,
                modified=r.modified,
                indexed_at=r.indexed_at,
                stale=r.stale,
                total_lines=r.total_lines,
                first_line=r.first_line,
                last_line=r.last_line,
                truncated=r.truncated,
                text="\n".join(r.lines),
            )
            return _result(out, _read_text(out, r.numbered()))

        return call(run)

    @server.tool(annotations=READ_ONLY)
    def links(
        note: Annotated[
            str,
            Field(
                min_length=1,
                description=(
                    "The note, named as a [[wikilink]] names it "
                    "('Note', 'folder/Note', an alias, any case) or by path."
                ),
            ),
        ],
        direction: Annotated[
            Literal["both", "outgoing", "backlinks"],
            Field(
                description="outgoing: links in this note; backlinks: links to it from other notes."
            ),
        ] = "both",
    ) -> Annotated[CallToolResult, LinksResult]:
        """A note's outgoing links (with their targets, resolved the way Obsidian resolves them) and
        its backlinks (the notes linking to it), each with its line and the text of that line. Use
        it to follow the author's own connections from a note."""

        def run(kb):
            target = kb.note(note)
            out_links = kb.links(target.path) if direction != "backlinks" else []
            back = kb.backlinks(target.path) if direction != "outgoing" else []
            out = LinksResult(
                path=target.path,
                title=target.title,
                outgoing=[
                    LinkItem(
                        line=lk.line,
                        context=lk.context,
                        target=lk.target,
                        anchor=lk.anchor,
                        path=lk.target_path,
                        title=lk.target_title,
                        resolved=lk.target_path is not None,
                    )
                    for lk in out_links
                ],
                backlinks=[
                    LinkItem(
                        line=lk.line,
                        context=lk.context,
                        target=lk.target,
                        anchor=lk.anchor,
                        path=lk.source_path,
                        title=lk.source_title,
                        resolved=True,
                    )
                    for lk in back
                ],
            )
            return _result(out, _links_text(out))

        return call(run)

    @server.tool(annotations=READ_ONLY)
    def related(
        note: NoteArg,
        limit: Annotated[int, Field(ge=1, le=50, description="How many notes.")] = 10,
        include_linked: Annotated[
            bool, Field(description="Also list notes this note already links to.")
        ] = False,
    ) -> Annotated[CallToolResult, RelatedResult]:
        """Notes closest in meaning to a note (from its passages' embeddings), leaving out those it
        already links to: notes worth reading next or linking. Without embeddings, the note's most
        distinctive words are searched instead (method 'keyword')."""

        def run(kb):
            r = kb.related(note, limit=limit, include_linked=include_linked)
            out = RelatedResult(
                path=r.path,
                title=r.title,
                method=r.method,
                terms=list(r.terms),
                notes=[
                    RelatedNote(
                        rank=i,
                        title=h.title,
                        path=h.path,
                        line=h.line,
                        heading_path=h.heading_path,
                        snippet=h.snippet,
                        score=round(h.score, 6),
                        linked=h.doc_id in r.links_to,
                        links_here=h.doc_id in r.linked_from,
                    )
                    for i, h in enumerate(r.hits, 1)
                ],
            )
            return _result(out, _related_text(out))

        return call(run)

    @server.tool(annotations=READ_ONLY)
    def sql(
        query: Annotated[
            str,
            Field(
                min_length=1,
                description=(
                    "One read-only SQL statement (SQLite). Tables: documents, chunks, links, "
                    "tags, aliases, headings, roots; views: notes, note_tags, chunk_texts, "
                    "backlinks, resolved_links, unresolved_links. "
                    "kbase_search(query, mode, limit) is a table-valued function."
                ),
            ),
        ],
        max_rows: Annotated[
            int, Field(ge=1, le=SQL_ROWS_MAX, description="Stop after this many rows.")
        ] = SQL_ROWS_DEFAULT,
        timeout: Annotated[
            float,
            Field(gt=0, le=SQL_TIMEOUT_MAX, description="Seconds before the query is stopped."),
        ] = 10.0,
    ) -> Annotated[CallToolResult, SqlResult]:
        """Run read-only SQL on the index for what the other tools do not answer: counts, lists by
        tag or date, link statistics. Writes are refused; a slow query is stopped at its
        time limit."""
        from kbase.sqlapi import jsonable

        def run(kb):
            res = kb.sql(query, timeout=timeout, max_rows=max_rows + 1)
            rows = [[jsonable(v) for v in row] for row in res.rows[:max_rows]]
            out = SqlResult(columns=res.columns, rows=rows, truncated=len(res.rows) > max_rows)
            return _result(out, _sql_text(out))

        return call(run, model=True)  # kbase_embed() and kbase_search() may embed

    @server.tool(annotations=READ_ONLY)
    def status() -> Annotated[CallToolResult, dict[str, Any]]:
        """What the index holds: its roots, counts of notes, chunks and links, how many chunks have
        embeddings (semantic search covers only those), and when it was last indexed."""

        def run(kb):
            status = kb.status()
            st = asdict(status)
            st["embedding_coverage"] = (
                None if status.embedding_coverage is None else round(status.embedding_coverage, 4)
            )
            st["server"] = {
                "watching": backend.watching,
                "embedded_while_idle": backend.idle_embedded,
            }
            return _result(st, json.dumps(st, indent=1, ensure_ascii=False))

        return call(run)

    @server.resource(
        NOTE_URI + "{+path}",
        name="note",
        mime_type="text/markdown",
        description="A note's text as indexed (path inside its root, as search returns it).",
    )
    def note_resource(path: str) -> str:
        try:
            with backend.use() as kb:
                return kb.document_at(path).body
        except InputError as e:
            raise ResourceNotFoundError(str(e)) from None
        except KbaseError as e:
            raise ResourceError(str(e)) from None

    return server


# --- readable text -------------------------------------------------------------------------------
def _search_text(r: SearchResult) -> str:
    if not r.hits:
        return f"No notes match {r.query!r} ({r.mode})."
    out = [f"{len(r.hits)} notes for {r.query!r} ({r.mode}):"]
    for h in r.hits:
        out.append(
            f"{h.rank}. {h.title} — {h.path}:{h.line} (score {h.score:.3g})"
            + (" [changed on disk since indexed]" if h.stale else "")
        )
        if h.heading_path:
            out.append(f"   {h.heading_path}")
        out.append(f"   {h.snippet}")
    return "\n".join(out)


def _read_text(r: ReadResult, numbered: str) -> str:
    meta = [f"{r.title} — {r.path}", f"lines {r.first_line}-{r.last_line} of {r.total_lines}"]
    if r.tags:
        meta.append("tags: " + ", ".join(r.tags))
    if r.aliases:
        meta.append("aliases: " + ", ".join(r.aliases))
    if r.date:
        meta.append(f"date: {r.date}")
    meta.append(f"modified: {r.modified}")
    if r.stale:
        meta.append("changed on disk since indexed")
    tail = (
        f"\n… {r.total_lines - r.last_line} more lines: read with start_line={r.last_line + 1}"
        if r.truncated
        else ""
    )
    return " · ".join(meta) + "\n" + numbered + tail


def _links_text(r: LinksResult) -> str:
    out = [f"{r.title} — {r.path}", f"outgoing links ({len(r.outgoing)}):"]
    out += [
        f"  line {lk.line} -> {lk.path or lk.target + ' (unresolved)'}"
        + (f"#{lk.anchor}" if lk.anchor else "")
        + f": {lk.context}"
        for lk in r.outgoing
    ]
    out.append(f"backlinks ({len(r.backlinks)}):")
    out += [f"  {lk.path}:{lk.line} ({lk.title}): {lk.context}" for lk in r.backlinks]
    return "\n".join(out)


def _related_text(r: RelatedResult) -> str:
    how = (
        "by meaning"
        if r.method == "semantic"
        else f"by keywords, as the note has no embeddings (terms: {', '.join(r.terms) or 'none'})"
    )
    out = (
        [f"Notes related to {r.title} — {r.path} ({how}):"]
        if r.notes
        else [f"No notes related to {r.path}."]
    )
    for n in r.notes:
        marks = "".join(
            m for m, on in ((" [linked]", n.linked), (" [links here]", n.links_here)) if on
        )
        out.append(f"{n.rank}. {n.title} — {n.path}:{n.line} (score {n.score:.3g}){marks}")
        out.append(f"   {n.snippet}")
    return "\n".join(out)


def _sql_text(r: SqlResult) -> str:
    from kbase.sqlapi import cell

    lines = [" | ".join(r.columns)] + [" | ".join(cell(v, 80) for v in row) for row in r.rows]
    lines.append(
        f"({len(r.rows)} rows" + (", more not shown: raise max_rows)" if r.truncated else ")")
    )
    return "\n".join(lines)


# --- running -----------------------------------------------------------------------------------
class _StaticToken:
    """The SDK's TokenVerifier for one shared secret (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="kbase", scopes=[])
        return None


def parse_http(value: str) -> tuple[str, int]:
    """'PORT', ':PORT', 'HOST:PORT' or '[V6]:PORT' -> (host, port);
    the host defaults to 127.0.0.1."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise InputError(
            f"--http {value!r} is not [HOST:]PORT", "e.g. --http 8765 or --http 127.0.0.1:8765"
        )
    return host, number


def security_settings(host: str) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: loopback names, and the address served on."""
    named = f"[{host}]" if ":" in host else host
    hosts = {*LOOPBACK}
    if host not in ("0.0.0.0", "::"):
        hosts.add(named)
    else:  # every interface: requests must name this machine
        hosts |= {socket.gethostname(), socket.getfqdn()}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(f"{h}:*" for h in hosts),
        allowed_origins=sorted(f"{scheme}://{h}:*" for h in hosts for scheme in ("http", "https")),
    )


def serve(
    db_path: Path,
    *,
    http: str | None = None,
    token: str | None = None,
    watch: bool = False,
    embed: bool = True,
    poll: bool = False,
) -> None:
    """Run ``kbase mcp`` until the client disconnects (stdio) or Ctrl-C (HTTP)."""
    db_path = Path(db_path).expanduser()
    if not db_path.exists():
        raise DatabaseError(
            f"no index at {db_path}", "build one with: kbase index PATH (or pass --db)"
        )
    backend = Backend(db_path)
    backend.kb.status()  # fail now, not at the first call, if the file is not a usable index
    options: dict[str, Any] = {}
    host = port = None
    if http is not None:
        host, port = parse_http(http)
        if token:
            options = {
                "token_verifier": _StaticToken(token),
                "auth": AuthSettings(
                    issuer_url=f"http://{_url_host(host)}:{port or 80}", resource_server_url=None
                ),
            }
        elif host not in ("127.0.0.1", "localhost", "::1"):
            raise InputError(
                f"serving on {host} without a token would let anyone who can reach it"
                " read your notes",
                f"pass --token SECRET (or set {TOKEN_ENV}), or serve on 127.0.0.1",
            )
    server = build_server(backend, **options)
    threads = []
    if watch:
        threads.append(
            threading.Thread(target=backend.watch, args=(poll,), name="kbase-watch", daemon=True)
        )
        if embed:
            from kbase.embed.embedder import BATCH_SIZE

            threads.append(
                threading.Thread(
                    target=backend.embed_while_idle,
                    args=(BATCH_SIZE,),
                    name="kbase-idle-embed",
                    daemon=True,
                )
            )
    for t in threads:
        t.start()
    try:
        if http is None:
            server.run("stdio")
        else:
            _serve_http(server, host, port)
    except KeyboardInterrupt:
        pass
    finally:
        backend.stop.set()
        for t in threads:
            t.join(timeout=30)
        backend.kb.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _serve_http(server: KbaseMCP, host: str, port: int) -> None:
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise InputError(
            f"cannot listen on {host}:{port}: {e.strerror}", "choose another port with --http"
        ) from e
    app = server.streamable_http_app(host=host, transport_security=security_settings(host))
    _log(f"serving on http://{_url_host(host)}:{sock.getsockname()[1]}/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
