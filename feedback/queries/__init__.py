"""Small keyword-only query functions over the feedback tables.

Each takes an open ORM `Session` first (see `feedback.db.transaction`), flushes, and leaves
the commit to the caller. Import from here or from the submodules.
"""

from feedback.queries.adapters import (
    NothingToRollBack,
    active_deployment,
    adapter_name,
    get_adapter,
    list_adapters,
    list_deployments,
    next_adapter_version,
    publish_adapter,
    record_deployment,
    rollback_deployment,
    rollback_target,
)
from feedback.queries.runs import (
    UnknownRun,
    create_run,
    finish_run,
    get_run,
    list_runs,
    set_run_dataset,
    start_run,
    update_run_step,
)
from feedback.queries.sessions import (
    UnknownSession,
    append_event,
    create_session,
    get_session,
    latest_summary_event,
    list_events,
    list_sessions,
    update_session,
)
from feedback.queries.suggestions import (
    FeedbackItem,
    MissingTokenIds,
    OutcomeConflict,
    UnknownSuggestion,
    feedback_since,
    get_suggestion,
    outcomes_for_suggestion,
    record_outcome,
    record_suggestion,
)

__all__ = [
    "FeedbackItem",
    "MissingTokenIds",
    "NothingToRollBack",
    "OutcomeConflict",
    "UnknownRun",
    "UnknownSession",
    "UnknownSuggestion",
    "active_deployment",
    "adapter_name",
    "append_event",
    "create_run",
    "create_session",
    "feedback_since",
    "finish_run",
    "get_adapter",
    "get_run",
    "get_session",
    "get_suggestion",
    "latest_summary_event",
    "list_adapters",
    "list_deployments",
    "list_events",
    "list_runs",
    "list_sessions",
    "next_adapter_version",
    "outcomes_for_suggestion",
    "publish_adapter",
    "record_deployment",
    "record_outcome",
    "record_suggestion",
    "rollback_deployment",
    "rollback_target",
    "set_run_dataset",
    "start_run",
    "update_run_step",
    "update_session",
]
