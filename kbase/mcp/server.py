"""The agent face: the index over the Model Context Protocol (``kbase mcp``), on the official
SDK's ``MCPServer``.

The face is split by job: ``tools`` (the tools as functions over ``KB``), ``schemas`` (their
arguments, structured results and descriptions), ``render`` (their text), ``budget`` (what fits
in a result), ``backend`` (the shared index, concurrency, watching and idle embedding), ``logs``
(log messages to clients), ``prompts`` and ``transport`` (HTTP, the token, the Host/Origin
checks). This module puts them together: the tools, the note resources
(``kbase://note/{path}``), prompts, completion of note names, logging, and running the server
over stdio or streamable HTTP.
"""

from __future__ import annotations

import inspect
import json
import threading
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    Completion,
    ListResourcesResult,
    PromptReference,
    Resource,
    ResourceTemplateReference,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from kbase.errors import DatabaseError, InputError, KbaseError
from kbase.mcp import prompts, render, stdio, tools, transport
from kbase.mcp import schemas as s
from kbase.mcp.backend import SQL_CONNECTIONS, SQL_PER_CLIENT, Backend, to_stderr
from kbase.mcp.budget import DEFAULT_BUDGET, RUN_CHARS, error_text
from kbase.mcp.logs import ClientLog

SERVER_NAME = "kbase"
NOTE_URI = "kbase://note/"
NOTE_TEMPLATE = NOTE_URI + "{+path}"
RESOURCES_PAGE = 500  # notes per resources/list page
COMPLETIONS = 100  # values per completion (the protocol's most)


def _error(text: str) -> CallToolResult:
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
    """MCPServer with kbase's error shape, paginated note resources and client logging."""

    def __init__(self, backend: Backend, **kwargs: Any) -> None:
        super().__init__(
            SERVER_NAME,
            instructions=s.INSTRUCTIONS,
            version=_version(),
            log_level="WARNING",
            **kwargs,
        )
        self.backend = backend
        self._arguments: dict[str, list[str]] | None = None  # each tool's argument names
        self.client_log = ClientLog()
        self.sql_turns = SqlTurns()
        low = self._lowlevel_server
        low.middleware.append(self.client_log.middleware)
        low.middleware.append(_bounded_errors)
        low.add_request_handler(
            "logging/setLevel", SetLevelRequestParams, self.client_log.set_level
        )
        backend.say = self.client_log.broadcast

    async def list_tools(self):
        """The tools as tools/list shows them: short (schemas.compact_input, output_schema)."""
        listed = await super().list_tools()
        for t in listed:
            t.input_schema = s.compact_input(t.input_schema)
            model = s.OUTPUTS.get(t.name)
            t.output_schema = s.output_schema(model) if model else {"type": "object"}
        return listed

    async def call_tool(self, name, arguments, context=None):
        """Arguments that fail the schema are a one-line tool error, as any other bad input; so
        is an argument the tool does not take (a misspelt 'limt' was dropped without a word, and
        the call ran with the default)."""
        unknown = await self._unknown_arguments(name, arguments)
        if unknown:
            return _error(unknown)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                return _error(
                    _validation_message(e.__cause__) + " (hint: see the tool's input schema)"
                )
            raise

    async def get_prompt(self, name, arguments=None, context=None):
        """A request for no prompt, or without its argument, is a JSON-RPC error of one line
        (invalid params) naming the prompt or argument; the SDK answered 'Internal server
        error' and printed a traceback on stderr."""
        problem = prompts.request_problem(name, arguments)
        if problem is not None:
            raise MCPError(INVALID_PARAMS, problem)
        return await super().get_prompt(name, arguments, context)

    async def _unknown_arguments(self, name: str, arguments: Any) -> str:
        """The error for the arguments of ``name`` it does not take, or ""."""
        if self._arguments is None:
            self._arguments = {
                t.name: list(t.input_schema.get("properties", {}))
                for t in await MCPServer.list_tools(self)
            }
        known = self._arguments.get(name)
        if known is None or not isinstance(arguments, dict):
            return ""  # an unknown tool, arguments that are not an object: the SDK says so
        unknown = [k for k in arguments if k not in known]
        if not unknown:
            return ""
        shown = ", ".join(json.dumps(k)[:40] for k in unknown[:5])
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        plural = "s" if len(unknown) > 1 else ""
        return (
            f"invalid arguments: {name} takes no argument{plural} {shown}{more}"
            f" (hint: its arguments are {', '.join(known)})"
        )

    async def _handle_list_resources(self, ctx, params):  # the SDK's hook, paginated here
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


async def _bounded_errors(ctx: Any, call_next: Any) -> Any:
    """Every error within the budget, whatever it echoes (a 10 MB note name was sent back in
    full): a tool's error result and a JSON-RPC error alike (budget.error_text)."""
    try:
        result = await call_next(ctx)
    except MCPError as e:
        if len(e.message) <= RUN_CHARS and e.data is None:
            raise
        raise MCPError(e.code, error_text(e.message)) from None
    if isinstance(result, CallToolResult) and result.is_error:
        for part in result.content:
            if isinstance(part, TextContent):
                part.text = error_text(part.text)
    elif isinstance(result, dict) and result.get("isError"):
        for item in result.get("content") or ():
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                item["text"] = error_text(item["text"])
    return result


def _session(ctx: Any) -> Any:
    """The client a call comes from (None for a call made in-process, outside a request)."""
    try:
        return ctx.request_context.session
    except ValueError:
        return None


class SqlTurns:
    """sql calls run on connections of their own (Backend.use_sql): at most SQL_CONNECTIONS at
    once, SQL_PER_CLIENT of them for one client; the others wait here, in the event loop (not
    in a worker thread, which the other tools need)."""

    def __init__(self) -> None:
        self._all: anyio.CapacityLimiter | None = None
        self._each: weakref.WeakKeyDictionary[Any, anyio.Semaphore] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def turn(self, session: Any) -> AsyncIterator[None]:
        if self._all is None:
            self._all = anyio.CapacityLimiter(SQL_CONNECTIONS)
        conn = getattr(session, "_connection", session)
        try:
            mine = self._each.setdefault(conn, anyio.Semaphore(SQL_PER_CLIENT))
        except TypeError:  # not weakly referable
            mine = anyio.Semaphore(SQL_PER_CLIENT)
        async with mine, self._all:
            yield


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


# (the destructive and idempotent hints apply only to tools that are not read-only)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(
    backend: Backend, *, default_budget: int = DEFAULT_BUDGET, **server_options: Any
) -> KbaseMCP:
    """The MCP server with kbase's tools, resources and prompts over ``backend``;
    ``default_budget``: the tools' default result budget in tokens."""
    server = KbaseMCP(backend, **server_options)
    log = server.client_log

    async def call(ctx: Context, fn, model: bool = False, sql: bool = False) -> CallToolResult:
        def work() -> tools.Reply:
            with backend.use_sql() if sql else backend.use(model=model) as kb:
                return fn(kb)

        try:
            if sql:  # beside the other tools, within the limits of SqlTurns
                async with server.sql_turns.turn(_session(ctx)):
                    reply = await anyio.to_thread.run_sync(work)
            else:
                reply = await anyio.to_thread.run_sync(work)
        except KbaseError as e:
            return _error(render.error_text(e.message, e.hint))
        for level, message in reply.log:
            await log.about_call(ctx, level, message)
        return _result(reply)

    @server.tool(annotations=READ_ONLY, description=s.SEARCH)
    async def search(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                description='Words, "a phrase", prefix*, -excluded, a OR b, path:x, file:x, '
                "tag:#x; or a question (semantic, hybrid)."
            ),
        ],
        mode: Annotated[
            Literal["keyword", "semantic", "hybrid"] | None,
            Field(description="Default: hybrid if embedded, else keyword."),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=s.SEARCH_LIMIT_MAX)] = 10,
        offset: s.Offset = 0,
        path: Annotated[
            str | None,
            Field(description="Under this folder or matching this glob."),
        ] = None,
        tags: Annotated[
            list[str],
            Field(description="With all these tags."),
        ] = [],  # noqa: B006
        since: Annotated[
            str | None,
            Field(description="On or after: YYYY-MM-DD or an age (7d, 2w, 1y)."),
        ] = None,
        until: Annotated[str | None, Field(description="On or before.")] = None,
        exclude: Annotated[
            list[str],
            Field(description="Leave out paths matching these globs or folders."),
        ] = [],  # noqa: B006
        passages: Annotated[
            int,
            Field(
                ge=0,
                le=s.SEARCH_LIMIT_MAX,
                description="How many first hits come with their passage.",
            ),
        ] = tools.PASSAGES,
        budget: s.Budget = default_budget,
    ) -> Annotated[CallToolResult, dict[str, Any]]:  # (schema: s.OUTPUTS)
        return await call(
            ctx,
            lambda kb: tools.search(
                kb,
                query,
                mode=mode,
                limit=limit,
                offset=offset,
                path=path,
                tags=tags,
                since=since,
                until=until,
                exclude=exclude,
                budget=budget,
                passages=passages,
            ),
            model=mode != "keyword",
        )

    @server.tool(annotations=READ_ONLY, description=s.READ)
    async def read(
        ctx: Context,
        note: s.NoteArg,
        start_line: Annotated[int | None, Field(ge=1, description="First line (from 1).")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="Last line (inclusive).")] = None,
        start_char: Annotated[
            int,
            Field(
                ge=1,
                description="Where a cut line goes on: next_start_char.",
            ),
        ] = 1,
        page: Annotated[
            int | None,
            Field(ge=1, description="A PDF's page (from 1), instead of lines."),
        ] = None,
        budget: s.Budget = default_budget,
    ) -> Annotated[CallToolResult, dict[str, Any]]:  # (schema: s.OUTPUTS)
        return await call(
            ctx,
            lambda kb: tools.read(
                kb,
                note,
                start_line=start_line,
                end_line=end_line,
                start_char=start_char,
                budget=budget,
                page=page,
            ),
        )

    @server.tool(annotations=READ_ONLY, description=s.LINKS)
    async def links(
        ctx: Context,
        note: s.NoteArg,
        direction: Literal["both", "outgoing", "backlinks"] = "both",
        limit: Annotated[
            int,
            Field(ge=1, le=s.LINKS_LIMIT_MAX, description="Links of each direction."),
        ] = s.LINKS_LIMIT_DEFAULT,
        offset: s.Offset = 0,
        budget: s.Budget = default_budget,
    ) -> Annotated[CallToolResult, dict[str, Any]]:  # (schema: s.OUTPUTS)
        return await call(
            ctx,
            lambda kb: tools.links(
                kb, note, direction=direction, limit=limit, offset=offset, budget=budget
            ),
        )

    @server.tool(annotations=READ_ONLY, description=s.RELATED)
    async def related(
        ctx: Context,
        note: s.NoteArg,
        limit: Annotated[int, Field(ge=1, le=s.RELATED_LIMIT_MAX)] = 10,
        offset: s.Offset = 0,
        include_linked: Annotated[bool, Field(description="Also notes it links to.")] = False,
        budget: s.Budget = default_budget,
    ) -> Annotated[CallToolResult, dict[str, Any]]:  # (schema: s.OUTPUTS)
        return await call(
            ctx,
            lambda kb: tools.related(
                kb,
                note,
                limit=limit,
                offset=offset,
                include_linked=include_linked,
                budget=budget,
            ),
        )

    sql_description = s.SQL
    try:
        with backend.use() as kb:
            sql_description = s.sql_description(*tools.schema_names(kb))
    except KbaseError:
        pass

    @server.tool(annotations=READ_ONLY, description=sql_description)
    async def sql(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                description="One read-only SQLite statement.",
            ),
        ],
        max_rows: Annotated[
            int, Field(ge=1, le=s.SQL_ROWS_MAX, description="Rows at most.")
        ] = s.SQL_ROWS_DEFAULT,
        offset: s.Offset = 0,
        timeout: Annotated[
            float,
            Field(gt=0, le=s.SQL_TIMEOUT_MAX, description="Seconds before it is stopped."),
        ] = s.SQL_TIMEOUT_DEFAULT,
        budget: s.Budget = default_budget,
    ) -> Annotated[CallToolResult, dict[str, Any]]:  # (schema: s.OUTPUTS)
        return await call(
            ctx,
            lambda kb: tools.sql(
                kb, query, max_rows=max_rows, offset=offset, timeout=timeout, budget=budget
            ),
            sql=True,
        )

    @server.tool(annotations=READ_ONLY, description=s.STATUS)
    async def status(
        ctx: Context, budget: s.Budget = default_budget
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        state = {"watching": backend.watching, "embedded_while_idle": backend.idle_embedded}
        return await call(ctx, lambda kb: tools.status(kb, state, budget=budget))

    @server.resource(
        NOTE_TEMPLATE,
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

    for spec in prompts.PROMPTS:
        server.add_prompt(
            Prompt.from_function(
                _prompt_function(spec),
                name=spec.name,
                title=spec.title,
                description=spec.description,
            )
        )

    @server.completion()
    async def complete(ref, argument, context) -> Completion | None:
        """Note paths for kbase://note/{path} and for the prompts' (and tools') note arguments,
        from what has been typed."""
        if isinstance(ref, ResourceTemplateReference):
            wanted = ref.uri == NOTE_TEMPLATE and argument.name == "path"
        elif isinstance(ref, PromptReference):
            # The protocol completes prompt and resource arguments; a client that asks about
            # a tool's note argument by the tool's name is answered the same way.
            wanted = argument.name == "note" and (
                ref.name in prompts.NOTE_ARGUMENTS or ref.name in ("read", "links", "related")
            )
        else:
            wanted = False
        if not wanted:
            return None

        def paths() -> tuple[list[str], int]:
            with backend.use() as kb:
                return kb.complete_notes(argument.value, COMPLETIONS)

        try:
            values, total = await anyio.to_thread.run_sync(paths)
        except KbaseError:
            return None
        return Completion(values=values, total=total, has_more=total > len(values))

    return server


def _prompt_function(spec: prompts.PromptSpec) -> Any:
    """A function whose one parameter is the prompt's argument, described (for prompts/list)."""

    def fn(**arguments: str) -> str:
        return spec.text(arguments[spec.argument])

    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                spec.argument,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[str, Field(description=spec.argument_description)],
            )
        ],
        return_annotation=str,
    )
    fn.__annotations__ = {
        spec.argument: Annotated[str, Field(description=spec.argument_description)],
        "return": str,
    }
    return fn


# --- running -----------------------------------------------------------------------------------
def serve(
    db_path: Path,
    *,
    http: str | None = None,
    token: str | None = None,
    watch: bool = False,
    embed: bool = True,
    poll: bool = False,
    budget: int = DEFAULT_BUDGET,
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
    server = build_server(backend, default_budget=budget, **options)
    # kbase search from a shell meanwhile is handed to this process (its model and vectors)
    handed = backend.kb.serve_searches(use=lambda: backend.use(model=True))
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
            anyio.run(stdio.serve, server, to_stderr)
        else:
            transport.serve_http(
                server, address[0], sock, backend.say, token=token, complain=to_stderr
            )
    except KeyboardInterrupt:
        pass
    finally:
        backend.stop.set()
        handed.close()
        for t in threads:
            t.join(timeout=30)
        backend.close()
