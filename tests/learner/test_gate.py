"""The gate on real training (the dev model, CPU): it deploys only on evidence.

A candidate trained on the true labels (`return ...` accepted, `print(...)` rejected:
tests/learner/synthetic_feedback.py) is deployed; one trained on the inverted labels is
refused; one trained on coin-flip labels is refused or deferred; with too few held-out
outcomes of a kind the decision is deferred whatever was trained. The candidate is judged
against the serving policy (here the base model) on the same held-out items, which it never
saw. Then the safety rules: KL to the serving policy and perplexity on general code.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from learner.config import GateConfig, TrainConfig
from learner.evaluate import HeldoutScores, score_heldout
from learner.gate import feedback_decision
from learner.train import make_policy, save_adapter, train_policy
from tests.learner.synthetic_feedback import make_samples

TRAIN = TrainConfig(max_steps=24, lr=3e-3)


@pytest.fixture(scope="module")
def samples(dev_tokenizer: Any, base_model: torch.nn.Module) -> list[Any]:
    return make_samples(dev_tokenizer, base_model, 96, seed=3)


def relabel(samples: list[Any], how: str) -> list[Any]:
    rng = random.Random(11)
    flip = {"true": lambda s: s.desirable, "inverted": lambda s: not s.desirable,
            "coin": lambda s: rng.random() < 0.5}[how]  # fmt: skip
    return [dataclasses.replace(s, desirable=flip(s)) for s in samples]


@pytest.fixture(scope="module")
def candidates(
    samples: list[Any], base_model: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """One adapter per labelling, each trained from scratch on the same train split."""
    train = [s for s in samples if not s.heldout]
    out = {}
    for how in ("true", "inverted", "coin"):
        policy, _ = make_policy(copy.deepcopy(base_model), TRAIN)
        train_policy(policy, relabel(train, how), TRAIN)
        out[how] = tmp_path_factory.mktemp(how) / "candidate"
        save_adapter(policy, out[how])
    return out


def scores_of(dev_model_dir: Path, heldout: list[Any], candidate: Path) -> HeldoutScores:
    return score_heldout(dev_model_dir, heldout, candidate, None, TRAIN, GateConfig())


def test_true_labels_deploy_inverted_refuse_coin_flips_do_not_deploy(
    dev_model_dir: Path, samples: list[Any], candidates: dict[str, Path]
) -> None:
    heldout = [s for s in samples if s.heldout]
    accepted = sum(s.desirable for s in heldout)
    assert (accepted, len(heldout) - accepted) == (12, 12)
    decisions = {}
    for how, candidate in candidates.items():
        scores = scores_of(dev_model_dir, heldout, candidate)
        decisions[how] = feedback_decision(scores, GateConfig(), finite=True)
    true, inverted, coin = decisions["true"], decisions["inverted"], decisions["coin"]
    assert true.verdict == "deploy", true
    assert true.evidence["effect"] > 0.5 and true.evidence["p_value"] < 0.1
    assert inverted.verdict == "refuse" and inverted.evidence["effect"] < 0, inverted
    assert "not better" in inverted.reasons[0]
    assert coin.verdict in ("refuse", "defer"), coin
    for decision in decisions.values():  # what the run page shows
        assert decision.evidence["items"] == {"accepted": 12, "rejected": 12}
        assert {"effect", "p_value", "lower", "wins", "losses"} <= decision.evidence.keys()


def test_too_few_held_out_outcomes_of_a_kind_defer(
    dev_model_dir: Path, samples: list[Any], candidates: dict[str, Path]
) -> None:
    heldout = [s for s in samples if s.heldout]
    few = [s for s in heldout if not s.desirable] + [s for s in heldout if s.desirable][:2]
    decision = feedback_decision(scores_of(dev_model_dir, few, candidates["true"]),
                                 GateConfig(min_per_class=5), finite=True)  # fmt: skip
    assert decision.verdict == "defer" and not decision.accepted
    assert "2 accepted" in decision.reasons[0] and decision.evidence["needed"] == 3


def test_kl_to_the_serving_policy_and_perplexity_on_general_code(
    dev_model_dir: Path, samples: list[Any], candidates: dict[str, Path]
) -> None:
    heldout = [s for s in samples if s.heldout]
    scores = scores_of(dev_model_dir, heldout, candidates["true"])
    assert scores.kl_to_serving > 0  # it moved...
    same = score_heldout(dev_model_dir, heldout, candidates["true"], candidates["true"], TRAIN,
                         GateConfig())  # fmt: skip
    assert same.kl_to_serving == pytest.approx(0, abs=1e-5)  # ...and from itself, not at all
    assert same.deltas == pytest.approx([0.0] * len(heldout), abs=1e-5)
    ppl = scores.perplexity
    assert ppl["files"] == 8 and ppl["tokens"] > 1000 and ppl["serving"] > 1
    assert ppl["ratio"] == pytest.approx(ppl["candidate"] / ppl["serving"], rel=1e-3)
    tight = feedback_decision(scores, GateConfig(max_kl=scores.kl_to_serving / 2), finite=True)
    assert tight.verdict == "refuse" and "KL to the serving policy" in tight.reasons[0]
    forgetting = dataclasses.replace(scores, perplexity={**ppl, "ratio": 1.2})
    refused = feedback_decision(forgetting, GateConfig(), finite=True)
    assert refused.verdict == "refuse" and "general code" in refused.reasons[0]
    broken = feedback_decision(scores, GateConfig(), finite=False)
    assert broken.verdict == "refuse" and "non-finite weights" in broken.reasons[0]
