"""Make a small random LoRA adapter for a model directory, in peft format, for backend tests.

peft initialises B to zero (the adapter is then a no-op); `init_lora_weights=False` makes both
A and B random, so the adapter really changes the model's outputs. Rank and targets stay
within what the vLLM server accepts (--max-lora-rank 16, Llama linear layers).
"""

from __future__ import annotations

from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

LLAMA_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_lora_adapter(model_dir: Path, out: Path, *, rank: int = 8, seed: int = 0) -> Path:
    """Write a random-init LoRA adapter for `model_dir` into `out` and return `out`."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    torch.manual_seed(seed)
    config = LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules=LLAMA_LINEAR, init_lora_weights=False
    )
    get_peft_model(model, config).save_pretrained(out)
    return out
