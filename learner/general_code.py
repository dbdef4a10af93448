"""General code the gate measures perplexity on: a fixed slice of Python's standard library.

    chunks = code_chunks(tokenizer, files=8, tokens=256)   # lists of token ids

An update that makes the person's completions likelier must not make the model worse at code
in general (forgetting). The standard library is code this project did not write or shape,
present wherever Python is, and the same on every run: the `files` .py files whose names hash
lowest (sha256 of the path under the stdlib folder, so the choice is stable across machines
of one Python version), each read from its first line of code after the module docstring and
comments, its first `tokens` tokens. Tested through the gate in tests/learner/test_gate.py.
"""

from __future__ import annotations

import functools
import hashlib
import sysconfig
from pathlib import Path
from typing import Any


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@functools.lru_cache(maxsize=8)
def chosen_files(folder: str, files: int) -> tuple[Path, ...]:
    """The `files` top-level .py files of `folder` with the lowest name hashes."""
    root = Path(folder)
    found = [p for p in root.glob("*.py") if p.is_file() and p.stat().st_size > 2_000]
    found.sort(key=lambda p: hashlib.sha256(p.name.encode()).hexdigest())
    return tuple(found[:files])


def _body(text: str) -> str:
    """The text from its first line that is code (past the docstring, comments, blanks)."""
    lines = text.splitlines(keepends=True)
    i, in_doc = 0, None
    while i < len(lines):
        stripped = lines[i].strip()
        if in_doc:
            if in_doc in stripped:
                in_doc = None
        elif stripped.startswith(('"""', "'''")):
            quote = stripped[:3]
            if stripped.count(quote) < 2 or len(stripped) == 3:
                in_doc = quote
        elif stripped and not stripped.startswith("#"):
            break
        i += 1
    return "".join(lines[i:])


def code_chunks(
    tokenizer: Any, *, files: int, tokens: int, folder: Path | None = None
) -> list[list[int]]:
    """Token ids of the chosen files' first `tokens` tokens of code (one list per file)."""
    where = folder or stdlib_dir()
    out = []
    for path in chosen_files(str(where), files):
        ids = tokenizer.encode(_body(path.read_text(encoding="utf-8", errors="replace")),
                               add_special_tokens=False)  # fmt: skip
        if len(ids) >= 16:
            out.append(list(ids[:tokens]))
    if not out:
        raise ValueError(f"no Python files of over 2 kB in {where} to measure perplexity on")
    return out
