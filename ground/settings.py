"""The one `Settings` object of an Apprentice process.

Only entry points (the CLI, the ASGI factory, the Celery app module) build a `Settings`;
everything else receives it, or a component config derived from it, as an argument.

Sources, highest priority first: keyword arguments, environment variables with the prefix
`APPRENTICE_` (e.g. `APPRENTICE_DATABASE_URL`), a TOML file (`APPRENTICE_CONFIG`, default
`$APPRENTICE_HOME/config.toml`, optional), then the embedded defaults below. Every field is
documented in docs/configuration.md; `tests/test_settings.py` keeps the two in step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ENV_PREFIX = "APPRENTICE_"
# URL fields that may carry a password (postgresql+psycopg://user:pw@host/db, redis://:pw@host).
# The catalogue's default (agent_server/models/catalog.json); ground imports nothing of ours.
DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
_URL_FIELDS = (
    "database_url", "broker_url", "result_backend", "model_url", "model_urls", "lsp_server_url",
)  # fmt: skip


def _default_home() -> Path:
    return Path(os.environ.get(f"{ENV_PREFIX}HOME", "~/.apprentice")).expanduser()


def _hide_password(url: str) -> str:
    """`scheme://user:***@host/...`: the URL as it may appear in a log."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return "<unparseable url>"
    userinfo, _, hostinfo = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostinfo}"))


def _config_file() -> Path:
    explicit = os.environ.get(f"{ENV_PREFIX}CONFIG")
    return Path(explicit).expanduser() if explicit else _default_home() / "config.toml"


class Settings(BaseSettings):
    """Configuration of every Apprentice process. Fields left empty derive from `home`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, frozen=True
    )

    home: Path = Field(
        default_factory=_default_home,
        description="Data directory: database, broker files, token, models, adapters, logs.",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL of the feedback database. Empty: SQLite at "
        "$APPRENTICE_HOME/apprentice.db. Postgres: postgresql+psycopg://user@host/db.",
    )
    broker_url: str = Field(
        default="",
        description="Celery broker URL. Empty: kombu's SQLAlchemy transport on SQLite at "
        "$APPRENTICE_HOME/broker.db (no server needed). Production: redis://host:6379/0.",
    )
    result_backend: str = Field(
        default="",
        description="Celery result backend. Empty: db+sqlite at $APPRENTICE_HOME/results.db.",
    )
    model_backend: Literal["embedded", "openai"] = Field(
        default="embedded",
        description="`embedded`: transformers + peft in-process on the CPU. `openai`: an "
        "OpenAI-compatible HTTP server such as vLLM at `model_url`.",
    )
    model_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="Base URL of the OpenAI-compatible server (used when model_backend=openai).",
    )
    # NoDecode: the environment may list them comma-separated as well as in JSON.
    model_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Base URLs of several OpenAI-compatible servers serving the same model "
        "(replicas): requests are spread over the healthy ones. Empty: `model_url` alone.",
    )
    model_health_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between health checks of each model server when there are several.",
    )
    model_name: str = Field(
        default="",
        description="Base model: a local directory in Hugging Face format for the embedded "
        "backend, the served model name for the HTTP backend. Empty: the real model "
        "SmolLM2-135M-Instruct at $APPRENTICE_HOME/models/smollm2-135m-instruct (installed on "
        "first start, or by `apprentice model install`).",
    )
    model_api_key: SecretStr = Field(
        default=SecretStr(""), description="Bearer key for the model server, if it needs one."
    )
    model_timeout_s: float = Field(
        default=120.0, gt=0, description="Timeout of one model request, in seconds."
    )
    token: SecretStr = Field(
        default=SecretStr(""),
        description="User token for the HTTP API and the WebSocket. Empty: made on first start "
        "into $APPRENTICE_HOME/token (mode 0600) and read from there afterwards.",
    )
    admin_token: SecretStr = Field(
        default=SecretStr(""),
        description="Admin token for /v1/admin. Empty: made into $APPRENTICE_HOME/admin_token.",
    )
    metrics_token: SecretStr = Field(
        default=SecretStr(""),
        description="Token Prometheus sends to scrape GET /metrics (the admin token works too). "
        "Empty: made into $APPRENTICE_HOME/metrics_token.",
    )
    host: str = Field(default="127.0.0.1", description="Interface the agent server binds.")
    port: int = Field(default=8765, ge=1, le=65535, description="Port of the agent server.")
    dashboard_dir: Path | None = Field(
        default=None,
        description="The built admin dashboard the server serves at /admin/ (scripts/dashboard.sh "
        "builds it). Empty: dashboard/dist of this repository.",
    )
    lsp_host: str = Field(default="127.0.0.1", description="Interface of `apprentice lsp --tcp`.")
    lsp_port: int = Field(default=8766, ge=1, le=65535, description="Port of `lsp --tcp`.")
    lsp_server_url: str = Field(
        default="",
        description="WebSocket URL of a running agent server (ws://host:8765/v1/ws) that "
        "`apprentice lsp` talks to. Empty: the language server runs the agent in-process.",
    )
    allowed_origins: list[str] = Field(
        default_factory=lambda: ["vscode-webview://*", "vscode-file://*"],
        description="Browser Origins allowed on the WebSocket (fnmatch patterns). Clients that "
        "send no Origin (editors, CLI) are allowed; any other browser Origin is refused.",
    )
    ws_max_connections_per_token: int = Field(
        default=32,
        ge=1,
        description="Open WebSocket connections one token (one person) may hold; one more "
        "reads `too_many_connections` and is closed.",
    )
    ws_messages_per_s: float = Field(
        default=100.0,
        gt=0,
        description="Client messages per second one token may send over its WebSockets, after "
        "a burst of ws_message_burst; beyond, a message is answered `rate_limited`.",
    )
    ws_message_burst: int = Field(
        default=400, ge=1, description="Messages one token may send at once (see above)."
    )
    learner_interval_s: int = Field(
        default=600,
        ge=0,
        description="Seconds between scheduled learner cycles (celery beat). 0 turns the "
        "schedule off; `apprentice learn` still runs a cycle by hand.",
    )
    learner_min_feedback: int = Field(
        default=16, ge=1, description="A scheduled cycle is skipped below this many new outcomes."
    )
    learner_task_repo: Path | None = Field(
        default=None,
        description="A git repository with a pytest suite. When set, a scheduled slot with "
        "too little new feedback runs a task cycle instead: tasks mined from its history, "
        "rolled out by the agent, trained on (learner/taskcycle.py).",
    )
    learner_queue: str = Field(
        default="learner",
        min_length=1,
        description="Celery queue of the learner's CPU steps (collect, tasks, evaluate, publish, "
        "deploy) and its schedule; one broker can serve several stacks.",
    )
    learner_accel_queue: str = Field(
        default="",
        description="Celery queue of the steps that want an accelerator (train, rollouts), so "
        "a GPU worker can take them alone. Empty: `learner_queue` (one worker does it all).",
    )
    artifacts_url: str = Field(
        default="",
        description="Where run snapshots, candidates and published adapters live. Empty: "
        "$APPRENTICE_HOME (a local directory). `s3://bucket/prefix`: an S3-API object store, "
        "so the learner's steps can run on hosts that share no disk (credentials: boto3's "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_DEFAULT_REGION).",
    )
    s3_endpoint_url: str = Field(
        default="",
        description="Endpoint of an S3-compatible server (MinIO, Ceph, ...) for "
        "`artifacts_url`. Empty: AWS S3.",
    )
    learner_visibility_timeout_s: int = Field(
        default=3600,
        ge=10,
        description="Seconds before the broker hands an unacknowledged learner task (a worker "
        "killed mid-step) to another worker. Keep it above the longest step.",
    )
    learner: dict[str, Any] = Field(
        default_factory=dict,
        description="The learner's settings for every cycle, scheduled or not: a partial "
        "LearnerConfig (learner/config.py; each field in docs/configuration.md), e.g. "
        '`[learner.data]` `exclude_users = ["ada"]` in config.toml, or JSON in '
        "APPRENTICE_LEARNER. Checked when a worker or `apprentice learn` starts; a run's own "
        "overrides (admin API body, `apprentice learn --tasks`) apply on top.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Log level of every Apprentice process."
    )

    @field_validator("model_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        # From the environment: a JSON list, or URLs separated by commas.
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [url.strip() for url in text.split(",") if url.strip()]
        return value

    @field_validator("home", mode="after")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # repr/str of Settings reach logs; SecretStr hides the tokens, this hides URL passwords.
        for name, value in super().__repr_args__():
            if name in _URL_FIELDS and isinstance(value, str):
                value = _hide_password(value)
            elif name in _URL_FIELDS and isinstance(value, list):
                value = [_hide_password(url) for url in value]
            yield name, value

    @model_validator(mode="after")
    def _derive_embedded_defaults(self) -> Settings:
        # Frozen model: fill the derived defaults once, at construction.
        derived = {
            "database_url": f"sqlite:///{self.home / 'apprentice.db'}",
            "broker_url": f"sqla+sqlite:///{self.home / 'broker.db'}",
            "result_backend": f"db+sqlite:///{self.home / 'results.db'}",
            "model_name": str(self.default_model_dir),
        }
        for name, value in derived.items():
            if not getattr(self, name):
                object.__setattr__(self, name, value)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=_config_file())
        return (init_settings, env_settings, toml)

    # Paths that several components agree on.
    @property
    def accel_queue(self) -> str:
        """The queue of train and rollouts: `learner_accel_queue`, else `learner_queue`."""
        return self.learner_accel_queue or self.learner_queue

    @property
    def adapters_dir(self) -> Path:
        return self.home / "adapters"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def default_model_dir(self) -> Path:
        """The embedded default: the catalogue's default model (agent_server/models/install.py)."""
        return self.home / "models" / DEFAULT_MODEL_NAME

    @property
    def dev_model_dir(self) -> Path:
        return self.home / "models" / "dev"

    @property
    def token_file(self) -> Path:
        return self.home / "token"

    @property
    def admin_token_file(self) -> Path:
        return self.home / "admin_token"

    @property
    def metrics_token_file(self) -> Path:
        return self.home / "metrics_token"

    def ensure_home(self) -> Path:
        """Create the data directory (mode 0700) if it is missing and return it."""
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.home
