"""The small files a task names, shown to the model with the task (so it need not ask).

    text, files = await small_files_named(workspace, "Fix the bug in calc.py: ...", 3000)

A person writes "fix the bug in calc.py"; a small model then has to choose `read_file`, spell
the path and only then edit. When the task names a file of the workspace that is small, its
text goes into the first user message instead (prompts.shown_files renders it), and the loop
records it as read. Paths are words of the task that look like file paths (`calc.py`,
`src/app/util.js`, quoted or not); a name that is no readable file is skipped silently. The
budget is in characters for all files together: a file that does not fit whole is not shown
(half a file invites edits against text the model never saw). Tested in
tests/agent/test_loop_repeats.py.
"""

from __future__ import annotations

import re

from agent_server.agent import prompts
from agent_server.agent.summarizer import View
from agent_server.agent.workspace import Workspace
from agent_server.agent.workspace_types import WorkspaceError

# A path-like word: optional dirs, a name, a dot and an extension of letters/digits.
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/-])")
MAX_FILES = 3


def paths_in(task: str) -> list[str]:
    """Path-like words of `task`, in order, without duplicates."""
    seen: list[str] = []
    for m in _PATH.finditer(task):
        path = m.group(1).rstrip(".")
        if path.startswith("./"):
            path = path[2:]
        if path and path not in seen:
            seen.append(path)
    return seen


async def small_files_named(workspace: Workspace, task: str, budget_chars: int) -> dict[str, str]:
    """path -> text of the files `task` names that fit, whole, in `budget_chars` together."""
    shown: dict[str, str] = {}
    left = budget_chars
    for path in paths_in(task):
        if len(shown) >= MAX_FILES or left <= 0:
            break
        try:
            text = await workspace.read_file(path)
        except (WorkspaceError, OSError, ValueError):
            continue  # not a file of the workspace (a word like "e.g." or a module name)
        if len(text) <= left:
            shown[path] = text
            left -= len(text)
    return shown


async def view_for_task(
    system: str, task: str, workspace: Workspace, budget_chars: int, few_shot: bool
) -> View:
    """A run's first view: the few-shot turns (`few_shot`), the task, the small files it
    names shown with it (and recorded as read; none when `budget_chars` is 0)."""
    files = await small_files_named(workspace, task, budget_chars) if budget_chars else {}
    examples = prompts.few_shot() if few_shot else []
    view = View(system, task, prompts.shown_files(files), examples)
    for path, text in files.items():
        view.touch(path, text)
    return view
