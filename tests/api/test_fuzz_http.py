"""Schemathesis against the HTTP API's OpenAPI schema: no generated request gets a 5xx.

A real server (uvicorn on a loopback port, a fresh migrated PostgreSQL database, the admin
token) publishes /openapi.json; `schemathesis.openapi.from_url` loads it from there, and every
documented operation (health, metrics, sessions, the admin API, the dashboard's sign-in) is
fuzzed through its `as_strategy` with hypothesis, in both generation modes: POSITIVE (data
the schema allows) and NEGATIVE (data it forbids: wrong types, out-of-range numbers, missing
required fields, bodies that are not objects). The cases go over real HTTP. Every request
carries `Authorization: Bearer <ADMIN_TOKEN>` (the admin token passes the user-token
routes too), so the handlers behind the auth check are reached. The database is seeded with
finished learner runs, outcomes and a session so the 200 paths serialize real rows.

Checked: `not_a_server_error` only. The other built-in checks fail on documented behaviour:
`status_code_conformance` (FastAPI documents 200 and 422; our 401/403/404/409 are in the
routers' docstrings, not the schema), `response_schema_conformance` (our 422s carry
`{"detail": "<text>"}`, not FastAPI's HTTPValidationError list), `negative_data_rejection`
(unknown query parameters are ignored, as HTTP APIs do) and `positive_data_acceptance` (a
valid-looking id of a run that does not exist is a 404). A mismatch of a response with its
model would surface as a 500 anyway: FastAPI validates what the handlers return.

schemathesis' pytest entry point (`schemathesis.pytest.from_fixture(...).parametrize()`) is
not used: with pytest 9.2 it fails on a removed pytest internal (`Function._nodeid`).

Run (prints the case count): .venv/bin/python -m pytest tests/api/test_fuzz_http.py -q -s
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup

from feedback.db import transaction
from feedback.queries.sessions import create_session
from tests.api.dashboard_data import seed_outcomes, seed_runs
from tests.api.server import ADMIN_TOKEN

pytestmark = pytest.mark.postgres
EXAMPLES = 40  # generated cases per operation and generation mode (fewer where few exist)
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# Queued runs wait for a learner worker that never comes here, and the server-sent events of
# GET /v1/admin/runs/{run_id}/events end only when their run has finished: with this route
# fuzzed, a generated request for a queued run would hang. Without it every run is a seeded,
# finished one and each stream ends after its first event, so the SSE route is fuzzed. The
# trigger's body is FastAPI-validated (TriggerIn, extra=forbid); tests/learner covers it.
EXCLUDED = {"POST /v1/admin/runs"}


@pytest.fixture
def server(admin_server):
    """The admin server with rows to serve: finished runs (their event streams end), a month
    of outcomes and one stored session."""
    factory = admin_server.services.db
    seed_runs(factory, n=3)
    seed_outcomes(factory, n=300, days=30, seed=1)
    with transaction(factory) as db:
        create_session(db, mode="interactive", title="t", workspace_root="w", client_name="c")
    return admin_server


def fuzz_operation(operation, mode: GenerationMode, http: requests.Session) -> tuple[list, list]:
    """Run up to EXAMPLES generated cases; return the (operation, mode, status) of each and
    the (operation, status, curl) of each that failed the check. Failures are collected, not
    raised, so one run reports every 5xx at once."""
    seen: list[int] = []
    failures: list[tuple[str, int, str]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,  # the same cases on every run: CI is reproducible
        database=None,  # no .hypothesis/ directory in the repo
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case) -> None:
        response = case.call(session=http, headers=AUTH, timeout=30)
        seen.append(response.status_code)
        try:
            case.validate_response(response, checks=[not_a_server_error])
        except (FailureGroup, AssertionError):
            failures.append((operation.label, response.status_code, case.as_curl_command()))

    try:
        run()
    except Unsatisfiable:
        # NEGATIVE on an operation without parameters or body: nothing can be made invalid.
        assert mode is GenerationMode.NEGATIVE and not seen, operation.label
    return [(operation.label, mode.value, status) for status in seen], failures


def test_no_generated_request_gets_a_server_error(server) -> None:
    schema = schemathesis.openapi.from_url(
        f"{server.http_url}/openapi.json",
        config=schemathesis.Config(),  # explicit: no schemathesis.toml or env var applies
        timeout=10,
    )
    http = requests.Session()
    statuses: Counter[int] = Counter()
    per_operation: Counter[str] = Counter()
    failures: list[tuple[str, int, str]] = []
    for result in schema.get_all_operations():
        operation = result.ok()  # raises if the schema itself is broken
        if operation.label in EXCLUDED:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            cases, failed = fuzz_operation(operation, mode, http)
            statuses.update(status for _, _, status in cases)
            per_operation[operation.label] += len(cases)
            failures += failed
    total, server_errors = sum(statuses.values()), sum(n for c, n in statuses.items() if c >= 500)
    print(
        f"\nschemathesis: {total} cases over {len(per_operation)} operations "
        f"({len(EXCLUDED)} excluded); statuses {dict(sorted(statuses.items()))}; "
        f"5xx={server_errors}"
    )
    # The first failing request of each operation, as a curl command line to replay it.
    first = {label: (status, curl) for label, status, curl in reversed(failures)}
    assert failures == [], "\n".join(f"{s} {label}: {c}" for label, (s, c) in first.items())
    assert server_errors == 0
    # Every documented operation but the excluded ones ran, most of them many times.
    assert len(per_operation) >= 15, per_operation
    assert total >= 15 * EXAMPLES, per_operation
    assert statuses[200] > 0 and any(400 <= c < 500 for c in statuses), statuses


# Values schemathesis does not generate (NUL in path and query strings, datetimes at the ends
# of Python's range) but PostgreSQL and datetime arithmetic choke on: each was a 500.
HOSTILE = [
    ("GET", "/v1/sessions/%00", None, None),
    ("GET", "/v1/sessions/a%00b/events", None, None),
    ("GET", "/v1/sessions", {"status": "\x00"}, None),
    ("GET", "/v1/sessions", {"status": "nonsense"}, None),
    ("GET", "/v1/admin/adapters", {"status": "nonsense"}, None),
    ("GET", "/v1/admin/rollouts/%00", None, None),
    ("GET", "/v1/admin/deployments", {"backend": "\x00"}, None),
    ("GET", "/v1/admin/runs/2147483648", None, None),
    ("GET", "/v1/admin/runs/-2147483649/rollouts", None, None),
    ("GET", "/v1/admin/runs/99999999999/events", None, None),
    ("POST", "/v1/admin/rollback", None, {"version": 2**31}),
    ("POST", "/v1/admin/rollback", None, {"version": None, "reason": "a\x00b"}),
    ("GET", "/v1/admin/stats/outcomes", {"user": "\x00"}, None),
    ("GET", "/v1/admin/stats/outcomes", {"until": "0001-01-02T00:00:00Z"}, None),
    ("GET", "/v1/admin/stats/outcomes", {"until": "9999-12-31T23:59:59-23:59"}, None),
    ("GET", "/v1/admin/stats/outcomes", {"since": "0001-01-01T00:00:00+14:00"}, None),
]


def test_values_postgres_cannot_take_are_client_errors(server) -> None:
    answers = []
    for method, path, params, body in HOSTILE:
        # A fresh connection each: after a 500 uvicorn may close the kept-alive one.
        with httpx.Client(base_url=server.http_url, headers=AUTH, timeout=10) as client:
            answers.append((client.request(method, path, params=params, json=body).status_code,
                            method, path, params, body))  # fmt: skip
    print(f"\nhand-made hostile requests: {len(answers)}, statuses {[a[0] for a in answers]}")
    assert [a for a in answers if not 400 <= a[0] < 500] == []


def test_the_seeded_rows_are_served(server) -> None:
    """Guard the fuzz itself: the 200 paths serve real rows, and the token gets through."""
    client = httpx.Client(base_url=server.http_url, headers=AUTH, timeout=10)
    runs = client.get("/v1/admin/runs").json()
    assert len(runs) == 3 and all(r["status"] == "succeeded" for r in runs)
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(days=40)).isoformat()
    rows = client.get("/v1/admin/stats/outcomes", params={"since": since}).json()["rows"]
    assert sum(r["n"] for r in rows) >= 300
    assert len(client.get("/v1/sessions").json()) == 1
