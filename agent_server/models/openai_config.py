"""`OpenAIConfig`: where an OpenAI-compatible server (vLLM) is and how to talk to it.

Read by `openai_http.OpenAIBackend` (which re-exports it) and built from the settings by
factory.py. Validated on construction, so a wrong URL or timeout fails at startup.
Tested in tests/models/test_openai_backend.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_server.models.retry import RetryPolicy

_TOOL_CHOICES = {"auto", "required", "none"}


@dataclass(frozen=True)
class OpenAIConfig:
    """Where the server is and how patiently to talk to it."""

    base_url: str = "http://127.0.0.1:8000/v1"  # up to and including /v1
    model: str = "apprentice-dev"  # the served base model name (vLLM --served-model-name)
    api_key: str = ""  # sent as a Bearer token when not empty
    timeout_s: float = 120.0  # bound on one call, retries included (stream: until 1st byte)
    retries: int = 3  # retries after the first attempt on connection errors and 502/503/504
    backoff_s: float = 0.25  # first wait between attempts; doubles each retry
    backoff_max_s: float = 4.0  # cap on one wait
    # count_tokens: a local tokenizer dir is exact and needs no round trip; None = ask the
    # server's /tokenize endpoint (blocking, one HTTP call per count).
    tokenizer_path: str | None = None
    context_window: int | None = None  # None = the server's max_model_len from /v1/models
    tool_choice: str = "auto"  # when tools are passed; "auto" needs --enable-auto-tool-choice

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL ending in /v1, e.g. "
                f"http://127.0.0.1:8000/v1; got {self.base_url!r}"
            )
        if not self.model:
            raise ValueError("model must name the served model (vLLM --served-model-name)")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError(f"context_window must be >= 1 or None, got {self.context_window}")
        if self.tool_choice not in _TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {sorted(_TOOL_CHOICES)}")
        if self.tokenizer_path is not None and not Path(self.tokenizer_path).is_dir():
            raise ValueError(
                f"tokenizer_path {self.tokenizer_path!r} is not a directory; point it at the "
                "model directory, or leave it None to count tokens with the server's /tokenize"
            )
        RetryPolicy(self.retries, self.backoff_s, self.backoff_max_s)  # validates now

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.retries, self.backoff_s, self.backoff_max_s)

    @property
    def root_url(self) -> str:
        """The server root: /tokenize and /health live there, not under /v1."""
        url = self.base_url.rstrip("/")
        return url.removesuffix("/v1")
