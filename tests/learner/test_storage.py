"""The artifact store (learner/storage.py) and publishing through it (learner/publish.py):
the local directory and a real S3-API server process (tests/fixtures/s3.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ground.settings import Settings
from learner.publish import (
    MANIFEST,
    VersionTaken,
    fetch_adapter,
    file_digests,
    publish_to_store,
)
from learner.storage import LocalStore, S3Store, StoreError, make_store
from tests.fixtures.s3 import S3Server


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _candidate(folder: Path, weights: bytes = b"\x00\x01weights") -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return folder


@pytest.fixture
def s3(s3_server: S3Server) -> S3Store:
    return S3Store(s3_server.new_bucket(), "team/a", endpoint_url=s3_server.url)


def test_make_store_reads_the_settings(tmp_path: Path, s3_server: S3Server) -> None:
    local = make_store(Settings(home=tmp_path))
    assert isinstance(local, LocalStore) and local.root == tmp_path.resolve()
    remote = make_store(Settings(home=tmp_path, artifacts_url="s3://bucket/some/prefix",
                                 s3_endpoint_url=s3_server.url))  # fmt: skip
    assert isinstance(remote, S3Store)
    assert remote.uri("adapters/policy-v1") == "s3://bucket/some/prefix/adapters/policy-v1"
    with pytest.raises(ValueError, match="use s3://bucket/prefix"):
        make_store(Settings(home=tmp_path, artifacts_url="ftp://host/x"))


def test_local_store_is_the_working_folder(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    run = tmp_path / "learner/runs/run-1"
    (run / "candidate").mkdir(parents=True)
    (run / "dataset.json").write_text("[]")
    assert store.push("learner/runs/run-1", run) == 0  # nothing moves on one machine
    assert store.pull("learner/runs/run-1", run) is True
    elsewhere = tmp_path / "copy"
    assert store.pull("learner/runs/run-1", elsewhere) and _tree(elsewhere) == _tree(run)
    assert store.create_json("x/m.json", {"a": 1}) and not store.create_json("x/m.json", {})
    assert store.read_json("x/m.json") == {"a": 1} and store.read_json("x/none.json") is None


def test_s3_round_trip_moves_only_what_changed(s3: S3Store, tmp_path: Path) -> None:
    here = tmp_path / "host-a/run-3"
    (here / "candidate").mkdir(parents=True)
    (here / "dataset.json").write_text('[{"id": 1}]')
    (here / "candidate/adapter_model.safetensors").write_bytes(b"\x00" * 70_000)
    (here / ".candidate-1234").mkdir()  # a temporary folder of an interrupted save
    (here / ".candidate-1234/partial").write_bytes(b"half")
    assert s3.push("learner/runs/run-3", here) == 2
    assert s3.push("learner/runs/run-3", here) == 0  # unchanged: not uploaded again

    there = tmp_path / "host-b/run-3"
    assert s3.pull("learner/runs/run-3", there) is True
    assert _tree(there) == {k: v for k, v in _tree(here).items() if not k.startswith(".")}
    (here / "dataset.json").write_text('[{"id": 2}]')
    assert s3.push("learner/runs/run-3", here) == 1
    assert s3.pull("learner/runs/run-3", there) and (there / "dataset.json").read_text() == (
        '[{"id": 2}]'
    )
    assert s3.pull("learner/runs/run-4", tmp_path / "empty") is False


def test_s3_create_json_is_a_conditional_write(s3: S3Store) -> None:
    assert s3.read_json("adapters/policy-v1/m.json") is None
    assert s3.create_json("adapters/policy-v1/m.json", {"run_id": 1}) is True
    assert s3.create_json("adapters/policy-v1/m.json", {"run_id": 2}) is False
    assert s3.read_json("adapters/policy-v1/m.json") == {"run_id": 1}


def test_an_unreachable_store_is_a_clear_error(tmp_path: Path) -> None:
    store = S3Store("bucket", endpoint_url="http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(StoreError, match="s3://bucket"):
        store.push("learner/runs/run-1", _candidate(tmp_path / "c"))


def test_publish_and_fetch_through_s3(s3: S3Store, s3_server: S3Server, tmp_path: Path) -> None:
    candidate = _candidate(tmp_path / "run-7/candidate")
    where = publish_to_store(s3, candidate, tmp_path / "unused", version=3, run_id=7)
    assert where == s3.uri("adapters/policy-v3")
    assert not (tmp_path / "unused").exists()  # nothing local: it lives in the bucket
    # A redelivered publish of the same run is recognised; another run cannot take the name.
    assert publish_to_store(s3, candidate, tmp_path, version=3, run_id=7) == where
    with pytest.raises(VersionTaken):
        publish_to_store(s3, candidate, tmp_path, version=3, run_id=8)

    adapters = tmp_path / "host-b/adapters"
    folder = fetch_adapter(s3, version=3, recorded=where, adapters_dir=adapters)
    assert folder == adapters / "policy-v3"
    assert file_digests(folder) == file_digests(candidate)
    assert json.loads((folder / MANIFEST).read_text())["run_id"] == 7
    assert all(not p.stat().st_mode & 0o222 for p in folder.iterdir())  # read-only
    assert fetch_adapter(s3, version=3, recorded=where, adapters_dir=adapters) == folder
    assert not list(adapters.glob(".tmp-*"))

    # A stored file that no longer matches its manifest is refused, and nothing is left.
    publish_to_store(s3, _candidate(tmp_path / "run-9/candidate"), tmp_path, version=4, run_id=9)
    s3_server.client().put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/adapters/policy-v4/"
                                  "adapter_model.safetensors", Body=b"tampered")  # fmt: skip
    with pytest.raises(ValueError, match="do not match their manifest"):
        fetch_adapter(s3, version=4, recorded=s3.uri("adapters/policy-v4"), adapters_dir=adapters)
    assert not (adapters / "policy-v4").exists() and not list(adapters.glob(".tmp-*"))
    with pytest.raises(FileNotFoundError, match="no such adapter"):
        fetch_adapter(s3, version=5, recorded=s3.uri("adapters/policy-v5"), adapters_dir=adapters)


def test_publish_to_a_local_store_is_the_atomic_folder(tmp_path: Path) -> None:
    candidate = _candidate(tmp_path / "run-1/candidate")
    store = LocalStore(tmp_path)
    where = publish_to_store(store, candidate, tmp_path / "adapters", version=1, run_id=1)
    assert where == str((tmp_path / "adapters/policy-v1").resolve())
    assert fetch_adapter(store, version=1, recorded=where, adapters_dir=tmp_path) == Path(where)
