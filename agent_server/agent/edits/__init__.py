"""Edits: SEARCH/REPLACE blocks located tolerantly, applied all-or-nothing, shown as diffs.

- `apply.py` — `SearchReplace`, `EditConfig`, `plan_edits` / `apply_edits`, `EditError`, the
  SEARCH/REPLACE text format (`parse_search_replace`).
- `match.py` — where a SEARCH block lies in a file (exact, whitespace-tolerant,
  indentation-preserving, partial-line, '...'-elided); `tolerant.py` — the whitespace- and
  indentation-tolerant strategy and the `FileView` index; `indent.py` — indentation helpers.
- `diff.py` — unified diffs, hunks, partial acceptance.

Workspaces apply edits through this package (`Workspace.plan_edit` / `apply_edit`, with the
workspace's `EditConfig`), and so does the agent's edit tool, through the workspace.
The names below are the package's surface; import them from here (the modules' other names
are internals, for this package's tests and bench/edit_apply.py).
Run the tests: .venv/bin/python -m pytest tests/agent/test_edits*.py -q
"""

from agent_server.agent.edits.apply import (
    EditConfig,
    EditError,
    EditPlan,
    SearchReplace,
    apply_edits,
    detect_newline,
    parse_search_replace,
    plan_edits,
    replace_whole_file,
)
from agent_server.agent.edits.diff import Hunk, apply_hunks, split_hunks, unified_diff

__all__ = [
    "EditConfig",
    "EditError",
    "EditPlan",
    "Hunk",
    "SearchReplace",
    "apply_edits",
    "apply_hunks",
    "detect_newline",
    "parse_search_replace",
    "plan_edits",
    "replace_whole_file",
    "split_hunks",
    "unified_diff",
]
