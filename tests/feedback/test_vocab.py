"""The shared vocabularies (feedback/vocab.py): one definition, and the schema agrees with it.

.venv/bin/python -m pytest tests/feedback/test_vocab.py -q
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from feedback import vocab

REPO = Path(__file__).resolve().parents[2]


def test_adapter_names_round_trip():
    for version in (1, 2, 17, 1000):
        name = vocab.adapter_name(version)
        assert name == f"policy-v{version}"
        assert vocab.adapter_version(name) == version
        assert vocab.is_adapter_name(name)
    for other in (None, "", "base", "policy-v", "policy-vx", "my-policy-v3", "policy-v3-old"):
        assert vocab.adapter_version(other) is None
    with pytest.raises(ValueError, match="start at 1"):
        vocab.adapter_name(0)


def test_label_kinds_partition_the_decisive_outcomes():
    assert not vocab.DESIRABLE & vocab.UNDESIRABLE
    assert vocab.LABEL_KINDS == vocab.DESIRABLE | vocab.UNDESIRABLE
    assert "shown" not in vocab.LABEL_KINDS and "applied" not in vocab.LABEL_KINDS
    assert set(vocab.DECISION_KINDS) <= vocab.LABEL_KINDS


def test_the_migrated_schema_allows_exactly_the_outcome_kinds():
    """Migrations are history and spell the kinds out; they must still agree with the vocab
    (a new kind needs a migration that widens the CHECK constraint): 0001's kinds, and
    those 0005 added (its AFTER)."""
    tree = ast.parse((REPO / "migrations/versions/0001_initial_schema.py").read_text())
    first: list[str] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "enum"
            and isinstance(node.args[2], ast.Constant)
            and node.args[2].value == "outcome_kind"
        ):
            first = [a.value for a in node.args[3:] if isinstance(a, ast.Constant)]
    assert first, "the outcome_kind enum was not found in migration 0001"
    spec = importlib.util.spec_from_file_location(
        "m0005", REPO / "migrations/versions/0005_written_outcomes.py"
    )
    assert spec and spec.loader
    m0005 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m0005)
    assert tuple(m0005.BEFORE) == tuple(first)
    assert tuple(m0005.AFTER) == vocab.OUTCOME_KINDS
