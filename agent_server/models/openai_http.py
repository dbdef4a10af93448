"""`OpenAIBackend`: the `ModelBackend` over an OpenAI-compatible HTTP server (vLLM).

    backend = OpenAIBackend(OpenAIConfig(base_url="http://127.0.0.1:8000/v1",
                                         model="apprentice-dev"))
    completion = await backend.complete([{"role": "user", "content": "hi"}])
    await backend.load_adapter("policy-v3", "/path/to/adapters/policy-v3")
    backend.use_adapter("policy-v3")

Start a server with scripts/vllm-serve.sh. Every completion carries the prompt's and the
sampled token ids and the logprobs (openai_wire.py). Adapters are selected by sending their
name as "model"; the runtime LoRA API (`load_adapter`, `unload_adapter`, `adapter_names`:
base.AdapterHost) is what the learner's Deployer calls. `timeout_s` bounds one call
*including* its retries, so a caller hears `BackendUnavailable` within it. Tests:
tests/models/test_openai_backend.py and tests/models/test_backend_contract.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx

from agent_server.models.base import (
    AdapterNotFound,
    BackendUnavailable,
    Chunk,
    Completion,
    ContextWindowExceeded,
    Message,
    ModelError,
    Sampling,
)
from agent_server.models.openai_wire import StreamParser, chat_payload, parse_completion
from agent_server.models.retry import Retryable, RetryPolicy, call_with_retries

# Worth another try: the server restarting or a proxy in front of it not ready yet.
_RETRY_STATUS = {502, 503, 504}
_TOOL_CHOICES = {"auto", "required", "none"}
DEFAULT_SAMPLING = Sampling()  # frozen, so one shared default is safe


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


class OpenAIBackend:
    """ModelBackend over HTTP. One instance per process; share it between tasks."""

    def __init__(
        self, config: OpenAIConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        """`transport`: another way to reach the server (a Unix socket, a canned one in bench)."""
        self.config = config
        self._adapter: str | None = None
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._headers = headers
        self._client = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=config.timeout_s,
            transport=transport,
        )
        self._context_window = config.context_window

    # -- identity --------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.config.model

    @property
    def adapter(self) -> str | None:
        return self._adapter

    def use_adapter(self, name: str | None) -> None:
        self._adapter = name

    @property
    def context_window(self) -> int:
        if self._context_window is None:
            # Asked once, synchronously: the protocol makes this a plain property.
            models = self._sync_request("GET", f"{self.config.base_url.rstrip('/')}/models")
            for entry in models.get("data", []):
                if entry.get("id") == self.config.model and entry.get("max_model_len"):
                    self._context_window = int(entry["max_model_len"])
                    break
            else:
                raise ModelError(
                    f"/v1/models does not list {self.config.model!r} with a max_model_len; "
                    "set context_window in the config"
                )
        return self._context_window

    # -- completions -----------------------------------------------------------------------
    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> Completion:
        served = adapter or self._adapter
        body = chat_payload(
            served or self.config.model,
            messages,
            sampling,
            tools=tools,
            tool_choice=self.config.tool_choice,
            schema=schema,
        )
        data = await self._post_json("chat/completions", body, adapter=served)
        return parse_completion(data, model=self.config.model, adapter=served)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> AsyncIterator[Chunk]:
        served = adapter or self._adapter
        body = chat_payload(
            served or self.config.model, messages, sampling, schema=schema, stream=True
        )

        async def open_stream(remaining: float) -> httpx.Response:
            request = self._client.build_request(
                "POST", "chat/completions", json=body, timeout=remaining
            )
            response = await self._send(request, stream=True)
            if response.status_code >= 400:
                await response.aread()
                await response.aclose()
                self._raise_for_status(response, adapter=served)
            return response

        response = await call_with_retries(
            open_stream,
            timeout_s=self.config.timeout_s,
            policy=self.config.retry_policy,
            what=f"streaming from {self.config.base_url}",
        )
        parser = StreamParser(served)
        try:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    for chunk in parser.feed(line[5:].strip()):
                        yield chunk
            for chunk in parser.finish():
                yield chunk
        except httpx.TransportError as exc:
            raise BackendUnavailable(f"stream from {self.config.base_url} broke: {exc}") from exc
        finally:
            await response.aclose()

    # -- tokens ----------------------------------------------------------------------------
    def count_tokens(self, messages: Sequence[Message]) -> int:
        if self.config.tokenizer_path is not None:
            from agent_server.models.chat_encoding import count_tokens  # imports transformers

            return count_tokens(self._tokenizer, messages)  # rendered as vLLM renders it
        reply = self._sync_request(
            "POST",
            f"{self.config.root_url}/tokenize",
            json={
                "model": self.config.model,
                "messages": list(messages),
                "add_generation_prompt": True,
            },
        )
        return int(reply["count"])

    @cached_property
    def _tokenizer(self) -> Any:
        from agent_server.models.chat_encoding import load_tokenizer  # heavy, only if counting

        assert self.config.tokenizer_path is not None
        return load_tokenizer(self.config.tokenizer_path)

    # -- runtime LoRA (vLLM, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) ---------------------------
    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Load a peft adapter directory under `name`; then select it by that name.

        AdapterNotFound when `path` holds no adapter; loading the same name and folder again
        is a no-op; the same name for another folder is a ModelError.
        """
        folder = str(Path(path).resolve())
        try:
            await self._post_json(
                "load_lora_adapter",
                {"lora_name": name, "lora_path": folder},
                adapter=name,
                expect_json=False,
            )
        except AdapterNotFound:
            raise
        except ModelError as exc:
            if "already been loaded" not in str(exc):
                raise
            # Loading the same version again is a no-op (a Deployer retrying, a restart);
            # the same name for another folder is refused: names are versions (policy-vN).
            loaded = {m["id"]: m.get("root") for m in await self.list_models()}
            if loaded.get(name) != folder:
                raise ModelError(
                    f"adapter name {name!r} is already loaded from {loaded.get(name)}; "
                    "load each version under a new name (policy-vN)"
                ) from exc

    async def unload_adapter(self, name: str) -> None:
        """Unload `name`; AdapterNotFound when it is not loaded."""
        await self._post_json(
            "unload_lora_adapter", {"lora_name": name}, adapter=name, expect_json=False
        )
        if self._adapter == name:
            self._adapter = None

    async def adapter_names(self) -> list[str]:
        """The adapters the server has loaded (every /v1/models entry but the base model)."""
        return sorted(m["id"] for m in await self.list_models() if m.get("id") != self.config.model)

    async def list_models(self) -> list[dict[str, Any]]:
        """/v1/models entries: the base model and each loaded adapter (with `parent`)."""

        async def attempt(remaining: float) -> dict[str, Any]:
            response = await self._send(self._client.build_request("GET", "models"))
            self._raise_for_status(response, adapter=None)
            return response.json()

        data = await call_with_retries(
            attempt,
            timeout_s=self.config.timeout_s,
            policy=self.config.retry_policy,
            what=f"listing models at {self.config.base_url}",
        )
        return list(data.get("data", []))

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- plumbing --------------------------------------------------------------------------
    async def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        if self._client.is_closed:
            raise ModelError("the HTTP model backend is closed")  # as the embedded one says
        try:
            response = await self._client.send(request, stream=stream)
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise Retryable(str(exc)) from exc
        except httpx.TimeoutException as exc:
            raise TimeoutError(str(exc)) from exc
        if response.status_code in _RETRY_STATUS:
            await response.aclose()
            raise Retryable(f"HTTP {response.status_code} from {request.url}")
        return response

    async def _post_json(
        self, path: str, body: dict[str, Any], *, adapter: str | None, expect_json: bool = True
    ) -> Any:
        async def attempt(remaining: float) -> Any:
            request = self._client.build_request("POST", path, json=body, timeout=remaining)
            response = await self._send(request)
            self._raise_for_status(response, adapter=adapter)
            return response.json() if expect_json else response.text

        return await call_with_retries(
            attempt,
            timeout_s=self.config.timeout_s,
            policy=self.config.retry_policy,
            what=f"POST {self.config.base_url.rstrip('/')}/{path}",
        )

    def _raise_for_status(self, response: httpx.Response, *, adapter: str | None) -> None:
        if response.status_code < 400:
            return
        try:
            message = response.json().get("error", {}).get("message", response.text)
        except (json.JSONDecodeError, AttributeError):
            message = response.text
        if response.status_code == 404 and adapter is not None:
            raise AdapterNotFound(f"adapter {adapter!r}: {message}")
        if response.status_code == 400 and "maximum context length" in str(message):
            # vLLM refuses a prompt that alone fills max_model_len (it clamps max_tokens).
            raise ContextWindowExceeded(f"{message} Summarize or drop messages.")
        raise ModelError(f"HTTP {response.status_code} from {response.url}: {message}")

    def _sync_request(self, method: str, url: str, **kwargs: Any) -> Any:
        """Blocking request for the protocol's synchronous members (context_window, counts)."""
        transport = httpx.HTTPTransport(retries=self.config.retries)  # connect errors only
        try:
            with httpx.Client(
                transport=transport, headers=self._headers, timeout=self.config.timeout_s
            ) as client:
                response = client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise BackendUnavailable(f"{method} {url}: {exc}") from exc
        if response.status_code >= 400:
            raise ModelError(f"HTTP {response.status_code} from {url}: {response.text[:300]}")
        return response.json()
