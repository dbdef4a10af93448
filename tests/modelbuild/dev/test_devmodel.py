"""The dev model builder (`apprentice model build-dev`): real builds, real loads, real generation.

Run: `.venv/bin/python -m pytest tests/modelbuild/dev/test_devmodel.py -q`. Uses the session model
(`dev_model_dir`, tests/fixtures/models.py) and makes a few small builds of its own.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from agent_server.models.chat_encoding import (
    count_tokens,
    encode_chat,
    load_tokenizer,
    render_chat,
)
from modelbuild.dev import (
    MANIFEST,
    DevModelConfig,
    build_dev_model,
    build_key,
    corpus,
    read_manifest,
)
from modelbuild.dev.build import write_atomically
from tests.fixtures.settings import REPO, run_cli

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Read main.py"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "main.py"}'},
            }
        ],
    },
    {"role": "tool", "content": "print('hi')"},
]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_session_model_loads_in_transformers_and_generates(dev_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(dev_model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(dev_model_dir)
    assert model.config.model_type == "llama"
    assert model.config.max_position_embeddings == 2048
    assert 1_000_000 < model.num_parameters() < 10_000_000
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    assert tok.eos_token_id in model.generation_config.eos_token_id

    prompt = encode_chat(tok, [{"role": "user", "content": "Complete: def add(a, b):"}])
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id
    )
    new = out[0, len(prompt) :].tolist()
    assert 1 <= len(new) <= 24
    assert all(0 <= t < len(tok) for t in new)


def test_chat_template_renders_every_role(dev_model_dir: Path) -> None:
    tok = load_tokenizer(dev_model_dir)
    text = render_chat(tok, CONVERSATION)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nRead main.py<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>{"name": "read_file", "arguments": {"path": "main.py"}}</tool_call><|im_end|>\n'
        "<|im_start|>tool\nprint('hi')<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert not render_chat(tok, CONVERSATION, add_generation_prompt=False).endswith("assistant\n")
    # OpenAI-style content parts (vLLM may pass them) render like the plain string.
    parts = [{"role": "user", "content": [{"type": "text", "text": "Read main.py"}]}]
    assert render_chat(tok, parts) == render_chat(tok, [CONVERSATION[1]])
    # Tools: one line each, `name(args): description`, in a system block before the rest.
    params = {"type": "object", "properties": {"path": {"type": "string"}}}
    spec = {"name": "read_file", "description": "Read a file.", "parameters": params}
    with_tools = render_chat(tok, CONVERSATION[:2], tools=[{"type": "function", "function": spec}])
    assert with_tools.startswith("<|im_start|>system\nCall a tool as <tool_call>")
    assert (
        "\nread_file(path): Read a file.\n<|im_end|>\n<|im_start|>system\nBe brief." in with_tools
    )
    bare = render_chat(
        tok, [CONVERSATION[1]], tools=[{"type": "function", "function": {"name": "x"}}]
    )
    assert "\nx()\n" in bare


def test_count_tokens_matches_transformers_chat_template(dev_model_dir: Path) -> None:
    tok = load_tokenizer(dev_model_dir)
    expected = tok.apply_chat_template(CONVERSATION, tokenize=True, add_generation_prompt=True)
    if isinstance(expected, dict) or hasattr(expected, "input_ids"):
        expected = expected["input_ids"]
    assert encode_chat(tok, CONVERSATION) == list(expected)
    assert count_tokens(tok, CONVERSATION) == len(expected)
    assert count_tokens(tok, CONVERSATION[:2]) < count_tokens(tok, CONVERSATION)
    # Each special token is one token: the template's markers are not spelled out in bytes.
    ids = encode_chat(tok, CONVERSATION[:1], add_generation_prompt=False)
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    assert tok.convert_tokens_to_ids("<|im_end|>") in ids
    # Tool-call markers are one token each and survive skip_special_tokens (parsers need them).
    marked = tok.encode("<tool_call>{}</tool_call>", add_special_tokens=False)
    assert marked[0] == tok.convert_tokens_to_ids("<tool_call>")
    assert marked[-1] == tok.convert_tokens_to_ids("</tool_call>")
    assert tok.decode(marked[1:-1]) == "{}"
    assert tok.decode(marked, skip_special_tokens=True) == "<tool_call>{}</tool_call>"
    assert len(tok) == 4096


def test_tokenizer_round_trips_code(dev_model_dir: Path) -> None:
    tok = load_tokenizer(dev_model_dir)
    samples = [
        (REPO / "apprentice" / "cli.py").read_text(),
        "def f(x):\n\treturn {'a': [1, 2.5e-3]}  # tab, unicode: é ∑ 🐍\n\n\n",
        "    " * 10 + "x = '''\r\n'''",
    ]
    for text in samples:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    # BPE learned code: well under one token per character on Python source.
    assert len(tok.encode(samples[0], add_special_tokens=False)) < len(samples[0]) / 2.5


RUN_TESTS = '{"thought": "Run the tests.", "tool": "run_command", "args": {"command": "pytest"}}'
READ = '{"thought": "Read it first.", "tool": "read_file", "args": {"path": "src/app.py"}}'
CODE_REPLY = "```python\n    return a + 1\n```"
NATIVE_READ = '<tool_call>{"name": "read_file", "arguments": {"path": "src/app.py"}}</tool_call>'


@pytest.mark.parametrize(
    ("user", "reply", "with_tools"),
    [
        ("Run the tests.", RUN_TESTS, False),
        ("Show me src/app.py.", READ, False),
        ("Show me src/app.py.", NATIVE_READ, True),
        (
            "Complete this code:\n```python\ndef f(a):\n```",
            "```python\n    return a + 1\n```",
            False,
        ),
    ],
)
def test_model_learned_to_end_its_turn(
    dev_model_dir: Path, user: str, reply: str, with_tools: bool
) -> None:
    """After a finished reply, a token that ends generation is the model's first choice.

    That is what makes generation stop on its own: generation_config's eos ids are
    <|im_end|>, `</tool_call>` (one call is all the agent takes; after a JSON text action,
    which ends in `}}` like a native call, this tiny model sometimes ranks it first) and the
    document separator. Untrained, their probability is ~1/4096 each. After a native call's
    `</tool_call>`, only the end of the turn is left.
    """
    model = AutoModelForCausalLM.from_pretrained(dev_model_dir, dtype=torch.float32)
    tok = load_tokenizer(dev_model_dir)
    stops = GenerationConfig.from_pretrained(dev_model_dir).eos_token_id
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert stops[0] == im_end == tok.eos_token_id
    assert tok.convert_tokens_to_ids("</tool_call>") in stops
    tools = corpus.TOOL_SPECS if with_tools else None
    ids = encode_chat(tok, [{"role": "user", "content": user}], tools=tools)
    ids += tok.encode(reply, add_special_tokens=False)
    with torch.no_grad():
        probs = model(torch.tensor([ids])).logits[0, -1].softmax(-1)
    top = int(probs.argmax())
    assert top in stops, f"first choice {tok.convert_ids_to_tokens(top)!r} ({probs[top]:.2f})"
    if reply.endswith("</tool_call>"):
        assert top == im_end


def test_held_out_loss_dropped(dev_model_dir: Path) -> None:
    manifest = read_manifest(dev_model_dir)
    assert manifest is not None, f"no {MANIFEST} in {dev_model_dir}"
    assert manifest["steps"] > 0
    assert not manifest["loss_after"] > manifest["loss_before"]
    # A real drop, not noise: at least a nat per token below the untrained model.
    assert manifest["loss_after"] < manifest["loss_before"] - 1.0
    assert manifest["chat_loss_after"] < manifest["chat_loss_before"] - 1.0


def test_the_corpus_is_the_pinned_commit_not_the_tree_on_disk(tmp_path: Path) -> None:
    """Edits to the tree must not change the dev model the tests run on: its project files
    come from corpus.PINNED_COMMIT (which a fresh clone has), whatever is on disk."""
    pinned = corpus._pinned_files(REPO, corpus.PINNED_COMMIT, "project")
    assert pinned, f"commit {corpus.PINNED_COMMIT} is not in this clone: CI would build from disk"
    names = {f.name for f in pinned}
    assert "project/agent_server/models/devmodel/corpus.py" in names
    old = next(f for f in pinned if f.name == "project/agent_server/models/devmodel/corpus.py")
    assert "PINNED_COMMIT" not in old.text  # the file as it was then, not as it is now
    project = [f for f in corpus.collect(stdlib_root=tmp_path) if f.name.startswith("project/")]
    assert sorted(f.name for f in project) == sorted(names)
    assert corpus._pinned_files(tmp_path, corpus.PINNED_COMMIT, "project") is None  # no git


def _snapshot_project(dest: Path) -> Path:
    """The repository's .py files as they are now: other people edit the tree meanwhile."""
    for f in corpus.collect(project_root=REPO):
        if f.name.startswith("project/"):
            path = dest / f.name.removeprefix("project/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f.text)
    return dest


@pytest.mark.slow
def test_same_seed_builds_the_same_weights(tmp_path: Path) -> None:
    project = _snapshot_project(tmp_path / "project")
    hashes = []
    for name, seed in [("a", 7), ("b", 7), ("c", 8)]:
        cfg = DevModelConfig(out=tmp_path / name, steps=2, seed=seed, project_root=project)
        result = build_dev_model(cfg)
        assert result.manifest["seed"] == seed and result.manifest["steps"] == 2
        hashes.append(_sha256(tmp_path / name / "model.safetensors"))
    assert hashes[0] == hashes[1]
    assert hashes[0] != hashes[2]
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (
        tmp_path / "b" / "tokenizer.json"
    ).read_bytes()


def test_config_refuses_bad_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of num_heads"):
        DevModelConfig(out=tmp_path, hidden_size=250, num_heads=4)
    with pytest.raises(ValueError, match="multiple of 16"):
        DevModelConfig(out=tmp_path, hidden_size=96, num_heads=4)
    with pytest.raises(ValueError, match="steps must be >= 0"):
        DevModelConfig(out=tmp_path, steps=-1)
    with pytest.raises(ValueError, match="seq_len"):
        DevModelConfig(out=tmp_path, seq_len=4096)


def test_write_atomically_replaces_an_existing_model(tmp_path: Path) -> None:
    out, new = tmp_path / "dev", tmp_path / ".dev.tmp"
    out.mkdir()
    (out / "old.txt").write_text("old")
    new.mkdir()
    (new / "config.json").write_text("{}")
    write_atomically(new, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev"]


def test_cli_help() -> None:
    result = run_cli("model", "build-dev", "--help")
    assert result.returncode == 0, result.stderr
    for option in ("--out", "--steps", "--seed"):
        assert option in result.stdout


@pytest.mark.slow
def test_cli_builds_with_zero_steps(tmp_path: Path) -> None:
    out = tmp_path / "model"
    result = run_cli("model", "build-dev", "--steps", "0", "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"wrote the dev model to {out}" in result.stdout
    assert "parameters: " in result.stdout and "held-out loss: " in result.stdout
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["steps"] == 0 and manifest["seed"] == 0
    assert manifest["build_key"] == build_key(corpus.collect())  # what the fixture checks
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (out / name).is_file(), name
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["chat_template"] == (out / "chat_template.jinja").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temp folder left behind
    AutoModelForCausalLM.from_pretrained(out)  # loads


@pytest.mark.slow
def test_cli_default_out_is_the_home_models_dev(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_cli(
        "model", "build-dev", "--steps", "0", env={"APPRENTICE_HOME": str(home)}, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (home / "models" / "dev" / "config.json").is_file()
    shutil.rmtree(home)
