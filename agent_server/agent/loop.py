"""The agent loop: run -> step -> query / execute (mini-swe-agent's DefaultAgent shape).

    agent = Agent(backend, LocalWorkspace(root), AgentConfig(mode="autonomous"), sink=sink)
    result = await agent.run("Fix the failing test in tests/test_x.py")  # -> RunResult

Each step lets the `Summarizer` shrink the `View` when it nears the context budget, asks the
model for one action, runs it with the `Toolbox` and appends the turn. Model-fixable errors
(malformed action, tool error, failed edit) go back to the model as the next observation, up
to `max_format_errors` in a row; whatever ends a run is a `Terminating` exception carrying
its status (`RunResult`; it and `AgentConfig` live in config.py). A repeat of an action that
failed or was declined is not run: the model is told, and it counts as an error (repeats.py).
Small files the task names are shown with it (task_files.py). Every step is emitted to the
`EventSink`; `Agent.resume(events)` continues a stored session from its last summary.
`agent.cancel()` (or cancelling the asyncio task) stops the model call, review or command.

Run its tests: .venv/bin/python -m pytest tests/agent/test_loop.py -q
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agent_server.agent import exceptions as ex
from agent_server.agent import prompts
from agent_server.agent.actions import Action, parse_action, tool_specs
from agent_server.agent.config import AgentConfig, RecordedCall, RunResult
from agent_server.agent.events import Event, EventSink, InMemorySink, completion_to_dict
from agent_server.agent.repeats import RepeatGuard
from agent_server.agent.summarizer import Step, Summarizer, View, default_summarizer, rebuild_view
from agent_server.agent.task_files import view_for_task
from agent_server.agent.tools import ModelCall, Reviewer, Toolbox
from agent_server.agent.workspace import Workspace
from agent_server.models.base import Completion, Message, ModelBackend, ModelError, collect_stream

T = TypeVar("T")


class Agent:
    def __init__(
        self,
        backend: ModelBackend,
        workspace: Workspace,
        config: AgentConfig | None = None,
        *,
        sink: EventSink | None = None,
        reviewer: Reviewer | None = None,
        summarizer: Summarizer | None = None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.config = cfg = config or AgentConfig()
        window, ratio = backend.context_window, cfg.context_budget_ratio
        if cfg.sampling.max_tokens > cfg.room(window):
            raise ValueError(
                f"sampling.max_tokens={cfg.sampling.max_tokens} does not fit beside a context "
                f"budget of {ratio} x {window} tokens: lower max_tokens or context_budget_ratio"
            )
        self.backend, self.on_text = backend, on_text
        self.sink: EventSink = sink or InMemorySink()
        self.summarizer = summarizer or default_summarizer(backend, ratio)
        self.tools = Toolbox(workspace, cfg.tool_config(), reviewer, self.sink, self.emit)
        self.repeats = RepeatGuard()
        self.view = View(system=prompts.system_prompt(cfg.native_tools), task="")
        self.step = self.seq = 0
        self._cancel = asyncio.Event()
        self._deadline: float | None = None
        self._calls: list[RecordedCall] = []  # this run's model calls, summaries included

    def cancel(self) -> None:
        """Stop the run promptly; it ends with status "cancelled"."""
        self._cancel.set()

    async def emit(self, kind: Any, **data: Any) -> None:
        self.seq += 1
        await self.sink.emit(Event(kind, self.step, data, self.seq))

    async def run(self, task: str) -> RunResult:
        cfg, ws = self.config, self.tools.ws
        few_shot = cfg.few_shot and not cfg.native_tools
        self.view = await view_for_task(self.view.system, task, ws, cfg.show_file_chars, few_shot)
        return await self._run(resumed=False)

    async def resume(self, events: Sequence[Event]) -> RunResult:
        """Continue a stored session from its last summary and the turns after it."""
        self.view = rebuild_view(events)
        self.seq, self.step = max(e.seq for e in events), max(e.step for e in events)
        return await self._run(resumed=True)

    async def _run(self, resumed: bool) -> RunResult:
        v, cfg = self.view, self.config
        start = {"system": v.system, "task": v.task, "shown": v.shown, "examples": v.examples}
        await self.emit("run_started", **start, mode=cfg.mode, resumed=resumed)
        self._calls, self.repeats = [], RepeatGuard(() if resumed else v.files)
        self._deadline = cfg.time_limit_s and time.monotonic() + cfg.time_limit_s
        start, errors = self.step, 0
        status, message = "error", "the agent crashed; the server log has the traceback"
        try:
            while True:
                if self.step - start >= cfg.step_limit:
                    raise ex.LimitsExceeded(f"step limit of {cfg.step_limit} reached", "step_limit")
                errors = errors + 1 if await self.do_step() else 0
                if errors >= cfg.max_format_errors:
                    last = self.view.turns[-1].observation["content"]
                    raise ex.TooManyErrors(f"{errors} errors in a row; the last: {last}")
        except ex.Terminating as e:
            status, message = e.status, e.message
        except ModelError as e:
            status, message = "model_error", f"{e.code}: {e}"
        except asyncio.CancelledError:  # the task was cancelled: record it, then let it end
            status, message = "cancelled", "the task running the agent was cancelled"
            raise
        finally:  # a cancel() that arrived before the run started still stopped it; now reset
            self._cancel.clear()
            await self.emit("run_finished", status=status, message=message, steps=self.step - start)
        return RunResult.of(status, message, self.step - start, self._calls)

    async def do_step(self) -> bool:
        """One model step: query, parse, execute, observe. True if it was a model-fixable error."""
        if self.summarizer.should_summarize(self.view):
            await self._summarize()
        self.step += 1
        prompt = self.view.messages()  # what the model sees; an edit's suggestion records it
        c = await self._guard(self._query(prompt))
        try:
            action: Action | None = parse_action(c)
        except ex.FormatError as e:
            action, error = None, e.message
        native = action is not None and action.call_id is not None
        reply = prompts.assistant_message(c, native)
        await self.emit("assistant", message=reply, completion=completion_to_dict(c))
        if action is None:
            await self.emit("format_error", error=error)
            return await self._observe(c, None, error, {}, error=True)
        self.view.plan = a.plan if (a := action).plan else self.view.plan
        await self.emit("tool_call", tool=a.tool, args=a.args, thought=a.thought, plan=a.plan)
        if (repeated := self.repeats.check(a)) is not None:  # not run again; counts as an error
            return await self._observe(c, a, repeated, {}, error=True)
        try:
            call = ModelCall(c, prompt, self.config.sampling)
            result = await self._guard(self.tools.execute(a, call, self.step))
        except ex.NonTerminating as e:
            self.repeats.record(a, e.message, failed=True, changed=False)
            return await self._observe(c, a, e.message, {}, error=True)
        self.repeats.record(a, result.text, failed=result.refused, changed=result.changed)
        return await self._observe(c, a, result.text, result.files, error=False)

    async def _query(self, msgs: list[Message]) -> Completion:
        cfg = self.config
        schema = cfg.decoding_schema()  # the action schema (or a narrower one configured)
        if self.on_text is not None and not cfg.native_tools:
            stream = self.backend.stream(msgs, schema=schema, sampling=cfg.sampling)
            c = await collect_stream(stream, self.backend.model_name, self.on_text)
        else:
            tools = tool_specs() if cfg.native_tools else None
            c = await self.backend.complete(msgs, tools=tools, schema=schema, sampling=cfg.sampling)
        self._calls.append(RecordedCall("agent", c, constrained=schema is not None))
        return c

    async def _summarize(self) -> None:
        before = self.backend.count_tokens(self.view.messages())
        view = await self._guard(self.summarizer.summarize(self.view))
        if self.summarizer.should_summarize(view):
            raise ex.ContextOverflow("over the context budget after summarizing: shorten the task")
        if view.summary_completion is not None:
            self._calls.append(RecordedCall("summary", view.summary_completion))
        self.view = view
        after = self.backend.count_tokens(view.messages())
        await self.emit("summary", **view.summary_data(), tokens_before=before, tokens_after=after)

    async def _observe(
        self, c: Completion, action: Action | None, text: str, files: dict[str, str], *, error: bool
    ) -> bool:
        call_id = action.call_id if action is not None else None
        obs = prompts.observation_message(text, call_id)
        for path, content in files.items():
            self.view.touch(path, content)
        reply = prompts.assistant_message(c, call_id is not None)
        self.view.turns.append(Step(self.step, reply, obs))
        outlines = {p: self.view.files[p] for p in files}
        await self.emit("observation", message=obs, files=outlines, error=error)
        return error

    async def _guard(self, aw: Awaitable[T]) -> T:
        """Await `aw` unless the run is cancelled or runs out of time first; then stop it."""
        work, stop = asyncio.ensure_future(aw), asyncio.ensure_future(self._cancel.wait())
        left = None if not self._deadline else max(0.0, self._deadline - time.monotonic())
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=left, return_when="FIRST_COMPLETED")
        finally:  # also when this task itself is cancelled: never leave the work running
            work.cancel()
            stop.cancel()
        if work in done:
            return work.result()
        await asyncio.wait({work})  # let it clean up (close the stream, kill the command)
        if self._cancel.is_set():
            raise ex.Cancelled("cancelled by the user")
        raise ex.LimitsExceeded(f"time limit of {self.config.time_limit_s}s reached", "time_limit")
