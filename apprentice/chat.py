"""The terminal client of `apprentice chat`: one session, the person reviews every diff.

The agent's tools run on the local folder (`LocalWorkspace(workspace)`) through the same
`tool.request` protocol an editor answers. Each proposed edit is printed as a diff with
numbered hunks; answer `a` (accept), `r` (reject, then a reason), or hunk numbers such as
`0 2` (accept only those). Commands need `y`. After a turn, type a follow-up message, or an
empty line / Ctrl-D to quit. Input is read in a thread so the connection stays alive.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.syntax import Syntax

from agent_server.agent.workspace import LocalWorkspace
from agent_server.protocol import messages as p
from agent_server.protocol.client import Decision, ProtocolClient, ProtocolError

console = Console(highlight=False)


async def ask(prompt: str) -> str | None:
    """A line from the person, or None at end of input."""
    try:
        return (await asyncio.to_thread(input, prompt)).strip()
    except EOFError:
        return None


async def review(proposal: p.EditProposed) -> Decision:
    console.print(f"\n[bold]proposed edit of {proposal.path}[/bold]")
    for hunk in proposal.hunks:
        console.print(f"[cyan]hunk {hunk.index}[/cyan]")
        console.print(Syntax(hunk.diff, "diff", theme="ansi_dark", word_wrap=True))
    while True:
        answer = await ask("accept? [a]ll / [r]eject / hunk numbers: ")
        if answer is None or answer.lower() in ("r", "reject", "n", "no"):
            reason = (await ask("why (optional, the agent reads it): ")) or None
            return Decision("rejected", reason=reason)
        if answer.lower() in ("a", "all", "y", "yes", ""):
            return Decision("accepted")
        try:
            hunks = sorted({int(x) for x in answer.replace(",", " ").split()})
        except ValueError:
            continue
        if hunks and all(0 <= h < len(proposal.hunks) for h in hunks):
            if len(hunks) == len(proposal.hunks):
                return Decision("accepted")
            return Decision("partially_accepted", hunks=hunks)


async def approve(request: p.CommandApprovalRequest) -> bool:
    console.print(f"\n[bold]the agent wants to run:[/bold] {request.command}")
    return (await ask("run it? [y/N]: ") or "").lower() in ("y", "yes")


def show(message: Any) -> None:
    if isinstance(message, p.AgentStep):
        args = ", ".join(f"{k}={v!r}"[:80] for k, v in message.args.items())
        first = message.observation.strip().splitlines()[:1]
        console.print(f"[dim]> {message.tool}({args})  {first[0][:100] if first else ''}[/dim]")
    elif isinstance(message, p.SummaryMade):
        console.print("[dim](the agent summarized its context to keep going)[/dim]")
    elif isinstance(message, p.Error):
        console.print(f"[red]error {message.code}: {message.message}[/red]")


async def run_chat(url: str, token: str, task: str, root: Path) -> int:
    client = await ProtocolClient.connect(url, token, client="apprentice-chat")
    workspace = LocalWorkspace(root)
    try:
        info = await client.create_session(title=task[:80], workspace=str(root))
        console.print(f"[dim]session {info.session_id} on {client.welcome.model}[/dim]")
        text: str | None = task
        while text:
            log = await client.run_turn(
                info.session_id, text, workspace=workspace, review=review, approve=approve,
                on_message=show,
            )  # fmt: skip
            done = log.done
            style = "green" if done.status == "finished" else "yellow"
            console.print(f"\n[{style}]{done.status}[/{style}]: {done.message}")
            text = await ask("\nyou (empty line to quit): ")
        return 0
    except ProtocolError as exc:
        console.print(f"[red]{exc}[/red]")
        return 1
    finally:
        await client.close()
