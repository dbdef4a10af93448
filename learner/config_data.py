"""Which feedback becomes training data (`LearnerConfig.data`): labels, split, people.

learner/data.py and learner/demos.py read it; learner/config.py gathers it with the rest.
"""

from __future__ import annotations

from pydantic import Field

from learner.config_tasks import Frozen as _Frozen


class DataConfig(_Frozen):
    """Which feedback becomes training data, and how it is labelled and split."""

    staleness_k: int = Field(
        default=3,
        ge=0,
        description="Drop samples produced by an adapter more than K versions older than the "
        "newest published one (the base model counts as version 0).",
    )
    heldout_fraction: float = Field(
        default=0.2,
        ge=0.0,
        lt=1.0,
        description="Share of suggestions held out (by a hash of the suggestion id: the "
        "same side in every run) for good: never trained on, they are the held-out pool every "
        "gate decision scores, across cycles (gate.max_heldout newest).",
    )
    min_samples: int = Field(
        default=4, ge=1, description="Fewer labelled samples than this: the run is skipped."
    )
    settle_s: float = Field(
        default=2.0,
        ge=0.0,
        description="Only read outcomes older than this: PostgreSQL hands out ids at INSERT, "
        "so a smaller id may become visible after a larger one was read.",
    )
    max_samples: int = Field(
        default=4096, ge=1, description="Newest labelled samples kept when there are more."
    )
    replay: float = Field(
        default=1.0,
        ge=0,
        description="Earlier training samples trained on again beside the new ones, per new "
        "sample (newest first; not held out, not stale): a cycle continues the serving "
        "adapter, and trained on the new feedback alone it forgets what earlier cycles taught "
        "(measured on the dev model: every held-out accepted item of the last lesson got "
        "worse). 0: the new feedback alone.",
    )
    demonstration_tokens: int = Field(
        default=64, ge=1, description="What a person wrote instead of a completion (a "
        "`written` outcome) is trained on as a demonstration, cut to this many tokens at a "
        "line end (an inline completion's own default length: max_tokens 64).",
    )  # fmt: skip
    quiet_demonstrations: bool = Field(
        default=True, description="A `written` outcome with nothing written (the person "
        "wrote nothing at the completion's place) teaches silence: the end-of-text token.",
    )  # fmt: skip
    exclude_users: tuple[str, ...] = Field(
        default=(),
        description="User names whose feedback is never trained on, beside the users who "
        "opted out themselves (`apprentice users learn NAME --off`).",
    )
    max_user_share: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="When feedback from two or more people (the shared token counts as one) "
        "is in a cycle, no one person's samples weigh more than this share of the total: "
        "their weights are scaled down. 1.0: no cap.",
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: {
            "accepted": 1.0,
            "persisted": 1.0,
            "partially_accepted": 0.5,
            "edited_after_accept": 0.5,
            "rejected": 1.0,
            "reverted": 1.0,
        },
        description="Weight of a sample by the outcome that decides its label; the keys are "
        "feedback.vocab.LABEL_KINDS (DESIRABLE ones: accepted, persisted, partially_accepted, "
        "edited_after_accept; UNDESIRABLE: rejected, reverted), 1.0 for one left out. "
        "shown/applied never decide a label.",
    )
