"""The learner's settings reach every cycle from one place: `[learner]` in config.toml (or
APPRENTICE_LEARNER). A scheduled cycle, which no one passes overrides to, leaves out the
feedback of a user named in `[learner.data] exclude_users`; a per-run override applies on
top; a bad value stops `apprentice learn` with one line naming the field."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from feedback.db import make_engine, make_sessionmaker, transaction
from feedback.queries import get_run, record_outcome, record_suggestion
from feedback.queries.users import add_user
from ground.settings import Settings
from learner import pipeline
from tests.fixtures.settings import run_cli

CONFIG = """
[learner.data]
exclude_users = ["eve"]
settle_s = 0.0
min_samples = 1

[learner.train]
max_steps = 1
"""


def feedback(db: object, user_id: int | None, n: int, kind: str) -> None:
    with transaction(db) as s:  # type: ignore[arg-type]
        for _ in range(n):
            row = record_suggestion(
                s, kind="completion", model="dev", adapter_version=None, user_id=user_id,
                prompt_messages=[], prompt_token_ids=[3, 1037, 198], completion_text="x",
                completion_token_ids=[9], completion_logprobs=[-0.5], proposed="x",
            )  # fmt: skip
            record_outcome(s, suggestion_id=row.id, kind=kind, client_event_id=uuid.uuid4().hex,
                           user_id=user_id)  # fmt: skip


def test_a_scheduled_cycle_honours_exclude_users_from_config_toml(
    tmp_path: Path, sqlite_head_url: str, dev_model_dir: Path, monkeypatch: object
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    monkeypatch.setenv("APPRENTICE_HOME", str(home))  # type: ignore[attr-defined]
    settings = Settings(database_url=sqlite_head_url, model_name=str(dev_model_dir),
                        learner_min_feedback=4)  # fmt: skip
    assert settings.learner["data"]["exclude_users"] == ["eve"]
    engine = make_engine(sqlite_head_url)
    db = make_sessionmaker(engine)
    try:
        with transaction(db) as s:
            ada, eve = add_user(s, "ada")[0].id, add_user(s, "eve")[0].id
        feedback(db, ada, 6, "accepted")
        feedback(db, eve, 5, "rejected")
        ctx = pipeline.Context(settings, db)
        assert ctx.config.data.exclude_users == ("eve",)
        run_id = pipeline.scheduled_run(ctx)
        assert run_id is not None
        # Ada's accepts alone: nothing to contrast them with (skipped), and that is the point.
        with contextlib.suppress(pipeline.RunSkipped):
            pipeline.collect(ctx, run_id)
        with transaction(db) as s:
            run = get_run(s, run_id=run_id)
            assert run.trigger == "schedule"
            assert run.config["data"]["exclude_users"] == ["eve"]  # what it ran with
            assert run.dataset["dropped"]["excluded_user"] == 5
            assert run.dataset["samples"] == 6 and run.dataset["undesirable"] == 0
        # A run's own overrides apply on top of the settings.
        other = pipeline.create_cycle(
            ctx, trigger="test", overrides={"data": {"exclude_users": []}}
        )
        with transaction(db) as s:
            assert get_run(s, run_id=other).config["data"]["exclude_users"] == []
            assert get_run(s, run_id=other).config["train"]["max_steps"] == 1
    finally:
        engine.dispose()


def test_a_bad_learner_setting_stops_apprentice_learn_with_one_line(
    tmp_path: Path, sqlite_head_url: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[learner.gate]\nalpha = 3\n")
    env = {"APPRENTICE_HOME": str(home), "APPRENTICE_DATABASE_URL": sqlite_head_url}
    done = run_cli("learn", env=env, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]  # a startup error: one line
    message = " ".join(done.stderr.split())
    assert "learner settings" in message and "gate.alpha: Input should be less than 1" in message
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr  # rich may wrap it once
