"""The dev model's training text: Python source on disk, plus a little chat-formatted data.

Sources: the standard library of the running interpreter (`sysconfig.get_paths()["stdlib"]`,
without site-packages) and this repository's own `.py` files. Files are listed in a fixed
order (by their corpus-relative name) and split into train / held-out by a hash of that name,
so the split never depends on the seed or on which files exist besides.

Used by build.py; try it with
`.venv/bin/python -c "from agent_server.models.devmodel.corpus import *; print(len(collect()))"`.
"""

from __future__ import annotations

import hashlib
import json
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

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
    return Path(__file__).resolve().parents[3]


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
    """Every corpus file, sorted by name (deterministic order, independent of the disk)."""
    stdlib = stdlib_root or Path(sysconfig.get_paths()["stdlib"])
    project = project_root or default_project_root()
    files = _python_files(stdlib, "stdlib") + _python_files(project, "project")
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
# The agent talks to the model in chat turns and asks for JSON actions under a schema. A few
# such conversations teach the format and, above all, to end the assistant turn.

_SYSTEM = "You are Apprentice, a coding assistant. Answer with code or a JSON action."
_TOOL_EXAMPLES: list[tuple[str, str, dict[str, object]]] = [
    ("Show me {path}.", "read_file", {"path": "{path}"}),
    ("Open {path} and read it.", "read_file", {"path": "{path}"}),
    ("List the files in {dir}.", "list_files", {"path": "{dir}"}),
    ("Where is {symbol} defined?", "search", {"query": "def {symbol}"}),
    ("Find uses of {symbol}.", "search", {"query": "{symbol}"}),
    ("Run the tests.", "run_command", {"command": "python -m pytest -q"}),
    ("Run {path}.", "run_command", {"command": "python {path}"}),
    (
        "Rename {symbol} to {symbol}_v2 in {path}.",
        "apply_edit",
        {"path": "{path}", "old": "{symbol}", "new": "{symbol}_v2"},
    ),
    ("That is all, thanks.", "finish", {"message": "Done."}),
]


def _fill(value: object, names: dict[str, str]) -> object:
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def _symbols(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("def ", "class ")):
            name = stripped.split(None, 1)[1].split("(", 1)[0].split(":", 1)[0].strip()
            if name.isidentifier():
                out.append(name)
    return out


def chat_examples(files: list[SourceFile], count: int, seed: int) -> list[list[dict[str, str]]]:
    """`count` conversations from `files`: half "complete this code", half JSON actions."""
    rng = random.Random(seed)
    pool = [f for f in files if len(f.text) > 400]
    conversations: list[list[dict[str, str]]] = []
    for i in range(count):
        f = pool[rng.randrange(len(pool))]
        path = f.name.split("/", 1)[1]
        if i % 2 == 0:
            lines = f.text.splitlines()
            start = rng.randrange(max(1, len(lines) - 24))
            head = "\n".join(lines[start : start + 8])
            tail = "\n".join(lines[start + 8 : start + 20])
            user = f"Complete this code from {path}:\n```python\n{head}\n```"
            reply = f"```python\n{tail}\n```"
        else:
            symbols = _symbols(f.text) or ["main"]
            names = {
                "path": path,
                "dir": path.rsplit("/", 1)[0] if "/" in path else ".",
                "symbol": symbols[rng.randrange(len(symbols))],
            }
            request, tool, args = _TOOL_EXAMPLES[rng.randrange(len(_TOOL_EXAMPLES))]
            user = request.format(**names)
            reply = json.dumps({"tool": tool, "args": _fill(args, names)})
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
        if rng.random() < 0.5:
            messages.insert(0, {"role": "system", "content": _SYSTEM})
        conversations.append(messages)
    return conversations
