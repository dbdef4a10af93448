"""FastAPI dependencies as `Annotated` aliases: the services, a DB session, the token check.

    @router.get("/things")
    def things(db: DbDep) -> list[Thing]: ...

Routers that need a token add `dependencies=[Depends(require_token)]`. Nothing to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from agent_server.api.auth import bearer_token
from agent_server.api.services import Services


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_db(services: ServicesDep) -> Iterator[Session]:
    with services.db() as db:
        yield db


DbDep = Annotated[Session, Depends(get_db)]


def require_token(request: Request, services: ServicesDep) -> None:
    if not services.auth.check_token(bearer_token(request)):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong token: send `Authorization: Bearer <token>` (the token "
            "is in $APPRENTICE_HOME/token unless APPRENTICE_TOKEN is set)",
            headers={"WWW-Authenticate": "Bearer"},
        )
