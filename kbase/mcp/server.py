"""The agent face: the index over the Model Context Protocol (``kbase mcp``), on the official
SDK's ``MCPServer``.

The face is split by job: ``tools`` (the tools as functions over ``KB``), ``schemas`` (their
arguments and structured results), ``render`` (their text), ``backend`` (the shared index,
concurrency, watching and idle embedding) and ``transport`` (HTTP, the token, the Host/Origin
checks). This module puts them together: it registers the tools, the note resources
(``kbase://note/{path}``), and runs the server over stdio or streamable HTTP.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, ListResourcesResult, Resource, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.mcp import tools, transport
from kbase.mcp.backend import Backend
from kbase.mcp.schemas import (
    INSTRUCTIONS,
    SEARCH_LIMIT_MAX,
    SQL_ROWS_DEFAULT,
    SQL_ROWS_MAX,
    SQL_TIMEOUT_MAX,
    LinksResult,
    NoteArg,
    ReadResult,
    RelatedResult,
    SearchResult,
    SqlResult,
)

SERVER_NAME = "kbase"
NOTE_URI = "kbase://note/"
RESOURCES_PAGE = 500  # notes per resources/list page


def _error(message: str, hint: str | None = None) -> CallToolResult:
    text = message + (f" (hint: {hint})" if hint else "")
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _result(reply: tools.Reply) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=reply.text)], structured_content=reply.data()
    )


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
                return kb.note_list(offset, RESOURCES_PAGE + 1)

        rows = await anyio.to_thread.run_sync(page)
        resources = [
            Resource(uri=note_uri(n.path), name=n.path, title=n.title, mime_type=_mime(n.kind))
            for n in rows[:RESOURCES_PAGE]
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


def build_server(backend: Backend, **server_options) -> KbaseMCP:
    """The MCP server with kbase's tools and resources over ``backend``."""
    server = KbaseMCP(backend, **server_options)

    def call(fn, model: bool = False) -> CallToolResult:
        try:
            with backend.use(model=model) as kb:
                return _result(fn(kb))
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

        return call(
            lambda kb: tools.search(
                kb,
                query,
                mode=mode,
                limit=limit,
                path=path,
                tags=tags,
                since=since,
                until=until,
                exclude=exclude,
            ),
            model=mode != "keyword",
        )

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

        return call(lambda kb: tools.read(kb, note, start_line=start_line, end_line=end_line))

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

        return call(lambda kb: tools.links(kb, note, direction=direction))

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

        return call(lambda kb: tools.related(kb, note, limit=limit, include_linked=include_linked))

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

        # kbase_embed() and kbase_search() may embed: the model
        return call(lambda kb: tools.sql(kb, query, max_rows=max_rows, timeout=timeout), model=True)

    @server.tool(annotations=READ_ONLY)
    def status() -> Annotated[CallToolResult, dict[str, Any]]:
        """What the index holds: its roots, counts of notes, chunks and links, how many chunks have
        embeddings (semantic search covers only those), and when it was last indexed."""

        server_state = {"watching": backend.watching, "embedded_while_idle": backend.idle_embedded}
        return call(lambda kb: tools.status(kb, server_state))

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


# --- running -----------------------------------------------------------------------------------
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
    address = None
    if http is not None:  # bad options fail first, before the index is opened
        address = transport.parse_http(http)
        transport.check_exposure(address[0], token)
    db_path = Path(db_path).expanduser()
    if not db_path.exists():
        raise DatabaseError(
            f"no index at {db_path}", "build one with: kbase index PATH (or pass --db)"
        )
    backend = Backend(db_path)
    backend.kb.status()  # fail now, not at the first call, if the file is not a usable index
    sock = None
    options: dict[str, Any] = {}
    if address is not None:
        sock = transport.listen(*address)
        options = transport.auth_options(address[0], sock.getsockname()[1], token)
    server = build_server(backend, **options)
    threads = []
    if watch:
        threads.append(
            threading.Thread(target=backend.watch, args=(poll,), name="kbase-watch", daemon=True)
        )
        if embed:
            threads.append(
                threading.Thread(
                    target=backend.embed_while_idle, name="kbase-idle-embed", daemon=True
                )
            )
    for t in threads:
        t.start()
    try:
        if sock is None or address is None:
            server.run("stdio")
        else:
            transport.serve_http(server, address[0], sock, backend.say)
    except KeyboardInterrupt:
        pass
    finally:
        backend.stop.set()
        for t in threads:
            t.join(timeout=30)
        backend.kb.close()
