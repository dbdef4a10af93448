"""The `Workspace` seam (what the agent's tools act on) and `LocalWorkspace(root)`.

    ws = LocalWorkspace("/path/to/project")
    text = await ws.read_file("src/app.py")
    await ws.apply_edit("src/app.py", [SearchReplace("x = 1\\n", "x = 2\\n")])
    plan = await ws.plan_edit("src/app.py", blocks)   # the same, computed but not written
    result = await ws.run_command(["pytest", "-q"], timeout_s=60)

Implementations: `LocalWorkspace` (this file: the server's own disk, confined to `root`; the
learner's rollouts and `apprentice chat` use it), `ClientWorkspace` (client_workspace.py:
each call goes to the editor over the WebSocket) and the language server's `EditorWorkspace`
(lsp/overlay.py: writes stay proposals). All raise the same `WorkspaceError` types
(workspace_types.py), whose messages are written to be the model's next observation.

Confinement (workspace_fs.py): relative paths only; absolute paths, `..` out of the root,
NUL bytes, over-long names and symlinks resolving outside are refused, for reads, writes,
listings and search alike; writes are atomic and keep the file's mode and newline style.
Edits: `plan_edit` reads the file and computes its whole new text with the workspace's
`EditConfig` (edits.plan_edits) without writing; `apply_edit` is `plan_edit` then one
`write_file`. Every edit goes this one way: the agent's edit tool plans, has the plan
reviewed, then writes. Approval is NOT the workspace's job: in interactive mode the agent's
tools ask the person before they call `write_file` or `run_command`.
Run the tests: .venv/bin/python -m pytest tests/agent/test_workspace.py -q
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agent_server.agent.edits import (
    EditConfig,
    SearchReplace,
    detect_newline,
    plan_edits,
    unified_diff,
)
from agent_server.agent.workspace_exec import run_process, scrubbed_env
from agent_server.agent.workspace_fs import ConfinedFS
from agent_server.agent.workspace_types import (
    BinaryFile,
    CommandResult,
    DirEntry,
    EditResult,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    InvalidPattern,
    Listing,
    NotADirectory,
    SearchMatch,
    SearchResult,
)

DEFAULT_IGNORE = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache",
     ".ruff_cache", ".tox"}
)  # fmt: skip


@runtime_checkable
class Workspace(Protocol):
    """Files and commands of one project. Paths are relative to its root, '/'-separated."""

    async def read_file(self, path: str) -> str: ...

    async def list_dir(
        self, path: str = ".", *, depth: int = 1, limit: int | None = None
    ) -> Listing:
        """Entries under `path`, `depth` levels deep (1 = direct children)."""
        ...

    async def search(
        self, pattern: str, *, path: str = ".", regex: bool = False, max_results: int | None = None
    ) -> SearchResult:
        """Lines containing `pattern` (a literal string unless regex=True)."""
        ...

    async def write_file(self, path: str, text: str) -> bool:
        """Replace or create the file (parents too); True when it was created."""
        ...

    async def plan_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        """What apply_edit would write, computed with the workspace's EditConfig; nothing is
        written. EditError (or FileNotFound) when the blocks do not apply."""
        ...

    async def apply_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        """All blocks or nothing (EditError, file untouched); an empty SEARCH creates."""
        ...

    async def run_command(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        timeout_s: float | None = None,
        output_cap_bytes: int | None = None,
    ) -> CommandResult:
        """Run in the root: argv (a string is split like a shell would) or, with shell=True,
        a shell command line."""
        ...


async def plan_file_edit(
    ws: Workspace, path: str, blocks: Sequence[SearchReplace], config: EditConfig
) -> EditResult:
    """plan_edit for any workspace: read the file, compute its whole new text; no write."""
    try:
        old, exists = await ws.read_file(path), True
    except FileNotFound:
        if any(b.search.strip() for b in blocks):
            raise FileNotFound(
                f"'{path}' does not exist. To create it, send one edit with an empty SEARCH "
                "(search) and the whole content as REPLACE (replace)."
            ) from None
        old, exists = "", False
    plan = plan_edits(old, blocks, config)
    diff = unified_diff(old, plan.text, path)
    return EditResult(path, old, plan.text, diff, created=not exists, strategies=plan.strategies)


async def edit_file(
    ws: Workspace, path: str, blocks: Sequence[SearchReplace], config: EditConfig
) -> EditResult:
    """apply_edit for any workspace: plan_file_edit, then write the whole new text once."""
    result = await plan_file_edit(ws, path, blocks, config)
    if result.new_text != result.old_text or result.created:
        await ws.write_file(path, result.new_text)
    return result


@dataclass(frozen=True)
class LocalWorkspaceConfig:
    """Limits of a LocalWorkspace. Defaults suit an interactive agent on a laptop."""

    max_file_bytes: int = 1_000_000  # read_file / write_file refuse larger files
    list_limit: int = 500  # most entries one list_dir returns
    list_max_depth: int = 10  # deepest list_dir may go
    search_max_results: int = 200  # default and ceiling of search's max_results
    search_max_files: int = 20_000  # files one search reads at most (then truncated)
    search_line_chars: int = 400  # longer matching lines are shortened in results
    ignore_names: frozenset[str] = DEFAULT_IGNORE  # never listed or searched
    command_timeout_s: float = 120.0  # default run_command timeout
    command_output_cap_bytes: int = 64_000  # default cap on a command's kept output
    env_drop_prefixes: tuple[str, ...] = ("APPRENTICE_",)  # never passed to commands
    extra_env: Mapping[str, str] = field(default_factory=dict)  # added to commands' env
    edits: EditConfig = field(default_factory=EditConfig)

    def __post_init__(self) -> None:
        positive = ["max_file_bytes", "list_limit", "list_max_depth", "search_max_results"]
        positive += ["search_max_files", "search_line_chars", "command_output_cap_bytes"]
        for name in positive:
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"LocalWorkspaceConfig.{name} must be >= 1, got {value}")
        if self.command_timeout_s <= 0:
            raise ValueError(f"command_timeout_s must be > 0 seconds, got {self.command_timeout_s}")


def _decode(data: bytes, path: str) -> str:
    if b"\x00" in data[:8192]:
        raise BinaryFile(f"'{path}' is a binary file; only text files can be read or edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BinaryFile(f"'{path}' is not UTF-8 text; it cannot be read or edited.") from None


class LocalWorkspace:
    """A Workspace on this machine's disk, confined to `root`."""

    def __init__(self, root: str | os.PathLike[str], config: LocalWorkspaceConfig | None = None):
        self.fs = ConfinedFS(root)
        self.root = self.fs.root
        self.config = config or LocalWorkspaceConfig()

    async def read_file(self, path: str) -> str:
        return await asyncio.to_thread(self._read, path)

    def _read(self, path: str) -> str:
        return _decode(self.fs.read_bytes(path, self.config.max_file_bytes), path)

    async def write_file(self, path: str, text: str) -> bool:
        return await asyncio.to_thread(self._write, path, text)

    def _write(self, path: str, text: str) -> bool:
        if not isinstance(text, str):
            raise InvalidPath(f"The new text of '{path}' must be a string.")
        try:
            old = self._read(path)
        except (FileNotFound, BinaryFile, FileTooLarge):
            old = None
        if old and detect_newline(old) == "\r\n" and "\r\n" not in text:
            text = text.replace("\n", "\r\n")  # keep the file's line endings
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidPath(f"The new text of '{path}' is not valid Unicode.") from None
        if len(data) > self.config.max_file_bytes:
            raise FileTooLarge(
                f"The new text has {len(data)} bytes, over the "
                f"{self.config.max_file_bytes}-byte limit."
            )
        return self.fs.write_atomic(path, data)

    async def plan_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await plan_file_edit(self, path, blocks, self.config.edits)

    async def apply_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await edit_file(self, path, blocks, self.config.edits)

    async def list_dir(
        self, path: str = ".", *, depth: int = 1, limit: int | None = None
    ) -> Listing:
        return await asyncio.to_thread(self._list, path, depth, limit)

    def _list(self, path: str, depth: int, limit: int | None) -> Listing:
        cfg = self.config
        depth = min(max(int(depth), 1), cfg.list_max_depth)
        limit = min(max(int(limit or cfg.list_limit), 1), cfg.list_limit)
        parts = self.fs.resolve(path, allow_root=True)
        if self.fs.kind(parts, path) != "dir":
            raise NotADirectory(f"'{path}' is not a directory; use read_file for a file.")
        entries: list[DirEntry] = []
        for item in self.fs.walk(parts, path, depth, cfg.ignore_names):
            if len(entries) >= limit:
                return Listing(entries, truncated=True)
            entries.append(DirEntry(item.rel, item.kind, item.size))
        return Listing(entries)

    async def search(
        self, pattern: str, *, path: str = ".", regex: bool = False, max_results: int | None = None
    ) -> SearchResult:
        return await asyncio.to_thread(self._search, pattern, path, regex, max_results)

    def _search(
        self, pattern: str, path: str, regex: bool, max_results: int | None
    ) -> SearchResult:
        cfg = self.config
        if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
            raise InvalidPattern("The search pattern is empty; give the text to look for.")
        try:
            rx = re.compile(pattern if regex else re.escape(pattern))
        except re.error as err:
            raise InvalidPattern(
                f"The regex does not compile: {err}. Search for plain text with regex=false."
            ) from None
        limit = min(max(int(max_results or cfg.search_max_results), 1), cfg.search_max_results)
        parts = self.fs.resolve(path, allow_root=True)
        matches: list[SearchMatch] = []
        for rel, data in self._texts(parts, path):
            if rel is None:  # search_max_files reached
                return SearchResult(matches, truncated=True)
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line[: 4 * cfg.search_line_chars]):
                    if len(matches) >= limit:
                        return SearchResult(matches, truncated=True)
                    matches.append(SearchMatch(rel, number, line[: cfg.search_line_chars]))
        return SearchResult(matches)

    def _texts(self, parts: tuple[str, ...], shown: str) -> Iterator[tuple[str | None, bytes]]:
        """(path, bytes) of the text files to search; (None, b"") when over the file cap."""
        cfg = self.config
        if self.fs.kind(parts, shown) == "file":
            data = self.fs.read_bytes("/".join(parts), cfg.max_file_bytes)
            if b"\x00" not in data[:8192]:
                yield "/".join(parts), data
            return
        count = 0
        for item in self.fs.walk(parts, shown, 100, cfg.ignore_names):
            if item.kind != "file":
                continue
            count += 1
            if count > cfg.search_max_files:
                yield None, b""
                return
            # Read while the walk holds the directory's descriptor open.
            data = self.fs.read_in(item.dir_fd, item.name, cfg.max_file_bytes)
            if data is not None and b"\x00" not in data[:8192]:
                yield item.rel, data

    async def run_command(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        timeout_s: float | None = None,
        output_cap_bytes: int | None = None,
    ) -> CommandResult:
        cfg = self.config
        return await run_process(
            command,
            shell=shell,
            cwd=self.root,
            env=scrubbed_env(os.environ, cfg.env_drop_prefixes, cfg.extra_env),
            timeout_s=timeout_s if timeout_s and timeout_s > 0 else cfg.command_timeout_s,
            output_cap_bytes=output_cap_bytes or cfg.command_output_cap_bytes,
        )
