"""The editor's side of an agent turn (the `Editor` seam of lsp/host.py), and progress.

- `ResolveEditor` (codeAction/resolve): every proposal is kept in the turn's workspace;
  the result is one `WorkspaceEdit` returned to the client, who decides by applying it.
  Commands are refused: a code action edits, it does not run things.
- `ChatEditor` (apprentice.chat): each proposal goes to the client at once with
  `workspace/applyEdit`; applied -> the agent sees it accepted, the outcome `accepted` is
  stored and followed up after the settle time (lsp/followups.py); not applied (or an
  error answer) -> rejected with the editor's reason prefixed `[editor] ` (which the
  agent reads): the editor failed, no person decided, so the learner does not train on it.
  The person's own rejection is `apprentice.reject` of the edit (lsp/features/commands.py).
  Commands ask the person with `window/showMessageRequest` (no answer in time: refused).
- `Progress`: `$/progress` work-done reports on a server-created token, when the client
  supports them; cancelling it in the editor cancels the turn.
Tests: tests/lsp/test_server.py (chat, resolve) through the real server process.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

from agent_server.agent.events import EditDecision, EditProposal
from agent_server.agent.tools import CommandDecision
from agent_server.agent.workspace import LocalWorkspace
from feedback.vocab import EDITOR_REASON_PREFIX
from lsp.followups import EditFollowUp
from lsp.overlay import EditorWorkspace
from lsp.text import uri_path
from lsp.workspace_edit import path_uri, workspace_edit

if TYPE_CHECKING:
    from lsp.server import ApprenticeServer

RUN, REFUSE = "Run", "Refuse"


class Progress:
    """One work-done progress bar; silent when the client has no window.workDoneProgress."""

    def __init__(self, ls: ApprenticeServer, title: str) -> None:
        self.ls, self.title = ls, title
        self.token: str | None = None

    async def begin(self, message: str, *, cancel: asyncio.Task[object] | None = None) -> None:
        window = self.ls.client_capabilities.window
        if window is None or not window.work_done_progress:
            return
        token = f"apprentice-{uuid.uuid4().hex[:12]}"
        try:
            await self.ls.work_done_progress.create_async(token)
        except Exception:  # the client refused the token: carry on without a progress bar
            return
        self.token = token
        value = types.WorkDoneProgressBegin(self.title, cancellable=cancel is not None,
                                            message=message)  # fmt: skip
        self.ls.work_done_progress.begin(token, value)
        future = self.ls.work_done_progress.tokens.get(token)
        if cancel is not None and future is not None:
            loop = asyncio.get_running_loop()
            future.add_done_callback(
                lambda f: loop.call_soon_threadsafe(cancel.cancel) if f.cancelled() else None
            )

    def report(self, message: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message)
            )

    def end(self, message: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(self.token, None)
            self.token = None


class _Base:
    def __init__(self, ls: ApprenticeServer, root: str, progress: Progress) -> None:
        self.ls, self.root, self.progress = ls, root, progress
        self.versions: dict[str, int | None] = {}  # buffer version each file was read at
        self.workspace = EditorWorkspace(LocalWorkspace(root), self._open_text)
        self.proposals: list[EditProposal] = []

    def _open_text(self, path: str) -> str | None:
        for uri, doc in list(self.ls.workspace.text_documents.items()):
            if uri_path(uri, self.root) == path:
                self.versions[path] = doc.version
                return doc.source
        return None

    async def on_step(self, text: str) -> None:
        self.progress.report(text)


class ResolveEditor(_Base):
    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        self.proposals.append(proposal)
        return EditDecision.accept()  # provisional: the client decides when it applies

    async def approve_command(self, command: str) -> CommandDecision:
        return CommandDecision(False, "a code action cannot run commands; edit the file instead")

    def edit(self) -> types.WorkspaceEdit | None:
        changes = self.workspace.changed()
        return workspace_edit(self.ls, self.root, changes, self.versions) if changes else None


class ChatEditor(_Base):
    def __init__(self, ls: ApprenticeServer, root: str, progress: Progress) -> None:
        super().__init__(ls, root, progress)
        self.applied: list[str] = []
        self.rejected: list[str] = []
        self._sent: set[str] = set()  # files already edited in this turn

    async def review_edit(self, proposal: EditProposal) -> EditDecision:
        self.proposals.append(proposal)
        path = proposal.path
        before = await self.workspace.current(path)
        # The first edit of a file carries the version the agent read; later ones follow
        # edits this turn applied, whose didChange may not have arrived yet.
        version = None if path in self._sent else self.versions.get(path)
        edit = workspace_edit(self.ls, self.root, {path: (before, proposal.after)},
                              {path: version})  # fmt: skip
        params = types.ApplyWorkspaceEditParams(edit, label=f"Apprentice: edit {path}")
        try:
            result = await self.ls.workspace_apply_edit_async(params)
            applied, reason = bool(result.applied), result.failure_reason
        except Exception as exc:  # an error answer: the editor failed to apply it too
            applied, reason = False, f"the editor answered with an error: {exc}"
        if applied:
            self._sent.add(path)
            self.applied.append(proposal.id)
            await self.ls.outcomes.write(proposal.id, "accepted", final_text=proposal.after)
            uri = path_uri(self.root, path)
            self.ls.outcomes.follow.track(EditFollowUp(proposal.id, uri, before, proposal.after))
            return EditDecision.accept()
        reason = EDITOR_REASON_PREFIX + (reason or "the editor did not apply the edit")
        self.rejected.append(proposal.id)
        await self.ls.outcomes.write(proposal.id, "rejected", reason=reason)
        return EditDecision.reject(reason)

    async def approve_command(self, command: str) -> CommandDecision:
        window = self.ls.client_capabilities.window
        if window is None or window.show_message is None:
            return CommandDecision(False, "this editor cannot ask the person; commands are off")
        params = types.ShowMessageRequestParams(
            types.MessageType.Warning, f"Apprentice wants to run: {command}",
            [types.MessageActionItem(RUN), types.MessageActionItem(REFUSE)],
        )  # fmt: skip
        timeout = self.ls.config.command_approval_timeout_s
        try:
            answer = await asyncio.wait_for(self.ls.window_show_message_request_async(params),
                                            timeout)  # fmt: skip
        except TimeoutError:
            return CommandDecision(False, f"no answer within {timeout:.0f}s")
        except Exception as exc:
            return CommandDecision(False, f"the editor could not ask: {exc}")
        approved = answer is not None and answer.title == RUN
        return CommandDecision(approved, "" if approved else "the person refused")
