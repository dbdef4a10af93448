"""`/v1/admin/session`: the dashboard's sign-in (admin_session.py says how it is kept safe).

    POST   /v1/admin/session {"token": "<admin token>"}  -> Set-Cookie, {"csrf_token", "expires"}
    GET    /v1/admin/session                             -> {"csrf_token", "expires"} or 401
    DELETE /v1/admin/session   (X-CSRF-Token)            -> the cookie cleared

Only the admin token signs in; the user token is refused like a wrong one, so the dashboard
shows its login page and no data. The token travels only in the JSON body.
"""

from __future__ import annotations

import datetime as dt
import logging

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from agent_server.api.admin_session import (
    COOKIE,
    SESSION_S,
    AdminSession,
    csrf_token,
    new_cookie,
    read_cookie,
)
from agent_server.api.deps import ServicesDep, require_admin

router = APIRouter(prefix="/v1/admin/session", tags=["admin"])
log = logging.getLogger(__name__)


class LoginIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=512, description="The admin token.")


class AdminSessionOut(BaseModel):
    csrf_token: str = Field(description="Send it as X-CSRF-Token on POST / PUT / DELETE.")
    expires: dt.datetime


def _out(admin_token: str, session: AdminSession) -> AdminSessionOut:
    expires = dt.datetime.fromtimestamp(session.expires(), tz=dt.UTC)
    return AdminSessionOut(csrf_token=csrf_token(admin_token, session), expires=expires)


@router.post("")
def sign_in(
    body: LoginIn, request: Request, response: Response, services: ServicesDep
) -> AdminSessionOut:
    """Sign in with the admin token: sets the HttpOnly, SameSite=Strict session cookie."""
    if not services.auth.check_token(body.token, admin=True):
        log.warning(
            "dashboard sign-in refused from %s", request.client.host if request.client else "?"
        )
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail="that is not the admin token")
    value, session = new_cookie(services.auth.admin_token)
    response.set_cookie(
        COOKIE, value, max_age=SESSION_S, path="/", httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip
    return _out(services.auth.admin_token, session)


@router.get("", dependencies=[Depends(require_admin)])
def current(request: Request, services: ServicesDep) -> AdminSessionOut:
    """The signed-in session's CSRF token (401 when not signed in)."""
    session = read_cookie(services.auth.admin_token, request.cookies.get(COOKIE))
    if session is None:  # signed in with a bearer token: no cookie session to describe
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no dashboard session")
    return _out(services.auth.admin_token, session)


@router.delete("", status_code=status.HTTP_204_NO_CONTENT, dependencies=[Depends(require_admin)])
def sign_out(response: Response) -> None:
    """Sign out: the cookie is cleared."""
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
