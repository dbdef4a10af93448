"""The gate's and the deployment's configuration (`LearnerConfig.gate`, `.deploy`): when a
trained adapter is put into service (learner/gate.py) and how. Part of learner/config.py,
which re-exports both; a file of its own only to keep files small.
"""

from __future__ import annotations

from pydantic import Field

from learner.config_tasks import Frozen as _Frozen


class GateConfig(_Frozen):
    """When a trained adapter is deployed: only on evidence that it is better than the one
    serving (learner/gate.py decides; learner/evidence.py is the test)."""

    alpha: float = Field(
        default=0.1,
        gt=0,
        lt=1,
        description="Deploy only when the candidate is better than the serving policy on the "
        "held-out items with one-sided p below this (a stratified bootstrap over paired "
        "items: learner/evidence.py). Larger deploys on weaker evidence.",
    )
    min_per_class: int = Field(
        default=5,
        ge=1,
        description="Held-out items needed of each kind (accepted and rejected feedback; "
        "held-out tasks) before the gate decides at all; with fewer the run ends deferred, "
        "deploys nothing, and keeps its feedback for the next cycle.",
    )
    min_tasks: int = Field(
        default=4,
        ge=1,
        description="Task cycles: held-out selection tasks needed (each rolled out by both "
        "adapters) before the gate decides; with fewer the run ends deferred.",
    )
    max_heldout: int = Field(
        default=512,
        ge=1,
        description="The newest held-out feedback items each decision scores (the held-out "
        "pool lasts across cycles: an outcome is held out once, by a hash of its suggestion "
        "id, and never trained on).",
    )
    max_kl: float = Field(
        default=1.0,
        gt=0,
        description="Refuse when the mean per-token KL from the serving policy to the "
        "candidate on the held-out completions exceeds this (nats): one update may not move "
        "what is served further than this.",
    )
    max_perplexity_increase: float = Field(
        default=0.05,
        ge=0,
        description="Refuse when the candidate's perplexity on general code (the standard "
        "library: learner/general_code.py) is above the serving policy's by more than this "
        "share (0.05: +5 %).",
    )
    perplexity_files: int = Field(
        default=8,
        ge=0,
        description="General-code files for the perplexity rule; 0 turns the rule off.",
    )
    perplexity_tokens: int = Field(
        default=256, ge=16, description="Tokens read from each general-code file."
    )
    perplexity_dir: str | None = Field(
        default=None,
        description="Folder of .py files for the perplexity rule (None: Python's standard "
        "library).",
    )
    seed: int = Field(default=0, description="Seed of the bootstrap's resampling.")
    codegen_problems: int = Field(
        default=0,
        ge=0,
        le=164,
        description="Also run the first N HumanEval problems (learner/codegen.py) with the "
        "candidate and the serving adapter; 0 (default) turns the check off: on a CPU it "
        "costs ~5-10 s of generation per problem and adapter on the real model, more than a "
        "training step, and a 135M model solves too few of a small subset for it to tell "
        "anything (see learner/codegen.py for figures). Turn it on with a GPU or a "
        "code-capable model.",
    )
    codegen_margin: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="With codegen_problems > 0: refuse when the candidate's pass@1 is lower "
        "than the serving adapter's by more than this (one problem is 1/N of pass@1).",
    )


class DeployConfig(_Frozen):
    """Putting a published adapter into service."""

    canary_prompt: str = Field(
        default="def add(a, b):",
        min_length=1,
        description="User message of the canary completion every new adapter must answer.",
    )
    canary_max_tokens: int = Field(default=8, ge=1, description="Tokens of the canary.")
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Bound on one call to the serving backend, retries included.",
    )
