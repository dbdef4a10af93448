"""Benchmark: can the agent fix 20 small bugs on a given model? No scripted parts.

    .venv/bin/python bench/agent_bugs.py --model .cache/real-model --model .cache/dev-model
    .venv/bin/python bench/agent_bugs.py --model A,B --bugs add,greet --step-limit 6

The bugs (bench/agent_bugs_data.py) are 20 tiny projects, each one file with a one-to-three
line bug, its test file and a precise task statement. For every model (`--model` takes model
folders; repeat it or give a comma list: each is loaded in turn with the embedded backend,
transformers on the CPU) and every bug: the project is written to a fresh temporary folder,
the real agent loop runs on it (`Agent`, `LocalWorkspace`, `AgentConfig(mode="autonomous")`,
the default prompts and grammar-constrained JSON actions; greedy unless `--temperature`),
then the test file is put back as it was (the tests are the judge, not the agent's to edit)
and every test of the project runs in a subprocess with a timeout. Fixed = they all pass:
the bug's test and the tests of the file's other functions.

Prints JSON on stdout: per model the share fixed and, per bug, fixed, the run's status,
steps, seconds, the tools called in order and whether the test file was touched. Progress
goes to stderr. Never part of the tests (tests/agent/test_agent_bugs_set.py checks the set).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_bugs_data import BUGS, Bug, run_tests, write  # noqa: E402

from agent_server.agent.config import AgentConfig  # noqa: E402
from agent_server.agent.events import InMemorySink  # noqa: E402
from agent_server.agent.loop import Agent  # noqa: E402
from agent_server.agent.workspace import LocalWorkspace  # noqa: E402
from agent_server.models.base import ModelBackend, Sampling  # noqa: E402


def agent_config(args: argparse.Namespace) -> AgentConfig:
    sampling = Sampling(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
    return AgentConfig(
        mode="autonomous",
        step_limit=args.step_limit,
        time_limit_s=args.time_limit_s,
        command_timeout_s=20.0,
        sampling=sampling,
    )


async def run_bug(backend: ModelBackend, bug: Bug, cfg: AgentConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"agent-bug-{bug.name}-") as tmp:
        root = Path(tmp)
        write(root, bug.files())
        sink = InMemorySink()
        agent = Agent(backend, LocalWorkspace(root), cfg, sink=sink)
        start = time.perf_counter()
        result = await agent.run(bug.task)
        seconds = time.perf_counter() - start
        test_file = root / bug.test_path
        touched = not test_file.is_file() or test_file.read_text() != bug.tests
        write(root, {bug.test_path: bug.tests})  # the judge is the original test file
        fixed, output = run_tests(root)
        target = root / bug.path
        edited = not target.is_file() or target.read_text() != bug.code
    tools = [e.data["tool"] for e in sink.of_kind("tool_call")]
    return {
        "bug": bug.name,
        "fixed": fixed,
        "status": result.status,
        "steps": result.steps,
        "seconds": round(seconds, 1),
        "tools": tools,
        "edited": edited,
        "touched_tests": touched,
        "message": result.message[:200],
        "tests": "" if fixed else output[-300:],
    }


def load(model_dir: str, threads: int) -> ModelBackend:
    from agent_server.models.embedded import EmbeddedBackend
    from agent_server.models.embedded_config import EmbeddedConfig

    return EmbeddedBackend(
        EmbeddedConfig(model_dir=Path(model_dir), torch_threads=threads, name=model_dir)
    )


async def run_model(model_dir: str, bugs: list[Bug], args: argparse.Namespace) -> dict[str, Any]:
    start = time.perf_counter()
    backend = load(model_dir, args.threads)
    load_s = time.perf_counter() - start
    cfg = agent_config(args)
    rows = []
    try:
        for bug in bugs:
            row = await run_bug(backend, bug, cfg)
            rows.append(row)
            mark = "fixed" if row["fixed"] else "not fixed"
            tools = " ".join(row["tools"])
            print(
                f"[{Path(model_dir).name}] {bug.name}: {mark} ({row['status']}, "
                f"{row['steps']} steps, {row['seconds']}s) {tools}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await backend.aclose()
    fixed = sum(r["fixed"] for r in rows)
    return {
        "model": model_dir,
        "fixed": fixed,
        "total": len(rows),
        "fixed_share": round(fixed / len(rows), 3) if rows else 0.0,
        "load_seconds": round(load_s, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "statuses": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
        "bugs": rows,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--model", action="append", required=True, help="model folder(s)")
    ap.add_argument("--bugs", default="", help="comma list of bug names (default: all 20)")
    ap.add_argument("--step-limit", type=int, default=6)
    ap.add_argument("--time-limit-s", type=float, default=180.0, help="per bug")
    ap.add_argument("--max-tokens", type=int, default=256, help="per agent step")
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    return ap.parse_args(argv)


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    models = [m.strip() for arg in args.model for m in arg.split(",") if m.strip()]
    names = {n.strip() for n in args.bugs.split(",") if n.strip()}
    unknown = names - {b.name for b in BUGS}
    if unknown:
        raise SystemExit(f"unknown bug(s): {sorted(unknown)}; known: {[b.name for b in BUGS]}")
    bugs = [b for b in BUGS if not names or b.name in names]
    report = {
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "config": {
            "step_limit": args.step_limit,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "time_limit_s": args.time_limit_s,
        },
        "models": [await run_model(m, bugs, args) for m in models],
    }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return report


if __name__ == "__main__":
    asyncio.run(main())
