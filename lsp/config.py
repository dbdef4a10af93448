"""`LspConfig`: the language server's own knobs, validated at construction.

    config = LspConfig.from_settings(Settings(), tcp="127.0.0.1:8766")

`from_settings` derives it from the process `Settings` (only the entry points build those);
tests build one directly. Every field says what it does; a bad value raises a ValueError
that says how to fix it. Nothing to run; tests/lsp/test_config.py checks the rules.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_server.agent.config import AgentConfig
from agent_server.models.base import Sampling
from ground.settings import Settings
from ground.tokens import user_token

SETTLE_OPTION = "outcomeSettleSeconds"
MAX_SETTLE_S = 86_400


def parse_host_port(value: str) -> tuple[str, int]:
    """`HOST:PORT` -> (host, port); raises ValueError naming the expected form."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"--tcp wants HOST:PORT with a port in 1..65535, e.g. 127.0.0.1:8766; "
                         f"got {value!r}")  # fmt: skip
    return host, int(port)


def settle_option(options: Any, default: float) -> tuple[float, str | None]:
    """initializationOptions.outcomeSettleSeconds, or (`default`, why it was not taken)."""
    value = options.get(SETTLE_OPTION) if isinstance(options, dict) else None
    if value is None:
        return default, None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 < value <= MAX_SETTLE_S):  # fmt: skip
        return default, (f"initializationOptions.{SETTLE_OPTION} must be a number of seconds "
                         f"in (0, {MAX_SETTLE_S}], got {value!r}; using {default:g}")  # fmt: skip
    return float(value), None


class LspConfig(BaseModel):
    """How `apprentice lsp` serves, where its agent runs and how it samples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transport: str = Field(default="stdio", description="`stdio` or `tcp`.")
    host: str = Field(default="127.0.0.1", description="Interface for --tcp.")
    port: int = Field(default=8766, ge=1, le=65535, description="Port for --tcp.")
    server_url: str = Field(
        default="",
        description="WebSocket URL of a running agent server (ws://host:port/v1/ws). Empty: "
        "the agent runs in this process on the client's root folder.",
    )
    token: str = Field(default="", repr=False, description="Bearer token for server_url.")
    database_url: str = Field(default="", description="Feedback DB of the in-process mode.")
    migrate: bool = Field(
        default=True, description="Migrate the feedback DB to head on start when it is behind."
    )
    debounce_ms: int = Field(
        default=75,
        ge=0,
        le=5000,
        description="Inline completion waits this long; a newer request for the same "
        "document in the meantime supersedes it (answered as cancelled, no model call).",
    )
    completion_max_tokens: int = Field(
        default=48, ge=1, le=512, description="Tokens of one inline completion at most."
    )
    completion_temperature: float = Field(
        default=0.2, ge=0, description="Sampling temperature of inline completions."
    )
    completion_context_chars: int = Field(
        default=6000,
        ge=100,
        description="Characters of prefix (and, half as many, suffix) sent around the cursor.",
    )
    agent: AgentConfig = Field(
        default_factory=lambda: AgentConfig(
            mode="interactive",
            step_limit=12,
            time_limit_s=300.0,
            sampling=Sampling(max_tokens=512),
        ),
        description="The in-process agent of one code action or chat turn: 12 model steps "
        "and 300 s at most, 512 tokens a step (clamped to the model's window). Interactive: "
        "the person reviews every edit and command in the editor. A dict given here is an "
        "AgentConfig's fields: AgentConfig's own defaults fill the rest.",
    )
    command_approval_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="How long a run_command waits for the person's answer in the editor "
        "(window/showMessageRequest); no answer refuses the command.",
    )
    outcome_settle_s: float = Field(
        default=30.0,
        gt=0,
        le=MAX_SETTLE_S,
        description="Seconds after an accept before its follow-up (persisted / reverted / "
        "edited_after_accept) is decided: the VS Code extension's outcomeSettleSeconds. An "
        'editor sets its own with initializationOptions {"outcomeSettleSeconds": n}.',
    )
    client_name: str = Field(default="lsp", description="Stored with sessions, for the logs.")

    @field_validator("transport")
    @classmethod
    def _known_transport(cls, value: str) -> str:
        if value not in ("stdio", "tcp"):
            raise ValueError(f"transport must be 'stdio' or 'tcp', got {value!r}")
        return value

    @field_validator("agent")
    @classmethod
    def _interactive_agent(cls, value: AgentConfig) -> AgentConfig:
        if value.mode != "interactive":
            raise ValueError("the language server's agent is interactive: the person reviews "
                             f"every edit in the editor (got mode {value.mode!r})")  # fmt: skip
        if value.sampling.max_tokens < 16:
            raise ValueError(f"agent.sampling.max_tokens must be >= 16 for one action, got "
                             f"{value.sampling.max_tokens}")  # fmt: skip
        return value

    @field_validator("server_url")
    @classmethod
    def _ws_url(cls, value: str) -> str:
        if value and not value.startswith(("ws://", "wss://")):
            raise ValueError(
                f"server_url must be a WebSocket URL like ws://127.0.0.1:8765/v1/ws, "
                f"got {value!r} (empty runs the agent in-process)"
            )
        return value

    @model_validator(mode="after")
    def _local_needs_database(self) -> LspConfig:
        if not self.server_url and not self.database_url:
            raise ValueError("the in-process mode needs database_url (Settings derives one)")
        return self

    @property
    def mode(self) -> str:
        return "remote" if self.server_url else "local"

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        tcp: str | None = None,
        server: str | None = None,
        **overrides: Any,
    ) -> LspConfig:
        """Config for `apprentice lsp [--tcp HOST:PORT] [--server URL]`."""
        values: dict[str, Any] = {
            "host": settings.lsp_host,
            "port": settings.lsp_port,
            "server_url": server if server is not None else settings.lsp_server_url,
            "database_url": settings.database_url,
        }
        if tcp:
            values["transport"] = "tcp"
            values["host"], values["port"] = parse_host_port(tcp)
        if values["server_url"]:
            values["token"] = user_token(settings)  # the agent server's, from this home
        return cls(**(values | overrides))
