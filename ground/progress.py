"""Progress bars that also show in a log.

rich's `Progress` draws nothing until it stops when its console is no terminal (a build
redirected to a file, CI, a background job), so an hour-long `apprentice model build-agent`
looked stuck in its log. This `Progress` is rich's, plus one plain line each time a task with
a known total passes another tenth, where the console is not a live terminal:

    with Progress(TextColumn("{task.description}"), BarColumn(), console=err) as bar:
        task = bar.add_task("agent traces", total=800, loss=float("nan"))
        bar.update(task, advance=1, loss=0.51)
        # at step 80: "agent traces: 80/800 (10%) 96 s loss 0.510"

Used by every command with a long loop (model builds, task mining and evaluation, learner runs).
"""

from __future__ import annotations

from typing import Any

from rich import progress as rich_progress
from rich.progress import TaskID

TENTHS = 10


class Progress(rich_progress.Progress):
    """rich's Progress; off a terminal, a plain line per tenth of each task's total."""

    def __init__(self, *columns: Any, **kwargs: Any) -> None:
        super().__init__(*columns, **kwargs)
        self._logged: dict[TaskID, int] = {}

    def update(self, task_id: TaskID, **kwargs: Any) -> None:
        super().update(task_id, **kwargs)
        self._log(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._log(task_id)

    def _log(self, task_id: TaskID) -> None:
        if self.console.is_interactive:
            return  # the live bar shows it
        task = next((t for t in self.tasks if t.id == task_id), None)
        if task is None or not task.total:
            return
        tenth = int(TENTHS * min(task.completed, task.total) / task.total)
        if tenth <= self._logged.get(task_id, 0):
            return
        self._logged[task_id] = tenth
        fields = " ".join(_field(k, v) for k, v in task.fields.items())
        share = f"({100 * task.completed / task.total:.0f}%)"
        line = f"{task.description}: {task.completed:g}/{task.total:g} {share} "
        line += f"{task.elapsed or 0:.0f} s {fields}"
        self.console.print(line.rstrip(), markup=False, highlight=False, soft_wrap=True)


def _field(name: str, value: Any) -> str:
    return f"{name} {value:.3f}" if isinstance(value, float) else f"{name} {value}"
