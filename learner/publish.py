"""Publish: copy a trained adapter into `$APPRENTICE_HOME/adapters/policy-vN`, atomically,
or into the object store's `adapters/policy-vN/` (learner/storage.py); fetch it back.

    folder = publish_files(candidate_dir, adapters_dir, version=3, run_id=7)
    where = publish_to_store(store, candidate_dir, adapters_dir, version=3, run_id=7)
    folder = fetch_adapter(store, version=3, recorded=where, adapters_dir=adapters_dir)

The files are copied into a hidden temporary folder beside the target, each file and the
folder fsynced, then the folder is renamed to `policy-vN` (one atomic rename on the same
filesystem) and the parent folder fsynced. So `policy-vN` either does not exist or is
complete; a crash leaves only a `.tmp-*` folder, which nothing lists or deploys (and which
`sweep_temporary` removes). Published files are made read-only: never modified afterwards.

A manifest (`apprentice-adapter.json`: version, run id, sha256 of each file) makes a
redelivered publish step recognise its own folder and skip the copy. The database row is
written by the pipeline after the rename (learner/pipeline.py).

In an object store the manifest is written last, with a conditional write: a version is
published once its manifest exists, and a second run cannot take the same name.
`fetch_adapter` downloads such a version into `adapters_dir/policy-vN` (a temporary folder,
digests checked against the manifest, then renamed): the folder the deploy step hands vLLM,
which must see the same path (a shared volume; docs/deploy.md).
Tested in tests/learner/test_pipeline.py (crashed publishes, redelivery) and
tests/learner/test_storage.py (the object store).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from agent_server.models.deployments import is_uri
from feedback.vocab import adapter_name
from learner.storage import ArtifactStore, LocalStore

MANIFEST = "apprentice-adapter.json"


class VersionTaken(FileExistsError):
    """policy-vN exists and was published by another run."""


def file_digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def publish_files(candidate: Path, adapters_dir: Path, *, version: int, run_id: int) -> Path:
    """`candidate`'s files as `adapters_dir/policy-v{version}`; returns that folder.

    Idempotent for the same run; VersionTaken if another run owns the name.
    """
    final = adapters_dir / adapter_name(version)
    if final.exists():
        manifest = read_manifest(final)
        if manifest and manifest.get("run_id") == run_id and manifest.get("version") == version:
            return final  # a redelivery: our own, complete folder
        raise VersionTaken(f"{final} already exists and belongs to another run")
    adapters_dir.mkdir(parents=True, exist_ok=True)
    tmp = adapters_dir / f".tmp-{adapter_name(version)}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for src in sorted(candidate.iterdir()):
            if src.is_file():
                shutil.copyfile(src, tmp / src.name)
        manifest = {"version": version, "run_id": run_id, "files": file_digests(tmp)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        for path in tmp.iterdir():
            _fsync_file(path)
            path.chmod(0o444)
        _fsync_dir(tmp)
        os.rename(tmp, final)  # fails if `final` appeared meanwhile and is not empty
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(adapters_dir)
    return final


def publish_to_store(
    store: ArtifactStore, candidate: Path, adapters_dir: Path, *, version: int, run_id: int
) -> str:
    """Publish `candidate` as `policy-v{version}`; returns where (the `adapters.path`): a
    local folder under `adapters_dir` for a LocalStore, the object's URI otherwise."""
    if isinstance(store, LocalStore):
        return str(publish_files(candidate, adapters_dir, version=version, run_id=run_id).resolve())
    key = f"adapters/{adapter_name(version)}"
    manifest = {"version": version, "run_id": run_id, "files": file_digests(candidate)}
    found = store.read_json(f"{key}/{MANIFEST}")
    if found is None:
        store.push(key, candidate)
        if store.create_json(f"{key}/{MANIFEST}", manifest):
            return store.uri(key)
        found = store.read_json(f"{key}/{MANIFEST}")
    if found and found.get("run_id") == run_id and found.get("version") == version:
        return store.uri(key)  # a redelivery: published by this run already
    raise VersionTaken(f"{store.uri(key)} already exists and belongs to another run")


def fetch_adapter(store: ArtifactStore, *, version: int, recorded: str, adapters_dir: Path) -> Path:
    """A published adapter as a local folder: `recorded` itself when it is one, else a
    download into `adapters_dir/policy-v{version}` (kept for the next time), checked
    against its manifest."""
    if not is_uri(recorded):
        return Path(recorded)
    final = adapters_dir / adapter_name(version)
    if read_manifest(final) is not None:
        return final
    adapters_dir.mkdir(parents=True, exist_ok=True)
    tmp = adapters_dir / f".tmp-{adapter_name(version)}-{uuid.uuid4().hex[:8]}"
    try:
        if not store.pull(f"adapters/{adapter_name(version)}", tmp):
            raise FileNotFoundError(f"{recorded}: no such adapter in the artifact store")
        manifest = read_manifest(tmp) or {}
        if manifest.get("version") != version or manifest.get("files") != file_digests(tmp):
            raise ValueError(f"{recorded}: files do not match their manifest")
        for path in tmp.iterdir():
            path.chmod(0o444)
        os.rename(tmp, final)
    except OSError:
        if read_manifest(final) is not None:  # another process fetched it meanwhile
            return final
        raise
    finally:
        if tmp.exists():
            for child in tmp.iterdir():
                child.chmod(0o644)
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def sweep_temporary(adapters_dir: Path, *, older_than_s: float = 600.0) -> list[Path]:
    """Remove `.tmp-*` folders left by crashed publishes (older than `older_than_s`, so a
    publish still in progress elsewhere is left alone); returns what was removed."""
    removed = []
    for path in adapters_dir.glob(".tmp-*"):
        if path.is_dir() and time.time() - path.stat().st_mtime > older_than_s:
            for child in path.iterdir():
                child.chmod(0o644)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
