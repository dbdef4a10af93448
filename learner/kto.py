"""The update rule: KTO-style learning from unpaired accept / reject feedback.

Why KTO (Ethayarajh et al., 2024) and not REINFORCE with a baseline:
- The feedback is unpaired and binary: one suggestion, one verdict. KTO is built for exactly
  that; DPO-style methods need pairs, which we rarely have.
- Its per-sample loss is bounded (a sigmoid of the log-ratio to the reference), so a few
  very long or very unlikely completions cannot dominate an update; REINFORCE's gradient
  scales with the completion's log-probability and needs a well-estimated baseline, which a
  batch of tens of samples does not give.
- Its implicit reward, r = log pi_theta(y|x) - log pi_ref(y|x), is what the evaluation gate
  measures (held-out preference accuracy) and what keeps the policy anchored: the reference
  is the same model with the adapter disabled, never a second copy.

The loss, per sample with label d (+1 desirable, -1 undesirable) and weight lambda:

    r   = sum_t [log pi_theta(y_t|.) - log pi_ref(y_t|.)]           # implicit reward
    iw  = min(cap, exp(mean_t [log pi_theta(y_t|.) - log pi_behaviour(y_t|.)]))   # detached
    z0  = max(0, sum(iw * r) / sum(iw))                              # detached: KL estimate
    L   = sum(iw * lambda * (1 - sigmoid(beta * d * (r - z0)))) / sum(iw * lambda)
          + kl_coef * mean over completion positions of KL(pi(.|prefix) || pi_ref(.|prefix))

Simplifications against the paper, and why:
- z0, the reference point (an estimate of KL(pi_theta || pi_ref)), comes from the batch's
  own completions weighted by the importance ratio: they were sampled from the behaviour
  policy (the serving adapter), so the weighted mean of r is an estimate of
  E_{pi_theta}[r] = KL. The paper uses mismatched (x, y') pairs instead because its data is
  not sampled from the policy; ours is, and this saves a second forward pass per step.
- The logged behaviour logprobs give a capped, length-normalised importance ratio (as in
  GSPO/truncated IS): samples produced by an older adapter, which the current policy has
  moved away from, count less; none counts more than `is_cap` times. Logprobs are the raw
  (temperature 1) ones the backends log, so at the start of training the ratio is ~1 for
  fresh samples and measures only how far the policy has since moved.
- The last term is not in KTO: an exact per-token KL penalty over the full next-token
  distributions at the positions we have. Without it, a batch of mostly rejections (a low
  acceptance rate) pushed the policy into degenerate text nobody had sampled: the sampled
  estimate of z0 cannot see mass that moved off the behaviour policy's support, this term
  can. It costs one no-grad reference forward per step; with kl_coef = 0 the reference
  token logprobs, which do not change during training, are computed once per run instead.
- lambda_D and lambda_U default to balancing the two classes' total weight.

Tested in tests/learner/test_train.py. Nothing to run on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from learner.data import Sample


@dataclass
class Batch:
    """Samples laid out right-aligned: [pad.. prompt completion]; completions end together."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    position_ids: torch.Tensor  # [B, L], 0 at each row's first real token
    completion_mask: torch.Tensor  # [B, T] over the last T tokens: 1 on completion tokens
    behaviour: torch.Tensor  # [B, T] logged logprobs (0 where masked)
    desirable: torch.Tensor  # [B] bool
    weight: torch.Tensor  # [B] per-sample weight (outcome weight x class weight)
    tokens: int  # real (prompt + completion) tokens in the batch

    def to(self, device: torch.device | str | None) -> Batch:
        """The same batch with every tensor on `device` (None: unchanged)."""
        if device is None:
            return self
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v
                 for k, v in self.__dict__.items()}  # fmt: skip
        return Batch(**moved)


def class_weights(
    samples: Sequence[Sample], desirable: float | None, undesirable: float | None
) -> tuple[float, float]:
    """(lambda_D, lambda_U); None means: balance the two classes' total weight."""
    n_d = sum(s.weight for s in samples if s.desirable)
    n_u = sum(s.weight for s in samples if not s.desirable)
    lam_d = desirable if desirable is not None else 1.0
    if undesirable is not None:
        return lam_d, undesirable
    return lam_d, (lam_d * n_d / n_u) if n_d > 0 and n_u > 0 else 1.0


def kept(
    prompt: int, completion: int, *, max_length: int, max_completion_length: int
) -> tuple[int, int]:
    """(prompt tokens, completion tokens) a sample of these lengths keeps in a row of at most
    `max_length` tokens, the one rule every forward pass follows: the completion's first
    `max_completion_length` tokens, and never more than `max_length - 1` of them (a
    completion longer than the row is capped, so one prompt token stays to predict its first
    token from); then the prompt's last tokens that fit (it is cut from the left)."""
    completion = min(completion, max_completion_length, max(1, max_length - 1))
    return min(prompt, max(1, max_length - completion)), completion


def make_batch(
    samples: Sequence[Sample],
    *,
    max_length: int,
    max_completion_length: int,
    lambdas: tuple[float, float] = (1.0, 1.0),
    pad_id: int = 0,
    device: torch.device | str | None = None,
) -> Batch:
    """Cut each of `samples` to at most `max_length` tokens (`kept`) and pad them into one
    batch, its tensors on `device` (None: the CPU): the model's, learner/device.py
    `model_device`."""
    rows, completions = [], []
    for s in samples:
        p, c = kept(len(s.prompt_ids), len(s.completion_ids), max_length=max_length,
                    max_completion_length=max_completion_length)  # fmt: skip
        completion = list(s.completion_ids[:c])
        prompt = list(s.prompt_ids[len(s.prompt_ids) - p :])
        rows.append(prompt + completion)
        completions.append(len(completion))
    length, span = max(map(len, rows)), max(completions)
    batch = len(rows)
    ids = torch.full((batch, length), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, length), dtype=torch.long)
    cmask = torch.zeros((batch, span), dtype=torch.float32)
    behaviour = torch.zeros((batch, span), dtype=torch.float32)
    for i, (row, n, s) in enumerate(zip(rows, completions, samples, strict=True)):
        ids[i, length - len(row) :] = torch.tensor(row)
        attention[i, length - len(row) :] = 1
        cmask[i, span - n :] = 1
        logged = s.behaviour_logprobs[:n]
        if len(logged) == n:
            behaviour[i, span - n :] = torch.tensor(logged, dtype=torch.float32)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    lam_d, lam_u = lambdas
    desirable = torch.tensor([s.desirable for s in samples])
    weight = torch.tensor([s.weight for s in samples], dtype=torch.float32)
    weight = weight * torch.where(desirable, lam_d, lam_u)
    return Batch(ids, attention, position_ids, cmask, behaviour, desirable, weight,
                 int(attention.sum())).to(device)  # fmt: skip


def completion_logits(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """Logits that predict the last T tokens, [B, T, V] (lm_head runs on those only)."""
    span = batch.completion_mask.shape[1]
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=span + 1,
        use_cache=False,
    )
    return out.logits[:, :-1, :].float()


def token_logprobs(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """log p(token) of each of the last T tokens, [B, T] (garbage where masked)."""
    span = batch.completion_mask.shape[1]
    targets = batch.input_ids[:, -span:]
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def per_token_kl(policy_logits: torch.Tensor, reference_logits: torch.Tensor) -> torch.Tensor:
    """Exact KL(pi || pi_ref) of the next-token distributions at each position, [B, T]."""
    policy, reference = policy_logits.log_softmax(-1), reference_logits.log_softmax(-1)
    return (policy.exp() * (policy - reference)).sum(-1)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor
    rewards: torch.Tensor  # [B] r = log pi_theta/pi_ref of each completion (detached)
    importance: torch.Tensor  # [B] capped importance ratios
    z0: float


def kto_loss(
    policy: torch.Tensor, reference: torch.Tensor, batch: Batch, *, beta: float, is_cap: float
) -> LossParts:
    """The KTO-style loss of the module docstring; `policy` carries the gradient."""
    mask = batch.completion_mask
    rewards = ((policy - reference) * mask).sum(-1)
    tokens = mask.sum(-1).clamp(min=1)
    drift = ((policy.detach() - batch.behaviour) * mask).sum(-1) / tokens
    importance = drift.exp().clamp(max=is_cap)
    z0 = ((importance * rewards.detach()).sum() / importance.sum()).clamp(min=0)
    sign = torch.where(batch.desirable, 1.0, -1.0)
    per_sample = 1 - F.sigmoid(beta * sign * (rewards - z0))
    w = importance * batch.weight
    loss = (w * per_sample).sum() / w.sum().clamp(min=1e-8)
    return LossParts(loss, rewards.detach(), importance, float(z0))


def preference_accuracy(rewards: Sequence[float], desirable: Sequence[bool]) -> float | None:
    """P(r of a desirable sample > r of an undesirable one), ties half; None without both."""
    good = [r for r, d in zip(rewards, desirable, strict=True) if d]
    bad = [r for r, d in zip(rewards, desirable, strict=True) if not d]
    if not good or not bad:
        return None
    g, b = torch.tensor(good).unsqueeze(1), torch.tensor(bad).unsqueeze(0)
    wins = (g > b).float() + 0.5 * (g == b).float()
    return float(wins.mean())
