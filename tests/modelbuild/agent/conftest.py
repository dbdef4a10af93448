"""Fixtures for the agent model's tests: one torch thread, as tests/learner/conftest.py sets
for the learner's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """One intra-op thread: the dev model gains nothing from more, and on a shared 2-core
    machine spinning OpenMP threads were measured 40x slower (embedded_config.py)."""
    import torch

    torch.set_num_threads(1)
