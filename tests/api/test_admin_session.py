"""The dashboard's sign-in against a real server: the admin token once, then an HttpOnly,
SameSite=Strict cookie; state changes need the CSRF token; the user token never signs in.

Run: .venv/bin/python -m pytest tests/api/test_admin_session.py -q
"""

from __future__ import annotations

import httpx
import pytest

from agent_server.api.admin_session import COOKIE, SESSION_S, new_cookie, read_cookie
from tests.api.server import ADMIN_TOKEN as ADMIN
from tests.api.server import TOKEN

pytestmark = pytest.mark.postgres


@pytest.fixture
def server(admin_server):
    return admin_server


def signed_in(server) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=server.http_url)
    response = client.post("/v1/admin/session", json={"token": ADMIN})
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"].lower()
    for attribute in ("httponly", "samesite=strict", "path=/", f"max-age={SESSION_S}"):
        assert attribute in cookie
    assert ADMIN.lower() not in cookie  # the cookie is a signed nonce, not the token
    return client, response.json()["csrf_token"]


def test_the_admin_token_signs_in_once_then_the_cookie_reads(server) -> None:
    client, csrf = signed_in(server)
    assert client.get("/v1/admin/runs").status_code == 200
    assert client.get("/v1/admin/session").json()["csrf_token"] == csrf


@pytest.mark.parametrize("token", [TOKEN, "wrong-token-0123456789", ""])
def test_the_user_token_or_a_wrong_one_signs_nobody_in(server, token) -> None:
    client = httpx.Client(base_url=server.http_url)
    response = client.post("/v1/admin/session", json={"token": token})
    assert response.status_code in (401, 422) and "set-cookie" not in response.headers
    for path in ("/v1/admin/runs", "/v1/admin/adapters", "/v1/admin/session"):
        response = client.get(path)  # no data: only the reason
        assert response.status_code == 401 and set(response.json()) == {"detail"}


def test_state_changes_need_the_csrf_token(server) -> None:
    client, csrf = signed_in(server)
    body = {"version": None, "reason": "test"}
    for headers in [{}, {"X-CSRF-Token": "0" * 64}, {"X-CSRF-Token": ""}]:
        response = client.post("/v1/admin/rollback", json=body, headers=headers)
        assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    # With the token the request passes the check (and rolls back to the base model).
    response = client.post("/v1/admin/rollback", json=body, headers={"X-CSRF-Token": csrf})
    assert response.status_code == 200 and response.json()["adapter_version"] is None
    # A bearer admin token needs no CSRF token: no ambient credential is involved.
    bearer = httpx.post(f"{server.http_url}/v1/admin/rollback", json=body,
                        headers={"Authorization": f"Bearer {ADMIN}"})  # fmt: skip
    assert bearer.status_code == 200


def test_signing_out_clears_the_cookie_and_needs_the_csrf_token(server) -> None:
    client, csrf = signed_in(server)
    assert client.delete("/v1/admin/session").status_code == 403
    response = client.delete("/v1/admin/session", headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204
    assert client.get("/v1/admin/runs").status_code == 401


def test_a_forged_tampered_or_stale_cookie_is_refused(server) -> None:
    value, session = new_cookie(ADMIN)
    assert read_cookie(ADMIN, value) == session
    assert read_cookie("another-admin-token-0123456", value) is None  # a new admin token
    assert read_cookie(ADMIN, value, now=session.issued + SESSION_S + 1) is None
    issued, nonce, signature = value.split(".")
    assert read_cookie(ADMIN, f"{issued}.{nonce}x.{signature}") is None
    assert read_cookie(ADMIN, f"{int(issued) + 9}.{nonce}.{signature}") is None
    forged, _ = new_cookie("not-the-admin-token-012345")
    # The signature's last character changed (to "0", or to "1" if it was "0": a "0" always
    # made this test fail one run in 64).
    tampered = f"{issued}.{nonce}.{signature[:-1]}{'1' if signature.endswith('0') else '0'}"
    for cookie in (forged, tampered, "garbage", "a" * 5000):
        response = httpx.get(f"{server.http_url}/v1/admin/runs", cookies={COOKIE: cookie})
        assert response.status_code == 401
    response = httpx.get(f"{server.http_url}/v1/admin/runs", cookies={COOKIE: value})
    assert response.status_code == 200
