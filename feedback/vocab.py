"""The shared vocabularies: outcome kinds and which of them are labels, adapter names.

Everything that names an outcome or an adapter — the feedback models and migrations, the
WebSocket protocol (and through its JSON Schema the VS Code extension's types), the language
server, the learner's data and config — takes the names from here, so one edit changes them
everywhere. Nothing to run; tests/feedback/test_vocab.py checks the rules.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

# What a person did with a suggestion (the `outcomes.kind` column).
OutcomeKind = Literal[
    "shown",  # an inline completion was displayed
    "accepted",  # the whole suggestion was taken
    "rejected",  # declined (a reason may say why)
    "partially_accepted",  # some hunks of an edit / a prefix of a completion
    "edited_after_accept",  # taken, then changed by the person within the settle time
    "reverted",  # taken, then undone
    "persisted",  # taken and still there after the settle time
    "applied",  # a language-server code action's edit was applied by the editor
    "written",  # not taken: final_text is what the person wrote at its place instead
]
OUTCOME_KINDS: tuple[str, ...] = get_args(OutcomeKind)

# The kinds an editor sends over the WebSocket (`applied` is the language server's own).
EditorOutcomeKind = Literal[
    "accepted", "rejected", "partially_accepted", "edited_after_accept", "reverted",
    "persisted", "shown", "written",
]  # fmt: skip
EDITOR_OUTCOME_KINDS: tuple[str, ...] = get_args(EditorOutcomeKind)

# The person's verdict on an edit proposal: what the agent loop waits for.
DecisionKind = Literal["accepted", "rejected", "partially_accepted"]
DECISION_KINDS: tuple[str, ...] = get_args(DecisionKind)

# Labels for the learner: the latest decisive outcome of a suggestion decides its label.
DESIRABLE: frozenset[str] = frozenset(
    {"accepted", "persisted", "partially_accepted", "edited_after_accept"}
)
UNDESIRABLE: frozenset[str] = frozenset({"rejected", "reverted"})
LABEL_KINDS: frozenset[str] = DESIRABLE | UNDESIRABLE  # shown / applied / written never do
# A follow-up of a completion (or edit) that was not taken: within the settle time the person
# wrote `final_text` at its place (the clients' rule: docs/protocol.md). It decides no label
# (the rejection did); the learner's demonstration objective trains on (prompt, final_text).
WRITTEN = "written"
# The VS Code extension's reason on a "rejected" it sent because it could not show the
# proposal: the person never saw it, so it is no label.
EDITOR_REASON_PREFIX = "[editor] "

# Adapters: version N is served under the name `policy-vN` and lives in adapters/policy-vN/.
ADAPTER_PREFIX = "policy-v"
_ADAPTER = re.compile(rf"^{re.escape(ADAPTER_PREFIX)}(\d+)$")


def adapter_name(version: int) -> str:
    """The name adapter version `version` is served and stored under: `policy-vN`."""
    if version < 1:
        raise ValueError(f"adapter versions start at 1, got {version}")
    return f"{ADAPTER_PREFIX}{version}"


def adapter_version(name: str | None) -> int | None:
    """`policy-v3` -> 3; None (the base model) or any other name -> None."""
    match = _ADAPTER.match(name or "")
    return int(match.group(1)) if match else None


def is_adapter_name(name: str | None) -> bool:
    return adapter_version(name) is not None


assert set(EDITOR_OUTCOME_KINDS) <= set(OUTCOME_KINDS)
assert set(DECISION_KINDS) <= set(EDITOR_OUTCOME_KINDS)
assert LABEL_KINDS.issubset(OUTCOME_KINDS)
assert WRITTEN in EDITOR_OUTCOME_KINDS and WRITTEN not in LABEL_KINDS
