"""The learner's configuration: one pydantic model per component, every field documented.

    config = LearnerConfig()                                   # the defaults
    config = LearnerConfig.model_validate({"train": {"max_steps": 4}})   # a run's overrides

A learning cycle runs with one `LearnerConfig`; the full resolved config is stored on its
`learner_runs.config`, so a run says exactly how it was made, and a trigger (CLI, admin
API, schedule, test) overrides any field by passing a partial dict. A bad value raises a
ValueError that says how to fix it. `config.cycle` (a `Cycle`, from `kind`) says what the
cycle is as data: its steps, the objectives its update trains, the gates that decide it.
Nothing to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agent_server.models.vllm_command import MAX_LORA_RANK
from feedback.vocab import LABEL_KINDS
from learner.config_code import CodeConfig
from learner.config_data import DataConfig
from learner.config_gate import DeployConfig, GateConfig
from learner.config_tasks import Frozen as _Frozen
from learner.config_tasks import MixConfig, TasksConfig, TaskTrainConfig  # noqa: F401

# LoRA defaults, chosen for the default model, SmolLM2-135M-Instruct (a Llama: 30 layers,
# hidden 576, MLP 1536, 9 query / 3 key-value heads of 64), and fine for the dev model:
# - target_modules: every projection of every layer. The MLP holds 3/4 of a layer's weights
#   (3 x 576 x 1536 against 576 x (576 + 192 + 192 + 576)), and LoRA on attention only falls
#   short (QLoRA, Dettmers et al. 2023: all linear layers are needed to match
#   full fine-tuning). These seven are exactly what vLLM serves LoRA on (it packs q/k/v and
#   gate/up itself). Embeddings and lm_head are left alone (SmolLM2 ties them; vLLM would
#   need modules_to_save, which it does not serve): no modules_to_save.
# - rank 8, alpha 16 (scale 2): 2.4M trainable weights on the 135M model (1.8%), plenty for
#   what one cycle learns from (tens to hundreds of judged completions: a higher rank only
#   fits their noise), and within vLLM's --max-lora-rank (MAX_RANK below).
# - lr 2e-3 (AdamW on the LoRA weights): a cycle is short (a few to a few dozen optimizer
#   steps on a CPU), so the adapter must move in few steps; the per-token KL penalty
#   (kl_coef) and the gate's max_kl hold it near the base. Measured with
#   bench/online_learning.py (2 busy CPU cores): on SmolLM2-135M, 5 cycles of 4-6 steps at
#   2e-3 left held-out code perplexity within 6% of the base (14.01 -> 14.82); on the dev
#   model, 1e-3 and 5e-4 drifted as far as 2e-3 did after 5 cycles (+18% / +24% against
#   +18%) with the same lift, so a smaller rate bought nothing measured.
LINEAR_LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# vLLM refuses an adapter of a larger rank than its --max-lora-rank: the learner never
# trains one (the same constant builds vLLM's command line).
MAX_RANK = MAX_LORA_RANK


class TrainConfig(_Frozen):
    """LoRA and the KTO-style update (learner/kto.py explains the algorithm)."""

    rank: int = Field(
        default=8,
        ge=1,
        le=MAX_RANK,
        description=f"LoRA rank (vLLM serves at most {MAX_RANK}; why 8: the notes above "
        "LINEAR_LAYERS in learner/config.py).",
    )
    alpha: float = Field(
        default=16.0, gt=0, description="LoRA alpha; the update scales by alpha/rank."
    )
    dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout.")
    target_modules: tuple[str, ...] = Field(
        default=LINEAR_LAYERS, description="Linear layers that get a LoRA adapter."
    )
    lr: float = Field(
        default=2e-3,
        gt=0,
        description="AdamW learning rate (LoRA weights only; why 2e-3: the notes above "
        "LINEAR_LAYERS in learner/config.py).",
    )
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay.")
    beta: float = Field(
        default=0.1,
        gt=0,
        description="KTO beta: how sharply the loss saturates in the log-ratio to the "
        "reference. Larger keeps the policy closer to the reference.",
    )
    desirable_weight: float | None = Field(
        default=None,
        gt=0,
        description="lambda_D. None: balance classes so desirable and undesirable samples "
        "carry equal total weight (KTO recommends a ratio in [1, 4/3]).",
    )
    undesirable_weight: float | None = Field(
        default=None, gt=0, description="lambda_U. None: balanced with lambda_D (see above)."
    )
    kl_coef: float = Field(
        default=0.5,
        ge=0,
        description="Weight of an exact per-token KL(pi || pi_ref) penalty over the completion "
        "positions (the full next-token distributions). It keeps rejections from pushing "
        "the policy into text nobody sampled; 0 turns it off (and saves a forward per step).",
    )
    is_cap: float = Field(
        default=2.0,
        ge=1.0,
        description="Cap on the per-sample importance ratio pi_theta/pi_behaviour "
        "(length-normalised, from the logged behaviour logprobs).",
    )
    batch_size: int = Field(default=8, ge=1, description="Samples per optimizer step.")
    micro_batch_tokens: int = Field(
        default=2048,
        ge=8,
        description="The hard token budget of every forward/backward pass: most padded tokens "
        "(samples x longest row) in it, on every path (training, reference logprobs, "
        "evaluation, task RL). A batch over it is split into micro-batches whose gradients "
        "accumulate; a sample longer than it is cut (prompt from the left, then the "
        "completion's end: learner/batching.py), and a max_length above it counts as it. "
        "Activation memory grows with it: ~2 MB a token on SmolLM2-135M in float32 without "
        "gradient checkpointing (8 prompts of 1,000 tokens in one pass held 18 GB). With "
        "processes > 1 the ranks share a batch's micro-batches (at least one each).",
    )
    gradient_checkpointing: bool = Field(
        default=True,
        description="Recompute each decoder layer's activations in backward instead of keeping "
        "them from the forward (train mode only): far less memory a pass, ~20% fewer tokens/s. "
        "Measured with bench/learner_memory.py on SmolLM2-135M (float32, 2 busy CPU cores, "
        "micro_batch_tokens 2048): a feedback step of 8 samples peaked at 3.4 GB resident on, "
        "6.2 GB off (27.7 / 33.8 tokens/s); one 2,048-token task-RL pass at 3.2 / 5.5 GB "
        "(24.4 / 29.0 tokens/s). Off trades memory for speed where memory is plentiful.",
    )
    epochs: float = Field(
        default=3.0, gt=0, description="Passes over the training split (fractions allowed)."
    )
    max_steps: int | None = Field(
        default=None, ge=1, description="Stop after this many optimizer steps (None: epochs)."
    )
    max_seconds: float = Field(
        default=900.0,
        gt=0,
        description="Wall-clock budget of the train step; training stops early past it. Keep "
        "it below the broker's visibility timeout (APPRENTICE_LEARNER_VISIBILITY_TIMEOUT_S).",
    )
    grad_clip: float = Field(default=1.0, gt=0, description="Max gradient norm.")
    max_length: int = Field(
        default=1024, ge=8, description="Prompt + completion tokens; prompts are cut from the left."
    )
    max_completion_length: int = Field(
        default=512, ge=1, description="Completion tokens kept (the rest is cut off)."
    )
    seed: int = Field(default=0, description="Adapter init and data order follow it.")
    threads: int | None = Field(
        default=None, ge=1, description="torch.set_num_threads while training (None: leave)."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description="Where training and evaluation run: auto is cuda when torch sees a GPU, "
        "else cpu; cuda without one is an error (learner/device.py).",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="The base model's precision: auto is bfloat16 on a GPU that supports it, "
        "else float32 (the CPU). LoRA weights and optimizer state stay float32.",
    )
    processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description=">1 launches torchrun with that many processes on this machine (gloo on "
        "the CPU, NCCL on GPUs: one each) sharing each batch; feedback cycles only (task and "
        "mixed cycles train in one process: learner/distributed.py).",
    )
    from_parent: bool = Field(
        default=True,
        description="Continue from the serving adapter (online learning); False: a fresh LoRA.",
    )

    @field_validator("target_modules")
    @classmethod
    def _known_layers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = set(value) - set(LINEAR_LAYERS)
        if not value or unknown:
            raise ValueError(
                f"target_modules {sorted(unknown) or '[]'} not supported: choose from "
                f"{list(LINEAR_LAYERS)} (vLLM serves LoRA on these only)"
            )
        return value


@dataclass(frozen=True)
class Cycle:
    """What a kind of cycle is, as data: its steps (learner/pipeline.py runs them in order),
    the objectives its update trains (learner/update.py; weights in `LearnerConfig.mix`) and
    the gates its evaluate step runs (learner/candidate.py)."""

    steps: tuple[str, ...]
    objectives: tuple[str, ...]  # "feedback" (outcomes), "tasks" (rollouts), "code" (repo)
    gates: tuple[str, ...]  # "feedback" (held-out outcomes), "tasks", "code" (held-out files)


CYCLES = {
    "feedback": Cycle(("collect", "train", "evaluate", "publish", "deploy"),
                      ("feedback",), ("feedback",)),
    "tasks": Cycle(("tasks", "rollouts", "train", "evaluate", "publish", "deploy"),
                   ("tasks",), ("tasks",)),
    "mixed": Cycle(("collect", "tasks", "rollouts", "train", "evaluate", "publish", "deploy"),
                   ("feedback", "tasks"), ("feedback", "tasks")),
}  # fmt: skip


class LearnerConfig(_Frozen):
    """Everything one learning cycle needs beyond Settings."""

    kind: Literal["feedback", "tasks", "mixed"] = Field(
        default="feedback",
        description="Which cycle (`CYCLES`: its steps, objectives and gates). feedback: "
        "people's outcomes (collect -> train -> evaluate -> publish -> deploy); tasks: the "
        "agent's own rollouts of mined tasks (tasks -> rollouts -> train -> evaluate -> "
        "publish -> deploy; see `tasks`); mixed: both objectives in one update and both "
        "gates (collect -> tasks -> ... -> deploy; weights in `mix`).",
    )
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    deploy: DeployConfig = Field(default_factory=DeployConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    mix: MixConfig = Field(default_factory=MixConfig)
    code: CodeConfig = Field(default_factory=CodeConfig)
    retries: int = Field(
        default=3,
        ge=0,
        description="Retries of a step on transient errors (database, broker, "
        "model server unreachable) before the run fails.",
    )
    retry_backoff_s: float = Field(
        default=5.0, ge=0, description="First wait before a retry; doubles each time."
    )

    @model_validator(mode="after")
    def _task_cycle_has_a_repo(self) -> LearnerConfig:
        if self.kind != "feedback" and self.tasks.repo is None:
            raise ValueError(f"a {self.kind} cycle (kind: {self.kind}) needs tasks.repo: the git "
                             "repository its tasks are mined from")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _weights_known(self) -> LearnerConfig:
        unknown = set(self.data.weights) - LABEL_KINDS
        if unknown:
            raise ValueError(
                f"data.weights has unknown outcome kinds {sorted(unknown)}: use "
                f"{', '.join(sorted(LABEL_KINDS))}"
            )
        return self

    @property
    def cycle(self) -> Cycle:
        """`CYCLES[kind]`; with `code.repo` a cycle that trains feedback also trains on the
        repository's code and is judged on its held-out files too (objective and gate "code")."""
        cycle = CYCLES[self.kind]
        if self.code.repo is None or "feedback" not in cycle.objectives:
            return cycle
        return Cycle(cycle.steps, (*cycle.objectives, "code"), (*cycle.gates, "code"))

    def with_overrides(self, overrides: dict[str, Any] | None) -> LearnerConfig:
        """A copy with `overrides` (a partial, nested dict) merged in and validated."""
        return LearnerConfig.model_validate(_merge(self.model_dump(), overrides or {}))


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
