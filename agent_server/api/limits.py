"""Per-token limits on the WebSocket: open connections, and messages per second.

    limits = TokenLimits(max_connections=16, messages_per_s=50, burst=200)
    if not limits.open(key): ...      # refuse: too many connections on this token
    limits.allow(key)                 # False: over the message rate (answer rate_limited)
    limits.close(key)

`key` is who the token stands for (a user's id, or the shared / admin token), so one person's
connections share one budget. The rate is a token bucket per key: `burst` messages at once,
refilled at `messages_per_s`. A refused message is answered, not handled: a client resends
it (outcomes are idempotent by `client_event_id`, so a resend never stores twice). One
process's counts: with several server replicas each holds its own. Tests:
tests/api/test_limits.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenLimits:
    def __init__(
        self,
        *,
        max_connections: int,
        messages_per_s: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_connections, self.rate, self.burst = max_connections, messages_per_s, burst
        self._clock = clock
        # Only the event loop's thread calls in (the WebSocket route, the read loop): no lock.
        self._open: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)

    def open(self, key: str) -> bool:
        if self._open.get(key, 0) >= self.max_connections:
            return False
        self._open[key] = self._open.get(key, 0) + 1
        return True

    def close(self, key: str) -> None:
        self._open[key] -= 1
        if self._open[key] <= 0:
            del self._open[key]
            self._buckets.pop(key, None)  # nobody left to account for

    def allow(self, key: str) -> bool:
        now = self._clock()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1, now)
        return True
