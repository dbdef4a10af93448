"""Published adapters and deployments (which version each serving backend runs).

    v = next_adapter_version(db)                     # write files to adapters/policy-v{v}/
    publish_adapter(db, version=v, path=..., base_model=..., metrics={...})
    record_deployment(db, adapter_version=v, backend="vllm")
    rollback_deployment(db, backend="vllm", reason="gate regression in production")

These functions only write the record; the Deployer (learner/) does the serving side.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, func, select, update
from sqlalchemy.orm import Session, aliased

from feedback.models import Adapter, Deployment
from feedback.vocab import adapter_name  # re-exported: callers import it from feedback.queries


class NothingToRollBack(LookupError):
    """The backend has no active deployment, or none before it to return to."""


def next_adapter_version(db: Session) -> int:
    """1 + the highest version ever recorded (refused ones included: numbers are not reused)."""
    highest = db.scalar(select(func.max(Adapter.version)))
    return (highest or 0) + 1


def publish_adapter(
    db: Session,
    *,
    version: int,
    path: str,
    base_model: str,
    parent_version: int | None = None,
    status: str = "published",
    metrics: dict[str, Any] | None = None,
    run_id: int | None = None,
) -> Adapter:
    """Record adapter `policy-v{version}`; a version already taken raises IntegrityError."""
    row = Adapter(
        version=version,
        name=adapter_name(version),
        path=path,
        base_model=base_model,
        parent_version=parent_version,
        status=status,
        metrics=metrics or {},
        run_id=run_id,
    )
    db.add(row)
    db.flush()
    return row


def get_adapter(db: Session, *, version: int) -> Adapter | None:
    return db.scalars(select(Adapter).where(Adapter.version == version)).one_or_none()


def list_adapters(db: Session, *, status: str | None = None) -> list[Adapter]:
    """Oldest version first."""
    query = select(Adapter).order_by(Adapter.version)
    if status is not None:
        query = query.where(Adapter.status == status)
    return list(db.scalars(query))


def active_deployment(db: Session, *, backend: str) -> Deployment | None:
    return db.scalars(
        select(Deployment).where(Deployment.backend == backend, Deployment.status == "active")
    ).one_or_none()


def list_deployments(
    db: Session, *, backend: str | None = None, limit: int = 50
) -> list[Deployment]:
    """Newest first."""
    query = select(Deployment).order_by(Deployment.id.desc()).limit(limit)
    if backend is not None:
        query = query.where(Deployment.backend == backend)
    return list(db.scalars(query))


def record_deployment(
    db: Session,
    *,
    adapter_version: int | None,
    backend: str,
    reason: str | None = None,
    status: str = "active",
    rollback_of: int | None = None,
) -> Deployment:
    """Record that `backend` now serves `adapter_version` (None: the base model).

    An `active` deployment supersedes the backend's current one. A `failed` one records
    an attempt and leaves the active one alone.
    """
    if status == "active":
        db.execute(
            update(Deployment)
            .where(Deployment.backend == backend, Deployment.status == "active")
            .values(status="superseded"),
            execution_options={"synchronize_session": "fetch"},
        )
    row = Deployment(
        adapter_version=adapter_version,
        backend=backend,
        status=status,
        reason=reason,
        rollback_of=rollback_of,
    )
    db.add(row)
    db.flush()
    return row


def rollback_target(db: Session, *, backend: str) -> Deployment | None:
    """The deployment to return to: the newest superseded one, older than the active one,
    serving another version, and not of a version that was since rolled back away from
    (a rollback means "this version is bad": later rollbacks never return to it)."""
    current = active_deployment(db, backend=backend)
    if current is None:
        return None
    later = aliased(Deployment)
    rolled_back_since = exists().where(
        later.backend == backend,
        later.status == "rolled_back",
        later.id > Deployment.id,
        later.adapter_version.is_not_distinct_from(Deployment.adapter_version),
    )
    return db.scalars(
        select(Deployment)
        .where(
            Deployment.backend == backend,
            Deployment.status == "superseded",
            Deployment.id < current.id,
            Deployment.adapter_version.is_distinct_from(current.adapter_version),
            ~rolled_back_since,
        )
        .order_by(Deployment.id.desc())
        .limit(1)
    ).first()


def rollback_deployment(db: Session, *, backend: str, reason: str) -> Deployment:
    """Mark the active deployment `rolled_back` and make the previous version active again.

    Returns the new active deployment (its `rollback_of` names the one rolled back).
    Rolling back again walks further back: v3 -> v2 -> v1 -> base model.
    """
    current = active_deployment(db, backend=backend)
    target = rollback_target(db, backend=backend)
    if current is None or target is None:
        raise NothingToRollBack(f"backend {backend!r} has nothing to roll back to")
    current.status = "rolled_back"
    db.flush()
    return record_deployment(
        db,
        adapter_version=target.adapter_version,
        backend=backend,
        reason=reason,
        rollback_of=current.id,
    )
