"""Retries with exponential backoff inside one deadline, for the HTTP model backend.

`call_with_retries(attempt, timeout_s=..., policy=...)` runs `attempt(remaining_s)` until it
succeeds, raises something that is not `Retryable`, or the deadline passes; the caller then
gets a typed `BackendUnavailable`. The deadline covers every attempt and every wait, so a
caller that configured `timeout_s=2` hears back within about two seconds even when the
server is down (the waits are cut short rather than overrunning it).

Tested through tests/models/test_openai_backend.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from agent_server.models.base import BackendUnavailable

T = TypeVar("T")


class Retryable(Exception):
    """Raised by an attempt for a failure worth trying again (connection refused, 503...)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a request that could not reach the server."""

    retries: int = 3  # attempts after the first one
    backoff_s: float = 0.25  # wait before the first retry; doubles each time
    backoff_max_s: float = 4.0  # cap on one wait

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0 (0 = no retry), got {self.retries}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0 seconds, got {self.backoff_s}")
        if self.backoff_max_s < self.backoff_s:
            raise ValueError(
                f"backoff_max_s ({self.backoff_max_s}) must be >= backoff_s ({self.backoff_s})"
            )

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        return min(self.backoff_s * (2**retry), self.backoff_max_s)


async def call_with_retries(
    attempt: Callable[[float], Awaitable[T]],
    *,
    timeout_s: float,
    policy: RetryPolicy,
    what: str,
) -> T:
    """Run `attempt(remaining_seconds)` with retries; BackendUnavailable when out of time/tries."""
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    tries = 0
    for retry in range(policy.retries + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        tries += 1
        try:
            async with asyncio.timeout(remaining):
                return await attempt(remaining)
        except Retryable as exc:
            last = exc.__cause__ or exc
        except TimeoutError as exc:
            raise BackendUnavailable(f"{what}: no answer within {timeout_s:g} s") from exc
        if retry == policy.retries:
            break
        wait = policy.delay(retry)
        if time.monotonic() + wait >= deadline:
            # Waiting would overrun the deadline: give up now rather than late.
            break
        await asyncio.sleep(wait)
    raise BackendUnavailable(
        f"{what}: unreachable after {tries} attempt(s) within {timeout_s:g} s: {last}"
    ) from last
