"""`apprentice eval completions`: the base model and an adapter, side by side, on completion
tasks of a repository's newest commits (learner/synth/completion.py, the time-held-out split:
never trained on), through the product's serving path.

    report = await evaluate_completions(model_dir, tasks, adapter=("policy-v3", folder))
    report["base"]["exact_line"], report["adapter"]["mean_reward"]

Each task is one `agent_server.session.completion.call_inline`: the product's inline prompt
(fill-in-the-middle when the model has a format, else prefix completion), stop strings and
sampling, on one embedded backend, what the person would be shown (`InlineCall.shown`)
scored with `completion_reward`. The editor's window is kept: at most `context_chars` of
prefix and half as many of suffix (lsp/config.py completion_context_chars; the CLI passes
the LSP's defaults for it, max_tokens and temperature). Sampling is seeded, so a run is
repeatable. Figures per side (JSON):
- exact_line: share of non-quiet tasks whose first line is the author's;
- similarity: mean edit similarity with the author's lines (non-quiet tasks);
- quiet_precision: of the answers that were empty, the share on quiet tasks (None: none);
- quiet_recall: of the quiet tasks, the share answered with nothing (None: no quiet task);
- shown: non-empty answers / tasks; mean_reward, and mean reward per category.
Tested through the CLI in tests/test_cli_eval_completions.py.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_server.models.base import ModelBackend
from agent_server.session.completion import InlineRequest, call_inline
from learner.synth.completion import CATEGORIES, CompletionTask
from learner.synth.completion_reward import completion_reward, exact_line, similarity


@dataclass(frozen=True)
class EvalConfig:
    temperature: float = 0.2  # the product's completion_temperature
    seed: int = 0  # of the sampling: a run is repeatable
    max_tokens: int = 48  # the LSP's completion_max_tokens
    context_chars: int = 6000  # prefix characters (suffix: half), the LSP's window

    def __post_init__(self) -> None:
        if self.temperature < 0 or self.max_tokens < 1 or self.context_chars < 1:
            raise ValueError("temperature >= 0, max_tokens >= 1 and context_chars >= 1")


@dataclass(frozen=True)
class Scored:
    task_id: str
    category: str
    answer: str  # what the person would have been shown
    reward: float
    exact: bool
    similarity: float


async def score_tasks(
    backend: ModelBackend,
    tasks: Sequence[CompletionTask],
    *,
    adapter: str | None,
    config: EvalConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Scored]:
    """Each task through the serving path once (`adapter` None: the base model)."""
    scored, side = [], adapter or "base"
    chars = config.context_chars
    for number, task in enumerate(tasks, 1):
        started = time.monotonic()
        request = InlineRequest(task.path, task.language, task.prefix[-chars:],
                                task.suffix[: chars // 2], config.max_tokens)  # fmt: skip
        call = await call_inline(backend, request, temperature=config.temperature,
                                 seed=config.seed, adapter=adapter)  # fmt: skip
        answer, quiet = call.shown, task.category == "quiet"
        scored.append(Scored(
            task.id, task.category, answer, completion_reward(task, answer),
            not quiet and exact_line(task, answer),
            0.0 if quiet or not answer.strip() else similarity(task, answer),
        ))  # fmt: skip
        progress(f"[{number}/{len(tasks)}] {side} {task.category} {task.path} "
                 f"reward={scored[-1].reward:.2f} ({time.monotonic() - started:.1f}s)")  # fmt: skip
    return scored


def figures(scored: Sequence[Scored]) -> dict[str, Any]:
    """One side's figures (see the module docstring)."""
    said = [s for s in scored if s.category != "quiet"]
    quiet = [s for s in scored if s.category == "quiet"]
    silent = [s for s in scored if not s.answer.strip()]

    def share(part: int, whole: int) -> float | None:
        return round(part / whole, 4) if whole else None

    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    return {
        "exact_line": share(sum(s.exact for s in said), len(said)),
        "similarity": mean([s.similarity for s in said]),
        "quiet_precision": share(sum(s.category == "quiet" for s in silent), len(silent)),
        "quiet_recall": share(sum(not s.answer.strip() for s in quiet), len(quiet)),
        "shown": share(len(scored) - len(silent), len(scored)),
        "mean_reward": mean([s.reward for s in scored]),
        "reward_per_category": {
            c: mean([s.reward for s in scored if s.category == c]) for c in CATEGORIES
        },
    }


async def evaluate_completions(
    model_dir: str | Path,
    tasks: Sequence[CompletionTask],
    *,
    adapter: tuple[str, Path] | None = None,
    config: EvalConfig | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The base model, then (given) the adapter (name, peft folder) loaded beside it on one
    embedded backend, on the same tasks; the JSON report."""
    from agent_server.models.embedded import EmbeddedBackend  # torch: imported when run
    from agent_server.models.embedded_config import EmbeddedConfig

    cfg = config or EvalConfig()
    started = time.monotonic()
    backend = EmbeddedBackend(EmbeddedConfig(model_dir=Path(model_dir)))
    try:
        base = await score_tasks(backend, tasks, adapter=None, config=cfg, progress=progress)
        adapted = None
        if adapter is not None:
            await backend.load_adapter(*adapter)
            adapted = await score_tasks(backend, tasks, adapter=adapter[0], config=cfg,
                                        progress=progress)  # fmt: skip
    finally:
        await backend.aclose()
    return {
        "model": str(model_dir),
        "adapter_name": adapter[0] if adapter else None,
        "tasks": len(tasks),
        "categories": {c: sum(t.category == c for t in tasks) for c in CATEGORIES},
        "commits": len({t.commit for t in tasks}),
        "config": {
            "temperature": cfg.temperature,
            "seed": cfg.seed,
            "max_tokens": cfg.max_tokens,
            "context_chars": cfg.context_chars,
        },
        "base": figures(base),
        "adapter": figures(adapted) if adapted is not None else None,
        "seconds": round(time.monotonic() - started, 1),
    }
