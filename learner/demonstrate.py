"""The demonstration objective: make what people wrote instead likelier at the prompt they saw.

    part = Part(DemonstrationObjective(demos, train), config.mix.demonstrations, train.epochs)

Each sample is a demonstration (learner/demos.py): a stored prompt and what the person wrote
at that place after not taking the completion (or the end-of-text token where they wrote
nothing). The loss is the negative log-likelihood of its tokens, the mean over each sample's
tokens, then the weighted mean over samples: every demonstration counts the same however
long, as every feedback sample does in the KTO loss. It is supervised imitation, not a
preference: the KTO objective it is summed with (learner/update.py, weight `mix.
demonstrations`) keeps its KL penalty to the reference, and the gate (learner/gate.py)
measures both on held-out items. Batches are cut and packed by the learner's one rule
(learner/batching.py). The same loss on chunks of a repository's files is continued
pretraining on the person's code (learner/repo_code.py; `name` "code"). Tested in
tests/learner/test_demonstrations.py (its direction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from peft import PeftModel

from learner.batching import batch_of, micro_batches, note_budget
from learner.config import TrainConfig
from learner.data import Sample
from learner.device import model_device
from learner.kto import completion_logits, token_logprobs
from learner.memory import release


class DemonstrationObjective:
    """Imitation of what people wrote, an objective of the one update (learner/update.py)."""

    distributed = False

    def __init__(self, samples: Sequence[Sample], config: TrainConfig,
                 name: str = "demonstrations"):  # fmt: skip
        self.samples, self.config, self.name = list(samples), config, name
        note_budget(config)
        self.last: dict[str, float | None] = {}
        self.tokens = self.micro_batches = 0
        self.first_nll: float | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def prepare(self, policy: PeftModel, used: Sequence[int]) -> None:
        """Nothing is fixed ahead: the loss needs no reference or old policy."""

    def figures(self) -> dict[str, float | None]:
        return self.last

    def summary(self) -> dict[str, Any]:
        return {f"{self.name}_nll_first": self.first_nll,
                f"{self.name}_nll_last": self.last.get(f"{self.name}_nll")}  # fmt: skip

    def backward(self, policy: PeftModel, picked: Sequence[int], scale: float = 1.0) -> float:
        chunk = [self.samples[i] for i in picked]
        total_weight = sum(s.weight for s in chunk) or 1.0
        loss, nll_sum = 0.0, 0.0
        for positions in micro_batches(chunk, self.config):
            part = [chunk[k] for k in positions]
            batch = batch_of(part, self.config, device=model_device(policy))
            logprobs = token_logprobs(completion_logits(policy, batch), batch)
            mask = batch.completion_mask
            per_sample = -(logprobs * mask).sum(-1) / mask.sum(-1).clamp(min=1)
            weights = torch.tensor([s.weight for s in part], device=per_sample.device)
            part_loss = (per_sample * weights).sum() / total_weight * scale
            part_loss.backward()
            loss += float(part_loss.detach())
            nll_sum += float((per_sample.detach() * weights).sum())
            self.tokens += batch.tokens
            self.micro_batches += 1
            del batch, logprobs, part_loss
            release()
        self.last = {f"{self.name}_nll": nll_sum / total_weight}
        if self.first_nll is None:
            self.first_nll = self.last[f"{self.name}_nll"]
        return loss
