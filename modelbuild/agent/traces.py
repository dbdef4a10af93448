"""Oracle agent traces for continued pretraining, made by the product's own harness.

    traces = make_traces(tokenizer, count=2000, seed=0)  # list[Trace]
    trace.text, trace.spans  # the whole rendered conversation; the model's replies in it

Composer 2's first stage trains the base on agent traces before any RL. Here a trace is one
easiest-tier task solved the way a competent agent would: a small module cut from the dev
model's own training corpus (modelbuild/dev/corpus.py: the standard library and this
repository at its pinned commit, held-out files and `tests/` left out), one single-line
mutation (learner/synth/mutate.py: operator, comparison, boolean, constant, negate, swapped
arguments), a located statement (learner/synth/statements.py located_statement: failing
tests, the file, the faulty line; or the dictated one, which adds what the line should
read) and a test file beside it. The **real** agent loop
(session.turns.Turn: prompts, few-shot turns, shown files, the edit applier, autonomous
mode) runs on it in a temporary LocalWorkspace with `OracleModel`, a ScriptedModel that
counts tokens with the dev tokenizer and answers with the oracle's actions: an edit that
turns the faulty line back into the original, then `finish`. A trace is kept only when the
loop finished and the file is the original again. The messages the loop sent are rendered
with the model's chat template, exactly as vLLM renders them, and `spans` marks the
characters of the two replies (the only tokens trained on).

No trace comes from a task repository: tasks mined for task cycles and benches (and their
held-out split) are never seen. Tested in tests/modelbuild/agent/test_traces.py.
"""

from __future__ import annotations

import ast
import asyncio
import json
import random
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_server.agent.config import AgentConfig
from agent_server.agent.edits.diff import unified_diff
from agent_server.agent.events import InMemorySink
from agent_server.agent.scripted import ScriptedModel
from agent_server.agent.workspace import LocalWorkspace
from agent_server.models.base import Message
from agent_server.models.chat_encoding import render_chat
from agent_server.session.turns import Turn
from learner.synth.mutate import mutations
from learner.synth.rollout import RolloutConfig
from learner.synth.statements import FROM_PATCH, precise_statement
from modelbuild.dev import corpus
from modelbuild.dev.tokenizer import IM_END

# Mutations whose fix is one line rewritten in place (the located tier's shape).
ONE_LINE_KINDS = frozenset({"operator", "comparison", "boolean", "constant", "negate", "swap_args"})
MAX_FUNCTION_LINES = 12
MAX_MODULE_CHARS = 600  # like the files of a small project (and two copies fit a short row)


@dataclass(frozen=True)
class Trace:
    path: str  # the module's path in the workspace
    function: str
    kind: str  # the mutation's kind
    statement: str
    text: str  # the rendered conversation, the model's replies included
    spans: tuple[tuple[int, int], ...]  # character spans of the model's replies in `text`


class OracleModel(ScriptedModel):
    """A ScriptedModel whose token counts are the real tokenizer's (so the loop fits its
    prompts and shown files to the real window exactly as it does for the served model)."""

    def __init__(self, outputs: Sequence[str], tokenizer: Any, context_window: int) -> None:
        super().__init__(list(outputs), context_window=context_window)
        self.tokenizer = tokenizer

    def count_tokens(self, messages: Sequence[Message]) -> int:
        text = render_chat(self.tokenizer, list(messages), add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class _Case:
    path: str
    module: str  # the original (correct) module text
    faulty: str  # the module with the mutation
    function: str
    kind: str
    bad_line: str
    good_line: str


def _modules(files: Sequence[corpus.SourceFile], rng: random.Random) -> Iterator[tuple[str, str]]:
    """(path, text): small modules of one or two short top-level functions from the corpus."""
    for f in files:
        if f.held_out or f.name.startswith(("project/tests/", "tests/")):
            continue
        try:
            tree = ast.parse(f.text)
        except (SyntaxError, ValueError):
            continue
        lines = f.text.splitlines()
        small = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None:
                body = lines[node.lineno - 1 - len(node.decorator_list) : node.end_lineno]
                if len(body) <= MAX_FUNCTION_LINES and not node.decorator_list:
                    small.append("\n".join(body))
        rng.shuffle(small)
        parts = Path(f.name).parts
        path = "/".join(parts[-2:]) if len(parts) > 2 else parts[-1]
        stem = Path(path).stem.strip("_") or "module"
        for i in range(0, len(small), 2):
            chosen = small[i : i + 1 + rng.randrange(2)]
            text = f'"""{stem.capitalize()}."""\n\n\n' + "\n\n\n".join(chosen) + "\n"
            if len(text) <= MAX_MODULE_CHARS:
                yield path, text


def _cases(files: Sequence[corpus.SourceFile], seed: int) -> Iterator[_Case]:
    rng = random.Random(seed)
    for path, text in _modules(files, rng):
        for m in mutations(path, text, seed=rng.randrange(1 << 30)):
            if m.kind not in ONE_LINE_KINDS:
                continue
            before, after = text.splitlines(), m.source.splitlines()
            changed = [i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b]
            if len(before) != len(after) or len(changed) != 1:
                continue
            i = changed[0]
            yield _Case(path, text, m.source, m.function, m.kind, after[i].strip(),
                        before[i].strip())  # fmt: skip
            break  # one mutation per module: more modules, more variety


def _test_file(case: _Case) -> tuple[str, str, str]:
    """A test module that imports the function: (path, text, failing node id)."""
    module = case.path.removesuffix(".py").replace("/", ".")
    name = case.function.split(".")[-1]
    path = f"tests/test_{Path(case.path).stem.strip('_')}.py"
    text = (
        f"from {module} import {name}\n\n\ndef test_{name.strip('_')}():\n"
        f"    assert {name}() is not None\n"
    )
    return path, text, f"{path}::test_{name.strip('_')}"


def _statement(case: _Case, nodeid: str, rng: random.Random, style: str) -> str:
    a, b = rng.randrange(10), rng.randrange(10, 20)
    message = rng.choice(["", f"AssertionError: assert {a} == {b}", "AssertionError"])
    precise = precise_statement([nodeid], {nodeid: message}, [case.path])
    return FROM_PATCH[style](precise, unified_diff(case.faulty, case.module, case.path))


def _action(thought: str, tool: str, args: dict[str, str]) -> str:
    return json.dumps({"thought": thought, "tool": tool, "args": args}, separators=(",", ":"))


async def _trace(
    case: _Case, tokenizer: Any, window: int, rng: random.Random, few_shot: bool, style: str
) -> Trace | None:
    test_path, test_text, nodeid = _test_file(case)
    statement = _statement(case, nodeid, rng, style)
    edit = {"path": case.path, "search": case.bad_line, "replace": case.good_line}
    replies = [
        _action("fix the faulty line", "edit", edit),
        _action("the line is fixed", "finish", {"message": f"Fixed {case.path}."}),
    ]
    oracle = OracleModel(replies, tokenizer, window)
    with tempfile.TemporaryDirectory(prefix="apprentice-trace-") as tmp:
        root = Path(tmp)
        for path, text in ((case.path, case.faulty), (test_path, test_text)):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        agent = AgentConfig(few_shot=few_shot)
        config = RolloutConfig(statement=style, step_limit=4, agent=agent).agent_config()
        turn = Turn(oracle, LocalWorkspace(root), config, InMemorySink())  # type: ignore[arg-type]
        result = await turn.run(statement)
        fixed = (root / case.path).read_text(encoding="utf-8")
    if result.status != "finished" or fixed != case.module or len(oracle.calls) != 2:
        return None
    last = oracle.calls[-1].messages + [{"role": "assistant", "content": replies[-1]}]
    text = render_chat(tokenizer, last, add_generation_prompt=False)
    spans = []
    for call, reply in zip(oracle.calls, replies, strict=True):
        prompt = render_chat(tokenizer, call.messages, add_generation_prompt=True)
        if not text.startswith(prompt + reply):
            return None  # the template does not render the conversation as a prefix
        end = len(prompt) + len(reply)
        end += len(IM_END) if text.startswith(IM_END, end) else 0  # the end of the turn too
        spans.append((len(prompt), end))
    return Trace(case.path, case.function, case.kind, statement, text, tuple(spans))


def make_traces(
    tokenizer: Any, *, count: int, seed: int = 0, context_window: int = 2048,
    files: Sequence[corpus.SourceFile] | None = None, few_shot: bool = False,
    statement: str = "located",
) -> list[Trace]:  # fmt: skip
    """Up to `count` traces (fewer when the corpus runs out), in a seeded order. Without
    the few-shot turns by default: a model trained on traces needs no examples, and its
    prompts are a third as long (AgentConfig.few_shot; tasks.few_shot in a task cycle).
    `statement`: "located" (the faulty line) or "dictated" (and what it should read)."""
    if statement not in FROM_PATCH:
        raise ValueError(f"statement must be located or dictated, not {statement!r}")
    files = corpus.collect() if files is None else files
    rng = random.Random(seed + 1)
    out: list[Trace] = []

    async def run() -> None:
        for case in _cases(files, seed):
            trace = await _trace(case, tokenizer, context_window, rng, few_shot, statement)
            if trace is not None:
                out.append(trace)
                if len(out) >= count:
                    return

    asyncio.run(run())
    return out
