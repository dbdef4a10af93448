"""`ApiConfig`: the web wing's own knobs, validated at construction.

Derived from `Settings` by `ApiConfig.from_settings`; tests and benches build one directly
(e.g. a short tool timeout, or an agent config with a small context budget). Nothing to run.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_server.protocol.parts import HARD_MAX_FRAME_BYTES, MAX_FRAME_BYTES
from feedback.queries.runs import HEARTBEAT_S, SILENT_LIMIT_S
from ground.settings import Settings

# uvicorn closes the connection (code 1009) above its own ws_max_size, as soon as a frame's
# header announces more (nothing of it is buffered); below that our limit answers with a typed
# error and the connection stays open. Keep ours smaller; 4 MiB bounds what one connection
# can make the server hold.
UVICORN_WS_MAX_SIZE = HARD_MAX_FRAME_BYTES


class ApiConfig(BaseModel):
    """How the agent server treats connections, sessions and turns."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    max_frame_bytes: int = Field(
        default=MAX_FRAME_BYTES,
        ge=1024,
        description="Largest client frame handled; larger ones get an error (frame_too_large).",
    )
    tool_timeout_s: float = Field(
        default=60.0, gt=0, description="How long a tool.request waits for the editor's answer."
    )
    review_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="How long an edit proposal or command approval waits for the person; "
        "after that the edit counts as rejected / the command as refused.",
    )
    transcript_events: int = Field(
        default=200, ge=0, description="Events replayed in session.info on resume (newest)."
    )
    completion_temperature: float = Field(
        default=0.2, ge=0, description="Sampling temperature of inline completions."
    )
    agent: Any = Field(
        default=None,
        description="An agent.config.AgentConfig for every session; None: its defaults.",
    )
    summarizer: Any = Field(
        default=None,
        description="A SummarizerConfig for every session; None: the summarizer's defaults.",
    )
    server_name: str = Field(default="apprentice", description="Sent in `welcome`.")
    max_connections_per_token: int = Field(
        default=32,
        ge=1,
        description="Open WebSocket connections one token (one person) may hold; one more "
        "gets `too_many_connections` and is closed.",
    )
    messages_per_s: float = Field(
        default=100.0, gt=0, description="Sustained client messages per second per token."
    )
    message_burst: int = Field(
        default=400,
        ge=1,
        description="Messages a token may send at once before `messages_per_s` applies; "
        "beyond, a message gets `rate_limited` and is not handled.",
    )
    reap_every_s: float = Field(
        default=15.0,
        ge=0,
        description="How often the server fails learner runs whose worker died (api/reaper.py); "
        "0: never.",
    )
    dead_worker_s: float = Field(
        default=SILENT_LIMIT_S,
        gt=HEARTBEAT_S,
        description="A running learner step silent this long (no heartbeat; a worker stamps "
        "it every 10 s) has a dead worker; on a broker that redelivers (Redis, RabbitMQ) the "
        "reaper waits two visibility timeouts more.",
    )

    @field_validator("max_frame_bytes")
    @classmethod
    def _below_uvicorn_limit(cls, value: int) -> int:
        if value >= UVICORN_WS_MAX_SIZE:
            raise ValueError(
                f"max_frame_bytes must be below uvicorn's ws_max_size ({UVICORN_WS_MAX_SIZE}); "
                "larger frames would close the connection instead of getting an error"
            )
        return value

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ApiConfig:
        from ground import __version__

        limits = {
            "max_connections_per_token": settings.ws_max_connections_per_token,
            "messages_per_s": settings.ws_messages_per_s,
            "message_burst": settings.ws_message_burst,
        }
        return cls(server_name=f"apprentice/{__version__}", **(limits | overrides))
