"""The /v1/completions wire format (openai_wire.py) without a server: the request body of a
plain-text completion, its reply parsed into a `Completion` (ids, logprobs, prompt ids), stop
strings past vLLM's limit of 4 applied to the text, and the fill-in-the-middle formats.
The real server and the embedded backend: tests/models/test_real_model.py.
Run: .venv/bin/python -m pytest tests/models/test_text_completion_wire.py -q
"""

from __future__ import annotations

import pytest

from agent_server.models.base import ModelError, Sampling
from agent_server.models.openai_wire import (
    chat_payload,
    cut_at_extra_stops,
    parse_text_completion,
    text_payload,
)

REPLY = {
    "choices": [{
        "index": 0, "text": " a + b", "finish_reason": "stop",
        "logprobs": {"tokens": ["token_id:264", "token_id:919"],
                     "token_logprobs": [-0.5, -0.25], "top_logprobs": [], "text_offset": []},
        "token_ids": [264, 919], "prompt_token_ids": [1604, 275],
    }],
    "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4},
}  # fmt: skip


def test_the_body_asks_for_ids_and_the_sampled_tokens_logprob() -> None:
    sampling = Sampling(max_tokens=8, temperature=0, stop=("\n\n",), stop_token_ids=(0, 5))
    body = text_payload("apprentice-dev", "def f():\n   ", sampling)
    assert body["prompt"] == "def f():\n   " and "messages" not in body
    assert body["logprobs"] == 0 and body["return_token_ids"] is True
    assert body["return_tokens_as_token_ids"] is True
    assert (body["stop"], body["stop_token_ids"], body["max_tokens"]) == (["\n\n"], [0, 5], 8)


def test_a_reply_becomes_a_completion_with_its_ids() -> None:
    made = parse_text_completion(REPLY, model="m", adapter="policy-v2")
    assert (made.text, made.token_ids, made.logprobs) == (" a + b", [264, 919], [-0.5, -0.25])
    assert made.prompt_token_ids == [1604, 275] and made.adapter == "policy-v2"
    # Without token_ids the ids come from the "token_id:N" names.
    choice = {k: v for k, v in REPLY["choices"][0].items() if k != "token_ids"}
    again = parse_text_completion({"choices": [choice]}, model="m", adapter=None)
    assert again.token_ids == [264, 919] and again.usage.completion_tokens == 2
    broken = {"choices": [{**choice, "logprobs": {"tokens": ["token_id:1"],
                                                  "token_logprobs": []}}]}  # fmt: skip
    with pytest.raises(ModelError, match="one logprob per sampled token"):
        parse_text_completion(broken, model="m", adapter=None)


def test_more_than_four_stops_go_four_to_the_server_and_the_rest_cut_the_text() -> None:
    stops = ("\nclass", "\ndef", "\n#", "\nif", "\nprint", "```")
    sampling = Sampling(max_tokens=8, stop=stops)
    assert text_payload("m", "p", sampling)["stop"] == list(stops[:4])
    assert chat_payload("m", [], sampling)["stop"] == list(stops[:4])
    reply = {**REPLY, "choices": [{**REPLY["choices"][0], "text": "return 1\nprint(2)",
                                   "finish_reason": "length"}]}  # fmt: skip
    made = cut_at_extra_stops(parse_text_completion(reply, model="m", adapter=None), sampling)
    assert (made.text, made.finish_reason) == ("return 1", "stop")
    assert made.token_ids == [264, 919]  # ids stay whole, as a server that stopped late
