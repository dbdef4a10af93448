"""The deployment files agree with the code: docker-compose.yml, Dockerfile, .dockerignore.

No Docker engine runs on these machines, so nothing here starts a container. What can be
checked without one is checked for real: the compose file against the official Compose JSON
schema (vendored by check-jsonschema), every APPRENTICE_* variable against `Settings` (a real
`Settings` is built from each service's environment), every command against the real typer
app (parsed by click exactly as `apprentice` would), and the volumes, ports and dependencies
that the services rely on to find each other. The learner's layout (its two workers and
queues, the GPUs, the object store profile): tests/test_compose_learner.py.

    .venv/bin/python -m pytest tests/test_compose.py -q
"""

from __future__ import annotations

import json
import re
import tomllib
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest
import typer.main
import yaml
from sqlalchemy.engine import make_url

from agent_server.models import vllm_command
from apprentice.cli import app
from ground.settings import ENV_PREFIX, Settings

REPO = Path(__file__).resolve().parents[1]
COMPOSE_TEXT = (REPO / "docker-compose.yml").read_text()
SERVICES = {
    "postgres",
    "redis",
    "vllm",
    "migrate",
    "agent-server",
    "learner-gpu-worker",
    "learner-cpu-worker",
    "learner-beat",
    "minio",
    "minio-init",
    "prometheus",
    "grafana",
}
# Services that run our image with its default entrypoint (`apprentice`).
APPRENTICE_SERVICES = {"migrate", "agent-server", "learner-gpu-worker", "learner-cpu-worker"}
WORKERS = {"learner-gpu-worker", "learner-cpu-worker"}
OURS = APPRENTICE_SERVICES | {"learner-beat"}
# What a filled-in .env provides; unset variables take the file's defaults.
DOT_ENV = {
    "POSTGRES_PASSWORD": "placeholder-password",
    "APPRENTICE_METRICS_TOKEN": "placeholder-metrics-token",
    "GRAFANA_ADMIN_PASSWORD": "placeholder-grafana",
}

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR:?error}` and `$$` rules (enough here)."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        value = env.get(name)
        if op in (":?", "?") and not (value if op == ":?" else value is not None):
            raise AssertionError(f"compose would refuse to start: {name} unset ({arg})")
        if op == ":-":
            return value or arg
        if op == "-":
            return arg if value is None else value
        return value or ""

    out = _VAR.sub(one, text.replace("$$", "\0"))
    assert "$" not in out, (
        f"an interpolation this test does not understand: {out[out.index('$') :][:60]}"
    )
    return out.replace("\0", "$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(interpolate(COMPOSE_TEXT, DOT_ENV))


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def settings_of(service: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The Settings a container of this service builds: its APPRENTICE_* env, no TOML file."""
    monkeypatch.setenv("APPRENTICE_CONFIG", str(tmp_path / "no-config.toml"))
    for key, value in env_of(service).items():
        if key.startswith(ENV_PREFIX):
            monkeypatch.setenv(key, value)
    return Settings()


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Named volume -> path inside the container."""
    result = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        result[source] = target
    return result


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [ln for ln in (REPO / "Dockerfile").read_text().splitlines() if not ln.startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [tuple(ln.split(None, 1)) for ln in joined.splitlines() if ln.strip()]


def resolve_cli(args: list[str]) -> tuple[Any, dict[str, Any]]:
    """Walk the real command tree as `apprentice ARGS` would; parse the leaf's options.

    Groups are recognised by their `commands` mapping: typer ships its own copy of click, so
    `isinstance(..., click.Group)` is not a test to rely on."""
    command = typer.main.get_command(app)
    rest = list(args)
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    assert not hasattr(command, "commands"), f"`apprentice {' '.join(args)}` is a group"
    ctx = command.make_context(command.name or "apprentice", rest)  # raises on unknown options
    return command, ctx.params


def test_schema_valid_and_services_present(compose):
    schema_text = (
        resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    ).read_text()
    jsonschema.Draft202012Validator(json.loads(schema_text)).validate(compose)
    assert set(compose["services"]) == SERVICES
    used = {name for svc in compose["services"].values() for name in mounts(svc)}
    named = {name for name in used if not name.startswith((".", "/"))}
    assert named <= set(compose["volumes"]), "every named volume must be declared"


def test_required_secret_is_enforced():
    with pytest.raises(AssertionError, match="POSTGRES_PASSWORD"):
        interpolate(COMPOSE_TEXT, {})


def test_every_apprentice_variable_is_a_settings_field(compose):
    fields = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    referenced = set(re.findall(r"\bAPPRENTICE_[A-Z0-9_]+", COMPOSE_TEXT))
    in_env = {k for svc in compose["services"].values() for k in env_of(svc) if "APPRENTICE" in k}
    assert in_env <= referenced
    unknown = referenced - fields - {"APPRENTICE_IMAGE_TAG"}
    assert not unknown, f"not Settings fields: {sorted(unknown)}"
    # APPRENTICE_IMAGE_TAG is only an image tag in compose; no container sees it.
    assert "APPRENTICE_IMAGE_TAG" not in in_env


@pytest.mark.parametrize("name", sorted(OURS))
def test_service_settings_validate(compose, name, monkeypatch, tmp_path):
    services = compose["services"]
    s = settings_of(services[name], monkeypatch, tmp_path)
    assert s.home == Path("/data")
    assert s.model_backend == "openai"
    db = make_url(s.database_url)
    pg_env = env_of(services["postgres"])
    assert (db.drivername, db.host, db.port) == ("postgresql+psycopg", "postgres", 5432)
    assert (db.username, db.password, db.database) == (
        pg_env["POSTGRES_USER"],
        DOT_ENV["POSTGRES_PASSWORD"],
        pg_env["POSTGRES_DB"],
    )
    assert s.broker_url.startswith("redis://redis:6379/")
    assert s.result_backend.startswith("redis://redis:6379/")
    vllm_args = dict(a.split("=", 1) for a in services["vllm"]["command"] if "=" in a)
    assert s.model_url == f"http://vllm:{vllm_args['--port']}/v1"
    # The name we send as "model" is the name vLLM serves the base model under.
    assert s.model_name == vllm_args["--model"]


def test_agent_server_port_published_and_command_agree(compose, monkeypatch, tmp_path):
    server = compose["services"]["agent-server"]
    s = settings_of(server, monkeypatch, tmp_path)
    command, params = resolve_cli(server["command"])
    assert command.name == "serve"
    assert params["host"] == "0.0.0.0", "inside a container the server must bind all interfaces"
    assert params["port"] in (None, s.port)
    container_ports = {int(str(p).rsplit(":", 1)[-1]) for p in server["ports"]}
    assert container_ports == {s.port}
    health = " ".join(server["healthcheck"]["test"])
    assert f"127.0.0.1:{s.port}/healthz" in health


@pytest.mark.parametrize("name", sorted(WORKERS))
def test_adapters_volume_is_shared_at_the_same_path(compose, name, monkeypatch, tmp_path):
    """The deploy step hands vLLM `$APPRENTICE_HOME/adapters/policy-vN` of the worker that
    deploys (downloaded there first when artifacts live in a bucket): that path must be the
    same folder inside vLLM."""
    services = compose["services"]
    learner = settings_of(services[name], monkeypatch, tmp_path)
    in_vllm = mounts(services["vllm"])["adapters"]
    in_learner = mounts(services[name])["adapters"]
    assert in_vllm == in_learner == str(learner.adapters_dir) == "/data/adapters"
    # The learner writes adapters; vLLM only reads them.
    assert not any(v.endswith(":ro") for v in services[name]["volumes"])
    assert "adapters:/data/adapters:ro" in services["vllm"]["volumes"]
    # The data volume holds the adapters folder in both of our images' views.
    assert PurePosixPath(in_learner).parent == PurePosixPath(
        mounts(services[name])["apprentice-data"]
    )


def test_vllm_serves_as_the_tests_do(compose):
    """Runtime LoRA loading, structured output and tool calls, with the same flags as the
    server the tests start (agent_server/models/vllm_command.py)."""
    vllm = compose["services"]["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:")
    args = vllm["command"]
    assert "--enable-lora" in args and "--enable-auto-tool-choice" in args
    flags = dict(a.split("=", 1) for a in args if "=" in a)
    assert int(flags["--max-lora-rank"]) == vllm_command.MAX_LORA_RANK == 16
    assert int(flags["--max-loras"]) == vllm_command.MAX_LORAS == 4
    assert flags["--tool-call-parser"] == vllm_command.TOOL_CALL_PARSER
    structured = json.loads(flags["--structured-outputs-config"])
    assert structured == vllm_command.STRUCTURED_OUTPUTS
    assert env_of(vllm)["VLLM_ALLOW_RUNTIME_LORA_UPDATING"].lower() in ("true", "1")
    assert 0 < float(flags["--gpu-memory-utilization"]) < 1, "the learner shares the GPU"


def test_migrate_runs_db_upgrade_before_everything_of_ours(compose):
    services = compose["services"]
    command, params = resolve_cli(services["migrate"]["command"])
    assert command.name == "upgrade" and params["revision"] == "head"
    assert "restart" not in services["migrate"], "a one-shot job must not be restarted"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("agent-server", *sorted(WORKERS), "learner-beat", "vllm"):
        cond = services[name]["depends_on"]["migrate"]["condition"]
        assert cond == "service_completed_successfully", name


def test_health_conditions_have_healthchecks(compose):
    services = compose["services"]
    for name, svc in services.items():
        for dep, spec in svc.get("depends_on", {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health"


@pytest.mark.parametrize("name", sorted(APPRENTICE_SERVICES))
def test_commands_name_real_cli_subcommands(compose, name):
    svc = compose["services"][name]
    assert "entrypoint" not in svc, "our services use the image's `apprentice` entrypoint"
    command, _ = resolve_cli(svc["command"])
    assert command.callback is not None


def test_beat_runs_the_learner_celery_app(compose):
    beat = compose["services"]["learner-beat"]
    assert beat["entrypoint"][:4] == ["celery", "-A", "learner.celery_app", "beat"]
    # The module name is a contract for the learner; it is written down where people look.
    assert "learner.celery_app" in (REPO / "docs" / "architecture.md").read_text()
    assert "--schedule=/data/celerybeat-schedule" in beat["command"]


def test_no_secret_values_in_the_file(compose):
    for name in OURS:
        env = env_of(compose["services"][name])
        for key in ("APPRENTICE_TOKEN", "APPRENTICE_ADMIN_TOKEN", "APPRENTICE_MODEL_API_KEY"):
            assert env.get(key, "") == "", f"{name}: {key} must come from .env, not the file"
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            assert env.get(key, "") == "", f"{name}: {key} must come from .env, not the file"
    for value in DOT_ENV.values():
        assert value not in COMPOSE_TEXT
    for required in ("POSTGRES_PASSWORD", "APPRENTICE_METRICS_TOKEN", "GRAFANA_ADMIN_PASSWORD"):
        assert "${" + required + ":?" in COMPOSE_TEXT


def test_prometheus_scrapes_the_agent_server_with_the_metrics_token(compose):
    services = compose["services"]
    config = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["agent-server:8765"]
    # The secret Prometheus reads is the token the agent server is given.
    secret = compose["secrets"]["metrics_token"]
    assert secret == {"environment": "APPRENTICE_METRICS_TOKEN"}
    assert "metrics_token" in services["prometheus"]["secrets"]
    assert job["authorization"]["credentials_file"] == "/run/secrets/metrics_token"
    server_env = env_of(services["agent-server"])
    assert server_env["APPRENTICE_METRICS_TOKEN"] == DOT_ENV["APPRENTICE_METRICS_TOKEN"]
    mounted = {m.split(":")[0]: m.split(":")[1] for m in services["prometheus"]["volumes"]}
    assert mounted["./deploy/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


def test_grafana_is_provisioned_from_the_repository(compose):
    mounted = {m.split(":")[0]: m.split(":")[1] for m in compose["services"]["grafana"]["volumes"]}
    for source in ("./deploy/grafana/provisioning", "./deploy/grafana/dashboards"):
        assert (REPO / source).is_dir() and source in mounted
    provider = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/dashboards/apprentice.yml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == mounted["./deploy/grafana/dashboards"]
    source = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert source["datasources"][0]["url"] == "http://prometheus:9090"


def test_dockerfile_matches_compose_and_project():
    steps = dockerfile()
    stages = [args for instr, args in steps if instr == "FROM"]
    assert stages == ["node:20-slim AS dashboard", "python:3.11-slim"]  # the image: the last
    copies = [args for instr, args in steps if instr == "COPY"]
    assert "--from=dashboard /dashboard/dist ./dashboard/dist" in copies
    env = " ".join(args for instr, args in steps if instr == "ENV")
    assert "APPRENTICE_HOME=/data" in env
    users = [args for instr, args in steps if instr == "USER"]
    assert users and users[-1] not in ("root", "0")
    entrypoint = [json.loads(args) for instr, args in steps if instr == "ENTRYPOINT"]
    assert entrypoint == [["apprentice"]]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["apprentice"] == "apprentice.cli:main"
    torch_pin = next(d for d in project["dependencies"] if d.startswith("torch"))
    args = dict(a.split("=", 1) for instr, a in steps if instr == "ARG" and "=" in a)
    assert torch_pin == f"torch=={args['TORCH_VERSION']}"
    assert args["TORCH_VARIANT"] == "cpu"
    runs = " ".join(a for instr, a in steps if instr == "RUN")
    assert 'pip install "torch==${TORCH_VERSION}" --index-url' in runs
    assert "download.pytorch.org/whl/${TORCH_VARIANT}" in runs


def test_dockerignore_keeps_secrets_and_environments_out():
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".env", ".git", ".venv", ".vllm-venv"} <= ignored
    # What the image needs must not be ignored.
    assert not {"pyproject.toml", "README.md", "apprentice", "migrations"} & ignored
