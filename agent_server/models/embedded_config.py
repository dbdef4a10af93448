"""Configuration of the embedded model backend (`EmbeddedBackend`), validated at construction.

    config = EmbeddedConfig(model_dir=Path("~/.apprentice/models/dev"))
    config = EmbeddedConfig.from_settings(Settings())  # the process's embedded defaults

Every field is documented where it is declared; a bad value raises ValueError saying how to
fix it. Tested in tests/models/test_embedded_backend.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class EmbeddedConfig:
    """Configuration of one embedded backend. Validated at construction."""

    model_dir: Path  # local Hugging Face folder: config.json, weights, tokenizer, chat template
    device: str = "cpu"  # torch device; the embedded backend is meant for "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # float32: fastest on CPUs
    max_new_tokens: int = 2048  # cap on any request's max_tokens
    # torch.set_num_threads at load (process-wide); None leaves torch's default. 1 by default:
    # the dev model is too small to gain from more, and on a busy 2-core machine two spinning
    # threads were measured at 117 ms/token against 2.7 ms/token for one.
    torch_threads: int | None = 1
    context_window: int | None = None  # prompt + completion; None: max_position_embeddings
    adapters_dir: Path | None = None  # where load_adapter(name) looks when given no path
    name: str | None = None  # model name reported in completions; None: str(model_dir)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_dir", Path(self.model_dir).expanduser())
        if not (self.model_dir / "config.json").is_file():
            raise ValueError(
                f"model_dir={self.model_dir} holds no config.json: point it at a Hugging Face "
                "model folder (build the dev model with `apprentice model build-dev`)"
            )
        try:
            device = torch.device(self.device)
        except RuntimeError as exc:
            raise ValueError(f"device={self.device!r} is not a torch device, use 'cpu'") from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} but CUDA is not available; use 'cpu'")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r}: choose one of {sorted(DTYPES)}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")
        if self.context_window is not None and self.context_window < 2:
            raise ValueError(f"context_window must be >= 2 or None, got {self.context_window}")
        if self.adapters_dir is not None:
            object.__setattr__(self, "adapters_dir", Path(self.adapters_dir).expanduser())

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> EmbeddedConfig:
        """The embedded defaults of a `Settings`: model at settings.model_name, its adapters."""
        values: dict[str, Any] = {
            "model_dir": Path(settings.model_name),
            "adapters_dir": settings.adapters_dir,
        }
        return cls(**(values | overrides))
