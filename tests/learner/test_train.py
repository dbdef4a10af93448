"""The train step and the evaluation metrics on the real dev model (CPU, seconds).

- one step changes the LoRA weights and leaves every base weight bit-identical;
- the saved adapter is in the form vLLM loads (no modules_to_save, no DoRA, rank <= 16);
- padding does not change a sample's logprobs (batches are right-aligned with masks).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from learner.config import LINEAR_LAYERS, TrainConfig
from learner.kto import completion_logits, make_batch, token_logprobs
from learner.train import make_policy, save_adapter, train_policy
from tests.learner.synthetic_feedback import make_samples


@pytest.fixture(scope="module")
def samples(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Any]:
    return make_samples(dev_tokenizer, base_model, 64, seed=1)


def test_a_train_step_changes_lora_weights_and_no_base_weight(
    base_model: torch.nn.Module, samples: list[Any]
) -> None:
    model = copy.deepcopy(base_model)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    policy, used_parent = make_policy(model, TrainConfig(max_steps=1, lr=1e-2))
    assert not used_parent
    lora_before = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}
    result = train_policy(policy, samples[:16], TrainConfig(max_steps=1, lr=1e-2))
    assert result.steps == 1 and result.tokens > 0

    changed = [n for n, p in policy.named_parameters() if "lora_" in n
               and not torch.equal(p.detach(), lora_before[n])]  # fmt: skip
    assert changed, "no LoRA weight moved"
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in changed} == set(LINEAR_LAYERS)
    base_now = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p
        for n, p in policy.named_parameters()
        if "lora_" not in n
    }
    assert base_now.keys() == before.keys()
    for name, value in before.items():
        assert torch.equal(base_now[name].detach(), value), f"base weight {name} changed"
        assert not base_now[name].requires_grad


def test_saved_adapter_is_what_vllm_loads(base_model: torch.nn.Module, tmp_path: Path) -> None:
    policy, _ = make_policy(copy.deepcopy(base_model), TrainConfig(rank=16))
    save_adapter(policy, tmp_path / "a")
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert config["r"] == 16 and not config.get("use_dora")
    assert not config.get("modules_to_save")
    assert set(config["target_modules"]) == set(LINEAR_LAYERS)
    assert (tmp_path / "a" / "adapter_model.safetensors").is_file()


def test_rank_above_vllms_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="less than or equal to 16"):
        TrainConfig(rank=32)
    with pytest.raises(ValueError, match="lm_head"):
        TrainConfig(target_modules=("q_proj", "lm_head"))


@torch.no_grad()
def test_padding_does_not_change_logprobs(base_model: torch.nn.Module, samples: list[Any]) -> None:
    short = min(samples, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
    long = max(samples, key=lambda s: len(s.prompt_ids) + len(s.completion_ids))
    assert len(long.prompt_ids) > len(short.prompt_ids)

    def logprobs(batch_samples: list[Any]) -> torch.Tensor:
        batch = make_batch(batch_samples, max_length=1024, max_completion_length=512)
        lp = token_logprobs(completion_logits(base_model, batch), batch)
        return lp[0][batch.completion_mask[0].bool()]

    alone, padded = logprobs([short]), logprobs([short, long])
    torch.testing.assert_close(alone, padded, atol=1e-4, rtol=1e-4)
    # and they are the logged behaviour logprobs the synthetic samples carry
    torch.testing.assert_close(alone, torch.tensor(short.behaviour_logprobs), atol=1e-4, rtol=0)


def test_a_batch_over_the_token_budget_is_split_and_trains_the_same(
    base_model: torch.nn.Module, samples: list[Any]
) -> None:
    """8 prompts of 1,000 tokens in one pass held 18 GB on the real model: a batch over
    micro_batch_tokens is cut into passes whose gradients accumulate. One class (equal
    weights) and one sample a pass: the loss of the first step is the unsplit batch's."""
    from learner.train import micro_batches

    same_class = [s for s in samples if s.desirable][:8]
    longest = max(len(s.prompt_ids) + len(s.completion_ids) for s in same_class)
    cuts = micro_batches(same_class, TrainConfig(micro_batch_tokens=2 * longest))
    assert [k for run in cuts for k in run] == list(range(8)) and all(len(r) <= 2 for r in cuts)
    assert micro_batches(same_class, TrainConfig(micro_batch_tokens=8)) == [[k] for k in range(8)]

    losses = {}
    for budget in (8 * longest, longest):  # a budget under `longest` would cut samples
        config = TrainConfig(max_steps=1, batch_size=8, micro_batch_tokens=budget)
        policy, _ = make_policy(copy.deepcopy(base_model), config)
        result = train_policy(policy, same_class, config)
        assert result.micro_batches == (1 if budget > longest else 8)
        losses[budget] = result.losses[0]
    assert losses[longest] == pytest.approx(losses[8 * longest], rel=1e-4)
