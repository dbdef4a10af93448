"""`GET /healthz`: liveness without a token (for `apprentice up`, compose and load balancers)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from agent_server.api.deps import ServicesDep
from agent_server.protocol.messages import PROTOCOL_VERSION

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    protocol_version: int
    model: str


@router.get("/healthz")
def healthz(services: ServicesDep) -> Health:
    # Deliberately says nothing secret: anyone on the network may call it.
    return Health(status="ok", protocol_version=PROTOCOL_VERSION, model=services.backend.model_name)
