"""The off-policy weight under constrained decoding (learner/grpo.py `off_policy_weight`).

A real agent action sampled by the embedded backend on the dev model under the agent's
action schema: its logged logprobs are the grammar-masked distribution's. Scored by the
trainer (no mask) with the policy unchanged, exp(lp_old - lp_behaviour) falls far below 1
on forced tokens; the call recorded as constrained takes weight 1 on every token, as it
should when nothing changed. An unconstrained call (no schema) has weight ~1 as it is.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import torch

from agent_server.agent.actions import action_schema
from agent_server.models.base import Sampling
from agent_server.models.embedded import EmbeddedBackend, EmbeddedConfig
from learner.config import TaskTrainConfig, TrainConfig
from learner.grpo import TaskObjective, off_policy_weight
from learner.train import make_policy
from learner.trajectories import CallSample

session_loop = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the bug in calc.py: add should return a + b."},
]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def backend(dev_model_dir: Path) -> AsyncIterator[EmbeddedBackend]:
    b = EmbeddedBackend(EmbeddedConfig(model_dir=Path(dev_model_dir)))
    yield b
    await b.aclose()


async def call(backend: EmbeddedBackend, *, schema: Any, constrained: bool) -> CallSample:
    sampling = Sampling(max_tokens=48, temperature=1.0, seed=3)
    c = await backend.complete(MESSAGES, schema=schema, sampling=sampling)
    return CallSample(rollout_id="r", seq=1, kind="agent", prompt_ids=c.prompt_token_ids or [],
                      completion_ids=list(c.token_ids), behaviour_logprobs=list(c.logprobs),
                      advantage=1.0, constrained=constrained)  # fmt: skip


def weights(base_model: torch.nn.Module, sample: CallSample) -> torch.Tensor:
    """The weight of each completion token, the policy as it sampled (a fresh LoRA: B = 0)."""
    train = TrainConfig()
    policy, _ = make_policy(copy.deepcopy(base_model), train)
    objective = TaskObjective([sample], train, TaskTrainConfig())
    objective.prepare(policy, [0])
    old = torch.tensor(objective.old[0])
    behaviour = torch.tensor(sample.behaviour_logprobs[: len(old)])
    flag = torch.tensor([sample.constrained])
    return off_policy_weight(old.unsqueeze(0), behaviour.unsqueeze(0), 2.0, flag)[0]


@session_loop
async def test_a_constrained_action_weighs_one_when_the_policy_has_not_changed(
    backend: EmbeddedBackend, base_model: torch.nn.Module
) -> None:
    masked = await call(backend, schema=action_schema(), constrained=True)
    assert len(masked.completion_ids) > 5
    as_if_free = CallSample(**{**masked.__dict__, "constrained": False})
    naive = weights(base_model, as_if_free)  # the old rule on the same call
    assert float(naive.min()) < 0.5, naive  # forced tokens: the mask's mass, not a drift
    fixed = weights(base_model, masked)
    torch.testing.assert_close(fixed, torch.ones_like(fixed))
    free = await call(backend, schema=None, constrained=False)  # no mask: ~1 as it is
    unmasked = weights(base_model, free)
    torch.testing.assert_close(unmasked, torch.ones_like(unmasked), atol=2e-3, rtol=0)
