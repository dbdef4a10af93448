"""`LspConfig`'s agent: a nested AgentConfig with the language server's defaults, always
interactive; and the remote mode's token found without the agent server's code.
Run: .venv/bin/python -m pytest tests/lsp/test_config.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_server.agent.config import AgentConfig
from agent_server.models.base import Sampling
from ground.settings import Settings
from lsp.config import LspConfig


def test_the_agent_is_a_nested_agent_config_with_the_lsp_defaults(tmp_path: Path) -> None:
    agent = LspConfig.from_settings(Settings(home=tmp_path)).agent
    assert isinstance(agent, AgentConfig)
    assert (agent.mode, agent.step_limit, agent.time_limit_s) == ("interactive", 12, 300.0)
    assert agent.sampling.max_tokens == 512
    mine = AgentConfig(step_limit=3, sampling=Sampling(max_tokens=64))
    assert LspConfig(database_url="sqlite://", agent=mine).agent is mine
    with pytest.raises(ValueError, match="interactive"):
        LspConfig(database_url="sqlite://", agent=AgentConfig(mode="autonomous"))
    with pytest.raises(ValueError, match="max_tokens must be >= 16"):
        LspConfig(database_url="sqlite://", agent={"sampling": {"max_tokens": 8}})
    with pytest.raises(ValueError, match="step_limit"):
        LspConfig(database_url="sqlite://", agent={"step_limit": 0})


def test_the_remote_token_comes_from_the_token_file_without_the_api(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text("from-the-file-0123456789\n")
    code = (
        "import sys; from ground.settings import Settings; from lsp.config import LspConfig; "
        f"c = LspConfig.from_settings(Settings(home={str(home)!r}), server='ws://h:1/v1/ws'); "
        "assert c.token == 'from-the-file-0123456789', c.token; "
        "assert not any(m.startswith('agent_server.api') for m in sys.modules), 'api imported'"
    )
    env = {k: v for k, v in os.environ.items() if k != "APPRENTICE_TOKEN"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
