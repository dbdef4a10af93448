"""The agent model: the dev model continued-pretrained on oracle agent traces.

    apprentice model build-agent [--base DIR] [--out DIR] [--traces N] [--steps N] [--copy-steps N]
    build_agent_model(AgentModelConfig(base=..., out=...))  # -> the manifest (a dict)

Composer 2's first stage, for the dev model, in two parts. First copy rows (copyrows.py: a
file, its faulty line quoted -- and, in the dictated tier, the line it should be -- the edit
action copied from them), the skill every edit needs and the traces alone do not teach a
model this small; then the whole model (not an adapter) trains on traces the product's own
harness made (traces.py: an oracle solving one-line bugs of the dictated tier by default, or
the located one, on modules cut from the dev model's corpus, never from a task repository),
with the loss on the model's replies only (the prompt is context), copy rows beside. Both
parts add corpus code rows each step so the model keeps writing code. The manifest
(`apprentice-agent-model.json`) records what to check before trusting it: the held-out code
loss before and after (forgetting), the replies' loss on held-out traces, how many held-out
traces greedy decoding answers with exactly the oracle's edit (and with its path and line),
and how many held-out copy rows it copies exactly. A Hugging Face model folder, as the dev
model's, written atomically.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from ground.progress import Progress
from learner.synth.statements import FROM_PATCH
from modelbuild.agent.copyrows import copy_row, corpus_chunks, exact_copies, path_words
from modelbuild.agent.traces import Trace, make_traces
from modelbuild.dev import MANIFEST as DEV_MANIFEST
from modelbuild.dev import build as dev
from modelbuild.dev import corpus
from modelbuild.dev.tokenizer import IM_END
from modelbuild.dev.train import DevTrainConfig, evaluate, lr_at, param_groups

MANIFEST = "apprentice-agent-model.json"
QUOTED = 0.5  # share of train copy rows whose line holds a `"` (copyrows.py says why)


@dataclass(frozen=True)
class AgentModelConfig:
    """What `build_agent_model` builds. Defaults: ~70 minutes on 2 CPU cores (31 of copy rows)."""

    base: Path  # a dev model folder (apprentice model build-dev)
    out: Path
    traces: int = 3000  # traces asked for (the corpus gives ~1,100 after the held-out ones)
    eval_traces: int = 32  # held-out traces (other modules): loss and exact-answer rate
    steps: int = 700
    batch_size: int = 8  # traces per step
    code_rows: int = 2  # corpus code rows per step (against forgetting)
    lr: float = 2e-3
    statement: str = "dictated"  # the traces' and copy rows' tier: "dictated" or "located"
    whole_share: float = 0.3  # rows trained through the finish reply; the rest end after the edit
    copy_steps: int = 1500  # copy-row steps before the traces (copyrows.py); 0: none
    copy_batch: int = 16  # copy rows per copy step
    copy_lr: float = 1e-3
    copy_beside: int = 4  # copy rows in each trace step too (the skill is kept)
    eval_copies: int = 64  # held-out copy rows measured before and after
    seed: int = 0

    def __post_init__(self) -> None:
        if self.traces < 1 or self.eval_traces < 1:
            raise ValueError("traces and eval_traces must be >= 1")
        if min(self.code_rows, self.copy_steps, self.copy_beside, self.eval_copies) < 0:
            raise ValueError("code_rows, copy_steps, copy_beside and eval_copies must be >= 0")
        if self.statement not in FROM_PATCH:
            raise ValueError(f"statement must be dictated or located, not {self.statement!r}")
        if self.copy_batch < 1 or self.copy_lr <= 0:
            raise ValueError("copy_batch must be >= 1 and copy_lr > 0")
        DevTrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr)


def encode(tokenizer: Any, trace: Trace, max_length: int) -> tuple[list[int], list[int]]:
    """Token ids of the trace and its labels: the ids inside the replies' spans, else -100."""
    enc = tokenizer(trace.text, add_special_tokens=False, return_offsets_mapping=True)
    ids, labels = enc["input_ids"], []
    for token, (start, end) in zip(ids, enc["offset_mapping"], strict=True):
        inside = any(s <= start and end <= e for s, e in trace.spans) and end > start
        labels.append(token if inside else -100)
    return ids[:max_length], labels[:max_length]


def padded_batch(rows: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """(ids, labels) rows right-padded into one batch (bench/copy_probe.py uses it too)."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (row_ids, row_labels) in enumerate(rows):
        ids[i, : len(row_ids)] = torch.tensor(row_ids)
        labels[i, : len(row_labels)] = torch.tensor(row_labels)
        mask[i, : len(row_ids)] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


@torch.no_grad()
def reply_loss(model: Any, rows: list[tuple[list[int], list[int]]], pad_id: int) -> float:
    """Mean loss per reply token over `rows`."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), 4):
        batch = padded_batch(rows[start : start + 4], pad_id)
        n = int((batch["labels"][:, 1:] != -100).sum())
        total += model(**batch).loss.item() * n
        count += n
    return total / max(count, 1)


@torch.no_grad()
def greedy_edits(model: Any, tokenizer: Any, traces: list[Trace]) -> dict[str, int]:
    """Held-out traces whose first reply greedy decoding writes exactly (the oracle's edit),
    and those whose reply is right up to `replace` (the right file and line to change)."""
    model.eval()
    exact = located = 0
    for trace in traces:
        start, end = trace.spans[0]
        prompt = tokenizer(trace.text[:start], add_special_tokens=False, return_tensors="pt")
        want = trace.text[start:end]
        budget = len(tokenizer(want, add_special_tokens=False)["input_ids"]) + 2
        out = model.generate(**prompt, max_new_tokens=budget, do_sample=False)
        got = tokenizer.decode(out[0, prompt["input_ids"].shape[1] :], skip_special_tokens=False)
        exact += got.startswith(want.removesuffix(IM_END).rstrip())
        located += got.startswith(want.partition('"replace":')[0])
    return {"heldout_exact_edits": exact, "heldout_located_edits": located}


def build_agent_model(cfg: AgentModelConfig, console: Console | None = None) -> dict[str, Any]:
    """Train the agent model into cfg.out (replacing what is there); returns its manifest."""
    console = console or Console(stderr=True)
    started = time.perf_counter()
    base = cfg.base.expanduser().resolve()
    if not (base / "config.json").is_file():
        raise ValueError(f"{base} holds no model (no config.json): build the dev model first")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    window = int(model.config.max_position_embeddings)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    files = corpus.collect()
    console.print(f"traces: making {cfg.traces + cfg.eval_traces} through the agent loop")
    traces = make_traces(tokenizer, count=cfg.traces + cfg.eval_traces, seed=cfg.seed,
                         context_window=window, files=files, statement=cfg.statement)  # fmt: skip
    if len(traces) < cfg.eval_traces + 1:
        raise ValueError(f"the corpus gave only {len(traces)} traces")
    held_paths = {t.path for t in traces[: cfg.eval_traces]}
    held = traces[: cfg.eval_traces]
    train_traces = [t for t in traces[cfg.eval_traces :] if t.path not in held_paths]
    train_rows = [encode(tokenizer, t, window) for t in train_traces]
    held_rows = [encode(tokenizer, t, window) for t in held]
    code = dev.eval_rows(files, tokenizer, dev.DevModelConfig(out=cfg.out))[0]
    code_train = _code_rows(files, tokenizer, cfg)
    copies = Copies(tokenizer, files, cfg)

    def measure() -> dict[str, float]:
        return {
            "heldout_code_loss": evaluate(model, code),
            "heldout_reply_loss": reply_loss(model, held_rows, pad_id),
            **greedy_edits(model, tokenizer, held),
            "heldout_exact_copies": exact_copies(model, copies.held, pad_id),
        }

    before = measure()
    console.print(f"before: {json.dumps({k: round(v, 4) for k, v in before.items()})}")
    _copy_warmup(model, copies, code_train, cfg, pad_id, console)
    losses = _train(model, train_rows, code_train, copies, cfg, pad_id, console)
    model = model.to(torch.bfloat16).float()  # measure exactly what is saved
    after = measure()
    console.print(f"after: {json.dumps({k: round(v, 4) for k, v in after.items()})}")
    kinds: dict[str, int] = {}
    for t in train_traces:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    manifest = {
        "builder": "apprentice model build-agent",
        "base": str(base),
        "base_manifest": json.loads((base / DEV_MANIFEST).read_text())
        if (base / DEV_MANIFEST).is_file() else None,
        "train_traces": len(train_rows), "heldout_traces": len(held_rows), "kinds": kinds,
        "reply_tokens": sum(sum(x != -100 for x in labels) for _, labels in train_rows),
        "before": before, "after": after, "final_loss": losses[-1] if losses else None,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "seconds": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    _save(model, base, cfg.out.expanduser().resolve(), manifest)
    return manifest


class Copies:
    """Copy rows (copyrows.py): seeded, train files under invented paths; a held-out set."""

    def __init__(self, tokenizer: Any, files: list[corpus.SourceFile], cfg: AgentModelConfig):
        self.tokenizer, self.rng = tokenizer, random.Random(cfg.seed + 11)
        self.dictated = cfg.statement == "dictated"
        self.train, self.words = corpus_chunks(files, held_out=False), path_words(files)
        held = corpus_chunks(files, held_out=True)
        self.held = [copy_row(tokenizer, held, random.Random(i), self.dictated)
                     for i in range(cfg.eval_copies)]  # fmt: skip

    def rows(self, n: int) -> list[tuple[list[int], list[int]]]:
        args = (self.tokenizer, self.train, self.rng, self.dictated, self.words, QUOTED)
        return [copy_row(*args) for _ in range(n)]


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}[/bold]"), BarColumn(),
                    TextColumn("{task.completed}/{task.total} steps"),
                    TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console)  # fmt: skip


def _code_loss(model, code_rows, step: int, n: int) -> torch.Tensor | float:
    """Half the loss of `n` corpus code rows (against forgetting), 0 without them."""
    if code_rows is None:
        return 0.0
    at = (step * n) % max(1, code_rows.shape[0] - n)
    chunk = code_rows[at : at + n]
    return 0.5 * model(input_ids=chunk, labels=chunk).loss


def _copy_warmup(model, copies: Copies, code_rows, cfg: AgentModelConfig, pad_id, console):
    """cfg.copy_steps steps of copy rows (constant lr, as bench/copy_probe.py measured)."""
    if not cfg.copy_steps:
        return
    torch.manual_seed(cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.copy_lr, weight_decay=0.0)
    model.train()
    with _progress(console) as bar:
        task = bar.add_task("copy rows", total=cfg.copy_steps, loss=float("nan"))
        for step in range(cfg.copy_steps):
            loss = model(**padded_batch(copies.rows(cfg.copy_batch), pad_id)).loss
            total = loss + _code_loss(model, code_rows, step, cfg.code_rows)
            optimizer.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            bar.update(task, advance=1, loss=loss.item())
    model.eval()
    console.print(f"copy rows: {exact_copies(model, copies.held, pad_id)} of "
                  f"{len(copies.held)} held-out rows copied exactly")  # fmt: skip


def _code_rows(files: list[corpus.SourceFile], tokenizer: Any, cfg: AgentModelConfig):
    """Code rows of the corpus's train files (as the dev model saw), enough for both parts."""
    if not cfg.code_rows:
        return None
    steps = max(cfg.copy_steps + cfg.steps, 1)
    rows = dev.DevModelConfig(out=cfg.out, steps=steps, seed=cfg.seed + 7,
                              batch_size=cfg.code_rows, chat_fraction=0.0)  # fmt: skip
    return dev.training_rows(files, tokenizer, rows)


def shared_prefix(rows: list[tuple[list[int], list[int]]]) -> int:
    """Tokens every row starts with (the system prompt), none of them labelled."""
    first = rows[0][0]
    n = len(first)
    for ids, _ in rows[1:]:
        pairs = enumerate(zip(first, ids, strict=False))
        n = min(n, next((i for i, (a, b) in pairs if a != b), len(ids)))
    labelled = [i for i, label in enumerate(rows[0][1]) if label != -100]
    return max(0, min(n, labelled[0] if labelled else n) - 1)


def first_reply_end(labels: list[int]) -> int:
    """The index just past the first reply's labelled tokens (the edit)."""
    start = next(i for i, label in enumerate(labels) if label != -100)
    return next((i for i in range(start, len(labels)) if labels[i] == -100), len(labels))


def _step_loss(model, prefix: torch.Tensor, rows, pad_id: int) -> torch.Tensor:
    """The batch's loss, the shared prefix encoded once without gradients (its keys and
    values are the same for every row; only the rows' own tokens are trained through)."""
    with torch.no_grad():
        cache = model(input_ids=prefix[None], use_cache=True).cache
    grown = DynamicCache()
    for i, layer in enumerate(cache.layers):
        shape = (len(rows), -1, -1, -1)
        grown.update(layer.keys.expand(*shape).contiguous(),
                     layer.values.expand(*shape).contiguous(), i)  # fmt: skip
    batch = padded_batch(rows, pad_id)
    ones = torch.ones((len(rows), prefix.shape[0]), dtype=torch.long)
    mask = torch.cat([ones, batch["attention_mask"]], dim=1)
    return model(input_ids=batch["input_ids"], labels=batch["labels"], attention_mask=mask,
                 cache=grown).loss  # fmt: skip


def _train(model, rows, code_rows, copies: Copies, cfg: AgentModelConfig, pad_id: int,
           console) -> list[float]:  # fmt: skip
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    tcfg = DevTrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr)
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=cfg.lr, betas=(0.9, 0.95))
    cut = shared_prefix(rows)
    prefix = torch.tensor(rows[0][0][:cut])
    order: list[int] = []
    losses: list[float] = []
    model.train()
    with _progress(console) as bar:
        task = bar.add_task("agent traces", total=cfg.steps, loss=float("nan"))
        for step in range(cfg.steps):
            if len(order) < cfg.batch_size:
                more = list(range(len(rows)))
                rng.shuffle(more)
                order += more
            picked, order = order[: cfg.batch_size], order[cfg.batch_size :]
            batch = []
            for i in picked:  # most rows end after the edit: the finish reply is easy
                ids, labels = rows[i]
                end = len(ids) if rng.random() < cfg.whole_share else first_reply_end(labels)
                batch.append((ids[cut:end], labels[cut:end]))
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, tcfg)
            loss = _step_loss(model, prefix, batch, pad_id)
            loss = loss + _code_loss(model, code_rows, cfg.copy_steps + step, cfg.code_rows)
            if cfg.copy_beside:
                loss = loss + model(**padded_batch(copies.rows(cfg.copy_beside), pad_id)).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            bar.update(task, advance=1, loss=losses[-1])
    model.eval()
    return losses


def _save(model: Any, base: Path, out: Path, manifest: dict[str, Any]) -> None:
    """The base's folder (tokenizer, template) with the new weights, swapped in atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for path in base.iterdir():
            if path.is_file() and path.name != DEV_MANIFEST and path.suffix != ".safetensors":
                shutil.copy2(path, tmp / path.name)
        model.to(torch.bfloat16).save_pretrained(tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        dev.publish_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
