"""Noticing a model that repeats itself: the `RepeatGuard` the agent loop consults each step.

    guard = RepeatGuard()
    if (note := guard.check(action)) is not None:   # a repeat: not run again
        observe(note, error=True)
    else:
        result = run(action); guard.record(action, failed=..., changed=...)

Small models loop: they re-send an action that just failed (an edit whose SEARCH does not
match, a read of a missing file) or that the person declined (a command, an edit), or they
re-read a file they already have (read, or shown with the task). Running such an action
again cannot help, and asking the person again about a declined command is rude. So a
repeat is not executed: the model gets an observation saying what it repeated and that it
must do something else, and the loop counts it as a model-fixable error, so a model that
keeps repeating ends the run (`too_many_errors`, the message naming the repeat) instead of
burning the step limit.

Repeats are keyed on the tool and its arguments (whitespace at the ends ignored). A failed
or declined action, and a file's text the model has, stay remembered until a file changes
(an edit applied, a command run: then a test or an edit may behave differently); another
successful read-only action only counts as repeated when it is the very last one.
Tested in tests/agent/test_loop_repeats.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from agent_server.agent.actions import Action

READ_ONLY = frozenset({"read_file", "list_dir", "search"})


def action_key(action: Action) -> str:
    """The identity of an action for repeat detection: its tool and (stripped) arguments."""
    args = {k: v.strip() for k, v in sorted(action.args.items())}
    return json.dumps([action.tool, args], sort_keys=True)


class RepeatGuard:
    """Remembers what failed or was declined since the last change, the files whose text the
    model has (read, or shown with the task: `read`) and the last action."""

    def __init__(self, read: Iterable[str] = ()) -> None:
        self.failed: dict[str, str] = {}  # action key -> how it failed (first line)
        self.last: str | None = None  # the key of the last action that ran and succeeded
        self.read = set(read)  # paths read or shown, unchanged since

    def check(self, action: Action) -> str | None:
        """None: run it. Otherwise the observation telling the model it is repeating itself."""
        key = action_key(action)
        if key in self.failed:
            return (
                f"You repeated an action that already failed or was declined: {action.tool} "
                f"with the same arguments (it gave: {self.failed[key]}). Repeating it will "
                "not help and it was not run again. Do something different: another action, "
                "different arguments, or finish explaining what blocks you."
            )
        path = action.args.get("path", "").strip().removeprefix("./")
        if action.tool == "read_file" and path in self.read:
            return (
                f"You already have the text of {path}: it is in the messages above and has not "
                "changed since, so it was not read again. Take the next step (for example an "
                "edit, or finish)."
            )
        if key == self.last and action.tool in READ_ONLY:
            return (
                f"You just did exactly this ({action.tool} with the same arguments) and "
                "nothing changed since; its result is in the messages above and it was not "
                "run again. Take the next step (for example an edit, or finish)."
            )
        return None

    def record(self, action: Action, outcome: str, *, failed: bool, changed: bool) -> None:
        """After `action` ran: `failed` (an error, or declined by the person), `changed` (it
        wrote a file). `outcome` is the observation; its first line is quoted on a repeat."""
        if changed:
            self.failed.clear()
            self.read.clear()
        key = action_key(action)
        if failed:
            self.failed[key] = (outcome.strip().splitlines() or [""])[0][:200]
            self.last = None
        else:
            self.last = key
            if action.tool == "read_file":
                self.read.add(action.args["path"].strip().removeprefix("./"))
