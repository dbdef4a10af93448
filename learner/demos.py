"""Demonstrations: what people wrote where a completion was not taken, as samples to imitate.

    encoder = Encoder.of(model_dir)          # the policy's tokenizer: text -> ids, end of text
    train, summary = collect_demonstrations(db, config.data, encoder, after_outcome_id=c,
                                            upto_outcome_id=upper)
    pool = collect_demonstrations(db, config.data, encoder, heldout=True, cap=40)[0]

A `written` outcome (feedback/vocab.py WRITTEN; the clients' rule is in docs/protocol.md,
EditOutcome) holds what the person wrote at an inline completion's place within the settle
time after they did not take it: what the model should have said, at exactly the prompt it
saw. A demonstration is a `Sample` with the suggestion's stored prompt ids (never
re-rendered) and, as its completion, the space the prompt left out of the prefix (stored as
`healed`, agent_server/session/prompts.py) + the written text, tokenized by the policy's own
tokenizer and cut to `data.demonstration_tokens` at a line end. Nothing written (blanks
only) is the end-of-text token alone when `data.quiet_demonstrations`: there, the answer
the person wanted was silence. A demonstration is desirable, its outcome "written", and it
has no behaviour logprobs (nobody sampled it).

The rules of feedback samples hold (learner/data.py): opted-out and excluded people's are
never read; the held-out split is the suggestion's own (`is_heldout`), so a held-out
rejection's demonstration is never trained on either -- the gate scores those instead
(learner/evaluate.py: is what the person wrote likelier under the candidate than under the
serving policy?); the same prompt and text count once; the newest `max_samples` are kept and
`cap_user_share` applies. An edit's `written` outcome is counted and left: an edit's prompt is
an agent turn, its demonstration would be an action, not text. Tested in
tests/learner/test_demonstrations.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from feedback.queries import feedback_since
from feedback.queries.users import excluded_user_ids
from feedback.vocab import WRITTEN
from learner.config import DataConfig
from learner.data import Sample, cap_user_share, is_heldout, settled_outcome_id


@dataclass(frozen=True)
class Encoder:
    """The policy's tokenizer, as the demonstrations need it."""

    encode: Callable[[str], list[int]]  # text -> ids, no special tokens added
    eos_id: int

    @classmethod
    def of(cls, model_dir: str | Path) -> Encoder:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        if tokenizer.eos_token_id is None:
            raise ValueError(f"the tokenizer of {model_dir} has no end-of-text token")
        return cls(lambda text: list(tokenizer.encode(text, add_special_tokens=False)),
                   int(tokenizer.eos_token_id))  # fmt: skip


def target_ids(written: str, healed: str, encoder: Encoder, config: DataConfig) -> list[int]:
    """The completion a demonstration teaches ([] when there is none to teach): the healed
    space and the written text, whole lines while they fit in `demonstration_tokens` (the
    first line cut to it when it alone is longer); silence is the end-of-text token."""
    text = written.rstrip()
    if not text.strip():
        return [encoder.eos_id] if config.quiet_demonstrations else []
    limit, kept = config.demonstration_tokens, ""
    lines = (healed + text).splitlines(keepends=True)
    for line in lines:
        if len(encoder.encode((kept + line).rstrip("\n"))) > limit:
            break
        kept += line
    if not kept:
        return encoder.encode(lines[0].rstrip("\n"))[:limit]
    return encoder.encode(kept.rstrip("\n"))


def _written(outcomes: list[Any], after: int, upper: int) -> Any | None:
    """The suggestion's latest `written` outcome in (after, upper], if any."""
    found = [o for o in outcomes if o.kind == WRITTEN and after < o.id <= upper]
    return found[-1] if found else None


def collect_demonstrations(
    db: Session,
    config: DataConfig,
    encoder: Encoder,
    *,
    after_outcome_id: int = 0,
    upto_outcome_id: int | None = None,
    heldout: bool = False,
    cap: int | None = None,
) -> tuple[list[Sample], dict[str, Any]]:
    """Demonstrations from `written` outcomes in (after_outcome_id, settled] (and <=
    upto_outcome_id when given): the training side, or with `heldout` the held-out side
    (newest `cap`). Oldest first; and a summary of what was read and left."""
    upper = settled_outcome_id(db, config.settle_s)
    if upto_outcome_id is not None:
        upper = min(upper, upto_outcome_id)
    excluded = excluded_user_ids(db, config.exclude_users)
    counts = {"edits": 0, "excluded_user": 0, "empty": 0, "duplicate": 0}
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    samples: list[Sample] = []
    for item in feedback_since(db, after_outcome_id=after_outcome_id):
        s = item.suggestion
        written = _written(item.outcomes, after_outcome_id, upper)
        if written is None or is_heldout(s.id, config.heldout_fraction) != heldout:
            continue
        if s.kind != "completion":
            counts["edits"] += 1
            continue
        if s.user_id is not None and s.user_id in excluded:
            counts["excluded_user"] += 1
            continue
        healed = str((s.prompt_messages or [{}])[0].get("healed", ""))
        target = target_ids(written.final_text or "", healed, encoder, config)
        if not s.prompt_token_ids or not target:
            counts["empty"] += 1
            continue
        key = (tuple(s.prompt_token_ids), tuple(target))
        if key in seen:
            counts["duplicate"] += 1
            continue
        seen.add(key)
        samples.append(Sample(
            suggestion_id=s.id, desirable=True, weight=1.0, prompt_ids=list(s.prompt_token_ids),
            completion_ids=target, behaviour_logprobs=[], adapter_version=s.adapter_version or 0,
            outcome=WRITTEN, heldout=heldout, user_id=s.user_id,
        ))  # fmt: skip
    samples = samples[-(cap if cap is not None else config.max_samples) :]
    samples, scaled = cap_user_share(samples, config.max_user_share)
    silent = sum(d.completion_ids == [encoder.eos_id] for d in samples)  # kept: they teach silence
    summary = {"demonstrations": len(samples), "silent": silent, "dropped": counts,
               "user_weight_scaled": scaled}  # fmt: skip
    return samples, summary
