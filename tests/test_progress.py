"""ground/progress.py: rich's progress bar, plus plain lines where no terminal shows it.

.venv/bin/python -m pytest tests/test_progress.py -q
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import BarColumn, TextColumn

from ground.progress import Progress


def _run(console: Console, steps: int) -> None:
    with Progress(TextColumn("{task.description}"), BarColumn(), console=console) as bar:
        task = bar.add_task("agent traces", total=steps, loss=float("nan"))
        for step in range(steps):
            bar.update(task, advance=1, loss=1.0 / (step + 1))
        unknown = bar.add_task("mining", total=None)
        bar.advance(unknown, 5)  # no total: no tenths to log


def test_off_a_terminal_a_line_per_tenth_with_the_fields() -> None:
    out = io.StringIO()
    _run(Console(file=out, force_terminal=False, width=120), steps=40)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("agent traces:")]
    assert [line.split()[2] for line in lines] == [f"{4 * i}/40" for i in range(1, 11)]
    assert "(10%)" in lines[0] and "loss 0.250" in lines[0]  # after step 4: 1/4
    assert "(100%)" in lines[-1] and "loss 0.025" in lines[-1]
    assert "mining:" not in out.getvalue()


def test_on_a_terminal_only_the_bar() -> None:
    out = io.StringIO()
    _run(Console(file=out, force_terminal=True, force_interactive=True, width=120), steps=40)
    assert "agent traces:" not in out.getvalue()
