"""Small exception classes that steer the agent loop (the mini-swe-agent shape).

Two families. `NonTerminating` errors are model-fixable: the loop turns their message into the
model's next observation (a malformed action, a failed edit, a tool error) and counts them
toward `AgentConfig.max_format_errors`. `Terminating` errors end the run; each carries the
`status` the run ends with and a message a person can read.

Nothing to run here; `tests/agent/test_loop.py` exercises every class.
"""

from __future__ import annotations

from typing import Literal

RunStatus = Literal[
    "finished",  # the model called `finish`
    "step_limit",  # AgentConfig.step_limit model steps were used
    "time_limit",  # AgentConfig.time_limit_s elapsed
    "too_many_errors",  # max_format_errors model-fixable errors in a row
    "cancelled",  # Agent.cancel() or the asyncio task was cancelled
    "model_error",  # the backend failed (ModelError); person-facing, with its code
    "context_overflow",  # the task alone does not fit the context budget
    "error",  # a bug: an unexpected exception (it propagates after run_finished is emitted)
]


class AgentException(Exception):
    """Base class; `message` is what the model or the person gets to read."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NonTerminating(AgentException):
    """Model-fixable: reflected back to the model as its next observation."""


class FormatError(NonTerminating):
    """The reply was not one valid action (bad JSON, unknown tool, missing argument)."""


class ToolFailure(NonTerminating):
    """A tool failed in a way the model can fix (WorkspaceError, EditError, bad path)."""


class Terminating(AgentException):
    """Ends the run with `status`."""

    status: RunStatus = "finished"


class Submitted(Terminating):
    """The model called `finish`; `message` is its final message to the person."""

    status: RunStatus = "finished"


class LimitsExceeded(Terminating):
    """A step or time limit was reached; `status` says which."""

    def __init__(self, message: str, status: RunStatus) -> None:
        super().__init__(message)
        self.status = status


class TooManyErrors(Terminating):
    """`max_format_errors` model-fixable errors happened in a row."""

    status: RunStatus = "too_many_errors"


class Cancelled(Terminating):
    """The run was cancelled by the person (or the task running it)."""

    status: RunStatus = "cancelled"


class ContextOverflow(Terminating):
    """The system prompt plus the task do not fit the context budget: shorten the task."""

    status: RunStatus = "context_overflow"


class BackendFailed(Terminating):
    """The model backend raised a ModelError; `code` is the backend's stable error code."""

    status: RunStatus = "model_error"

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code
