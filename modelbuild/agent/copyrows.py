"""Copy rows: the one skill every edit action needs, taught before the agent traces.

    rows = [copy_row(tokenizer, chunks, rng) for _ in range(16)]  # (ids, labels) each
    copy_row(tokenizer, chunks, rng, dictated=True)  # the dictated tier's row
    copy_row(tokenizer, chunks, rng, words=path_words(files))  # under an invented path
    copy_row(tokenizer, chunks, rng, quoted=0.5)  # half the rows copy a line with a `"`
    exact_copies(model, rows, pad_id)  # how many greedy decoding copies token for token

An edit action copies a path and a line from its prompt into `path` and `search`. A 5M model
does not learn that from ~1,000 agent traces (docs/tasks.md: 0 of 32 held-out edits exact),
but it does from a few thousand short rows that are nothing else (bench/copy_probe.py: 0 to
49 of 100 held-out lines in 2,500 steps). A copy row is shaped like the located tier's first
turn, without the chat frame: the statement's "The faulty line: `...`", the file shown under
its path, then the edit action up to `"path":"`; the labels are the path, the line (escaped
as JSON escapes it) and what follows it up to the `replace` value (the agent model's
replies sometimes closed the action after `search` when the labels stopped at its quote).
A dictated row (the dictated tier's first turn) shows the file with a slip in the line (an
operator, comparison, boolean or number changed, as learner/synth/mutate.py's kinds change
them), quotes the slipped line and then the line as it should read; its labels run on through
the whole action: the path, the slipped line as `search`, the right one as `replace`, `"}}`.
Chunks come from the dev model's corpus (corpus.collect), train rows from its train files
and measured rows from its held-out files, so a line copied right was never memorized.
Train rows show their chunk under an **invented path** (`invented_path`: random words of
the train files' text, "ledger/fold_quota.py"): under the corpus's own ~1,800 paths
the agent model recalled a path it knew instead of copying the one shown ("token.py" ->
"tokenize.py", the shop's "shop/prices.py" -> "shop/duces.py"); a path seen once must be
copied. Measured rows keep the held-out files' real paths (never trained on).
Train rows also copy a line holding a double quote more often than the corpus has them
(`quoted`): JSON writes it `\\"`, and only ~1 in 8 corpus lines holds one (the standard
library quotes with `'`), so the agent model miscopied the shop's `return "hello " + name`
after the escape (`return \\"hello \\"__It should read...`).
Used by modelbuild/agent/pretrain.py.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import torch

from modelbuild.dev import corpus

CHUNK_LINES = (4, 10)  # lines of the file shown
_WORD = re.compile(r"\b[a-z]{3,10}\b")
ACTION = '{"thought":"fix the faulty line","tool":"edit","args":{"path":"'
# Slips a dictated row puts in its line: each pattern's match becomes its partner.
SLIPS = (
    ("==", "!="), ("!=", "=="), ("<=", "<"), (">=", ">"), (" < ", " <= "), (" > ", " >= "),
    (" + ", " - "), (" - ", " + "), (" * ", " + "), (" and ", " or "), (" or ", " and "),
    ("True", "False"), ("False", "True"), ("0", "1"), ("1", "2"),
)  # fmt: skip


def corpus_chunks(files: list[corpus.SourceFile], held_out: bool) -> list[tuple[str, list[str]]]:
    """(path, lines) of the corpus's held-out or train files, paths shaped as traces' are."""
    out = []
    for f in files:
        if f.held_out != held_out:
            continue
        parts = Path(f.name).parts
        path = "/".join(parts[-2:]) if len(parts) > 2 else parts[-1]
        lines = [line for line in f.text.splitlines() if len(line) <= 100]
        if len(lines) >= CHUNK_LINES[1]:
            out.append((path, lines))
    return out


def path_words(files: list[corpus.SourceFile]) -> list[str]:
    """Lower-case words (3-10 letters) of the train files (identifiers split at `_`)."""
    words: set[str] = set()
    for f in files:
        if not f.held_out:
            words.update(_WORD.findall(f.text.replace("_", " ")))
    return sorted(words)


def invented_path(words: list[str], rng: random.Random) -> str:
    """A path made of random `words`: 0-2 folders and a module of one or two words."""
    folders = [rng.choice(words) for _ in range(rng.choice((0, 1, 1, 2)))]
    stem = "_".join(rng.choice(words) for _ in range(rng.choice((1, 1, 2))))
    return "/".join([*folders, f"{stem}.py"])


def slip(line: str, rng: random.Random) -> str | None:
    """The line with one slip (SLIPS) at a random place it can go, None where none can."""
    found = [(i, old, new) for old, new in SLIPS for i in _places(line, old)]
    if not found:
        return None
    i, old, new = rng.choice(found)
    return line[:i] + new + line[i + len(old) :]


def _places(line: str, old: str) -> list[int]:
    return [i for i in range(len(line)) if line.startswith(old, i)]


def copy_row(
    tokenizer: Any, chunks: list[tuple[str, list[str]]], rng: random.Random,
    dictated: bool = False, words: list[str] | None = None, quoted: float = 0.0,
) -> tuple[list[int], list[int]]:  # fmt: skip
    """(ids, labels) of one copy row: labels on the path, the line and `,"replace":"` (a
    dictated row: on through the right line and `"}}`). With `words`, under an invented path
    instead of the chunk's own; with probability `quoted`, a line holding a `"`."""
    need_quote = rng.random() < quoted
    while True:
        path, lines = rng.choice(chunks)
        size = rng.randint(*CHUNK_LINES)
        at = rng.randrange(len(lines) - size + 1)
        shown = lines[at : at + size]
        targets = [s.strip() for s in shown if 8 <= len(s.strip()) <= 70]
        targets = [t for t in targets if not t.startswith("#")]
        if dictated:
            targets = [t for t in targets if any(old in t for old, _ in SLIPS)]
        if need_quote:
            targets = [t for t in targets if '"' in t]
        if targets:
            break
    right = rng.choice(targets)
    path = invented_path(words, rng) if words else path
    target = slip(right, rng) if dictated else right
    assert target is not None
    body = "\n".join(s.replace(right, target) if s.strip() == right else s for s in shown)
    told = f"\nIt should read: `{right}`" if dictated else ""
    prompt = (
        f"The fix belongs in {path} (not in the tests).\n\nThe faulty line: `{target}`{told}"
        f"\n\nThe file {path}:\n```\n{body}\n```\n{ACTION}"
    )
    tail = json.dumps(right) + "}}" if dictated else '"'
    text = prompt + f'{path}","search":{json.dumps(target)},"replace":{tail}'
    # One encoding of the whole row, as a trace's is (a token may span the prompt's end).
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    labels = [t if end > len(prompt) else -100 for t, (_, end) in zip(ids, offsets, strict=True)]
    return ids, labels


@torch.no_grad()
def exact_copies(model: Any, rows: list[tuple[list[int], list[int]]], pad_id: int) -> int:
    """Rows whose labelled tail greedy decoding writes token for token."""
    was_training = model.training
    model.eval()
    right = 0
    for ids, labels in rows:
        cut = labels.count(-100)  # the prompt, then the labelled copy
        answer = ids[cut:]
        prompt = torch.tensor([ids[:cut]])
        out = model.generate(
            prompt, max_new_tokens=len(answer), do_sample=False, pad_token_id=pad_id
        )
        right += out[0, cut:].tolist() == answer
    model.train(was_training)
    return right
