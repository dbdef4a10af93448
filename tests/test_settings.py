"""`ground.settings.Settings`: defaults, sources and their precedence, validation, secrets,
and docs/configuration.md kept in step with the fields.

Every test runs with a fresh APPRENTICE_HOME and no other APPRENTICE_* variable (the autouse
fixture in tests/fixtures/settings.py).

    .venv/bin/python -m pytest tests/test_settings.py -q
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from ground.settings import ENV_PREFIX, Settings

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "configuration.md").read_text()
# Variables the doc may name that are not fields: they say where the settings come from.
NOT_FIELDS = {"APPRENTICE_CONFIG"}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


# --- the documentation ---------------------------------------------------------------------


def doc_rows() -> dict[str, str]:
    """Env var name -> its row in the settings table of docs/configuration.md."""
    rows = {}
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and (m := re.fullmatch(r"`(APPRENTICE_[A-Z0-9_]+)`", cells[0])):
            rows[m[1]] = line
    return rows


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_field_is_documented(field):
    rows = doc_rows()
    name = env_name(field)
    assert name in rows, f"docs/configuration.md has no table row for {name}"
    info = Settings.model_fields[field]
    row = rows[name]
    # Literal choices and plain defaults are written out, so a changed default shows up here.
    for choice in (
        typing.get_args(info.annotation)
        if typing.get_origin(info.annotation) is typing.Literal
        else ()
    ):
        assert f"`{choice}`" in row, f"{name}: choice {choice!r} missing from its row"
    default = info.default
    if isinstance(default, (int, float, str)) and default != "" and not isinstance(default, bool):
        assert f"`{default}`" in row, f"{name}: default {default!r} missing from its row"
    if isinstance(default, SecretStr):
        assert "secret" in row.lower(), f"{name}: say that the value is a secret"


def test_no_unknown_variable_is_documented():
    fields = {env_name(f) for f in Settings.model_fields}
    mentioned = set(re.findall(r"\bAPPRENTICE_[A-Z0-9_]*[A-Z0-9]\b", DOC))
    unknown = mentioned - fields - NOT_FIELDS
    assert not unknown, f"docs/configuration.md names variables Settings does not read: {unknown}"
    assert set(doc_rows()) == fields, "one table row per field, no more"


def test_doc_toml_example_is_valid(tmp_path, monkeypatch):
    """The example config file in the doc loads as written."""
    blocks = re.findall(r"```toml\n(.*?)```", DOC, flags=re.S)
    assert blocks, "docs/configuration.md shows an example config.toml"
    for block in blocks:
        path = tmp_path / "example.toml"
        path.write_text(block)
        monkeypatch.setenv("APPRENTICE_CONFIG", str(path))
        Settings()


def test_ground_room_is_a_leaf():
    """Every room may import `ground` only because it imports nothing of ours."""
    ours = {
        "apprentice", "agent_server", "feedback", "lsp", "learner", "modelbuild", "migrations",
        "tests",
    }  # fmt: skip
    for path in sorted((REPO / "ground").glob("*.py")):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add((node.module or ".").split(".")[0])
        assert not imported & ours, f"{path.name} imports {imported & ours}"


# --- defaults ------------------------------------------------------------------------------


def test_embedded_defaults_derive_from_home(tmp_path, monkeypatch):
    home = tmp_path / "h"
    monkeypatch.setenv("APPRENTICE_HOME", str(home))
    s = Settings()
    assert s.home == home.resolve()
    assert s.database_url == f"sqlite:///{home / 'apprentice.db'}"
    assert s.broker_url == f"sqla+sqlite:///{home / 'broker.db'}"
    assert s.result_backend == f"db+sqlite:///{home / 'results.db'}"
    assert (
        s.model_name == str(home / "models" / "smollm2-135m-instruct") == str(s.default_model_dir)
    )
    assert s.dev_model_dir == home / "models" / "dev"
    assert s.model_backend == "embedded"
    assert s.adapters_dir == home / "adapters"
    assert (s.token_file, s.admin_token_file) == (home / "token", home / "admin_token")
    assert not home.exists(), "building Settings must not create anything"
    assert s.ensure_home() == home and (home.stat().st_mode & 0o777) == 0o700


def test_home_default_and_tilde(monkeypatch, tmp_path):
    monkeypatch.delenv("APPRENTICE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings().home == tmp_path / ".apprentice"
    monkeypatch.setenv("APPRENTICE_HOME", "~/elsewhere")
    assert Settings().home == tmp_path / "elsewhere"


def test_explicit_values_are_not_replaced_by_derived_ones(tmp_path):
    s = Settings(home=tmp_path, database_url="postgresql+psycopg://u@h/db", model_name="m")
    assert s.database_url == "postgresql+psycopg://u@h/db"
    assert s.model_name == "m"
    assert s.broker_url == f"sqla+sqlite:///{tmp_path / 'broker.db'}"


# --- sources and precedence ----------------------------------------------------------------


def test_env_overrides(monkeypatch):
    monkeypatch.setenv("APPRENTICE_PORT", "9001")
    monkeypatch.setenv("APPRENTICE_MODEL_BACKEND", "openai")
    monkeypatch.setenv("APPRENTICE_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1/x")
    monkeypatch.setenv("APPRENTICE_ALLOWED_ORIGINS", '["https://example.test"]')
    monkeypatch.setenv("APPRENTICE_TOKEN", "t0k")
    s = Settings()
    assert s.port == 9001 and isinstance(s.port, int)
    assert s.model_backend == "openai"
    assert s.database_url == "postgresql+psycopg://postgres@127.0.0.1/x"
    assert s.allowed_origins == ["https://example.test"]
    assert s.token.get_secret_value() == "t0k"


def write_config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_toml_in_home_is_read(monkeypatch, tmp_path):
    home = tmp_path / "h"
    monkeypatch.setenv("APPRENTICE_HOME", str(home))
    write_config(
        home / "config.toml", 'port = 9100\nlog_level = "DEBUG"\nallowed_origins = ["a://*"]\n'
    )
    s = Settings()
    assert (s.port, s.log_level, s.allowed_origins) == (9100, "DEBUG", ["a://*"])


def test_apprentice_config_names_the_file(monkeypatch, tmp_path):
    write_config(Settings().home / "config.toml", "port = 9100\n")
    other = write_config(tmp_path / "other.toml", "port = 9200\n")
    monkeypatch.setenv("APPRENTICE_CONFIG", str(other))
    assert Settings().port == 9200


def test_precedence_kwargs_then_env_then_toml_then_default(monkeypatch, tmp_path):
    cfg = write_config(tmp_path / "c.toml", 'port = 9100\nlsp_port = 9101\nhost = "0.0.0.0"\n')
    monkeypatch.setenv("APPRENTICE_CONFIG", str(cfg))
    monkeypatch.setenv("APPRENTICE_PORT", "9200")
    monkeypatch.setenv("APPRENTICE_HOST", "10.0.0.1")
    s = Settings(host="127.0.0.2")
    assert s.host == "127.0.0.2"  # keyword beats env and TOML
    assert s.port == 9200  # env beats TOML
    assert s.lsp_port == 9101  # TOML beats the default
    assert s.log_level == "INFO"  # the default


def test_home_in_toml_moves_the_data_not_the_file(monkeypatch, tmp_path):
    monkeypatch.delenv("APPRENTICE_HOME")  # the variable would beat the file's `home`
    cfg = write_config(tmp_path / "c.toml", f'home = "{tmp_path / "data"}"\n')
    monkeypatch.setenv("APPRENTICE_CONFIG", str(cfg))
    s = Settings()
    assert s.home == tmp_path / "data"
    assert s.database_url == f"sqlite:///{tmp_path / 'data' / 'apprentice.db'}"


def test_missing_config_file_is_fine(monkeypatch, tmp_path):
    monkeypatch.setenv("APPRENTICE_CONFIG", str(tmp_path / "absent.toml"))
    assert Settings().port == 8765


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("APPRENTICE_PORT", "70000", "less than or equal to 65535"),
        ("APPRENTICE_PORT", "0", "greater than or equal to 1"),
        ("APPRENTICE_PORT", "http", "valid integer"),
        ("APPRENTICE_LSP_PORT", "-1", "greater than or equal to 1"),
        ("APPRENTICE_MODEL_BACKEND", "vllm", "'embedded' or 'openai'"),
        ("APPRENTICE_LOG_LEVEL", "verbose", "'DEBUG', 'INFO', 'WARNING' or 'ERROR'"),
        ("APPRENTICE_MODEL_TIMEOUT_S", "0", "greater than 0"),
        ("APPRENTICE_LEARNER_MIN_FEEDBACK", "0", "greater than or equal to 1"),
        # pydantic-settings names the field and the source, not JSON (docs/configuration.md does).
        ("APPRENTICE_ALLOWED_ORIGINS", "vscode-webview://*", "error parsing value"),
    ],
)
def test_bad_values_are_refused_with_the_field_and_the_rule(monkeypatch, var, value, says):
    monkeypatch.setenv(var, value)
    with pytest.raises((ValidationError, ValueError)) as info:
        Settings()
    message = str(info.value)
    assert var.removeprefix(ENV_PREFIX).lower() in message
    assert says in message


def test_unknown_key_in_toml_is_refused(monkeypatch, tmp_path):
    cfg = write_config(tmp_path / "c.toml", "prot = 8000\n")
    monkeypatch.setenv("APPRENTICE_CONFIG", str(cfg))
    with pytest.raises(ValidationError, match=r"prot\n.*Extra inputs are not permitted"):
        Settings()


def test_unknown_env_variable_is_ignored(monkeypatch):
    # Test and script variables share the prefix (APPRENTICE_TEST_MODEL); they are not settings.
    monkeypatch.setenv("APPRENTICE_NOT_A_SETTING", "x")
    assert Settings().port == 8765


def test_settings_are_frozen():
    s = Settings()
    with pytest.raises(ValidationError):
        s.port = 1  # type: ignore[misc]


# --- secrets -------------------------------------------------------------------------------


def test_secrets_are_not_shown(monkeypatch):
    monkeypatch.setenv("APPRENTICE_TOKEN", "user-secret-1")
    monkeypatch.setenv("APPRENTICE_ADMIN_TOKEN", "admin-secret-2")
    monkeypatch.setenv("APPRENTICE_MODEL_API_KEY", "model-secret-3")
    monkeypatch.setenv("APPRENTICE_DATABASE_URL", "postgresql+psycopg://app:db-secret-4@pg/app")
    monkeypatch.setenv("APPRENTICE_BROKER_URL", "redis://:broker-secret-5@redis:6379/0")
    s = Settings()
    for shown in (repr(s), str(s), f"{s}", f"{s!r}"):
        for secret in (
            "user-secret-1",
            "admin-secret-2",
            "model-secret-3",
            "db-secret-4",
            "broker-secret-5",
        ):
            assert secret not in shown
    assert "postgresql+psycopg://app:***@pg/app" in repr(s)
    # The values themselves are intact for the code that needs them.
    assert s.token.get_secret_value() == "user-secret-1"
    assert s.database_url == "postgresql+psycopg://app:db-secret-4@pg/app"
