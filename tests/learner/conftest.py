"""Fixtures for the learner's tests: the dev model's tokenizer, settings on a fresh
database, a pipeline Context, and synthetic feedback (tests/learner/synthetic_feedback.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from feedback.db import make_engine, make_sessionmaker
from ground.settings import Settings
from learner.pipeline import Context

# Small and quick: a few optimizer steps, outcomes readable at once, and half the feedback
# held out so that a few dozen synthetic outcomes give the gate evidence to decide on (3 of
# each kind at least; the defaults' 20 % and 5 would defer most such cycles, as they should).
FAST = {
    "data": {"settle_s": 0.0, "heldout_fraction": 0.5},
    "train": {"max_steps": 12, "batch_size": 8, "lr": 3e-3},
    "gate": {"min_per_class": 3},
}
# A later cycle that teaches something new, judged on the newest held-out outcomes only (a
# dozen or so: that lesson's), with room for the 5M-parameter dev model's perplexity to move
# (+4.5 % in one such cycle): for the tests of what happens after the gate.
NEWEST = {"max_heldout": 12, "max_perplexity_increase": 0.25}


@pytest.fixture(scope="session")
def dev_tokenizer(dev_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(dev_model_dir)


@pytest.fixture(scope="session")
def base_model(dev_model_dir: Path) -> Any:
    """The dev model in float32 (read-only: tests wrap copies, never train this one)."""
    from learner.train import load_base

    return load_base(dev_model_dir)


@pytest.fixture
def learner_settings(tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path) -> Settings:
    """Embedded defaults on a fresh SQLite database and the dev model."""
    return Settings(
        home=tmp_path / "home", database_url=sqlite_head_url, model_name=str(dev_model_dir)
    )


@pytest.fixture
def learner_db(learner_settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(learner_settings.database_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def ctx(learner_settings: Settings, learner_db: sessionmaker[Session]) -> Context:
    return Context(learner_settings, learner_db)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """One intra-op thread: the dev model gains nothing from more, and on a shared 2-core
    machine spinning OpenMP threads were measured 40x slower (embedded_config.py)."""
    import torch

    torch.set_num_threads(1)
