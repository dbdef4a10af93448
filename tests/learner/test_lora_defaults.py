"""The learner's LoRA defaults on the real model (SmolLM2-135M-Instruct): the adapter it
publishes is the one vLLM loads.

- the learner's rank limit is vLLM's --max-lora-rank, one constant for both;
- with the default TrainConfig, every projection of every one of the 30 layers gets a LoRA
  (2.4M weights, the count learner/config.py gives), one train step moves them and keeps
  them finite, and the saved adapter is peft's format with the tensor names vLLM reads
  (base_model.model.model.layers.N.{self_attn,mlp}.X_proj.lora_{A,B}.weight), no
  modules_to_save, no DoRA. That vLLM loads it and its logprobs change is
  tests/models/test_real_model.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import torch
from safetensors.torch import load_file

from agent_server.models.vllm_command import MAX_LORA_RANK, server_command
from learner.config import LINEAR_LAYERS, MAX_RANK, TrainConfig
from learner.data import Sample
from learner.train import load_base, make_policy, save_adapter, train_policy
from tests.learner.synthetic_feedback import base_logprobs

KEY = re.compile(
    r"base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight"
)


def test_the_learners_rank_limit_is_vllms(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 64}))
    argv = server_command(tmp_path, 8000)
    assert MAX_RANK == MAX_LORA_RANK == int(argv[argv.index("--max-lora-rank") + 1])
    assert TrainConfig().rank <= MAX_RANK


def _samples(tokenizer: object) -> list[Sample]:
    rows = [("def add(a, b):\n    ", "return a + b", True), ("def add(a, b):\n    ", "pass", False)]
    out = []
    for i, (prompt, completion, desirable) in enumerate(rows):
        out.append(Sample(
            suggestion_id=f"s{i}", desirable=desirable, weight=1.0,
            prompt_ids=tokenizer(prompt)["input_ids"],  # type: ignore[operator]
            completion_ids=tokenizer(completion)["input_ids"],  # type: ignore[operator]
            behaviour_logprobs=[], adapter_version=0, outcome="accepted", heldout=False,
        ))  # fmt: skip
    return out


def test_default_adapter_on_the_real_model_is_what_vllm_loads(
    real_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoConfig, AutoTokenizer

    model_config = AutoConfig.from_pretrained(real_model_dir)
    base = load_base(real_model_dir)
    samples = _samples(AutoTokenizer.from_pretrained(real_model_dir))
    logprobs = base_logprobs(base, samples)
    samples = [
        dataclasses.replace(s, behaviour_logprobs=lp)
        for s, lp in zip(samples, logprobs, strict=True)
    ]
    config = TrainConfig(max_steps=1, batch_size=2)
    policy, _ = make_policy(base, config)

    # r x (in + out) per projection, per layer: what learner/config.py says (2.4M)
    hidden, mlp = model_config.hidden_size, model_config.intermediate_size
    kv = model_config.num_key_value_heads * (hidden // model_config.num_attention_heads)
    per_layer = (hidden + hidden) * 2 + (hidden + kv) * 2 + (hidden + mlp) * 3
    want = config.rank * per_layer * model_config.num_hidden_layers
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    assert trainable == want and 2.3e6 < want < 2.5e6, trainable

    result = train_policy(policy, samples, config)
    assert result.steps == 1 and all(map(math.isfinite, result.losses))
    save_adapter(policy, tmp_path / "adapter")

    saved = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert saved["r"] == config.rank and saved["lora_alpha"] == config.alpha
    assert set(saved["target_modules"]) == set(LINEAR_LAYERS)
    assert not saved.get("modules_to_save") and not saved.get("use_dora")
    tensors = load_file(str(tmp_path / "adapter" / "adapter_model.safetensors"))
    found = {(int(m[1]), m[3], m[4]) for key in tensors if (m := KEY.fullmatch(key))}
    assert len(found) == len(tensors), sorted(
        set(tensors) - {k for k in tensors if KEY.fullmatch(k)}
    )
    layers = model_config.num_hidden_layers
    assert found == {(i, name, ab) for i in range(layers) for name in LINEAR_LAYERS for ab in "AB"}
    assert all(torch.isfinite(t).all() for t in tensors.values())
    assert any(key.endswith("lora_B.weight") and t.abs().sum() > 0 for key, t in tensors.items())
