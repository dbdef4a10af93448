"""The OpenAI chat and text completions wire format as vLLM 0.32 speaks it: bodies, replies.

Pure functions, no I/O, used by `openai_http.OpenAIBackend`:
- `chat_payload(...)` builds the request: logprobs on, `return_token_ids` (vLLM returns the
  sampled `token_ids` per choice and `prompt_token_ids`), and `return_tokens_as_token_ids`
  so every logprob entry names its token as "token_id:N" (a fallback when a server does not
  send `token_ids`, and never a lossy string for tokens that are not valid UTF-8 alone).
- `parse_completion(...)` / `StreamParser` turn replies into `Completion` / `Chunk`.
- `text_payload(...)` / `parse_text_completion(...)`: the same for /v1/completions (a
  plain-text prompt: inline completions), ids and logprobs recorded the same way.
- vLLM refuses more than 4 stop strings; the first 4 are sent and `cut_at_extra_stops`
  applies the others to a finished reply's text (a stream gets the first 4 only).

Logprobs are vLLM's default `raw_logprobs` (the model's own log-softmax, before temperature
and top-p), which is what the learner recomputes from the model for importance ratios.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from agent_server.models.base import (
    Chunk,
    Completion,
    Message,
    ModelError,
    Sampling,
    ToolCall,
    Usage,
)
from agent_server.models.structured import response_format

# vLLM takes at most 4 stop strings (VLLM_MAX_STOP_STRINGS); more are applied to the text here.
SERVER_STOPS = 4
# vLLM says "abort" for a request it cancelled; the protocol calls that "cancelled".
_FINISH = {"abort": "cancelled", "cancelled": "cancelled", "function_call": "tool_calls"}


def chat_payload(
    model: str,
    messages: Sequence[Message],
    sampling: Sampling,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: str = "auto",
    schema: dict[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The JSON body of one POST /v1/chat/completions."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), "logprobs": True,
            **_sampling_fields(sampling)}  # fmt: skip
    if tools:
        body["tools"] = list(tools)
        body["tool_choice"] = tool_choice
    if schema is not None:
        body["response_format"] = response_format(schema)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def text_payload(model: str, prompt: str, sampling: Sampling) -> dict[str, Any]:
    """The JSON body of one POST /v1/completions (a plain-text prompt, no chat template).

    `logprobs: 0` reports the sampled token's logprob alone; vLLM encodes the prompt with
    the tokenizer's special tokens (`add_special_tokens`, its default), as
    chat_encoding.encode_text does.
    """
    return {"model": model, "prompt": prompt, "logprobs": 0, **_sampling_fields(sampling)}


def _sampling_fields(sampling: Sampling) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
    }
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.stop:
        body["stop"] = list(sampling.stop[:SERVER_STOPS])  # the rest: cut_at_extra_stops
    if sampling.stop_token_ids:
        body["stop_token_ids"] = sorted(sampling.stop_token_ids)
    return body


def cut_at_extra_stops(completion: Completion, sampling: Sampling) -> Completion:
    """Apply the stop strings past the server's limit to a finished reply: its text ends
    before the first one (its token ids stay whole, as a server that stopped late left them)."""
    extra = sampling.stop[SERVER_STOPS:]
    cuts = [i for i in (completion.text.find(s) for s in extra if s) if i >= 0]
    if not cuts:
        return completion
    return dataclasses.replace(completion, text=completion.text[: min(cuts)], finish_reason="stop")


def finish_reason(raw: str | None) -> str:
    return _FINISH.get(raw or "stop", raw or "stop")


def _token_id(entry: dict[str, Any]) -> int:
    token = str(entry.get("token", ""))
    if not token.startswith("token_id:"):
        raise ModelError(
            f"logprob entry names its token as {token!r}, not 'token_id:N': the server "
            "ignored return_tokens_as_token_ids (is it vLLM?)"
        )
    return int(token.removeprefix("token_id:"))


def ids_and_logprobs(choice: dict[str, Any]) -> tuple[list[int], list[float]]:
    """Sampled token ids and their logprobs from one choice (whole reply or stream delta)."""
    entries = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(e["logprob"]) for e in entries]
    ids = choice.get("token_ids")
    if ids is None:
        ids = [_token_id(e) for e in entries]
    ids = [int(i) for i in ids]
    if len(ids) != len(logprobs):
        raise ModelError(
            f"server sent {len(ids)} token ids but {len(logprobs)} logprobs; the learner "
            "needs one logprob per sampled token"
        )
    return ids, logprobs


def parse_text_completion(data: dict[str, Any], *, model: str, adapter: str | None) -> Completion:
    """A /v1/completions reply as a `Completion` (ids per choice; logprobs as a list)."""
    choices = data.get("choices") or []
    if not choices:
        raise ModelError(f"server reply has no choices: {str(data)[:300]}")
    choice = choices[0]
    raw = choice.get("logprobs") or {}
    logprobs = [float(lp) for lp in raw.get("token_logprobs") or []]
    ids = choice.get("token_ids")
    if ids is None:
        ids = [_token_id({"token": t}) for t in raw.get("tokens") or []]
    ids = [int(i) for i in ids]
    if len(ids) != len(logprobs):
        raise ModelError(
            f"server sent {len(ids)} token ids but {len(logprobs)} logprobs; the learner "
            "needs one logprob per sampled token"
        )
    prompt_ids = _int_list(choice.get("prompt_token_ids") or data.get("prompt_token_ids"))
    return Completion(
        text=choice.get("text") or "",
        token_ids=ids,
        logprobs=logprobs,
        finish_reason=finish_reason(choice.get("finish_reason")),
        usage=usage_of(data) or Usage(len(prompt_ids or []), len(ids)),
        model=model,
        adapter=adapter,
        prompt_token_ids=prompt_ids,
    )


def _int_list(raw: Any) -> list[int] | None:
    return None if raw is None else [int(i) for i in raw]


def usage_of(data: dict[str, Any]) -> Usage | None:
    raw = data.get("usage")
    if not raw:
        return None
    return Usage(int(raw.get("prompt_tokens", 0)), int(raw.get("completion_tokens", 0)))


def tool_calls_of(message: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):  # some servers send an object
            arguments = json.dumps(arguments)
        calls.append(ToolCall(str(call.get("id", "")), str(function.get("name", "")), arguments))
    return calls


def parse_completion(data: dict[str, Any], *, model: str, adapter: str | None) -> Completion:
    """A non-streamed reply as a `Completion`."""
    choices = data.get("choices") or []
    if not choices:
        raise ModelError(f"server reply has no choices: {str(data)[:300]}")
    choice = choices[0]
    message = choice.get("message") or {}
    ids, logprobs = ids_and_logprobs(choice)
    usage = usage_of(data) or Usage(len(data.get("prompt_token_ids") or []), len(ids))
    return Completion(
        text=message.get("content") or "",
        token_ids=ids,
        logprobs=logprobs,
        finish_reason=finish_reason(choice.get("finish_reason")),
        usage=usage,
        model=model,
        adapter=adapter,
        prompt_token_ids=_int_list(data.get("prompt_token_ids")),
        tool_calls=tool_calls_of(message),
    )


class StreamParser:
    """Turns SSE `data:` payloads into `Chunk`s; the last chunk has finish_reason and usage.

    vLLM sends the finish reason with the last token and the usage in a separate event after
    it, so the finishing chunk is held back until the usage (or the end of the stream) comes.
    It sends `prompt_token_ids` once, in the first event (an empty role delta, no chunk of
    its own): the parser keeps them and puts them on the finishing chunk.
    """

    def __init__(self, adapter: str | None) -> None:
        self.adapter = adapter
        self.prompt_token_ids: list[int] | None = None
        self._held: Chunk | None = None
        self.done = False

    def feed(self, payload: str) -> list[Chunk]:
        """Chunks ready after one `data:` payload (the text after "data: ")."""
        if payload.strip() == "[DONE]":
            self.done = True
            return self.finish()
        data = json.loads(payload)
        if "error" in data:
            error = data["error"]
            raise ModelError(f"server error mid-stream: {error.get('message', error)}")
        if data.get("prompt_token_ids") is not None:
            self.prompt_token_ids = _int_list(data["prompt_token_ids"])
        out: list[Chunk] = []
        usage = usage_of(data)
        for choice in data.get("choices") or []:
            text = (choice.get("delta") or {}).get("content") or ""
            ids, logprobs = ids_and_logprobs(choice)
            reason = choice.get("finish_reason")
            if reason is not None:
                self._held = Chunk(text, ids, logprobs, finish_reason(reason), adapter=self.adapter)
            elif text or ids:
                out.append(Chunk(text, ids, logprobs, adapter=self.adapter))
        if usage is not None and self._held is not None:
            held, self._held = self._held, None
            out.append(self._finishing(held, usage))
        return out

    def finish(self) -> list[Chunk]:
        """Flush a finishing chunk that never got its usage event."""
        if self._held is None:
            return []
        held, self._held = self._held, None
        return [self._finishing(held, None)]

    def _finishing(self, held: Chunk, usage: Usage | None) -> Chunk:
        return dataclasses.replace(held, usage=usage, prompt_token_ids=self.prompt_token_ids)
