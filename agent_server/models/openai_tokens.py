"""`ServerTokens`: what `OpenAIBackend` knows about its model's tokenizer.

Counts prompt tokens (chat and plain text), finds the fill-in-the-middle format (fim.py) and
the stop tokens, from a local copy of the served model's tokenizer when the config names one
(`tokenizer_path`: exact, no round trip), else by asking the server's /tokenize (blocking:
the protocol's counting members are synchronous). The stop tokens are those the embedded
backend stops at (chat_encoding.stop_token_ids): a server's generation config may list only
the chat's eos, and a plain-text completion must end at the end-of-text token too. Tools
for a chat template that ignores them are written into the system message (`messages_for`).
Tested in tests/models/test_openai_backend.py and tests/models/test_real_model.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from agent_server.models.base import Message
from agent_server.models.fim import Infill, detect_infill
from agent_server.models.openai_config import OpenAIConfig

_UNSET: Any = object()


class ServerTokens:
    def __init__(self, config: OpenAIConfig, request: Callable[..., Any]) -> None:
        """`request(method, url, json=...)`: the backend's blocking request."""
        self.config = config
        self._request = request
        self._infill: Infill | None = _UNSET

    def count_chat(self, messages: Sequence[Message]) -> int:
        if self.config.tokenizer_path is not None:
            from agent_server.models.chat_encoding import count_tokens  # imports transformers

            return count_tokens(self.tokenizer, messages)  # rendered as vLLM renders it
        body = {"model": self.config.model, "messages": list(messages),
                "add_generation_prompt": True}  # fmt: skip
        return int(self._request("POST", f"{self.config.root_url}/tokenize", json=body)["count"])

    def count_text(self, text: str) -> int:
        if self.config.tokenizer_path is not None:
            from agent_server.models.chat_encoding import encode_text

            return len(encode_text(self.tokenizer, text))
        return len(self._server_tokens(text, special=True))

    def infill(self) -> Infill | None:
        if self._infill is _UNSET:
            if self.config.tokenizer_path is not None:
                from agent_server.models.chat_encoding import infill_of

                self._infill = infill_of(self.tokenizer)
            else:

                def one_token(text: str) -> int | None:
                    ids = self._server_tokens(text, special=False)
                    return ids[0] if len(ids) == 1 else None

                self._infill = detect_infill(one_token)
        return self._infill

    def messages_for(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> list[Message]:
        """`messages` with `tools` written into the system message when the served model's
        chat template ignores them (chat_encoding.with_tools), as the embedded backend
        renders them; unchanged without a local tokenizer (the server's template decides)."""
        if not tools or self.config.tokenizer_path is None:
            return list(messages)
        from agent_server.models.chat_encoding import with_tools

        return with_tools(self.tokenizer, messages, tools)[0]

    @cached_property
    def stop_token_ids(self) -> frozenset[int]:
        """The embedded backend's stop tokens; empty without a local tokenizer."""
        if self.config.tokenizer_path is None:
            return frozenset()
        from transformers import GenerationConfig

        from agent_server.models.chat_encoding import stop_token_ids

        try:
            generation = GenerationConfig.from_pretrained(self.config.tokenizer_path)
        except OSError:  # no generation_config.json: the tokenizer's own eos
            generation = None
        return stop_token_ids(self.tokenizer, generation)

    @cached_property
    def tokenizer(self) -> Any:
        from agent_server.models.chat_encoding import load_tokenizer  # heavy, only if counting

        assert self.config.tokenizer_path is not None
        return load_tokenizer(self.config.tokenizer_path)

    def _server_tokens(self, text: str, *, special: bool) -> list[int]:
        body = {"model": self.config.model, "prompt": text, "add_special_tokens": special}
        reply = self._request("POST", f"{self.config.root_url}/tokenize", json=body)
        return [int(i) for i in reply["tokens"]]
