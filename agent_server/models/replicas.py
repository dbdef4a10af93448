"""`ReplicaPool`: one `ModelBackend` over several OpenAI-compatible servers (replicas) that
serve the same model.

    pool = ReplicaPool(config, ["http://vllm-a:8000/v1", "http://vllm-b:8000/v1"])
    completion = await pool.complete(messages)        # on one replica in rotation
    await pool.load_adapter("policy-v3", folder)      # on every replica in rotation
    pool.use_adapter("policy-v3")

factory.py builds one when `model_urls` names several servers. Each replica is an
`OpenAIBackend` (with its own retries).

- Requests go to the replica in rotation with the fewest requests in flight (ties: round
  robin). One that cannot be reached (connection refused or broken, 502/503/504 after its own
  retries) leaves rotation and the request is tried once more on another replica; a stream is
  never retried once a chunk has reached the caller, and a timeout is not (its budget is spent).
- A health loop GETs every replica's `/health` each `health_interval_s`: a failing one leaves
  rotation. One that answers again is first given the serving adapter (`use_adapter`'s, from
  the folder it was loaded from, when its /v1/models lacks it), then put back; no other.
- `load_adapter` / `unload_adapter` act on every replica in rotation and raise if any fails
  (so a canary through the pool fails and the deployments row does not flip).
- No replica in rotation: `BackendUnavailable`, as from one backend whose server is down.
The chosen replica's URL is logged at debug, never a prompt or a token. Tested in
tests/models/test_replicas.py (small HTTP servers) and tests/models/test_replicas_vllm.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from agent_server.models.base import (
    AdapterNotFound,
    BackendUnavailable,
    Chunk,
    Completion,
    Message,
    ModelError,
    Sampling,
)
from agent_server.models.fim import Infill
from agent_server.models.openai_config import OpenAIConfig
from agent_server.models.openai_http import DEFAULT_SAMPLING, OpenAIBackend
from agent_server.models.retry import Retryable

log = logging.getLogger(__name__)
T = TypeVar("T")


async def is_healthy(client: httpx.AsyncClient, root_url: str) -> bool:
    """Whether the server at `root_url` (no /v1) answers GET /health with 200."""
    try:
        response = await client.get(f"{root_url.rstrip('/')}/health")
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def unreachable(exc: BackendUnavailable) -> bool:
    """A failure another replica may not share: connection refused/broken, 502/503/504."""
    cause = exc.__cause__
    timed_out = isinstance(cause, httpx.TimeoutException)
    return isinstance(cause, (httpx.TransportError, Retryable)) and not timed_out


@dataclasses.dataclass(eq=False)
class Replica:
    """One server of the pool and what the pool knows of it."""

    url: str  # its base URL, up to /v1
    backend: OpenAIBackend
    in_rotation: bool = True  # optimistic at start: the health loop corrects it
    in_flight: int = 0
    requests: int = 0  # requests sent to it, ever (tests and metrics read it)


class ReplicaPool:
    """ModelBackend and AdapterHost over several OpenAIBackends (module docstring)."""

    def __init__(
        self, config: OpenAIConfig, urls: Sequence[str], *, health_interval_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:  # fmt: skip
        """`config` for every replica, its `base_url` replaced by each of `urls` in turn."""
        if not urls:
            raise ValueError("a replica pool needs at least one model server URL")
        if health_interval_s <= 0:
            raise ValueError(f"health_interval_s must be > 0 seconds, got {health_interval_s}")
        self.config = config
        self.health_interval_s = health_interval_s
        self.replicas = [
            Replica(u, OpenAIBackend(dataclasses.replace(config, base_url=u), transport=transport))
            for u in dict.fromkeys(urls)
        ]
        auth = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._health = httpx.AsyncClient(headers=auth, timeout=5.0, transport=transport)
        self._serving: str | None = None
        self._paths: dict[str, Path] = {}  # adapter name -> the folder it was loaded from
        self._lock = asyncio.Lock()  # adapter changes and restores, one at a time
        self._turn = 0
        self._task: asyncio.Task[None] | None = None

    # -- identity --------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.config.model

    @property
    def adapter(self) -> str | None:
        return self._serving

    def use_adapter(self, name: str | None) -> None:
        self._serving = name

    @property
    def context_window(self) -> int:
        return self._primary().backend.context_window

    @property
    def in_rotation(self) -> list[str]:
        """The URLs of the replicas requests go to now."""
        return [r.url for r in self.replicas if r.in_rotation]

    # -- completions -----------------------------------------------------------------------
    async def complete(
        self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
        schema: dict[str, Any] | None = None, sampling: Sampling = DEFAULT_SAMPLING,
        adapter: str | None = None,
    ) -> Completion:  # fmt: skip
        served = adapter or self._serving
        return await self._call(lambda b: b.complete(
            messages, tools=tools, schema=schema, sampling=sampling, adapter=served))  # fmt: skip

    async def complete_text(
        self, prompt: str, *, sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None
    ) -> Completion:
        served = adapter or self._serving
        return await self._call(lambda b: b.complete_text(
            prompt, sampling=sampling, adapter=served))  # fmt: skip

    async def stream(
        self, messages: Sequence[Message], *, schema: dict[str, Any] | None = None,
        sampling: Sampling = DEFAULT_SAMPLING, adapter: str | None = None,
    ) -> AsyncIterator[Chunk]:  # fmt: skip
        served = adapter or self._serving
        replica = self._pick()
        for attempt in (0, 1):
            started = False
            try:
                with self._busy(replica):
                    chunks = replica.backend.stream(messages, schema=schema, sampling=sampling,
                                                    adapter=served)  # fmt: skip
                    async with contextlib.aclosing(chunks):
                        async for chunk in chunks:
                            started = True
                            yield chunk
                return
            except BackendUnavailable as exc:
                if started or attempt or not unreachable(exc):
                    raise
                replica = self._fail_over(replica, exc)

    async def _call(self, request: Callable[[OpenAIBackend], Awaitable[T]]) -> T:
        replica = self._pick()
        try:
            with self._busy(replica):
                return await request(replica.backend)
        except BackendUnavailable as exc:
            if not unreachable(exc):
                raise
            replica = self._fail_over(replica, exc)
        with self._busy(replica):
            return await request(replica.backend)

    def _pick(self, *, besides: Replica | None = None) -> Replica:
        self.start()
        ready = [r for r in self.replicas if r.in_rotation and r is not besides]
        if not ready:
            raise BackendUnavailable(
                f"no model server is in rotation: all {len(self.replicas)} failed their "
                f"health check or could not be reached ({', '.join(r.url for r in self.replicas)})"
            )
        self._turn = (self._turn + 1) % len(ready)
        chosen = min(ready[self._turn :] + ready[: self._turn], key=lambda r: r.in_flight)
        log.debug("model request -> %s", chosen.url)
        return chosen

    def _fail_over(self, replica: Replica, exc: BackendUnavailable) -> Replica:
        """Take `replica` out of rotation and pick another; re-raise `exc` if none is left."""
        self._take_out(replica, str(exc))
        try:
            other = self._pick(besides=replica)
        except BackendUnavailable:
            raise exc from None
        log.debug("retrying on %s after %s failed", other.url, replica.url)
        return other

    @contextlib.contextmanager
    def _busy(self, replica: Replica) -> Iterator[None]:
        replica.in_flight += 1
        replica.requests += 1
        try:
            yield
        finally:
            replica.in_flight -= 1

    def _take_out(self, replica: Replica, why: str) -> None:
        if replica.in_rotation:
            replica.in_rotation = False
            log.warning("model server %s leaves rotation: %s", replica.url, why)

    def _primary(self) -> Replica:
        return next((r for r in self.replicas if r.in_rotation), self.replicas[0])

    # -- tokens (the same model everywhere: asked of one replica) ---------------------------
    def count_tokens(self, messages: Sequence[Message]) -> int:
        return self._primary().backend.count_tokens(messages)

    def count_text_tokens(self, text: str) -> int:
        return self._primary().backend.count_text_tokens(text)

    def infill(self) -> Infill | None:
        return self._primary().backend.infill()

    # -- runtime LoRA, on every replica in rotation ------------------------------------------
    async def load_adapter(self, name: str, path: str | Path) -> None:
        """Load `name` from `path` on every replica in rotation; raise if any fails."""
        folder = Path(path).resolve()
        async with self._lock:
            self._paths[name] = folder  # where a replica that comes back loads it from
            failed = await self._on_all(lambda b: b.load_adapter(name, folder))
        if failed:
            raise _first(failed, f"loading adapter {name!r}")

    async def unload_adapter(self, name: str) -> None:
        """Unload `name` from every replica in rotation (AdapterNotFound: from none)."""
        async with self._lock:
            count = len(self._ready())
            failed = await self._on_all(lambda b: b.unload_adapter(name))
            self._paths.pop(name, None)
            self._serving = None if self._serving == name else self._serving
        others = [(r, e) for r, e in failed if not isinstance(e, AdapterNotFound)]
        if others or len(failed) == count:  # not loaded anywhere: AdapterNotFound
            raise _first(others or failed, f"unloading adapter {name!r}")

    async def adapter_names(self) -> list[str]:
        """Every adapter loaded on some replica in rotation, sorted."""
        ready = self._ready()
        lists = await asyncio.gather(*(r.backend.adapter_names() for r in ready))
        return sorted({n for names in lists for n in names})

    def _ready(self) -> list[Replica]:
        self.start()
        ready = [r for r in self.replicas if r.in_rotation]
        if not ready:
            self._pick()  # raises BackendUnavailable, the same words as a request hears
        return ready

    async def _on_all(
        self, call: Callable[[OpenAIBackend], Awaitable[None]]
    ) -> list[tuple[Replica, BaseException]]:
        """`call` on every replica in rotation at once; the failures, with their replica."""
        ready = self._ready()
        results = await asyncio.gather(*(call(r.backend) for r in ready), return_exceptions=True)
        failed = [(r, e) for r, e in zip(ready, results, strict=True) if e is not None]
        for replica, exc in failed:
            if isinstance(exc, BackendUnavailable) and unreachable(exc):
                self._take_out(replica, str(exc))
        return failed

    # -- health ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the health loop (the first request does it too); needs a running loop."""
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._health_loop(), name="model-replicas-health")

    async def _health_loop(self) -> None:
        while True:
            try:
                await self.check_health()
            except Exception as exc:  # never let one bad round end the loop
                log.warning("model server health check: %s", exc)
            await asyncio.sleep(self.health_interval_s)

    async def check_health(self) -> None:
        """One round of the health loop: take failing replicas out, restore answering ones."""
        roots = [r.backend.config.root_url for r in self.replicas]
        healthy = await asyncio.gather(*(is_healthy(self._health, root) for root in roots))
        for replica, ok in zip(self.replicas, healthy, strict=True):
            if not ok:
                self._take_out(replica, "its health check failed")
        for replica, ok in zip(self.replicas, healthy, strict=True):
            if ok and not replica.in_rotation:
                await self._restore(replica)

    async def _restore(self, replica: Replica) -> None:
        """Give `replica` the serving adapter, then put it back into rotation."""
        async with self._lock:
            try:
                for _ in range(3):  # the serving adapter may change while it loads
                    name = self._serving
                    if name is not None:
                        await self._give(replica, name)
                    if self._serving == name:
                        break
                else:
                    return
            except Exception as exc:
                log.warning("model server %s stays out of rotation: %s", replica.url, exc)
                return
            replica.in_rotation = True
        log.info("model server %s is in rotation, serving %s", replica.url, name or "no adapter")

    async def _give(self, replica: Replica, name: str) -> None:
        if name in await replica.backend.adapter_names():
            return
        folder = self._paths.get(name)
        if folder is None:
            raise ModelError(f"the serving adapter {name!r} was not loaded through this pool")
        await replica.backend.load_adapter(name, folder)
        log.info("loaded the serving adapter %s on %s", name, replica.url)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._health.aclose()
        for replica in self.replicas:
            await replica.backend.aclose()


def _first(failed: list[tuple[Replica, BaseException]], what: str) -> ModelError:
    """The first failure as the error to raise: its own type when a ModelError, naming where."""
    replica, exc = failed[0]
    where = f"{what} on {replica.url} ({len(failed)} replica(s) failed): {exc}"
    made = type(exc)(where) if isinstance(exc, ModelError) else ModelError(where)
    made.__cause__ = exc
    return made
