"""Oracle agent traces (modelbuild/agent/traces.py) and the agent model built on them
(modelbuild/agent/pretrain.py), with the dev model's real tokenizer and weights.

.venv/bin/python -m pytest tests/modelbuild/agent/test_traces.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from agent_server.agent.actions import parse_action
from agent_server.models.base import Completion, Usage
from modelbuild.agent.pretrain import MANIFEST, AgentModelConfig, build_agent_model, encode
from modelbuild.agent.traces import ONE_LINE_KINDS, make_traces
from modelbuild.dev import MANIFEST as DEV_MANIFEST
from modelbuild.dev.corpus import SourceFile, is_held_out

MODULE = '''"""Shapes."""


def area(w, h):
    """w times h."""
    return w * h


def grow(size, by):
    if by > 0:
        return size + by
    return size
'''


def _name(stem: str, held_out: bool) -> str:
    """A corpus name on the asked side of the held-out split."""
    for i in range(1000):
        name = f"stdlib/geo/{stem}{i}.py"
        if is_held_out(name) == held_out:
            return name
    raise AssertionError("no name found")


@pytest.fixture(scope="module")
def tokenizer(dev_model_dir: Path):
    return AutoTokenizer.from_pretrained(dev_model_dir)


def _action(text: str):
    return parse_action(Completion(text=text, token_ids=[], logprobs=[], finish_reason="stop",
                                   usage=Usage(0, 0), model="m", adapter=None))  # fmt: skip


def test_a_trace_is_the_real_loop_solving_a_one_line_bug(tokenizer) -> None:
    files = [SourceFile(_name("shapes", False), MODULE) for _ in range(1)]
    traces = make_traces(tokenizer, count=4, seed=3, files=files)
    assert len(traces) == 1  # one mutation per module
    trace = traces[0]
    assert trace.kind in ONE_LINE_KINDS and trace.path.startswith("geo/shapes")
    assert trace.path in trace.statement and "The faulty line: `" in trace.statement
    faulty = trace.statement.rpartition("The faulty line: `")[2].removesuffix("`")
    assert faulty not in [line.strip() for line in MODULE.splitlines()]  # the mutated line
    # the loop's own prompt: system text, the few-shot turns, the task, the shown files
    assert trace.text.index("You are Apprentice") < trace.text.index(trace.statement)
    assert "perimeter" not in trace.text  # no few-shot turns (by default)
    assert f"The file {trace.path}:" in trace.text
    edit, finish = (_action(trace.text[s:e].removesuffix("<|im_end|>")) for s, e in trace.spans)
    assert edit.tool == "edit" and edit.args["path"] == trace.path
    assert edit.args["search"] == faulty and edit.args["replace"] in MODULE
    assert finish.tool == "finish"
    # the applied edit came back as the loop's observation between the two replies
    between = trace.text[trace.spans[0][1] : trace.spans[1][0]]
    assert f"The edit of {trace.path} was applied" in between and edit.args["replace"] in between


def test_a_dictated_trace_says_what_the_line_should_read(tokenizer) -> None:
    files = [SourceFile(_name("shapes", False), MODULE)]
    trace = make_traces(tokenizer, count=1, seed=3, files=files, statement="dictated")[0]
    edit = _action(trace.text[slice(*trace.spans[0])].removesuffix("<|im_end|>"))
    assert trace.statement.endswith(
        f"The faulty line: `{edit.args['search']}`\nIt should read: `{edit.args['replace']}`"
    )
    with pytest.raises(ValueError, match="located or dictated"):
        make_traces(tokenizer, count=1, files=files, statement="vague")


def test_held_out_and_test_files_give_no_traces(tokenizer) -> None:
    files = [SourceFile(_name("shapes", True), MODULE),
             SourceFile("project/tests/test_geo.py", MODULE)]  # fmt: skip
    assert make_traces(tokenizer, count=4, files=files) == []


def test_only_the_replies_are_labelled(tokenizer) -> None:
    files = [SourceFile(_name(f"s{i}", False), MODULE) for i in range(3)]
    trace = make_traces(tokenizer, count=1, seed=1, files=files)[0]
    ids, labels = encode(tokenizer, trace, 4096)
    labelled = [i for i, label in zip(ids, labels, strict=True) if label != -100]
    text = tokenizer.decode(labelled)
    replies = "".join(trace.text[s:e] for s, e in trace.spans)
    assert text == replies and text.count("<|im_end|>") == 2
    assert len(labelled) < len(ids) // 5  # the prompt is context, not target


def test_build_agent_model_trains_the_whole_model_and_says_how_it_went(
    dev_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "agent"
    cfg = AgentModelConfig(base=dev_model_dir, out=out, traces=6, eval_traces=2, steps=2,
                           batch_size=2, code_rows=1, copy_steps=2, copy_batch=2,
                           copy_beside=1, eval_copies=2)  # fmt: skip
    manifest = build_agent_model(cfg)
    saved = json.loads((out / MANIFEST).read_text())
    assert saved["train_traces"] == manifest["train_traces"] >= 4
    for side in ("before", "after"):
        assert set(saved[side]) == {"heldout_code_loss", "heldout_reply_loss",
                                    "heldout_exact_edits", "heldout_located_edits",
                                    "heldout_exact_copies"}  # fmt: skip
        assert 0 <= saved[side]["heldout_exact_copies"] <= 2
    assert saved["after"]["heldout_reply_loss"] < saved["before"]["heldout_reply_loss"]
    assert not (out / DEV_MANIFEST).exists()  # not mistaken for a dev model to rebuild
    assert (out / "tokenizer.json").read_bytes() == (dev_model_dir / "tokenizer.json").read_bytes()
    new, old = load_file(out / "model.safetensors"), load_file(dev_model_dir / "model.safetensors")
    assert set(new) == set(old)
    assert any(not torch.equal(new[k], old[k]) for k in new)
    assert not list(tmp_path.glob(".agent.tmp-*"))  # written atomically
