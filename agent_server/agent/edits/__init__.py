"""Edits: SEARCH/REPLACE blocks located tolerantly, applied all-or-nothing, shown as diffs.

- `apply.py` — `SearchReplace`, `EditConfig`, `plan_edits` / `apply_edits`, `EditError`, the
  SEARCH/REPLACE text format (`parse_search_replace`).
- `match.py` — where a SEARCH block lies in a file (exact, whitespace-tolerant,
  indentation-preserving, partial-line, '...'-elided); `indent.py` — indentation helpers.
- `diff.py` — unified diffs, hunks, partial acceptance.

The names below are the package's surface; import them from here.
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
