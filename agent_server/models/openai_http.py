"""`OpenAIBackend`: the `ModelBackend` over an OpenAI-compatible HTTP server (vLLM).

    backend = OpenAIBackend(OpenAIConfig(base_url="http://127.0.0.1:8000/v1",
                                         model="apprentice-dev"))
    completion = await backend.complete([{"role": "user", "content": "hi"}])
    await backend.load_adapter("policy-v3", "/path/to/adapters/policy-v3")
    backend.use_adapter("policy-v3")

Start a server with scripts/vllm-serve.sh. Every completion carries the prompt's and the
sampled token ids and the logprobs (openai_wire.py); `complete_text` is /v1/completions (a
plain-text prompt, for inline completions). Token counts, the fill-in-the-middle format and
the stop tokens sent with each request come from openai_tokens.py. Adapters are selected by
sending their name as "model"; the runtime LoRA API (`load_adapter`, `unload_adapter`,
`adapter_names`: base.AdapterHost) is what the learner's Deployer calls. `timeout_s` bounds one call
*including* its retries, so a caller hears `BackendUnavailable` within it. Tests:
tests/models/test_openai_backend.py and tests/models/test_backend_contract.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
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
from agent_server.models.fim import Infill
from agent_server.models.openai_config import OpenAIConfig
from agent_server.models.openai_tokens import ServerTokens
from agent_server.models.openai_wire import (
    StreamParser,
    chat_payload,
    cut_at_extra_stops,
    parse_completion,
    parse_text_completion,
    text_payload,
)
from agent_server.models.retry import Retryable, call_with_retries

__all__ = ["OpenAIBackend", "OpenAIConfig"]

# Worth another try: the server restarting or a proxy in front of it not ready yet.
_RETRY_STATUS = {502, 503, 504}
DEFAULT_SAMPLING = Sampling()  # frozen, so one shared default is safe


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
        self._tokens = ServerTokens(config, self._sync_request)

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
            self._tokens.messages_for(messages, tools),  # the tools still go: vLLM parses calls
            self._with_stops(sampling),
            tools=tools,
            tool_choice=self.config.tool_choice,
            schema=schema,
        )
        data = await self._post_json("chat/completions", body, adapter=served)
        made = parse_completion(data, model=self.config.model, adapter=served)
        return cut_at_extra_stops(made, sampling)

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
            served or self.config.model, messages, self._with_stops(sampling), schema=schema,
            stream=True,
        )  # fmt: skip

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

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
    ) -> Completion:
        served = adapter or self._adapter
        body = text_payload(served or self.config.model, prompt, self._with_stops(sampling))
        data = await self._post_json("completions", body, adapter=served)
        made = parse_text_completion(data, model=self.config.model, adapter=served)
        return cut_at_extra_stops(made, sampling)

    # -- tokens ----------------------------------------------------------------------------
    def count_tokens(self, messages: Sequence[Message]) -> int:
        return self._tokens.count_chat(messages)

    def count_text_tokens(self, text: str) -> int:
        return self._tokens.count_text(text)

    def infill(self) -> Infill | None:
        """From the local tokenizer, else from the server's /tokenize (asked once)."""
        return self._tokens.infill()

    def _with_stops(self, sampling: Sampling) -> Sampling:
        """`sampling` plus the stop tokens the embedded backend stops at (openai_tokens.py)."""
        stops = {*sampling.stop_token_ids, *self._tokens.stop_token_ids}
        if stops == set(sampling.stop_token_ids):
            return sampling
        return dataclasses.replace(sampling, stop_token_ids=tuple(sorted(stops)))

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
