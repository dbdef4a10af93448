"""The person's repository as code to learn from: its files, split for good, cut into chunks.

    train, heldout = repo_chunks(config.code, encoder)   # Samples: continued pretraining

Continued pretraining on the person's own code teaches the model its names and idioms (the
first stage of the recipe this learner follows is continued pretraining on code, before RL).
The files are those git tracks in `code.repo` (`git ls-files`: nothing ignored, nothing
vendored that the person did not commit) with a code suffix, 200 B to 200 kB, read from the
working tree. A file is held out for good by a hash of its path (one in `heldout_one_in`):
its chunks are never trained on, they are what the gate's code verdict scores
(learner/gate.py `code_decision`: per held-out file, is the candidate's per-token logprob of
it higher than the serving policy's). Train files are cut into chunks of `chunk_tokens`
tokens; the chunk's first token is its prompt, the rest what the objective
(learner/demonstrate.py, named "code") makes likelier; `max_chunks` of them, chosen by a
seeded shuffle. Held-out files give their first chunk, `max_heldout_files` of them.
Tested in tests/learner/test_repo_code.py.
"""

from __future__ import annotations

import hashlib
import random
import subprocess
from pathlib import Path

from learner.config_code import CodeConfig
from learner.data import Sample
from learner.demos import Encoder

CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".lua", ".sh", ".sql",
})  # fmt: skip
MIN_BYTES, MAX_BYTES = 200, 200_000


class RepoError(ValueError):
    """The repository cannot be read as code to learn from; the message says why."""


def repo_files(repo: Path) -> list[str]:
    """Paths (relative, sorted) of the code files git tracks in `repo`."""
    if not (repo / ".git").exists():
        raise RepoError(f"{repo}: not a git repository")
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True,
                            check=False)  # fmt: skip
    if listed.returncode != 0:
        raise RepoError(f"{repo}: git ls-files failed: {listed.stderr.decode().strip()}")
    out = []
    for name in sorted(listed.stdout.decode("utf-8", "replace").split("\0")):
        path = repo / name
        if (name and path.suffix in CODE_SUFFIXES and path.is_file()
                and MIN_BYTES <= path.stat().st_size <= MAX_BYTES):  # fmt: skip
            out.append(name)
    return out


def is_heldout_file(name: str, one_in: int) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % one_in == 0


def _chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size) if len(ids[i : i + size]) > 16]


def _sample(name: str, k: int, chunk: list[int], heldout: bool) -> Sample:
    return Sample(suggestion_id=f"code:{name}:{k}", desirable=True, weight=1.0,
                  prompt_ids=chunk[:1], completion_ids=chunk[1:], behaviour_logprobs=[],
                  adapter_version=0, outcome="code", heldout=heldout)  # fmt: skip


def repo_chunks(config: CodeConfig, encoder: Encoder) -> tuple[list[Sample], list[Sample]]:
    """(train chunks, held-out chunks) of `config.repo` (module docstring)."""
    if config.repo is None:
        return [], []
    repo = Path(config.repo).expanduser()
    names = repo_files(repo)
    if not names:
        raise RepoError(f"{repo}: git tracks no code files to learn from")
    train: list[Sample] = []
    heldout: list[Sample] = []
    for name in names:
        text = (repo / name).read_text(encoding="utf-8", errors="replace")
        chunks = _chunks(encoder.encode(text), config.chunk_tokens)
        if is_heldout_file(name, config.heldout_one_in):
            heldout += [_sample(name, 0, chunks[0], True)] if chunks else []
        else:
            train += [_sample(name, k, c, False) for k, c in enumerate(chunks)]
    random.Random(config.seed).shuffle(train)
    return train[: config.max_chunks], heldout[: config.max_heldout_files]
