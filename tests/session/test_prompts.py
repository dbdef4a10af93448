"""The session layer's prompts: the task text, the follow-up, the inline-completion prompt
and its fitting (far ends cut first, the code next to the cursor kept).
Run: .venv/bin/python -m pytest tests/session/test_prompts.py -q
"""

from __future__ import annotations

from agent_server.agent.events import Event
from agent_server.agent.scripted import ScriptedModel
from agent_server.protocol.messages import Diagnostic, EditorContext, Position, Selection
from agent_server.session.prompts import (
    CURSOR,
    FOLLOW_UP,
    SYSTEM,
    completion_prompt,
    fit_prompt,
    follow_up,
    task_text,
)

PREFIX = "".join(f"line_{i} = {i}\n" for i in range(400))  # ~5.6k characters
SUFFIX = "".join(f"after_{i} = {i}\n" for i in range(100))


def _user(prompt: list[dict]) -> str:
    assert prompt[0] == {"role": "system", "content": SYSTEM}
    return str(prompt[1]["content"])


def test_a_prompt_that_fits_is_left_whole() -> None:
    model = ScriptedModel([], context_window=20_000)
    prompt = fit_prompt(model, "a.py", "python", PREFIX, SUFFIX, 64)
    assert prompt == completion_prompt("a.py", "python", PREFIX, SUFFIX)
    assert _user(prompt) == f"File: a.py (python)\n\n{PREFIX}{CURSOR}{SUFFIX}"


def test_fit_prompt_cuts_the_far_ends_first() -> None:
    model = ScriptedModel([], context_window=2_000)  # one token a character: must cut
    prompt = fit_prompt(model, "a.py", "python", PREFIX, SUFFIX, 64)
    assert model.count_tokens(prompt) <= 2_000 - 64
    before, after = _user(prompt).split("\n\n", 1)[1].split(CURSOR)
    # What is kept is the code around the cursor: the end of the prefix, the suffix's start.
    assert before and PREFIX.endswith(before) and len(before) < len(PREFIX)
    assert SUFFIX.startswith(after)
    assert "line_399 = 399\n" in before and "line_0 = 0\n" not in before
    # The longer side is halved first: the suffix (shorter) is cut only when it is longer.
    assert len(before) >= len(after) or after == SUFFIX


def test_fit_prompt_gives_up_with_an_empty_context_rather_than_looping() -> None:
    model = ScriptedModel([], context_window=64)
    prompt = fit_prompt(model, "a.py", "", PREFIX, SUFFIX, 60)
    assert _user(prompt) == f"File: a.py\n\n{CURSOR}"


def test_task_text_carries_what_the_editor_shows() -> None:
    assert task_text("fix it", EditorContext()) == "fix it"
    sel = Selection(start=Position(line=1, character=0), end=Position(line=2, character=3),
                    text="y = 2")  # fmt: skip
    diag = Diagnostic(line=4, severity="error", message="undefined name 'z'")
    context = EditorContext(path="a.py", language="python", selection=sel, diagnostics=[diag])
    text = task_text("fix it", context)
    assert text.startswith("fix it\n\nOpen file: a.py (python)")
    assert "Selected (lines 2-3):\n```\ny = 2\n```" in text
    assert "- a.py:5 error: undefined name 'z'" in text


def test_follow_up_is_the_next_observation_after_a_note_when_none_is_pending() -> None:
    finished = Event("run_finished", 2, {"status": "step_limit", "message": "12 steps"}, 7)
    out = follow_up([Event("run_started", 0, {}, 1), finished], "and now?", EditorContext())
    assert [(e.kind, e.seq, e.step) for e in out] == [("assistant", 8, 2), ("observation", 9, 2)]
    assert "step_limit. 12 steps" in out[0].data["message"]["content"]
    assert out[1].data["message"] == {"role": "user", "content": FOLLOW_UP + "and now?"}
    pending = Event("assistant", 3, {"message": {"role": "assistant", "content": "?"}}, 4)
    assert [e.kind for e in follow_up([pending], "yes", EditorContext())] == ["observation"]
