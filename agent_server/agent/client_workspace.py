"""`ClientWorkspace`: a Workspace whose files live in the editor; each call is a tool request.

    ws = ClientWorkspace(send_request)          # send_request(method, params) -> reply dict
    text = await ws.read_file("src/app.py")     # -> tool.request {method: "read_file", ...}

The API layer provides `send_request`: it sends a `tool.request` over the WebSocket and awaits
the matching `tool.result`, returned as a dict: `{"result": {...}}` on success or
`{"error": {"code": ..., "message": ...}}` (a bare result dict is accepted too). Error codes
map back to the same `WorkspaceError` classes `LocalWorkspace` raises; no answer within the
timeout, or a broken transport, raises `WorkspaceUnavailable`.

The wire format, method by method (params -> result):
    read_file    {path}                                -> {text}
    list_dir     {path, depth, limit}                  -> {entries: [{path, kind, size}], truncated}
    search       {pattern, path, regex, max_results}   -> {matches: [{path, line, text}], truncated}
    write_file   {path, text}                          -> {created}
    run_command  {command, shell, timeout_s, output_cap_bytes}
                                                       -> {exit_code, output, timed_out, truncated}
`plan_edit` and `apply_edit` are computed here (read_file, then the edits package with this
workspace's `EditConfig`; apply_edit adds one write_file), so an editor implements only the
five methods above. `answer_request` is the editor side of the same format over any
Workspace: terminal clients and the tests use it to serve requests from a LocalWorkspace.
Run the tests: .venv/bin/python -m pytest tests/agent/test_workspace.py -q
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_server.agent.edits import EditConfig, EditError, SearchReplace
from agent_server.agent.workspace import Workspace, edit_file, plan_file_edit
from agent_server.agent.workspace_types import (
    CommandResult,
    EditResult,
    Listing,
    SearchResult,
    WorkspaceError,
    WorkspaceUnavailable,
    error_from_code,
)

SendRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
METHODS = ("read_file", "list_dir", "search", "write_file", "run_command")
assert EditError.code  # imported so error_from_code knows "edit_failed"


@dataclass(frozen=True)
class ClientWorkspaceConfig:
    timeout_s: float = 30.0  # how long the editor may take to answer one request
    # run_command waits its own timeout plus this grace before giving up on the editor.
    command_grace_s: float = 10.0
    command_timeout_s: float = 120.0  # default run_command timeout sent to the editor
    command_output_cap_bytes: int = 64_000
    edits: EditConfig = field(default_factory=EditConfig)

    def __post_init__(self) -> None:
        for name in ("timeout_s", "command_grace_s", "command_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ClientWorkspaceConfig.{name} must be > 0 seconds")
        if self.command_output_cap_bytes < 1:
            raise ValueError("ClientWorkspaceConfig.command_output_cap_bytes must be >= 1")


class ClientWorkspace:
    """A Workspace served by the editor through `send_request`."""

    def __init__(self, send_request: SendRequest, config: ClientWorkspaceConfig | None = None):
        self._send = send_request
        self.config = config or ClientWorkspaceConfig()

    async def _call(self, method: str, params: dict[str, Any], timeout_s: float | None = None):
        timeout = timeout_s or self.config.timeout_s
        try:
            reply = await asyncio.wait_for(self._send(method, params), timeout)
        except TimeoutError:
            raise WorkspaceUnavailable(
                f"The editor did not answer {method} within {timeout:g} s; try again later."
            ) from None
        except WorkspaceError:
            raise
        except Exception as err:  # the transport's own failure: connection closed, ...
            raise WorkspaceUnavailable(
                f"The editor could not be reached for {method}: {err}"
            ) from err
        if not isinstance(reply, dict):
            raise WorkspaceUnavailable(f"The editor's answer to {method} was not an object.")
        error = reply.get("error")
        if error:
            if isinstance(error, dict):
                code, message = str(error.get("code", "")), str(error.get("message", ""))
            else:
                code, message = "", str(error)
            raise error_from_code(code, message or f"The editor reported an error ({code}).")
        result = reply.get("result", reply)
        if not isinstance(result, dict):
            raise WorkspaceUnavailable(f"The editor's result for {method} was not an object.")
        return result

    async def _typed(self, method: str, params: dict[str, Any], build, timeout_s=None):
        result = await self._call(method, params, timeout_s)
        try:
            return build(result)
        except (KeyError, TypeError, ValueError) as err:
            raise WorkspaceUnavailable(
                f"The editor's result for {method} is malformed: {err!r}"
            ) from err

    async def read_file(self, path: str) -> str:
        return await self._typed("read_file", {"path": path}, lambda r: _str(r["text"]))

    async def list_dir(
        self, path: str = ".", *, depth: int = 1, limit: int | None = None
    ) -> Listing:
        params = {"path": path, "depth": depth, "limit": limit}
        return await self._typed("list_dir", params, Listing.from_dict)

    async def search(
        self, pattern: str, *, path: str = ".", regex: bool = False, max_results: int | None = None
    ) -> SearchResult:
        params = {"pattern": pattern, "path": path, "regex": regex, "max_results": max_results}
        return await self._typed("search", params, SearchResult.from_dict)

    async def write_file(self, path: str, text: str) -> bool:
        params = {"path": path, "text": text}
        return await self._typed("write_file", params, lambda r: bool(r.get("created", False)))

    async def plan_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await plan_file_edit(self, path, blocks, self.config.edits)

    async def apply_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await edit_file(self, path, blocks, self.config.edits)

    async def run_command(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        timeout_s: float | None = None,
        output_cap_bytes: int | None = None,
    ) -> CommandResult:
        timeout = timeout_s or self.config.command_timeout_s
        params = {
            "command": command if isinstance(command, str) else list(command),
            "shell": shell,
            "timeout_s": timeout,
            "output_cap_bytes": output_cap_bytes or self.config.command_output_cap_bytes,
        }
        wait = timeout + self.config.command_grace_s
        return await self._typed("run_command", params, CommandResult.from_dict, wait)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("text must be a string")
    return value


async def answer_request(ws: Workspace, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The editor side: run one tool request on `ws`, as `{"result": ...}` or `{"error": ...}`."""
    try:
        if method == "read_file":
            result: dict[str, Any] = {"text": await ws.read_file(params["path"])}
        elif method == "list_dir":
            listing = await ws.list_dir(
                params.get("path", "."), depth=params.get("depth") or 1, limit=params.get("limit")
            )
            result = listing.to_dict()
        elif method == "search":
            found = await ws.search(
                params["pattern"],
                path=params.get("path", "."),
                regex=bool(params.get("regex", False)),
                max_results=params.get("max_results"),
            )
            result = found.to_dict()
        elif method == "write_file":
            result = {"created": await ws.write_file(params["path"], params["text"])}
        elif method == "run_command":
            ran = await ws.run_command(
                params["command"],
                shell=bool(params.get("shell", False)),
                timeout_s=params.get("timeout_s"),
                output_cap_bytes=params.get("output_cap_bytes"),
            )
            result = ran.to_dict()
        else:
            return _error("unknown_method", f"Unknown method {method!r}; known: {METHODS}.")
    except WorkspaceError as err:
        return {"error": err.to_dict()}
    except (KeyError, TypeError, ValueError) as err:
        return _error("invalid_request", f"Bad parameters for {method}: {err!r}.")
    return {"result": result}


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
