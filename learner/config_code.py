"""Settings of continued pretraining on the person's repository (`LearnerConfig.code`).

The objective and the data are learner/repo_code.py's; the weight of its loss is
`mix.code`; the gate's verdict on it is learner/gate.py `code_decision`. RL on completion
tasks mined from its history is learner/completion_rl.py's (weight `mix.completions`).
"""

from __future__ import annotations

from pydantic import Field

from learner.config_tasks import Frozen


class CodeConfig(Frozen):
    """Which repository a cycle also learns the code of, and how much of it."""

    repo: str | None = Field(
        default=None,
        description="A git repository whose tracked code files every feedback cycle also "
        "trains on (continued pretraining; `apprentice learn --repo PATH` for one cycle). "
        "Held-out files (a hash of the path) are never trained on: the gate scores them.",
    )
    chunk_tokens: int = Field(default=256, ge=32, description="Tokens of a training chunk.")
    max_chunks: int = Field(
        default=64, ge=1, description="Training chunks a cycle takes (a seeded shuffle)."
    )
    heldout_one_in: int = Field(
        default=5, ge=2, description="One file in this many is held out, by a hash of its path."
    )
    max_heldout_files: int = Field(
        default=24, ge=1, description="Held-out files (their first chunk) the gate scores."
    )
    seed: int = Field(default=0, description="Seed of the choice of training chunks.")
    completion_tasks: int = Field(
        default=0, ge=0, description="Completion tasks mined from the repository's history "
        "(train split: learner/synth/completion.py) that each such cycle samples through the "
        "serving path and trains on by their reward (RL: learner/completion_rl.py, weight "
        "mix.completions); 0: none.",
    )  # fmt: skip
    samples: int = Field(default=4, ge=2, description="Completions sampled per task (a group).")
    temperature: float = Field(
        default=0.8, ge=0.0, description="Their sampling temperature (the product's prompt, "
        "stop strings and length; a higher temperature than serving, so a group differs).",
    )  # fmt: skip
    max_tokens: int = Field(default=48, ge=1, description="Tokens of each sampled completion.")
