"""The feedback tables as SQLAlchemy 2 models; `Base.metadata` is the whole schema."""

from feedback.models.base import Base, UTCDateTime, new_uuid, utcnow
from feedback.models.learner import (
    Adapter,
    AdapterStatus,
    Deployment,
    DeploymentStatus,
    LearnerRun,
    RunStatus,
)
from feedback.models.rollouts import RolloutCall, RolloutCallKind, TaskRollout
from feedback.models.sessions import (
    AgentSession,
    EventKind,
    EventRole,
    SessionEvent,
    SessionMode,
    SessionStatus,
)
from feedback.models.suggestions import Outcome, OutcomeKind, Suggestion, SuggestionKind
from feedback.models.users import User

__all__ = [
    "Adapter",
    "AdapterStatus",
    "AgentSession",
    "Base",
    "Deployment",
    "DeploymentStatus",
    "EventKind",
    "EventRole",
    "LearnerRun",
    "Outcome",
    "OutcomeKind",
    "RolloutCall",
    "RolloutCallKind",
    "RunStatus",
    "SessionEvent",
    "SessionMode",
    "SessionStatus",
    "Suggestion",
    "SuggestionKind",
    "TaskRollout",
    "UTCDateTime",
    "User",
    "new_uuid",
    "utcnow",
]
