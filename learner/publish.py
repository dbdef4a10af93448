"""Publish: copy a trained adapter into `$APPRENTICE_HOME/adapters/policy-vN`, atomically.

    folder = publish_files(candidate_dir, adapters_dir, version=3, run_id=7)

The files are copied into a hidden temporary folder beside the target, each file and the
folder fsynced, then the folder is renamed to `policy-vN` (one atomic rename on the same
filesystem) and the parent folder fsynced. So `policy-vN` either does not exist or is
complete; a crash leaves only a `.tmp-*` folder, which nothing lists or deploys (and which
`sweep_temporary` removes). Published files are made read-only: never modified afterwards.

A manifest (`apprentice-adapter.json`: version, run id, sha256 of each file) makes a
redelivered publish step recognise its own folder and skip the copy. The database row is
written by the pipeline after the rename (learner/pipeline.py).
Tested in tests/learner/test_pipeline.py (crashed publishes, redelivery).
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

from feedback.vocab import adapter_name

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
