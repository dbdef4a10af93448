"""The learner's records: runs with per-step metrics, published adapters, deployments.

`adapters.version` N is the adapter `policy-vN` under `$APPRENTICE_HOME/adapters/`; a
`deployments` row says which version (NULL: the base model) a backend serves. At most one
deployment per backend is `active`, enforced by a partial unique index.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from feedback.models.base import Base, UTCDateTime, str_enum, utcnow

AdapterStatus = Literal["published", "refused", "retired"]
DeploymentStatus = Literal["active", "superseded", "rolled_back", "failed"]
RunStatus = Literal["queued", "running", "succeeded", "failed", "skipped", "deferred"]


class LearnerRun(Base):
    """One learning cycle: collect -> train -> evaluate/gate -> publish -> deploy (a task cycle:
    tasks -> rollouts -> train -> evaluate/gate -> publish -> deploy)."""

    __tablename__ = "learner_runs"
    __table_args__ = (Index("ix_learner_runs_created_at", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    status: Mapped[str] = mapped_column(str_enum(RunStatus, "run_status"), default="queued")
    # Who asked: "schedule", "manual", "cli", "api"...
    trigger: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # [{name, status, started, finished, metrics}], in the order the steps ran.
    steps: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # What the run trained on: outcome id range, counts, synthetic task ids...
    dataset: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    adapter_version: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime())


class Adapter(Base):
    """A trained LoRA adapter; published ones are never modified on disk afterwards."""

    __tablename__ = "adapters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version: Mapped[int] = mapped_column(Integer, unique=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str] = mapped_column(Text)
    base_model: Mapped[str] = mapped_column(String(512))
    # The adapter this one was trained from; NULL: trained from the base model.
    parent_version: Mapped[int | None] = mapped_column(
        ForeignKey("adapters.version", ondelete="SET NULL")
    )
    status: Mapped[str] = mapped_column(str_enum(AdapterStatus, "adapter_status"))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("learner_runs.id", ondelete="SET NULL"))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


ACTIVE_ONLY = text("status = 'active'")


class Deployment(Base):
    """An adapter version put into service on a backend (or a failed attempt to)."""

    __tablename__ = "deployments"
    __table_args__ = (
        # One active deployment per backend: two deployers racing cannot both win.
        Index(
            "uq_deployments_active_backend",
            "backend",
            unique=True,
            postgresql_where=ACTIVE_ONLY,
            sqlite_where=ACTIVE_ONLY,
        ),
        Index("ix_deployments_backend_id", "backend", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # NULL: the base model without an adapter.
    adapter_version: Mapped[int | None] = mapped_column(
        ForeignKey("adapters.version", ondelete="RESTRICT")
    )
    # "vllm", "embedded"...: the Deployer that carried it out.
    backend: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(str_enum(DeploymentStatus, "deployment_status"))
    rollback_of: Mapped[int | None] = mapped_column(
        ForeignKey("deployments.id", ondelete="SET NULL")
    )
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
