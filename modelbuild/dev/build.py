"""Build the dev model: tokenizer + tiny Llama + CPU continued pretraining, written atomically.

Run it as `apprentice model build-dev [--out DIR] [--steps N] [--seed S]`, or from Python:
`build_dev_model(DevModelConfig(out=Path("..."), steps=300))`. The folder it writes is a
Hugging Face model folder that transformers and vLLM load as is (config.json,
model.safetensors in bfloat16, tokenizer.json, tokenizer_config.json + chat_template.jinja,
generation_config.json) plus `apprentice-dev-model.json`, the manifest: seed, steps,
held-out losses before/after, parameter count, corpus digest, the builder's version hash,
and the build key of both (`build_key`: what a cached dev model is checked against).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
from transformers.utils import logging as hf_logging

from agent_server.models.chat_encoding import render_chat
from modelbuild.dev import corpus
from modelbuild.dev.tokenizer import (
    EOS,
    IM_END,
    TOOL_CALL_END,
    save_tokenizer,
    train_tokenizer,
    wrap,
)
from modelbuild.dev.train import (
    DevTrainConfig,
    encode_documents,
    evaluate,
    pack,
    train,
)

MANIFEST = "apprentice-dev-model.json"
DEFAULT_STEPS = 300


def builder_version() -> str:
    """Hash of this package's source: a model built by other code has another version."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def build_key(files: list[corpus.SourceFile]) -> str:
    """The cache key of a build: the builder's version and the digest of its corpus `files`
    (corpus.collect). A model whose manifest holds another key is stale: other code built it,
    or other text (another interpreter's standard library, the tree on disk without git)."""
    h = hashlib.sha256(f"{builder_version()}\0{corpus.corpus_digest(files)}".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class DevModelConfig:
    """What `build_dev_model` builds. Defaults: ~5M parameters, 2-3 minutes on 2 CPU cores."""

    out: Path
    steps: int = DEFAULT_STEPS  # continued-pretraining steps; 0 = initialised weights only
    seed: int = 0  # model init, data order and chat sampling all follow it
    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 688
    num_layers: int = 4
    num_heads: int = 4  # head_dim = hidden / heads = 64: a size vLLM's CPU attention takes
    num_kv_heads: int = 2
    context_window: int = 2048  # max_position_embeddings: the window the system plans with
    seq_len: int = 256  # training row length (packed)
    # Tuned on these 2 cores at 300 steps (held-out code / chat loss): batch 8 at lr 1.5e-3
    # gave 5.01 / 3.64 against 5.47 / 4.28 for batch 4 at 1e-3 (~2x the time: ~2 min idle);
    # at batch 4, lr 1e-3 beat 2e-3, 3e-3 and 6e-3. seq 128 did as well as 256 but leaves the
    # model blind past 128 positions.
    batch_size: int = 8
    lr: float = 1.5e-3
    # Share of training tokens that are chat conversations: 0.3 over 0.15 cost no code loss
    # and taught the turn format (replies that open a JSON action and end the turn).
    chat_fraction: float = 0.3
    eval_rows: int = 24  # held-out rows of seq_len tokens
    tokenizer_sample_chars: int = 6_000_000
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    stdlib_root: Path | None = None  # default: this interpreter's standard library
    project_root: Path | None = None  # default: this repository

    def __post_init__(self) -> None:
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0 (0 = no training), got {self.steps}")
        if not 512 <= self.vocab_size <= 65536:
            raise ValueError(
                f"vocab_size must be in [512, 65536] (e.g. 4096), got {self.vocab_size}"
            )
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} must be a multiple of num_heads {self.num_heads}"
            )
        if (self.hidden_size // self.num_heads) % 16:
            raise ValueError(
                "head_dim (hidden_size / num_heads) must be a multiple of 16 for vLLM's CPU "
                f"attention; got {self.hidden_size // self.num_heads}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}"
            )
        if not 16 <= self.seq_len <= self.context_window:
            raise ValueError(
                f"seq_len must be in [16, context_window={self.context_window}], got {self.seq_len}"
            )
        if not 0 <= self.chat_fraction < 1:
            raise ValueError(f"chat_fraction must be in [0, 1), got {self.chat_fraction}")
        if self.eval_rows < 1 or self.threads < 1:
            raise ValueError("eval_rows and threads must be >= 1")
        DevTrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr)


@dataclass(frozen=True)
class BuildResult:
    out: Path
    params: int
    loss_before: float  # held-out code loss (nats/token) of the initialised model
    loss_after: float  # ... of the saved (bfloat16) model
    chat_loss_before: float  # held-out chat conversations, same measure
    chat_loss_after: float
    seconds: float
    manifest: dict[str, Any]


def training_rows(files, tokenizer, cfg: DevModelConfig) -> torch.Tensor:
    """Seeded mix of code files and chat conversations, packed; one pass covers all steps."""
    budget = cfg.steps * cfg.batch_size * cfg.seq_len
    train_files = [f for f in files if not f.held_out]
    random.Random(cfg.seed).shuffle(train_files)
    code_texts, chars = [], 0
    for f in train_files:  # ~3.5 chars per token on code: stop once the budget is covered
        if chars >= budget * 4 * (1 - cfg.chat_fraction):
            break
        code_texts.append(f.text)
        chars += len(f.text)
    # Render more conversations than needed, keep a prefix worth the chat share of characters.
    chats = corpus.chat_examples(train_files, int(budget * cfg.chat_fraction / 40) + 1, cfg.seed)
    chat_texts, chat_chars = [], 0
    for c in chats:
        if chat_chars >= budget * 4 * cfg.chat_fraction:
            break
        chat_texts.append(
            render_chat(tokenizer, c.messages, tools=c.tools, add_generation_prompt=False)
        )
        chat_chars += len(chat_texts[-1])
    docs = code_texts + chat_texts
    random.Random(cfg.seed + 1).shuffle(docs)
    return pack(encode_documents(tokenizer, docs), cfg.seq_len)


def eval_rows(files, tokenizer, cfg: DevModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out code rows and held-out chat rows; independent of the seed.

    Only standard-library files count: the project's own files change with every commit,
    and the figures should compare across builds. Rows are picked evenly across all held-out
    files (each file capped at 8 rows), so the measure spans module headers and bodies alike.
    """
    held = [f for f in files if f.held_out and f.name.startswith("stdlib/")]
    stream: list[int] = []
    for ids in _encode_each(tokenizer, [f.text for f in held]):
        stream.extend(ids[: 8 * cfg.seq_len])
    rows = pack(stream, cfg.seq_len)
    pick = torch.linspace(0, rows.shape[0] - 1, min(cfg.eval_rows, rows.shape[0])).long()
    code = rows[pick]
    chats = corpus.chat_examples(held, 4 * cfg.eval_rows, seed=1234)
    chat_texts = [
        render_chat(tokenizer, c.messages, tools=c.tools, add_generation_prompt=False)
        for c in chats
    ]
    chat = pack(encode_documents(tokenizer, chat_texts), cfg.seq_len)[: cfg.eval_rows]
    return code, chat


def _encode_each(tokenizer, texts: list[str]) -> list[list[int]]:
    eos_id = tokenizer.convert_tokens_to_ids(EOS)
    encoded = tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
    return [[*enc.ids, eos_id] for enc in encoded]


def _model_config(cfg: DevModelConfig, tokenizer) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.context_window,
        rms_norm_eps=1e-5,
        # Untied: tied Llama heads have had loader quirks in servers; 1M params is cheap.
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _add_compat_fields(config_path: Path) -> None:
    """transformers 5 writes `rope_parameters`; readers on 4.x look for `rope_theta`."""
    config = json.loads(config_path.read_text())
    config.setdefault("rope_theta", config.get("rope_parameters", {}).get("rope_theta", 10000.0))
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def publish_folder(tmp: Path, out: Path) -> None:
    """Make the model folder `tmp` readable by everyone, then swap it in at `out`."""
    # mkdtemp makes 0700 and safetensors may write 0600; a model is for every local reader.
    tmp.chmod(0o755)
    for path in tmp.iterdir():
        path.chmod(0o644)
    write_atomically(tmp, out)


def write_atomically(tmp: Path, out: Path) -> None:
    """Swap `tmp` into place at `out`; readers never see a half-written model."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_dev_model(cfg: DevModelConfig, console: Console | None = None) -> BuildResult:
    """Build the dev model into cfg.out (replacing what is there) and return its figures."""
    console = console or Console(stderr=True)
    started = time.perf_counter()
    torch.set_num_threads(cfg.threads)

    files = corpus.collect(cfg.stdlib_root, cfg.project_root)
    if not any(f.held_out for f in files):
        raise ValueError("the corpus has no held-out files; point stdlib_root at a real stdlib")
    console.print(f"corpus: {len(files)} Python files ({sum(f.held_out for f in files)} held out)")

    sample = corpus.tokenizer_sample(files, cfg.tokenizer_sample_chars)
    tokenizer = wrap(train_tokenizer(sample, cfg.vocab_size), cfg.context_window)
    console.print(f"tokenizer: byte-level BPE, {len(tokenizer)} tokens")

    eval_code, eval_chat = eval_rows(files, tokenizer, cfg)
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(_model_config(cfg, tokenizer)).float()
    params = sum(p.numel() for p in model.parameters())
    loss_before, chat_before = evaluate(model, eval_code), evaluate(model, eval_chat)
    console.print(f"model: Llama, {params / 1e6:.2f}M parameters; held-out loss {loss_before:.3f}")

    train_tokens = 0
    if cfg.steps:
        rows = training_rows(files, tokenizer, cfg)
        train_tokens = rows.numel()
        tcfg = DevTrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr)
        train(model, rows, tcfg, seed=cfg.seed, console=console)

    model = model.to(torch.bfloat16)  # what we save; measure the loss of exactly that
    loss_after = evaluate(model.float(), eval_code)
    chat_after = evaluate(model, eval_chat)
    model = model.to(torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        # End of turn first; the document separator also ends raw (non-chat) completions.
        # `</tool_call>` too: one call is all the agent takes, and after a JSON text action
        # (which ends in `}}` as a native call does) this tiny model sometimes ranks it above
        # the end of the turn; stopping there leaves the action whole (actions.py parses it).
        eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in (IM_END, TOOL_CALL_END, EOS)],
        pad_token_id=tokenizer.pad_token_id,
    )

    manifest: dict[str, Any] = {
        "builder": "apprentice model build-dev",
        "builder_version": builder_version(),
        "build_key": build_key(files),
        "seed": cfg.seed,
        "steps": cfg.steps,
        "params": params,
        "vocab_size": len(tokenizer),
        "context_window": cfg.context_window,
        "loss_before": round(loss_before, 5),
        "loss_after": round(loss_after, 5),
        "chat_loss_before": round(chat_before, 5),
        "chat_loss_after": round(chat_after, 5),
        "train_tokens": train_tokens,
        "corpus_files": len(files),
        "corpus_digest": corpus.corpus_digest(files),
        "torch": torch.__version__,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
    }
    out = cfg.out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        hf_logging.disable_progress_bar()  # one shard of 10 MB: its bar is noise
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)
        _add_compat_fields(tmp / "config.json")
        seconds = time.perf_counter() - started
        manifest["seconds"] = round(seconds, 1)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        publish_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuildResult(
        out, params, loss_before, loss_after, chat_before, chat_after, seconds, manifest
    )


def read_manifest(model_dir: Path) -> dict[str, Any] | None:
    """The manifest of a built dev model, or None if `model_dir` holds none."""
    path = Path(model_dir) / MANIFEST
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_build_dev(out: Path, *, steps: int = DEFAULT_STEPS, seed: int = 0) -> BuildResult:
    """The body of `apprentice model build-dev`: build, then print where and how well."""
    result = build_dev_model(DevModelConfig(out=Path(out), steps=steps, seed=seed))
    # Plain print: rich would wrap a long path across lines, and scripts grep this summary.
    print(f"wrote the dev model to {result.out}")
    print(f"parameters: {result.params:,} ({result.params / 1e6:.2f}M)")
    print(
        f"held-out loss: {result.loss_before:.3f} -> {result.loss_after:.3f} "
        f"(chat {result.chat_loss_before:.3f} -> {result.chat_loss_after:.3f}) "
        f"after {steps} steps"
    )
    print(f"time: {result.seconds:.1f} s")
    return result
