"""Group commit: many callers' small database calls answered from one transaction.

    outcomes = Batched(factory, record_outcomes)     # feedback/queries/outcomes_batch.py
    stored = await outcomes.call(dict(suggestion_id=..., kind=..., client_event_id=...))

`fn(db, items) -> results` does a whole batch in one transaction and returns one result per
item, in order: a value, or an exception for that item alone (raised to its caller). One
batch runs at a time per `Batched`; what arrives meanwhile waits and goes in the next one, so
under load each transaction carries many items (bench/ingest.py: a transaction per outcome
spent most of the server's CPU on BEGIN / COMMIT and per-statement overhead), while a lone
call is done at once, alone. A caller is answered only after its batch committed. No task
outlives its batch: a run ends when nothing is queued. A batch that fails as a whole (an item
the database refuses) is redone one item at a time, so a bad item fails only itself.
Used by store.py for outcomes (with the read of their suggestions, in the same transaction).
Tested in tests/session/test_batches.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from feedback.db import transaction

Item = TypeVar("Item")
Result = TypeVar("Result")
MAX_BATCH = 64


class Batched(Generic[Item, Result]):
    def __init__(
        self,
        factory: sessionmaker[Session],
        fn: Callable[[Session, Sequence[Item]], Sequence[Result | BaseException]],
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._factory, self._fn, self._max = factory, fn, max_batch
        self._queue: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running: asyncio.Task[None] | None = None
        self.batches = 0  # transactions run (tests and benches read it)

    async def call(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        # One turn of the event loop first: frames that arrived with this one are handled and
        # join its batch (without it, a burst of acks split the next outcomes into a batch of
        # one and a batch of the rest).
        await asyncio.sleep(0)
        while self._queue:
            batch, self._queue = self._queue[: self._max], self._queue[self._max :]
            items = [item for item, _ in batch]
            try:
                results = await asyncio.to_thread(self._run, items)
            except Exception:
                results = [await self._alone(item) for item in items]
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # the caller went away; the work is done all the same
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    def _run(self, items: list[Item]) -> Sequence[Result | BaseException]:
        with transaction(self._factory) as db:
            results = self._fn(db, items)
        self.batches += 1
        return results

    async def _alone(self, item: Item) -> Result | BaseException:
        try:
            return (await asyncio.to_thread(self._run, [item]))[0]
        except Exception as exc:  # this item's own failure, for its caller alone
            return exc

    async def aclose(self) -> None:
        """Wait for the batch in flight (the server is stopping)."""
        if self._running is not None:
            with contextlib.suppress(Exception):
                await self._running
