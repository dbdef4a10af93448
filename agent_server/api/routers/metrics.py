"""`GET /metrics`: the Prometheus exposition of this server (agent_server/api/metrics.py).

Needs the metrics token or the admin token as `Authorization: Bearer ...` (Prometheus:
`authorization: {credentials_file: ...}` in the scrape config; deploy/prometheus/). The user
token is refused: the figures say how every person's suggestions fared.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agent_server.api.auth import bearer_token
from agent_server.api.deps import ServicesDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request, services: ServicesDep) -> Response:
    """Prometheus text format; counts since this process started, database figures now."""
    if not services.auth.check_metrics_token(bearer_token(request)):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="send `Authorization: Bearer <metrics token>` ($APPRENTICE_HOME/metrics_token "
            "unless APPRENTICE_METRICS_TOKEN is set; the admin token works too)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)
