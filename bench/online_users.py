"""The simulated people and the code of bench/online_learning.py: prompts, users, perplexity.

- `CodeFiles(folder)`: the .py files under a folder, its subfolders included (default: the
  standard library's top level), split for good by a hash of the file's path under the
  folder: `train` files give the prompts whose outcomes the learner trains on; `heldout` files
  (one in five) are never trained on: they give the intent user's measured prompts and the
  perplexity text.
- `code_prompts(files, n, seed, context=15, quiet_share=0.0)`: `Prompt`s: `context` lines of
  a file, cut before a non-blank line, the prefix ending in that line's indentation;
  `Prompt.next_line` is the real line. A `quiet_share` of them are cut before a blank line
  instead (`quiet`): the person was about to write nothing, the right answer is silence.
- `RegexUser(pattern)`: accepts a completion when it matches (easy to game: `#  0x` junk
  everywhere matched `[0-9]`). `IntentUser()`: accepts exactly when the completion's first
  line is the file's real next line, modulo surrounding whitespace (nothing, at a quiet
  prompt); when it does not, it writes the real line (`writes`: what the editor reports as
  `written`; "" at a quiet prompt).
- `Perplexity(model_dir, files)`: held-out code perplexity of the base model, or of the base
  with a peft adapter folder (the served policy): exp(mean next-token NLL) over the first
  `tokens` tokens of each held-out file, transformers + peft in float32 on the CPU.
Not a test; run the bench: .venv/bin/python bench/online_learning.py --help
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

HELDOUT_ONE_IN = 5  # one file in five is held out, by a hash of its name


@dataclass(frozen=True)
class Prompt:
    path: str  # the file's path under the code folder, as the editor would send it
    prefix: str  # text before the cursor
    next_line: str  # the line the person was about to write
    quiet: bool = False  # about to write nothing (a blank line)


class CodeFiles:
    """Python files of `folder` with at least 40 lines, split into train / held-out."""

    def __init__(self, folder: Path | None = None) -> None:
        root = folder or Path(sysconfig.get_paths()["stdlib"])
        self.root = root
        self.train: list[Path] = []
        self.heldout: list[Path] = []
        found = sorted(root.rglob("*.py")) if folder else sorted(root.glob("*.py"))
        for path in found:
            if len(path.read_text(errors="replace").splitlines()) < 40:
                continue
            name = path.name if folder is None else str(path.relative_to(root))
            digest = int(hashlib.sha1(name.encode()).hexdigest(), 16)
            (self.heldout if digest % HELDOUT_ONE_IN == 0 else self.train).append(path)
        if len(self.train) < 2 or len(self.heldout) < 2:
            raise SystemExit(f"{root}: too few .py files of 40+ lines for a train/held-out split")


def code_prompts(files: list[Path], n: int, seed: int, *, context: int = 15,
                 quiet_share: float = 0.0, root: Path | None = None) -> list[Prompt]:  # fmt: skip
    """n prompts: `context` lines of a file cut before a non-blank line, its indent typed; a
    `quiet_share` of them cut before a blank line after a non-blank one (nothing typed)."""
    rng = random.Random(seed)
    texts: dict[Path, list[str]] = {}  # each file read once, however many cuts are tried
    out: list[Prompt] = []
    for _ in range(n):
        # Whether this prompt is quiet is drawn once, then a cut of that kind is searched
        # for: drawing it again per try would make quiet prompts as rare as blank lines.
        quiet = rng.random() < quiet_share
        while True:
            path = rng.choice(files)
            if path not in texts:
                texts[path] = path.read_text(errors="replace").splitlines()
            lines = texts[path]
            cut = rng.randrange(10, len(lines) - 5)
            blank, after_text = not lines[cut].strip(), bool(lines[cut - 1].strip())
            if blank == quiet and (after_text or not quiet):
                break
        indent = "" if quiet else re.match(r"\s*", lines[cut]).group(0)  # type: ignore[union-attr]
        prefix = "\n".join(lines[max(0, cut - context) : cut]) + "\n" + indent
        name = str(path.relative_to(root)) if root else path.name
        out.append(Prompt(name, prefix, lines[cut], quiet))
    return out


class User(Protocol):
    name: str

    def accepts(self, prompt: Prompt, completion: str) -> bool: ...

    def writes(self, prompt: Prompt) -> str | None: ...


class RegexUser:
    """Accepts a completion whose text matches the pattern anywhere."""

    def __init__(self, pattern: str) -> None:
        self.name, self.pattern = f"regex:{pattern}", re.compile(pattern)

    def accepts(self, prompt: Prompt, completion: str) -> bool:
        return bool(self.pattern.search(completion))

    def writes(self, prompt: Prompt) -> str | None:
        return None  # it judges text; it has no intent to write down


class IntentUser:
    """Accepts exactly what the person was about to write: the first line of the completion
    (after the indentation already typed) equals the file's real next line, both stripped."""

    name = "intent"

    def accepts(self, prompt: Prompt, completion: str) -> bool:
        first = completion.split("\n", 1)[0]
        return not prompt.quiet and first.strip() == prompt.next_line.strip()

    def writes(self, prompt: Prompt) -> str:
        """What the person types at the cursor when they do not take the completion: the
        real line after the indentation already typed (nothing at a quiet prompt)."""
        return "" if prompt.quiet else prompt.next_line.strip()


class Perplexity:
    """exp(mean NLL) of the first `tokens` tokens of each file, base or base + adapter."""

    def __init__(self, model_dir: Path, files: list[Path], *, tokens: int = 256) -> None:
        import torch
        from transformers import AutoTokenizer

        from learner.train import load_base

        self.model_dir = model_dir
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.chunks = []
        for path in files:
            ids = tokenizer(path.read_text(errors="replace"))["input_ids"][:tokens]
            if len(ids) >= 16:
                self.chunks.append(torch.tensor([ids]))
        self.base = load_base(model_dir)
        self.tokens = sum(c.shape[1] - 1 for c in self.chunks)

    def __call__(self, adapter_dir: Path | None) -> float:
        import torch
        from peft import PeftModel

        model = self.base
        if adapter_dir is not None:
            model = PeftModel.from_pretrained(self.base, str(adapter_dir)).eval()
        total = 0.0
        try:
            with torch.no_grad():
                for ids in self.chunks:
                    out = model(input_ids=ids, labels=ids)  # mean over ids.shape[1] - 1
                    total += float(out.loss) * (ids.shape[1] - 1)
        finally:
            if adapter_dir is not None:
                model.unload()  # the base's own modules back, without the LoRA layers
        return math.exp(total / self.tokens)
