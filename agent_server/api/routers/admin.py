"""`/v1/admin`: the learner's runs, adapters and deployments; trigger a cycle; roll back.

Needs the admin token (`Authorization: Bearer <admin token>`; `$APPRENTICE_HOME/admin_token`
unless APPRENTICE_ADMIN_TOKEN is set) or the dashboard's session cookie with its CSRF token
(routers/admin_session.py); the user token is refused with 403.

    GET  /v1/admin/runs                 newest first          GET /v1/admin/runs/{id}
    POST /v1/admin/runs {"config": {...}}  -> 202, a queued run a learner worker picks up
    GET  /v1/admin/adapters             GET /v1/admin/deployments
    POST /v1/admin/rollback {"version": 2 | null | "previous", "reason": "..."}

Triggering writes a queued `learner_runs` row (its `config`: overrides of the learner's
defaults, validated by the worker) and sends `learner.cycle` by name through the broker
(ground/broker.py): this app never imports the learner. Rolling back loads the target
adapter into this server's backend and answers a canary before the deployments row flips,
then the deployment follower makes it the default at once. Tests:
tests/learner/test_admin_api.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from agent_server.api.deps import DbDep, DbInt, DbText, ServicesDep, require_admin
from agent_server.models.base import ModelError
from agent_server.models.deployments import (
    adapter_path,
    deployment_backend,
    load_and_check,
    rollback_to,
)
from feedback.db import transaction
from feedback.models import AdapterStatus
from feedback.queries import (
    adapter_name,
    create_run,
    finish_run,
    get_adapter,
    get_run,
    list_adapters,
    list_deployments,
    list_runs,
    rollback_target,
)
from feedback.queries.stats import step_seconds
from ground.broker import send_cycle

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class StepTime(BaseModel):
    name: str
    status: str
    seconds: float | None = Field(description="Wall time; null while the step runs.")


class RunOut(_Out):
    id: int
    status: str
    trigger: str
    kind: str = Field(description="feedback | tasks | mixed (the run's config)")
    adapter_version: int | None
    error: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    dataset: dict[str, Any] | None = Field(description="What the run trained on: counts, ids.")
    step_times: list[StepTime]

    @classmethod
    def of(cls, row: Any) -> Any:
        """From a learner_runs row (the kind and step times derived from its JSON)."""
        steps = [s for s in row.steps or [] if isinstance(s, dict)]
        fields = {name: getattr(row, name) for name in RunDetail.model_fields if hasattr(row, name)}
        fields["kind"] = str((row.config or {}).get("kind", "feedback"))
        fields["step_times"] = [
            StepTime(name=str(s.get("name")), status=str(s.get("status")), seconds=step_seconds(s))
            for s in steps
        ]
        return cls.model_validate(fields)


class RunDetail(RunOut):
    config: dict[str, Any]
    steps: list[dict[str, Any]] = Field(description="{name, status, started, finished, metrics}")


class AdapterOut(_Out):
    version: int
    name: str
    path: str
    base_model: str
    parent_version: int | None
    status: str
    metrics: dict[str, Any]
    run_id: int | None
    created_at: dt.datetime


class DeploymentOut(_Out):
    id: int
    adapter_version: int | None
    backend: str
    status: str
    rollback_of: int | None
    reason: str | None
    created_at: dt.datetime


class TriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: dict[str, Any] = Field(
        default_factory=dict, description="Overrides of the learner's config for this run."
    )


class RollbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: DbInt | None | Literal["previous"] = Field(
        default="previous",
        description="A published version, null for the base model, or the previous one.",
    )
    reason: DbText = Field(default="rollback from the admin API", max_length=2000)


@router.get("/runs")
def runs(db: DbDep, limit: int = Query(default=50, ge=1, le=500)) -> list[RunOut]:
    return [RunOut.of(r) for r in list_runs(db, limit=limit)]


@router.get("/runs/{run_id}")
def run(run_id: DbInt, db: DbDep) -> RunDetail:
    row = get_run(db, run_id=run_id)
    if row is None:
        raise HTTPException(404, detail=f"no learner run {run_id}")
    return RunDetail.of(row)


@router.post("/runs", status_code=status.HTTP_202_ACCEPTED)
def trigger(body: TriggerIn, services: ServicesDep) -> RunOut:
    """Queue a learning cycle; a learner worker runs it (poll GET /v1/admin/runs/{id})."""
    with transaction(services.db) as db:
        row = create_run(db, trigger="api", config=body.config)
    try:
        send_cycle(services.settings, row.id)
    except Exception as exc:  # the broker is down: say so, and do not leave a run queued
        with transaction(services.db) as db:
            finish_run(db, run_id=row.id, status="failed", error=f"broker unreachable: {exc}")
        raise HTTPException(503, detail=f"the learner's broker is unreachable: {exc}") from None
    return RunOut.of(row)


@router.get("/adapters")
def adapters(
    db: DbDep, status_: Annotated[AdapterStatus | None, Query(alias="status")] = None
) -> list[AdapterOut]:
    return [AdapterOut.model_validate(a) for a in list_adapters(db, status=status_)]


@router.get("/deployments")
def deployments(
    db: DbDep, backend: DbText | None = None, limit: int = Query(default=50, ge=1, le=500)
) -> list[DeploymentOut]:
    return [
        DeploymentOut.model_validate(d) for d in list_deployments(db, backend=backend, limit=limit)
    ]


@router.post("/rollback")
async def rollback(body: RollbackIn, request: Request, services: ServicesDep) -> DeploymentOut:
    """Serve `version` again (load + canary first); the follower switches at once."""
    backend = deployment_backend(services.settings.model_backend)

    def target() -> tuple[int | None, Path | None]:
        with transaction(services.db) as db:
            version = body.version
            if version == "previous":
                found = rollback_target(db, backend=backend)
                if found is None:
                    raise HTTPException(
                        409, detail=f"backend {backend!r} has nothing to roll back to"
                    )
                version = found.adapter_version
            if version is None:
                return None, None
            row = get_adapter(db, version=version)
            if row is None or row.status != "published":
                raise HTTPException(404, detail=f"no published adapter version {version}")
            return version, adapter_path(row.path, version, services.settings.adapters_dir)

    version, path = await asyncio.to_thread(target)
    if version is not None and path is not None:
        try:
            await load_and_check(services.backend, adapter_name(version), path)
        except (ModelError, AttributeError) as exc:
            raise HTTPException(
                502, detail=f"{adapter_name(version)} cannot serve: {exc}"
            ) from None

    def flip() -> DeploymentOut:
        with transaction(services.db) as db:
            row = rollback_to(db, backend=backend, version=version, reason=body.reason)
            return DeploymentOut.model_validate(row)

    out = await asyncio.to_thread(flip)
    follower = getattr(request.app.state, "follower", None)
    if follower is not None:
        await follower.sync_once()
    return out
