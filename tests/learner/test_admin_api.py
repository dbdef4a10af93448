"""The admin API and the embedded loop, end to end on the embedded defaults: a real agent
server (embedded dev model, SQLite), a real `apprentice worker` on kombu's SQLite broker
(no broker settings at all), a cycle triggered through POST /v1/admin/runs, the server
following the deployments table within seconds, and rollback through the API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_server.protocol import messages as p
from agent_server.protocol.client import ProtocolClient
from feedback.db import make_engine, make_sessionmaker
from ground.settings import Settings
from tests.api.server import TOKEN, RunningServer, start_server
from tests.learner.conftest import FAST
from tests.learner.synthetic_feedback import seed_feedback
from tests.learner.worker import Worker, start_worker, wait_for

ADMIN = "admin-token-0123456789abcdef"


@pytest.fixture
def stack(tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path) -> Iterator[RunningServer]:
    settings = Settings(
        home=tmp_path / "home", database_url=sqlite_head_url, model_name=str(dev_model_dir),
        token=TOKEN, admin_token=ADMIN,
    )  # fmt: skip
    server = start_server(settings)
    yield server
    server.stop()


def admin(server: RunningServer, token: str = ADMIN) -> httpx.Client:
    return httpx.Client(base_url=server.http_url, headers={"Authorization": f"Bearer {token}"},
                        timeout=60)  # fmt: skip


async def served_by(server: RunningServer) -> str | None:
    """The adapter that serves an inline completion in a new session."""
    client = await ProtocolClient.connect(server.ws_url, TOKEN)
    try:
        info = await client.create_session(title="which adapter")
        await client.send(
            p.CompletionRequest(id="c1", path="a.py", prefix="def add(a, b):\n    ",
                                session_id=info.session_id, max_tokens=4)
        )  # fmt: skip
        return (await client.expect(p.CompletionSuggestion)).adapter
    finally:
        await client.close()


def test_admin_endpoints_need_the_admin_token(stack: RunningServer) -> None:
    assert admin(stack, TOKEN).get("/v1/admin/runs").status_code == 403
    assert httpx.get(f"{stack.http_url}/v1/admin/runs").status_code == 401
    with admin(stack) as api:
        assert api.get("/v1/admin/runs").json() == []
        assert api.get("/v1/admin/adapters").json() == []
        assert api.get("/v1/admin/deployments").json() == []
        assert api.get("/v1/admin/runs/99").status_code == 404
        assert api.post("/v1/admin/rollback", json={}).status_code == 409
        assert api.post("/v1/admin/rollback", json={"version": 5}).status_code == 404
        assert api.post("/v1/admin/runs", json={"bogus": 1}).status_code == 422


def test_a_trigger_with_the_broker_down_says_so_and_leaves_no_queued_run(
    tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path
) -> None:
    settings = Settings(
        home=tmp_path / "home", database_url=sqlite_head_url, model_name=str(dev_model_dir),
        token=TOKEN, admin_token=ADMIN, broker_url="redis://127.0.0.1:1/0",
    )  # fmt: skip
    server = start_server(settings)
    try:
        with admin(server) as api:
            reply = api.post("/v1/admin/runs", json={})
            assert reply.status_code == 503 and "broker" in reply.json()["detail"]
            (run,) = api.get("/v1/admin/runs").json()
            assert run["status"] == "failed" and "broker unreachable" in run["error"]
    finally:
        server.stop()


async def test_a_triggered_cycle_is_served_within_seconds_and_rolls_back(
    stack: RunningServer, dev_tokenizer: Any, dev_model_dir: Path, tmp_path: Path
) -> None:
    settings = stack.settings
    engine = make_engine(settings.database_url)
    seed_feedback(make_sessionmaker(engine), dev_tokenizer, dev_model_dir, 40)
    engine.dispose()
    assert await served_by(stack) is None  # the base model, before any deployment

    # No broker settings: the worker and the API meet on $APPRENTICE_HOME/broker.db.
    env = {"APPRENTICE_HOME": str(settings.home), "APPRENTICE_DATABASE_URL": settings.database_url,
           "APPRENTICE_MODEL_NAME": str(dev_model_dir)}  # fmt: skip
    worker: Worker = start_worker(env, tmp_path / "worker.log")
    try:
        with admin(stack) as api:
            queued = api.post("/v1/admin/runs", json={"config": FAST})
            assert queued.status_code == 202, queued.text
            run_id = queued.json()["id"]
            assert queued.json()["status"] == "queued"

            def finished() -> dict[str, Any] | None:
                run = api.get(f"/v1/admin/runs/{run_id}").json()
                done = ("succeeded", "failed", "skipped", "deferred")
                return run if run["status"] in done else None

            run = wait_for(finished, timeout=300, what=f"run {run_id}", worker=worker)
            done_at = time.monotonic()
            assert run["status"] == "succeeded", (run["error"], worker.log())
            assert [s["name"] for s in run["steps"]] == [
                "collect", "train", "evaluate", "publish", "deploy"
            ]  # fmt: skip
            assert run["config"]["train"]["max_steps"] == 12  # resolved and recorded
            assert "broker.db" in str(list(settings.home.iterdir()))
            (adapter,) = api.get("/v1/admin/adapters").json()
            assert adapter["name"] == "policy-v1" and adapter["run_id"] == run_id
            (deployment,) = api.get("/v1/admin/deployments").json()
            assert (deployment["adapter_version"], deployment["backend"]) == (1, "embedded")

            # The server follows the table: new requests use the new adapter within seconds.
            deadline = done_at + 10
            while (adapter_now := await served_by(stack)) != "policy-v1":
                assert time.monotonic() < deadline, f"still served by {adapter_now!r}"
                await asyncio.sleep(0.2)

            back = api.post("/v1/admin/rollback", json={"version": None, "reason": "test"})
            assert back.status_code == 200, back.text
            assert back.json()["adapter_version"] is None and back.json()["rollback_of"]
            assert await served_by(stack) is None
            again = api.post("/v1/admin/rollback", json={"version": 1})
            assert again.status_code == 200 and again.json()["adapter_version"] == 1
            assert await served_by(stack) == "policy-v1"
            statuses = [d["status"] for d in api.get("/v1/admin/deployments").json()]
            assert statuses == ["active", "rolled_back", "rolled_back"]
    finally:
        worker.stop()
