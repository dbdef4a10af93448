"""FastAPI dependencies as `Annotated` aliases: the services, a DB session, the token check.

    @router.get("/things")
    def things(db: DbDep) -> list[Thing]: ...

Routers that need a token add `dependencies=[Depends(require_token)]` (the admin routers:
`require_admin`, which also takes the dashboard's session cookie, admin_session.py).
Nothing to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from annotated_types import Ge, Le
from fastapi import Depends, HTTPException, Request, status
from sqlalchemy.orm import Session

from agent_server.api.admin_session import COOKIE, CSRF_HEADER, SAFE_METHODS, csrf_ok, read_cookie
from agent_server.api.auth import Principal, bearer_token
from agent_server.api.services import Services
from agent_server.protocol.parts import _NO_NUL


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]


def get_db(services: ServicesDep) -> Iterator[Session]:
    with services.db() as db:
        yield db


DbDep = Annotated[Session, Depends(get_db)]


# Parameters that reach a query, typed so that what PostgreSQL cannot take is a 422 and not
# the driver's error (a 500): text holding NUL, and numbers outside its `integer` column type
# (run ids, adapter versions). tests/api/test_fuzz_http.py found both.
DbText = Annotated[str, _NO_NUL]
DbInt = Annotated[int, Ge(-(2**31)), Le(2**31 - 1)]


def require_token(request: Request, services: ServicesDep) -> Principal:
    """The shared token, a person's token (`apprentice users add`), or the admin token:
    who is asking (`PrincipalDep`)."""
    principal = services.auth.identify(bearer_token(request), services.db)
    if principal is None:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong token: send `Authorization: Bearer <token>` (the token "
            "is in $APPRENTICE_HOME/token unless APPRENTICE_TOKEN is set)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return principal


PrincipalDep = Annotated[Principal, Depends(require_token)]


def require_admin(request: Request, services: ServicesDep) -> None:
    """The admin token (or an admin user's token) as a bearer token, or the dashboard's
    session cookie (with its CSRF token on anything but GET / HEAD / OPTIONS). A user token
    gets 403, anything else 401."""
    token = bearer_token(request)
    if token is None:
        admin_token = services.auth.admin_token
        session = read_cookie(admin_token, request.cookies.get(COOKIE))
        if session is not None:
            if request.method in SAFE_METHODS or csrf_ok(
                admin_token, session, request.headers.get(CSRF_HEADER)
            ):
                return
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"missing or wrong {CSRF_HEADER} header (GET /v1/admin/session gives it)",
            )
    elif (principal := services.auth.identify(token, services.db)) is not None:
        if principal.admin:
            return
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="this needs the admin token")
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail="missing or wrong token: send `Authorization: Bearer <admin token>` (it is in "
        "$APPRENTICE_HOME/admin_token unless APPRENTICE_ADMIN_TOKEN is set), or sign in at /admin/",
        headers={"WWW-Authenticate": "Bearer"},
    )
