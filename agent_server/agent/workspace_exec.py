"""Running one command for LocalWorkspace: own process group, timeout, output cap, clean env.

The command runs in its own session (process group) so a timeout or a cancelled agent kills
everything it started (`os.killpg`), not just the first process. stdout and stderr are read
interleaved as they come; past the cap only the head and the tail are kept (errors are
usually at the end). The environment is the server's minus anything that looks like a secret
(APPRENTICE_* and names containing TOKEN, SECRET, PASSWORD, API_KEY, ...).

Approval is not this layer's job: the agent loop asks the person before calling it in
interactive mode. Run the tests: .venv/bin/python -m pytest tests/agent/test_workspace.py -q
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Mapping, Sequence

from agent_server.agent.workspace_types import CommandError, CommandResult

SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
# Non-interactive defaults: nothing may wait for a terminal or a pager.
QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"}


def scrubbed_env(
    base: Mapping[str, str], drop_prefixes: Sequence[str], extra: Mapping[str, str]
) -> dict[str, str]:
    env = {
        k: v
        for k, v in base.items()
        if not k.startswith(tuple(drop_prefixes))
        and not any(m in k.upper() for m in SECRET_MARKERS)
    }
    return env | QUIET_ENV | dict(extra)


class _CappedOutput:
    """Keeps the first and last cap/2 bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.total = cap, bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.cap - self.cap // 2:
            del self.tail[: len(self.tail) - (self.cap - self.cap // 2)]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", "replace")
        omitted = self.total - len(self.head) - len(self.tail)
        return (
            self.head.decode("utf-8", "replace")
            + f"\n[... {omitted} bytes of output omitted ...]\n"
            + self.tail.decode("utf-8", "replace")
        )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_process(
    command: str | Sequence[str],
    *,
    shell: bool,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    output_cap_bytes: int,
) -> CommandResult:
    if shell and not isinstance(command, str):
        command = shlex.join(command)
    if not shell:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise CommandError("The command is empty; give a program and its arguments.")
    common = dict(
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    try:
        if shell:
            proc = await asyncio.create_subprocess_shell(command, **common)  # type: ignore[arg-type]
        else:
            proc = await asyncio.create_subprocess_exec(*argv, **common)  # type: ignore[arg-type]
    except FileNotFoundError:
        raise CommandError(
            f"Command not found: {argv[0]!r}. Check the name, or run it through a shell."
        ) from None
    except PermissionError:
        raise CommandError(f"{argv[0]!r} is not executable.") from None
    except OSError as err:
        raise CommandError(f"The command could not start: {err}.") from None
    out = _CappedOutput(output_cap_bytes)

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            out.add(chunk)

    reader = asyncio.create_task(pump())
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        # Also on success and on cancellation: background children of the command die with it.
        _kill_group(proc)
        await asyncio.shield(proc.wait())
        try:
            await asyncio.wait_for(reader, 2.0)
        except TimeoutError:  # a grandchild that left the group still holds the pipe
            reader.cancel()
    text = out.text()
    if timed_out:
        text += f"\n[killed after the {timeout_s:g} s timeout]\n"
    return CommandResult(
        exit_code=None if timed_out else proc.returncode,
        output=text,
        timed_out=timed_out,
        truncated=out.truncated,
    )
