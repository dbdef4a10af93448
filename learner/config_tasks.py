"""The task cycle's configuration (`LearnerConfig.tasks`): what is mined, rolled out and
trained on (learner/taskcycle.py), and the task-RL update's own knobs (learner/grpo.py).
Part of learner/config.py, which re-exports both; a file of its own only to keep files small.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Frozen(BaseModel):
    """Every config model: immutable, and an unknown key is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskTrainConfig(Frozen):
    """The task objective of the update on the agent's own rollouts (learner/grpo.py explains
    it); the step's shapes (learning rate, rank, lengths, batch and micro-batch sizes,
    max_steps, max_seconds) are TrainConfig's: one update loop for every objective."""

    epochs: float = Field(default=1.0, gt=0, description="Passes over the trajectory samples.")
    clip_low: float = Field(
        default=0.2, gt=0, lt=1, description="PPO clip below: ratio >= 1 - clip_low."
    )
    clip_high: float = Field(
        default=0.28,
        gt=0,
        description="PPO clip above: ratio <= 1 + clip_high (higher than clip_low: DAPO's "
        "clip-higher, so rare good tokens can gain).",
    )
    is_cap: float = Field(
        default=2.0,
        ge=1.0,
        description="Cap on the per-token importance weight exp(lp_old - lp_behaviour) "
        "against the trainer / inference-engine logprob gap (truncated IS).",
    )
    advantages: Literal["both", "positive"] = Field(
        default="both",
        description="Which rollouts' calls are trained on: both (every kept rollout, "
        "A_i < 0 pushing its tokens down) or positive (only A_i > 0: the rollouts that beat "
        "their group, as in rejection-sampling fine-tuning -- a failed edit is not pushed "
        "down as a whole).",
    )

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("lr", "max_steps"):
                if data.get(key) is not None:
                    raise ValueError(
                        f"tasks.update.{key} is gone: one update loop runs every objective at "
                        f"train.{key}; set train.{key} instead"
                    )
            data = {k: v for k, v in data.items() if k not in ("lr", "max_steps")}
        return data


class TasksConfig(Frozen):
    """Task cycles (`kind: tasks`): tasks mined from a repository's history, rolled out K
    times each through the product's own agent by the serving adapter, trained on with
    learner/grpo.py, gated on the held-out tasks' solve rate (learner/taskcycle.py)."""

    repo: str | None = Field(
        default=None,
        description="The git repository (with a pytest suite) whose tasks a task cycle mines "
        "and whose files the rollouts start from. Required for a task cycle.",
    )
    tasks_file: str | None = Field(
        default=None,
        description="A tasks.jsonl (`apprentice tasks mine`) of `repo`; None: mined at the "
        "first task cycle on the repository's HEAD and kept for the next ones.",
    )
    max_tasks: int = Field(default=12, ge=2, description="Tasks mined at most.")
    python: str = Field(
        default="python",
        description="Interpreter that runs the repository's tests (mining, rollouts, grading).",
    )
    mine_timeout_s: float = Field(default=300.0, gt=0, description="Per test-suite run.")
    seed: int = Field(default=0, description="Mining's seed (which mutations).")
    heldout_fraction: float = Field(
        default=0.3,
        gt=0,
        lt=1,
        description="Share of the files and of the commits held out: their tasks are only "
        "ever evaluated, never trained on.",
    )
    tiers: list[Literal["easy", "medium", "hard"]] | None = Field(
        default=None,
        description="Only tasks of these difficulty tiers are trained on and evaluated "
        "(None: all). A tier the model never solves gives neither a learning signal nor a "
        "held-out rate that can move.",
    )
    train_tasks: int = Field(
        default=4, ge=1, description="Train tasks rolled out per cycle (each cycle the next)."
    )
    max_heldout: int = Field(
        default=4,
        ge=1,
        description="Held-out selection tasks per cycle: the gate decides on these.",
    )
    max_confirm: int = Field(
        default=4,
        ge=0,
        description="Held-out confirmation tasks per cycle: rolled out by both adapters and "
        "reported, never used to decide (0: none).",
    )
    confirm_fraction: float = Field(
        default=0.5,
        ge=0,
        lt=1,
        description="Share of the held-out tasks that are confirmation tasks (by a hash of the "
        "task id: the same task is on the same side in every cycle; the two sets never meet).",
    )
    samples: int = Field(
        default=4, ge=2, description="K: rollouts per train task (the group of one task)."
    )
    eval_samples: int = Field(
        default=2, ge=1, description="Rollouts per held-out task, for each adapter."
    )
    statement: Literal["dictated", "located", "precise", "vague"] = Field(
        default="precise",
        description="Which problem statement the agent is given: dictated (the located text "
        "and what a one-line fix's line should read: the easiest tier), located (the precise "
        "text and the faulty line), precise (the failing tests and the file), vague (as a "
        "person types it).",
    )
    few_shot: bool = Field(
        default=True,
        description="Show the agent's few-shot example turns before the task (AgentConfig."
        "few_shot). A model continued-pretrained on agent traces (apprentice model "
        "build-agent) was trained without them.",
    )
    step_limit: int = Field(default=10, ge=1, description="Agent steps per rollout.")
    wall_s: float = Field(default=180.0, gt=0, description="Wall-clock budget per rollout.")
    max_tokens: int = Field(default=384, ge=1, description="Completion tokens per agent step.")
    temperature: float = Field(
        default=1.0, ge=0, description="Sampling temperature of rollouts (exploration)."
    )
    concurrency: int = Field(default=2, ge=1, description="Rollouts at once.")
    max_length: int = Field(
        default=4096,
        ge=8,
        description="Prompt + completion tokens of one model call trained on (train.max_length "
        "for task cycles), never more than train.micro_batch_tokens: above it, rows are cut to "
        "that budget. Agent prompts are long; cutting them from the left makes the "
        "trainer's logprobs differ from the engine's (the run's logprob gap shows it).",
    )
    reward: Literal["shaped", "outcome"] = Field(
        default="shaped",
        description="The rollouts' reward (learner/synth/reward.py): shaped (the outcome less "
        "effort and format penalties, -1 for a run ended by malformed actions) or outcome (1 "
        "solved, else 0: giving up scores what failing scores, so only solving is paid).",
    )
    update: TaskTrainConfig = Field(default_factory=TaskTrainConfig)


class MixConfig(Frozen):
    """The weight of each objective's loss in the update's sum (learner/update.py), in every
    cycle that trains it; they matter where a cycle names both (`kind: mixed`)."""

    feedback: float = Field(default=1.0, ge=0, description="Weight of the feedback (KTO) loss.")
    tasks: float = Field(
        default=1.0, ge=0, description="Weight of the task (policy-gradient) loss."
    )
    demonstrations: float = Field(
        default=1.0,
        ge=0,
        description="Weight of the demonstration loss (what people wrote "
        "instead of a completion: learner/demonstrate.py); 0 leaves it out.",
    )
    completions: float = Field(
        default=1.0, ge=0, description="Weight of the completion-task RL loss "
        "(`code.completion_tasks`: learner/completion_rl.py).",
    )  # fmt: skip
    code: float = Field(
        default=1.0, ge=0, description="Weight of the loss on the repository's code "
        "(`code.repo`: continued pretraining, learner/repo_code.py).",
    )  # fmt: skip
