"""The dev model's training text: Python source on disk, plus a little chat-formatted data.

Sources: the standard library of the running interpreter (`sysconfig.get_paths()["stdlib"]`,
without site-packages) and this repository's own `.py` files **as of a pinned commit**
(`PINNED_COMMIT`, read with `git archive`), not as they are on disk: every edit to the tree
would otherwise build a different dev model, and tests of its behaviour (an end-of-turn
token, a gate decision) would change with unrelated commits. Without git or that commit (an
image built without `.git`, a shallow clone) the tree on disk is used, and the build says so.
Move the pin deliberately, in a commit of its own, and run the dev-model tests with it.
Files are listed in a fixed order (by their corpus-relative name) and split into train /
held-out by a hash of that name, so the split never depends on the seed or on which files
exist besides.

Used by build.py; try it with
`.venv/bin/python -c "from modelbuild.dev.corpus import *; print(len(collect()))"`.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import random
import subprocess
import sysconfig
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The commit whose .py files are the project part of the corpus (see the docstring).
PINNED_COMMIT = "a8c7bc3da50f513e8bde4b919e2604bfb751572a"

# Folders that hold no hand-written source worth learning from, or other people's packages.
_SKIP_PARTS = frozenset(
    {
        "site-packages",
        "dist-packages",
        "__pycache__",
        ".venv",
        ".vllm-venv",
        ".git",
        ".cache",
        "node_modules",
        "build",
        "dist",
    }
)
# Generated tables (unicode data, encodings) teach little and blow up a small sample.
_MAX_FILE_BYTES = 200_000


@dataclass(frozen=True)
class SourceFile:
    """One corpus file: `name` is stable across machines (e.g. `stdlib/json/decoder.py`)."""

    name: str
    text: str

    @property
    def held_out(self) -> bool:
        return is_held_out(self.name)


def is_held_out(name: str, percent: int = 5) -> bool:
    """About `percent`% of files, chosen by a hash of the name, never seen in training."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 100 < percent


def default_project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _pinned_files(root: Path, commit: str, prefix: str) -> list[SourceFile] | None:
    """The `.py` files of `commit` in the git repository at `root`; None without one."""
    try:
        tar = subprocess.run(
            ["git", "-C", str(root), "archive", "--format=tar", commit],
            capture_output=True, check=True, timeout=120,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    files: list[SourceFile] = []
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in archive.getmembers():
            rel = Path(member.name)
            if not member.isfile() or rel.suffix != ".py" or _SKIP_PARTS.intersection(rel.parts):
                continue
            if member.size > _MAX_FILE_BYTES:
                continue
            data = archive.extractfile(member)
            try:
                text = data.read().decode("utf-8") if data is not None else ""
            except UnicodeDecodeError:
                continue
            if text.strip():
                files.append(SourceFile(f"{prefix}/{rel.as_posix()}", text))
    return files


def _python_files(root: Path, prefix: str) -> list[SourceFile]:
    files: list[SourceFile] = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if _SKIP_PARTS.intersection(rel.parts) or not path.is_file():
            continue
        try:
            if path.stat().st_size > _MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # the stdlib's test suite holds deliberately undecodable files
        if text.strip():
            files.append(SourceFile(f"{prefix}/{rel.as_posix()}", text))
    return files


def collect(stdlib_root: Path | None = None, project_root: Path | None = None) -> list[SourceFile]:
    """Every corpus file, sorted by name (deterministic order, independent of the disk).
    `project_root` given: that folder's files as they are; else this repository's at
    PINNED_COMMIT (the tree on disk where git or the commit is missing)."""
    stdlib = stdlib_root or Path(sysconfig.get_paths()["stdlib"])
    if project_root is not None:
        project = _python_files(project_root, "project")
    else:
        pinned = _pinned_files(default_project_root(), PINNED_COMMIT, "project")
        if pinned is None:
            log.warning("commit %s not found: the dev model's corpus is the tree on disk, "
                        "so its build differs from CI's", PINNED_COMMIT[:12])  # fmt: skip
        project = pinned if pinned is not None else _python_files(default_project_root(), "project")
    files = _python_files(stdlib, "stdlib") + project
    files.sort(key=lambda f: f.name)
    return files


def corpus_digest(files: list[SourceFile]) -> str:
    """A short hash of names and contents: two builds on the same corpus share it."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.text.encode()).digest())
    return h.hexdigest()[:16]


def tokenizer_sample(files: list[SourceFile], max_chars: int) -> list[str]:
    """A bounded, seed-independent sample of training files for BPE training."""
    train = [f for f in files if not f.held_out]
    # Order by hash so the sample spans the whole library, not just the first packages.
    train.sort(key=lambda f: hashlib.sha256(f.name.encode()).digest())
    out: list[str] = []
    total = 0
    for f in train:
        if total >= max_chars:
            break
        out.append(f.text)
        total += len(f.text)
    return out


# --- chat-formatted data -------------------------------------------------------------------
# The agent talks to the model in chat turns and asks for one action per turn: JSON text under
# a schema ({"thought", "plan"?, "tool", "args"}, agent_server/agent/actions.py) or, when the
# backend is given tool specs, a Hermes-style native call that both backends parse
# (<tool_call>{"name", "arguments"}</tool_call>, agent_server/models/hermes.py). A few such
# conversations teach those shapes and, above all, to end the assistant turn. The tool names
# and arguments below copy actions.py's TOOLS rather than import them: the builder's version
# hash (build.py) covers this package only, so what the model is trained on lives here.

_SYSTEM = "You are Apprentice, a coding assistant. Answer with one JSON action."
# (user request, tool, args, thought); {path} {dir} {symbol} are filled from a corpus file.
_TOOL_EXAMPLES: list[tuple[str, str, dict[str, str], str]] = [
    ("Show me {path}.", "read_file", {"path": "{path}"}, "I need to read the file first."),
    ("Open {path} and read it.", "read_file", {"path": "{path}"}, "Read {path}."),
    ("List the files in {dir}.", "list_dir", {"path": "{dir}"}, "List {dir}."),
    ("What is in this project?", "list_dir", {"path": "."}, "Start from the root."),
    (
        "Where is {symbol} defined?",
        "search",
        {"query": "def {symbol}", "path": "."},
        "Search for the definition.",
    ),
    ("Find uses of {symbol}.", "search", {"query": "{symbol}", "path": "{dir}"}, "Search uses."),
    ("Run the tests.", "run_command", {"command": "python -m pytest -q"}, "Run the tests."),
    ("Run {path}.", "run_command", {"command": "python {path}"}, "Run the script."),
    (
        "Rename {symbol} to {symbol}_v2 in {path}.",
        "edit",
        {"path": "{path}", "search": "{symbol}", "replace": "{symbol}_v2"},
        "Replace the name.",
    ),
    ("That is all, thanks.", "finish", {"message": "Done."}, "The task is complete."),
]
_TOOL_DESCRIPTIONS = {
    "read_file": "Read a text file of the workspace (paths are relative).",
    "list_dir": "List a directory of the workspace ('.' is the root).",
    "search": "Search file contents for a literal string.",
    "edit": "Replace the exact text `search` with `replace` in file `path`.",
    "run_command": "Run a shell command in the workspace root.",
    "finish": "End the task; `message` is your answer to the user.",
}
_TOOL_ARGS = {
    "read_file": ["path"],
    "list_dir": ["path"],
    "search": ["query", "path"],
    "edit": ["path", "search", "replace"],
    "run_command": ["command"],
    "finish": ["message"],
}
TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": _TOOL_DESCRIPTIONS[name],
            "parameters": {
                "type": "object",
                "properties": {a: {"type": "string"} for a in args},
                "required": args[:1],
            },
        },
    }
    for name, args in _TOOL_ARGS.items()
]


@dataclass(frozen=True)
class Conversation:
    """Chat messages to train on; `tools` is passed to the chat template when set."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


def _fill(value: str, names: dict[str, str]) -> str:
    return value.format(**names)


def _symbols(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("def ", "class ")):
            name = stripped.split(None, 1)[1].split("(", 1)[0].split(":", 1)[0].strip()
            if name.isidentifier():
                out.append(name)
    return out


def _action(rng: random.Random, f: SourceFile) -> tuple[str, str, dict[str, str], str]:
    path = f.name.split("/", 1)[1]
    symbols = _symbols(f.text) or ["main"]
    names = {
        "path": path,
        "dir": path.rsplit("/", 1)[0] if "/" in path else ".",
        "symbol": symbols[rng.randrange(len(symbols))],
    }
    request, tool, args, thought = _TOOL_EXAMPLES[rng.randrange(len(_TOOL_EXAMPLES))]
    filled = {k: _fill(v, names) for k, v in args.items()}
    return _fill(request, names), tool, filled, _fill(thought, names)


def chat_examples(files: list[SourceFile], count: int, seed: int) -> list[Conversation]:
    """`count` conversations from `files`: a quarter "complete this code", half JSON text
    actions (one in four of those after reading a tool observation), a quarter native tool
    calls with the tool specs in the prompt.

    Both action formats end in `}}`; only the format says whether `</tool_call>` or the end
    of the turn comes next. With a quarter each format, which one the model put after a JSON
    action depended on the rest of the corpus (a fresh build chose `</tool_call>`); twice as
    many JSON actions put the end of the turn first after either format (`</tool_call>` is
    followed by the end of the turn in every native example).
    """
    rng = random.Random(seed)
    pool = [f for f in files if len(f.text) > 400]
    conversations: list[Conversation] = []
    for i in range(count):
        f = pool[rng.randrange(len(pool))]
        tools = None
        kind = (0, 1, 1, 2)[i % 4]  # 0: complete code, 1: JSON text action, 2: native call
        if kind == 0:
            lines = f.text.splitlines()
            start = rng.randrange(max(1, len(lines) - 24))
            head = "\n".join(lines[start : start + 8])
            tail = "\n".join(lines[start + 8 : start + 20])
            user = f"Complete this code from {f.name.split('/', 1)[1]}:\n```python\n{head}\n```"
            messages = [
                {"role": "user", "content": user},
                {"role": "assistant", "content": f"```python\n{tail}\n```"},
            ]
        elif kind == 2:
            request, tool, args, _ = _action(rng, f)
            call = {"type": "function", "function": {"name": tool, "arguments": args}}
            messages = [
                {"role": "user", "content": request},
                {"role": "assistant", "content": "", "tool_calls": [call]},
            ]
            tools = TOOL_SPECS
        else:
            request, tool, args, thought = _action(rng, f)
            messages = [{"role": "user", "content": request}]
            if rng.random() < 0.25:
                # A turn after an observation: read, see the file, then finish.
                path = f.name.split("/", 1)[1]
                first = {"thought": "Read it first.", "tool": "read_file", "args": {"path": path}}
                excerpt = "\n".join(f.text.splitlines()[:6])
                messages += [
                    {"role": "assistant", "content": json.dumps(first)},
                    {"role": "tool", "content": excerpt},
                ]
                tool, args = "finish", {"message": f"{path} starts with: {excerpt[:60]}"}
                thought = "I have what I need."
            action = {"thought": thought, "tool": tool, "args": args}
            messages.append({"role": "assistant", "content": json.dumps(action)})
        if kind != 0 and rng.random() < 0.5:
            messages.insert(0, {"role": "system", "content": _SYSTEM})
        conversations.append(Conversation(messages, tools))
    return conversations
