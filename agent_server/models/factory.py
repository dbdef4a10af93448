"""Build the process's `ModelBackend` from `Settings`: the one place that picks a backend.

    backend = build_backend(Settings())   # model_backend = "embedded" | "openai"

`openai` -> `OpenAIBackend` at `model_url`; when `model_urls` names several servers, a
`replicas.ReplicaPool` over them (one URL there: a plain `OpenAIBackend` at it).
`model_name` is the served model name; when it is a local model directory instead (the
default: the dev model under $APPRENTICE_HOME), the server is taken to be
scripts/vllm-serve.sh serving that directory, so the request names its served name
("apprentice-dev") and tokens are counted with the directory's tokenizer.
`embedded` -> `EmbeddedBackend` (transformers + peft in-process) on the `model_name` dir.
Tested in tests/models/test_openai_backend.py.
"""

from __future__ import annotations

from pathlib import Path

from agent_server.models.base import ModelBackend
from agent_server.models.openai_http import OpenAIBackend, OpenAIConfig
from agent_server.models.replicas import ReplicaPool
from agent_server.models.vllm_command import SERVED_NAME
from ground.settings import Settings


def model_urls(settings: Settings) -> list[str]:
    """The model servers' base URLs: `model_urls`, or `model_url` alone when that is empty."""
    return list(settings.model_urls) or [settings.model_url]


def openai_config(settings: Settings) -> OpenAIConfig:
    """The HTTP backend's config derived from the process settings (at the first server)."""
    local_dir = Path(settings.model_name).expanduser()
    is_dir = local_dir.is_dir()
    return OpenAIConfig(
        base_url=model_urls(settings)[0],
        model=SERVED_NAME if is_dir else settings.model_name,
        api_key=settings.model_api_key.get_secret_value(),
        timeout_s=settings.model_timeout_s,
        tokenizer_path=str(local_dir) if is_dir else None,
    )


def build_backend(settings: Settings) -> ModelBackend:
    """The backend `settings.model_backend` names, ready to use (close it with aclose())."""
    if settings.model_backend == "openai":
        urls = model_urls(settings)
        if len(urls) > 1:
            return ReplicaPool(
                openai_config(settings), urls, health_interval_s=settings.model_health_interval_s
            )
        return OpenAIBackend(openai_config(settings))
    if settings.model_backend == "embedded":
        # Imported here: it pulls in torch and transformers, which the HTTP path never needs.
        from agent_server.models.embedded import EmbeddedBackend

        return EmbeddedBackend.from_settings(settings)
    raise ValueError(
        f"model_backend must be 'embedded' or 'openai', got {settings.model_backend!r}"
    )
