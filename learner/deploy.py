"""Deploy: the `Deployer` seam and the two ways an adapter is put into service.

    deployer = make_deployer(settings, config.deploy)
    deployment = asyncio.run(deploy_version(db, deployer, version=3, path=folder, reason=...))
    asyncio.run(rollback(db, deployer, version=1, reason="v3 misbehaves"))   # any version

- `VLLMDeployer`: loads `policy-vN` through vLLM's runtime LoRA API (a new name for every
  version, never in place), answers a canary completion with it, and after the deployments
  row has flipped unloads every version older than the previous one. With several servers
  (`model_urls`) it does so on every one that is up before the row flips (its docstring).
- `EmbeddedDeployer`: the embedded backend lives in the agent server's process and loads
  what the deployments table names (agent_server/models/deployments.py). This deployer
  proves the adapter serves by loading it into a scratch embedded backend in the worker
  for the canary, then lets the table flip.
Either way: if loading or the canary fails, the row does not flip, and the serving adapter
stays what it was. Tested in tests/learner/test_e2e_vllm.py and tests/learner/test_pipeline.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any, Protocol

import httpx
from sqlalchemy.orm import Session, sessionmaker

from agent_server.models.base import BackendUnavailable, ModelError
from agent_server.models.deployments import (
    adapter_path,
    deployment_backend,
    load_and_check,
    prune,
    rollback_to,
)
from agent_server.models.openai_http import OpenAIBackend
from agent_server.models.replicas import is_healthy
from feedback.db import transaction
from feedback.models import Deployment
from feedback.queries import active_deployment, get_adapter, record_deployment
from feedback.vocab import adapter_name
from ground.settings import Settings
from learner.config import DeployConfig


class Deployer(Protocol):
    """Puts an adapter version into service on one serving backend, and takes old ones out."""

    @property
    def backend(self) -> str:
        """The `deployments.backend` name this deployer records ("vllm", "embedded")."""
        ...

    async def put_into_service(self, name: str, path: Path) -> dict[str, Any]:
        """Load the adapter and answer a canary with it; raise if it cannot serve."""
        ...

    async def retire(self, keep: set[str]) -> list[str]:
        """Unload every policy adapter not in `keep`; returns the names unloaded."""
        ...

    async def aclose(self) -> None: ...


class VLLMDeployer:
    """Loads and canaries an adapter on every vLLM server (`model_urls`, else `model_url`).

    `put_into_service` returns only once every server that is up serves the adapter, so
    `deploy_version` flips the row after all of them have it. With several servers, one that
    fails its health check (GET /health) is skipped and named in the details' `skipped`: the
    agent server's ReplicaPool keeps it out of rotation and gives it the serving adapter before
    it takes traffic again, so a replica being down does not stop the learner. One that is up
    but cannot load the adapter or answer the canary fails the deploy, naming it; none up is
    `BackendUnavailable`. One server: no health check, it is simply used (as before).
    `retire` unloads on every server that is up.
    """

    backend = "vllm"

    def __init__(self, settings: Settings, config: DeployConfig) -> None:
        from agent_server.models.factory import model_urls, openai_config

        http = dataclasses.replace(openai_config(settings), timeout_s=config.timeout_s)
        urls = model_urls(settings)
        self.clients = [OpenAIBackend(dataclasses.replace(http, base_url=u)) for u in urls]
        self.config = config

    async def _up(self) -> tuple[list[OpenAIBackend], list[str]]:
        """(the servers to deploy to, the URLs skipped as down)."""
        if len(self.clients) == 1:
            return self.clients, []
        async with httpx.AsyncClient(timeout=min(self.config.timeout_s, 10.0)) as http:
            roots = [c.config.root_url for c in self.clients]
            healthy = await asyncio.gather(*(is_healthy(http, root) for root in roots))
        up = [c for c, ok in zip(self.clients, healthy, strict=True) if ok]
        down = [c.config.base_url for c, ok in zip(self.clients, healthy, strict=True) if not ok]
        if not up:
            raise BackendUnavailable(f"no model server is up: {', '.join(down)} failed /health")
        return up, down

    async def put_into_service(self, name: str, path: Path) -> dict[str, Any]:
        up, skipped = await self._up()
        canaries = []
        for client in up:
            try:
                canaries.append(await load_and_check(
                    client, name, path,
                    prompt=self.config.canary_prompt, max_tokens=self.config.canary_max_tokens,
                ))  # fmt: skip
            except ModelError as exc:
                if len(self.clients) == 1:
                    raise
                raise type(exc)(f"{client.config.base_url}: {exc}") from exc
        canary = canaries[0]
        details: dict[str, Any] = {"canary": canary.text, "canary_tokens": len(canary.token_ids)}
        if len(self.clients) > 1:
            details |= {"replicas": [c.config.base_url for c in up], "skipped": skipped}
        return details

    async def retire(self, keep: set[str]) -> list[str]:
        up, _ = await self._up()
        dropped: set[str] = set()
        for client in up:
            dropped.update(await prune(client, keep))
        return sorted(dropped)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


class EmbeddedDeployer:
    backend = "embedded"

    def __init__(self, settings: Settings, config: DeployConfig) -> None:
        self.settings, self.config = settings, config

    async def put_into_service(self, name: str, path: Path) -> dict[str, Any]:
        from agent_server.models.embedded import EmbeddedBackend

        scratch = EmbeddedBackend.from_settings(self.settings)
        try:
            canary = await load_and_check(
                scratch, name, path,
                prompt=self.config.canary_prompt, max_tokens=self.config.canary_max_tokens,
            )  # fmt: skip
        finally:
            await scratch.aclose()
        return {"canary": canary.text, "canary_tokens": len(canary.token_ids)}

    async def retire(self, keep: set[str]) -> list[str]:
        return []  # the serving process unloads old versions as it follows the table

    async def aclose(self) -> None:
        return None


def make_deployer(settings: Settings, config: DeployConfig) -> Deployer:
    """The deployer for the process's serving backend (settings.model_backend)."""
    if deployment_backend(settings.model_backend) == "vllm":
        return VLLMDeployer(settings, config)
    return EmbeddedDeployer(settings, config)


async def deploy_version(
    db: sessionmaker[Session],
    deployer: Deployer,
    *,
    version: int,
    path: Path,
    reason: str,
) -> tuple[Deployment, dict[str, Any]]:
    """Load + canary, then flip the row, then unload versions older than the previous one."""
    name = adapter_name(version)
    details = await deployer.put_into_service(name, path)
    with transaction(db) as s:
        previous = active_deployment(s, backend=deployer.backend)
        keep = {name}
        if previous is not None and previous.adapter_version is not None:
            keep.add(adapter_name(previous.adapter_version))
        row = record_deployment(s, adapter_version=version, backend=deployer.backend, reason=reason)
    details["unloaded"] = await deployer.retire(keep)
    return row, details


async def rollback(
    db: sessionmaker[Session],
    deployer: Deployer,
    *,
    version: int | None,
    reason: str,
    adapters_dir: Path | None = None,
) -> Deployment:
    """Serve published `version` (None: the base model) again, in one call. An adapter
    published to an object store is loaded from `adapters_dir/policy-vN` (`adapter_path`)."""
    if version is not None:
        with transaction(db) as s:
            row = get_adapter(s, version=version)
            if row is None or row.status != "published":
                raise LookupError(f"no published adapter version {version}")
            path = adapter_path(row.path, version, adapters_dir)
        if path is None:
            raise LookupError(f"{row.path}: give the adapters folder it was downloaded into")
        await deployer.put_into_service(adapter_name(version), path)
    with transaction(db) as s:
        return rollback_to(s, backend=deployer.backend, version=version, reason=reason)


def record_failed_deployment(
    db: sessionmaker[Session], *, backend: str, version: int | None, reason: str
) -> None:
    """A `failed` row: the attempt is on record, the active deployment is left alone."""
    with transaction(db) as s:
        record_deployment(s, adapter_version=version, backend=backend, status="failed",
                          reason=reason[:2000])  # fmt: skip
