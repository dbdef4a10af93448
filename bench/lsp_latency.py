"""Inline-completion latency through the language server against a direct backend call.

Both in one run, on the same model and the same prompt: `direct` calls the backend the
settings name (embedded on the dev model by default) in this process, exactly as the
server's LocalHost does (same fill-in-the-middle prompt, same sampling); `lsp` starts
`apprentice lsp` over stdio and times textDocument/inlineCompletion round trips from a
pygls client (request -> JSON-RPC -> debounce -> model -> suggestion row in SQLite ->
`shown` outcome -> answer). Blocks of each alternate so machine drift hits both. Prints
JSON: p50/p99/mean of both, their ratios, the server's debounce, the server-side model time
stored with each suggestion (`latency_s`) and the mean completion tokens of both paths.

    .venv/bin/python bench/lsp_latency.py                      # dev model: $APPRENTICE_TEST_MODEL
    .venv/bin/python bench/lsp_latency.py -n 100 --model ~/.apprentice/models/dev

Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from agent_server.models.base import Sampling  # noqa: E402
from agent_server.session.prompts import fit_prompt  # noqa: E402
from ground.settings import Settings  # noqa: E402
from lsp.config import LspConfig  # noqa: E402

SOURCE = (
    'import os\n\n\ndef read_config(path):\n    """Read KEY=VALUE lines into a dict."""\n'
    "    values = {}\n    with open(path) as f:\n        for line in f:\n            "
)
SUFFIX = "\n    return values\n\n\nprint(read_config(os.environ['CONFIG']))\n"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(ms, 0.5), 2), "p99_ms": round(pct(ms, 0.99), 2),
            "mean_ms": round(statistics.fmean(ms), 2)}  # fmt: skip


class Direct:
    def __init__(self, settings: Settings, config: LspConfig) -> None:
        from agent_server.models.factory import build_backend

        self.backend = build_backend(settings)
        self.prompt = fit_prompt(self.backend, "app.py", "python", SOURCE, SUFFIX,
                                 config.completion_max_tokens)  # fmt: skip
        self.sampling = Sampling(max_tokens=config.completion_max_tokens,
                                 temperature=config.completion_temperature)  # fmt: skip
        self.tokens: list[int] = []

    async def once(self) -> float:
        start = time.perf_counter()
        completion = await self.backend.complete(self.prompt, sampling=self.sampling)
        elapsed = (time.perf_counter() - start) * 1000
        self.tokens.append(len(completion.token_ids))
        return elapsed


class ThroughLsp:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.client = LanguageClient("lsp-latency-bench", "1")
        self.uri = from_fs_path(str(root / "app.py")) or ""
        lines = SOURCE.split("\n")
        self.position = types.Position(len(lines) - 1, len(lines[-1]))

    async def start(self) -> None:
        command = [sys.executable, "-m", "apprentice.cli", "lsp"]
        await self.client.start_io(*command, env=self.env, cwd=str(REPO))
        caps = types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(
                inline_completion=types.InlineCompletionClientCapabilities()))  # fmt: skip
        root_uri = from_fs_path(str(self.root))
        await self.client.initialize_async(types.InitializeParams(caps, root_uri=root_uri))
        self.client.initialized(types.InitializedParams())
        item = types.TextDocumentItem(self.uri, "python", 1, SOURCE + SUFFIX)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(item))

    async def once(self) -> float:
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
            text_document=types.TextDocumentIdentifier(self.uri),
            position=self.position,
        )
        start = time.perf_counter()
        await self.client.text_document_inline_completion_async(params)
        return (time.perf_counter() - start) * 1000

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.wait_for(self.client.stop(), timeout=30)


def stored(url: str) -> tuple[list[float], list[int]]:
    """Server-side model seconds and completion tokens of every stored suggestion."""
    from sqlalchemy import select

    from feedback.db import make_engine, make_sessionmaker
    from feedback.models import Suggestion

    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as db:
            rows = list(db.scalars(select(Suggestion).order_by(Suggestion.created_at)))
            return [r.latency_s or 0.0 for r in rows], [len(r.completion_token_ids) for r in rows]
    finally:
        engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=60, help="timed calls per path")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per path first")
    parser.add_argument("--block", type=int, default=10, help="calls per alternating block")
    default_model = os.environ.get("APPRENTICE_TEST_MODEL") or str(REPO / ".cache" / "dev-model")
    parser.add_argument("--model", "--model-dir", dest="model_dir", default=default_model,
                        help="model folder for the embedded backend")  # fmt: skip
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lsp-latency-"))
    root = work / "project"
    root.mkdir()
    (root / "app.py").write_text(SOURCE + SUFFIX)
    url = f"sqlite:///{work / 'feedback.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPRENTICE_")}
    env |= {"APPRENTICE_HOME": str(work / "home"), "APPRENTICE_DATABASE_URL": url,
            "APPRENTICE_MODEL_NAME": args.model_dir, "APPRENTICE_LOG_LEVEL": "WARNING"}  # fmt: skip
    settings = Settings(home=work / "home", database_url=url, model_name=args.model_dir)
    config = LspConfig.from_settings(settings)

    direct, lsp = Direct(settings, config), ThroughLsp(root, env)
    await lsp.start()
    for _ in range(args.warmup):
        await direct.once()
        await lsp.once()
    direct.tokens.clear()
    timings: dict[str, list[float]] = {"direct": [], "lsp": []}
    block = 0
    while len(timings["lsp"]) < args.n:
        order = [("direct", direct), ("lsp", lsp)]
        for name, path in order if block % 2 == 0 else order[::-1]:
            for _ in range(min(args.block, args.n - len(timings[name]))):
                timings[name].append(await path.once())  # type: ignore[attr-defined]
        block += 1
    await lsp.stop()
    await direct.backend.aclose()
    server_s, server_tokens = stored(url)
    server_s, server_tokens = server_s[args.warmup :], server_tokens[args.warmup :]
    d, s = summary(timings["direct"]), summary(timings["lsp"])
    model_time = summary([x * 1000 for x in server_s]) if server_s else None
    print(json.dumps({
        "model": args.model_dir, "n": args.n, "max_tokens": config.completion_max_tokens,
        "debounce_ms": config.debounce_ms,
        "direct": d, "lsp": s,
        "ratio_p50": round(s["p50_ms"] / d["p50_ms"], 3),
        "ratio_p99": round(s["p99_ms"] / d["p99_ms"], 3),
        "lsp_minus_direct_p50_ms": round(s["p50_ms"] - d["p50_ms"], 2),
        "server_model_time": model_time,
        # What the language server adds besides its debounce: JSON-RPC both ways, the
        # suggestion row and the `shown` outcome (two DB transactions), the event loop.
        "overhead_p50_ms_beyond_model_and_debounce": round(
            s["p50_ms"] - model_time["p50_ms"] - config.debounce_ms, 2) if model_time else None,
        "mean_tokens": {
            "direct": round(statistics.fmean(direct.tokens), 1),
            "lsp": round(statistics.fmean(server_tokens), 1) if server_tokens else None,
        },
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
