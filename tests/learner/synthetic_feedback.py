"""Synthetic feedback for the learner's tests: a property that is always accepted vs always
rejected, as `Sample`s or as real suggestion + outcome rows in the feedback database.

The property (`PROPERTIES[0]`): a desirable completion is `return <expr>`, an undesirable one
`print(<expr>)`, over the same expressions and varied code prompts. A later cycle that must
beat an adapter which already learned that one takes another property (`prop=1`, ...): the
gate deploys only a candidate that is surely better than what serves, and more of a learned
lesson rarely is. Behaviour logprobs are those of the
policy that "served" them (the base model, or the adapter named), so importance ratios
start at 1 as in production.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.chat_encoding import encode_chat
from feedback.db import transaction
from feedback.queries import record_outcome, record_suggestion
from learner.config import TrainConfig
from learner.data import Sample
from learner.device import model_device
from learner.kto import completion_logits, make_batch, token_logprobs

SNIPPETS = [
    "def area(width, height):\n    ",
    "def total(items):\n    result = sum(items)\n    ",
    "def scale(value, factor):\n    ",
    "def greet(name):\n    message = 'hi ' + name\n    ",
    "def first(seq):\n    ",
    "def mean(xs):\n    n = len(xs)\n    ",
    "def clamp(x, lo, hi):\n    ",
    "def double(n):\n    ",
    "def key_of(record):\n    ",
    "def join_all(parts):\n    ",
    "def last(seq):\n    ",
    "def square(v):\n    ",
]
EXPRESSIONS = [
    "width * height", "result", "value * factor", "message", "seq[0]", "sum(xs) / n",
    "max(lo, min(x, hi))", "n * 2", "record['key']", "''.join(parts)", "seq[-1]", "v * v",
    "a + b", "x", "len(items)", "name.upper()",
]  # fmt: skip
# (desirable, undesirable) completion templates, each over an expression.
PROPERTIES = [("return {}", "print({})"), ("yield {}", "del {}"), ("assert {}", "raise {}")]


def messages(snippet: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You complete code at the cursor."},
        {"role": "user", "content": f"Complete this code:\n{snippet}"},
    ]


def texts(n: int, seed: int = 0, prop: int = 0) -> list[tuple[list[dict[str, Any]], str, bool]]:
    """n (prompt messages, completion text, desirable) triples, half of each class."""
    rng = random.Random(seed)
    good, bad = PROPERTIES[prop]
    out = []
    for i in range(n):
        desirable = i % 2 == 0
        expr = rng.choice(EXPRESSIONS)
        text = (good if desirable else bad).format(expr)
        out.append((messages(rng.choice(SNIPPETS)), text, desirable))
    return out


@torch.no_grad()
def base_logprobs(model: torch.nn.Module, samples: Sequence[Sample]) -> list[list[float]]:
    config = TrainConfig()
    batch = make_batch(samples, max_length=config.max_length,
                       max_completion_length=config.max_completion_length,
                       device=model_device(model))  # fmt: skip
    lp = token_logprobs(completion_logits(model, batch), batch)
    return [row[mask.bool()].tolist() for row, mask in zip(lp, batch.completion_mask, strict=True)]


def make_samples(
    tokenizer: Any,
    model: torch.nn.Module,
    n: int,
    *,
    seed: int = 0,
    heldout_every: int = 4,
    prop: int = 0,
) -> list[Sample]:
    """n labelled samples; every `heldout_every`-th pair of samples is held out."""
    samples = []
    for i, (prompt, text, desirable) in enumerate(texts(n, seed, prop)):
        samples.append(
            Sample(
                suggestion_id=f"synth-{prop}-{seed}-{i}",
                desirable=desirable,
                weight=1.0,
                prompt_ids=encode_chat(tokenizer, prompt),
                completion_ids=list(tokenizer.encode(text, add_special_tokens=False)),
                behaviour_logprobs=[],
                adapter_version=0,
                outcome="accepted" if desirable else "rejected",
                heldout=(i // 2) % heldout_every == 0,
            )
        )
    logprobs = base_logprobs(model, samples)
    return [
        Sample(**{**s.__dict__, "behaviour_logprobs": lp})
        for s, lp in zip(samples, logprobs, strict=True)
    ]


def seed_feedback(
    db: sessionmaker[Session],
    tokenizer: Any,
    model_dir: Path,
    n: int,
    *,
    seed: int = 0,
    adapter_version: int | None = None,
    prop: int = 0,
) -> list[str]:
    """Write n suggestions with an accepted / rejected outcome each; returns their ids.

    With `adapter_version`, the behaviour logprobs are that published adapter's own, as
    they would be had it served the suggestions.
    """
    from peft import PeftModel

    from feedback.queries import get_adapter
    from learner.train import load_base

    model = load_base(model_dir)
    if adapter_version is not None:
        with transaction(db) as s:
            path = get_adapter(s, version=adapter_version).path  # type: ignore[union-attr]
        model = PeftModel.from_pretrained(model, path).eval()
    samples = make_samples(tokenizer, model, n, seed=seed, prop=prop)
    prompts = [p for p, _, _ in texts(n, seed, prop)]
    ids = []
    with transaction(db) as s:
        for sample, prompt in zip(samples, prompts, strict=True):
            row = record_suggestion(
                s, kind="completion", model="dev", adapter_version=adapter_version,
                prompt_messages=prompt,
                prompt_token_ids=sample.prompt_ids,
                completion_text=tokenizer.decode(sample.completion_ids),
                completion_token_ids=sample.completion_ids,
                completion_logprobs=sample.behaviour_logprobs,
                proposed=tokenizer.decode(sample.completion_ids),
            )  # fmt: skip
            record_outcome(s, suggestion_id=row.id, kind="shown", client_event_id=uuid.uuid4().hex)
            kind = "accepted" if sample.desirable else "rejected"
            record_outcome(s, suggestion_id=row.id, kind=kind, client_event_id=uuid.uuid4().hex)
            ids.append(row.id)
    return ids
