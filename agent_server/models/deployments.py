"""Serving what the `deployments` table names: the follower, the canary, rollback.

- `DeploymentFollower(backend, db, backend_name=...)`: polls the table every `poll_s`
  seconds; when the active version changes it loads `policy-vN` into the backend (a no-op
  on vLLM when the learner already loaded it; the embedded backend loads it in-process),
  makes it the default for new requests, and unloads versions older than the previous one.
  The agent server runs one (api/main.py); new requests use a new adapter within seconds.
- `load_and_check(backend, name, path)`: load an adapter and answer one canary completion
  with it; the learner's deployers and the admin rollback both put adapters into service
  through it, so nothing is made active that cannot serve.
- `rollback_to(db, backend=..., version=...)`: the table's side of a rollback to any
  published version (or the base model).

`deployment_backend(settings.model_backend)` is the `deployments.backend` name of a process's
backend. Tested in tests/learner/test_admin_api.py (embedded) and test_e2e_vllm.py (vLLM).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from pathlib import Path
from typing import cast

from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.base import (
    AdapterBackend,
    AdapterHost,
    Completion,
    ModelBackend,
    ModelError,
    Sampling,
)
from feedback.db import transaction
from feedback.models import Deployment
from feedback.queries import active_deployment, get_adapter, record_deployment
from feedback.vocab import adapter_name, is_adapter_name

log = logging.getLogger(__name__)
BACKEND_NAMES = {"openai": "vllm", "embedded": "embedded"}


class CanaryFailed(ModelError):
    """An adapter loaded but could not answer the canary completion."""

    code = "canary_failed"


def deployment_backend(model_backend: str) -> str:
    """`deployments.backend` for a Settings.model_backend ("openai" -> "vllm")."""
    try:
        return BACKEND_NAMES[model_backend]
    except KeyError:
        raise ValueError(
            f"model_backend {model_backend!r}: use one of {sorted(BACKEND_NAMES)}"
        ) from None


def adapter_host(backend: ModelBackend) -> AdapterBackend:
    """`backend` as one that loads adapters; a ModelError for one that cannot (a script)."""
    # isinstance on AdapterHost only (methods): on ModelBackend it would read every property,
    # and an OpenAIBackend's context_window may ask the server.
    if not isinstance(backend, AdapterHost):
        raise ModelError(f"the {type(backend).__name__} backend cannot load LoRA adapters")
    return cast(AdapterBackend, backend)


async def load_and_check(
    backend: ModelBackend,
    name: str,
    path: str | Path,
    *,
    prompt: str = "def add(a, b):",
    max_tokens: int = 8,
) -> Completion:
    """Load adapter `name` from `path` and answer one canary with it; CanaryFailed if not."""
    await adapter_host(backend).load_adapter(name, path)
    completion = await backend.complete(
        [{"role": "user", "content": prompt}],
        sampling=Sampling(max_tokens=max_tokens, temperature=0.0),
        adapter=name,
    )
    if completion.adapter != name:
        raise CanaryFailed(f"the canary was served by {completion.adapter!r}, not {name!r}")
    if not completion.token_ids or not all(math.isfinite(x) for x in completion.logprobs):
        raise CanaryFailed(f"adapter {name} answered the canary with no tokens or NaN logprobs")
    return completion


async def loaded_policies(backend: AdapterHost) -> set[str]:
    """The `policy-vN` adapters the backend has loaded."""
    return {n for n in await backend.adapter_names() if is_adapter_name(n)}


async def prune(backend: AdapterHost, keep: set[str]) -> list[str]:
    """Unload every loaded `policy-vN` not in `keep`; returns what was unloaded."""
    dropped = sorted(await loaded_policies(backend) - keep)
    for name in dropped:
        await backend.unload_adapter(name)
    return dropped


def is_uri(recorded: str) -> bool:
    """Whether an `adapters.path` names an object in a store (`s3://...`), not a folder."""
    return "://" in recorded


def adapter_path(recorded: str, version: int, adapters_dir: Path | None) -> Path | None:
    """The folder a model server loads published `version` from: its `adapters.path` when
    that is a folder; for one published to an object store (`s3://...`), `adapters_dir/
    policy-vN`, where the learner's deploy step downloaded it (a volume the model servers
    see at the same path: docs/deploy.md). None when there is no such folder to name."""
    if not is_uri(recorded):
        return Path(recorded)
    return adapters_dir / adapter_name(version) if adapters_dir is not None else None


def serving_record(db: Session, *, backend: str) -> tuple[int | None, str | None]:
    """(version, `adapters.path`) of the adapter `backend`'s active deployment names;
    (None, None): the base model. The path is None if the version has no adapter row."""
    active = active_deployment(db, backend=backend)
    if active is None or active.adapter_version is None:
        return None, None
    row = get_adapter(db, version=active.adapter_version)
    return active.adapter_version, (row.path if row is not None else None)


def serving_adapter(
    db: Session, *, backend: str, adapters_dir: Path | None = None
) -> tuple[int | None, Path | None]:
    """(version, folder) of the adapter `backend`'s active deployment names; (None, None):
    the base model. The folder is None if the version has no adapter row (or, published to
    an object store, when no `adapters_dir` is given: `adapter_path`)."""
    version, recorded = serving_record(db, backend=backend)
    if version is None or recorded is None:
        return version, None
    return version, adapter_path(recorded, version, adapters_dir)


def rollback_to(db: Session, *, backend: str, version: int | None, reason: str) -> Deployment:
    """Make `version` (None: the base model) active, marking the current one rolled back."""
    if version is not None:
        row = get_adapter(db, version=version)
        if row is None or row.status != "published":
            raise LookupError(f"no published adapter version {version}")
    current = active_deployment(db, backend=backend)
    if current is not None:
        current.status = "rolled_back"
        db.flush()
    return record_deployment(
        db,
        adapter_version=version,
        backend=backend,
        reason=reason,
        rollback_of=current.id if current is not None else None,
    )


class DeploymentFollower:
    """Keeps a backend serving the active deployment of `backend_name` (module docstring)."""

    def __init__(
        self,
        backend: AdapterBackend,
        db: sessionmaker[Session],
        *,
        backend_name: str,
        poll_s: float = 1.0,
        adapters_dir: Path | None = None,
    ) -> None:
        if poll_s <= 0:
            raise ValueError(f"poll_s must be > 0 seconds, got {poll_s}")
        self.backend, self.db, self.backend_name, self.poll_s = backend, db, backend_name, poll_s
        self.serving: int | None = None  # the version now the default (None: base model)
        self.previous: int | None = None
        self._synced = False
        self.adapters_dir = adapters_dir
        self._task: asyncio.Task[None] | None = None

    def _wanted(self) -> tuple[int | None, Path | None]:
        with transaction(self.db) as db:
            return serving_adapter(db, backend=self.backend_name, adapters_dir=self.adapters_dir)

    async def sync_once(self) -> bool:
        """Follow the table now; True when the serving adapter changed."""
        version, path = await asyncio.to_thread(self._wanted)
        if self._synced and version == self.serving:
            return False
        if version is not None:
            if path is None:
                raise LookupError(f"deployment names version {version}, which has no adapter row")
            name = adapter_name(version)
            await self.backend.load_adapter(name, path)
            self.backend.use_adapter(name)
        else:
            self.backend.use_adapter(None)
        if self._synced:
            self.previous = self.serving
        self.serving, self._synced = version, True
        log.info("serving %s", adapter_name(version) if version else "the base model")
        if self.backend_name == "embedded":  # on vLLM the learner's deployer prunes
            keep = {adapter_name(v) for v in (self.serving, self.previous) if v is not None}
            await prune(self.backend, keep)
        return True

    async def run(self) -> None:
        while True:
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database or model server is down: retry later
                log.warning("deployment follower: %s", exc)
            await asyncio.sleep(self.poll_s)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="deployments")
        return self._task

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def start_follower(
    backend: ModelBackend,
    db: sessionmaker[Session],
    model_backend: str,
    *,
    poll_s: float = 1.0,
    adapters_dir: Path | None = None,
) -> DeploymentFollower | None:
    """A running follower for a process's backend; None for one that cannot load adapters
    (the scripted models of tests). Call from inside the event loop; `aclose()` it at exit."""
    if not isinstance(backend, AdapterHost):
        return None
    follower = DeploymentFollower(
        adapter_host(backend), db, backend_name=deployment_backend(model_backend), poll_s=poll_s,
        adapters_dir=adapters_dir,
    )  # fmt: skip
    follower.start()
    return follower
