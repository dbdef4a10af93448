"""`EditorWorkspace`: the agent's Workspace as the editor sees it; writes stay proposals.

    ws = EditorWorkspace(LocalWorkspace(root), open_text=lambda path: buffer_text_or_None)
    await agent.run(task)           # the agent reads buffers (unsaved text included), writes here
    ws.changes                      # {path: (text before the turn, text after)}

Reads see, in order: what the agent wrote in this turn, the editor's open buffer (unsaved
edits included), then the disk. Writes never touch the disk: the editor owns the files, so
they reach it as a `WorkspaceEdit` (code action resolve) or `workspace/applyEdit` (chat),
and the editor saves them when the person does. Listings and search read the disk;
commands run on the disk, confined to the root like LocalWorkspace's. One per agent turn.
Tests: tests/lsp/test_overlay.py.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence

from agent_server.agent.edits import SearchReplace
from agent_server.agent.workspace import LocalWorkspace, edit_file, plan_file_edit
from agent_server.agent.workspace_types import (
    CommandResult,
    EditResult,
    FileNotFound,
    Listing,
    SearchResult,
)

OpenText = Callable[[str], str | None]  # workspace path -> open buffer text, or None


class EditorWorkspace:
    def __init__(self, disk: LocalWorkspace, open_text: OpenText) -> None:
        self.disk, self.open_text = disk, open_text
        self.root = disk.root
        # path -> (text before this turn or None for a new file, text after)
        self.changes: dict[str, tuple[str | None, str]] = {}
        self._originals: dict[str, str | None] = {}

    async def _original(self, path: str) -> str | None:
        """The file as the turn first saw it: later reads agree with it (a snapshot)."""
        if path not in self._originals:
            text = self.open_text(path)
            if text is None:
                try:
                    text = await self.disk.read_file(path)
                except FileNotFound:
                    text = None
            self._originals[path] = text
        return self._originals[path]

    def _key(self, path: str) -> str:
        self.disk.fs.resolve(path)  # confinement: the same refusals as LocalWorkspace
        return posixpath.normpath(path)  # "./a.py" and "a.py" are one file

    async def read_file(self, path: str) -> str:
        path = self._key(path)
        if path in self.changes:
            return self.changes[path][1]
        text = await self._original(path)
        if text is None:
            raise FileNotFound(f"'{path}' does not exist.")
        return text

    async def current(self, path: str) -> str | None:
        """The text as this turn sees it now; None for a file that does not exist yet."""
        path = self._key(path)
        if path in self.changes:
            return self.changes[path][1]
        return await self._original(path)

    async def write_file(self, path: str, text: str) -> bool:
        path = self._key(path)
        if path in self.changes:
            before = self.changes[path][0]
        else:
            before = await self._original(path)
        self.changes[path] = (before, text)
        return before is None

    async def plan_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await plan_file_edit(self, path, blocks, self.disk.config.edits)

    async def apply_edit(self, path: str, blocks: Sequence[SearchReplace]) -> EditResult:
        return await edit_file(self, path, blocks, self.disk.config.edits)

    async def list_dir(
        self, path: str = ".", *, depth: int = 1, limit: int | None = None
    ) -> Listing:
        return await self.disk.list_dir(path, depth=depth, limit=limit)

    async def search(
        self, pattern: str, *, path: str = ".", regex: bool = False, max_results: int | None = None
    ) -> SearchResult:
        return await self.disk.search(pattern, path=path, regex=regex, max_results=max_results)

    async def run_command(
        self,
        command: str | Sequence[str],
        *,
        shell: bool = False,
        timeout_s: float | None = None,
        output_cap_bytes: int | None = None,
    ) -> CommandResult:
        return await self.disk.run_command(
            command, shell=shell, timeout_s=timeout_s, output_cap_bytes=output_cap_bytes
        )

    def changed(self) -> dict[str, tuple[str | None, str]]:
        """The files whose text differs from where the turn started."""
        return {p: (b, a) for p, (b, a) in self.changes.items() if b != a}
