"""The small real dev model: a BPE tokenizer and a tiny Llama trained here on Python code.

Build it with `apprentice model build-dev`. This package only builds the model; encoding a
chat for it (or any model) is agent_server/models/chat_encoding.py.
"""

import os
import sys

if "torch" not in sys.modules:
    # OpenMP threads that spin while waiting crawl (10x measured) when other processes share
    # the cores; passive waits cost little. Read once, when torch loads: so only if it has not.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from modelbuild.dev.build import (
    MANIFEST,
    BuildResult,
    DevModelConfig,
    build_dev_model,
    build_key,
    builder_version,
    read_manifest,
    run_build_dev,
)
from modelbuild.dev.tokenizer import CHAT_TEMPLATE

__all__ = [
    "CHAT_TEMPLATE",
    "MANIFEST",
    "BuildResult",
    "DevModelConfig",
    "build_dev_model",
    "build_key",
    "builder_version",
    "read_manifest",
    "run_build_dev",
]
