"""The `ArtifactStore` seam: where a learner run's files and the published adapters live, so
that no step needs the previous step's local disk.

    store = make_store(settings)          # $APPRENTICE_HOME, or s3://bucket/prefix
    store.pull("learner/runs/run-7", folder)   # before a step: the run's files, here
    store.push("learner/runs/run-7", folder)   # after it: what the step wrote, there

Keys are relative paths: `learner/runs/run-N/` (dataset.json, tasks.jsonl, split.json,
candidate/) and `adapters/policy-vN/` (a published adapter and its manifest).

- `LocalStore(root)`: a directory, `$APPRENTICE_HOME` by default. A step's working folder
  IS the stored folder, so `pull` and `push` do nothing: one machine works as before.
- `S3Store(bucket, prefix, endpoint_url)`: any S3-API object store (AWS S3, MinIO, Ceph)
  through boto3. A step works in a local cache (`$APPRENTICE_HOME/learner/runs/run-N`):
  `pull` downloads what is missing or different there, `push` uploads what is not already
  stored (size and MD5 against the listing's ETag). Each download lands under a temporary
  name and is renamed, so a crash never leaves half a file behind.

Publishing through the store and fetching an adapter to a local folder: learner/publish.py.
Tested in tests/learner/test_storage.py (both stores; S3 on a real S3-API server process).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ground.settings import Settings


class StoreError(RuntimeError):
    """The object store refused or could not be reached; the message says which and why."""


class ArtifactStore(Protocol):
    def uri(self, key: str) -> str:
        """Where `key` lives, for people and for the `adapters.path` column."""
        ...

    def pull(self, key: str, folder: Path) -> bool:
        """Every file under `key` into `folder` (same relative paths); False if none."""
        ...

    def push(self, key: str, folder: Path) -> int:
        """Every file under `folder` to `key`; returns how many were uploaded."""
        ...

    def read_json(self, key: str) -> Any | None:
        """The JSON object stored at `key`, or None if there is none."""
        ...

    def create_json(self, key: str, value: Any) -> bool:
        """Store `value` at `key` unless something is there already; False if it was."""
        ...


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> dict[str, Path]:
    """Relative name -> path of the files under `folder`; hidden names (`.tmp-*`,
    `.candidate-*`: what is still being written) left out."""
    if not folder.is_dir():
        return {}
    found = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
    return {n: p for n, p in found.items() if not any(x.startswith(".") for x in n.split("/"))}


class LocalStore:
    """A directory. Steps on one machine work in the stored folders themselves."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def uri(self, key: str) -> str:
        return str((self.root / key).resolve())

    def _same(self, key: str, folder: Path) -> bool:
        return (self.root / key).resolve() == folder.resolve()

    def pull(self, key: str, folder: Path) -> bool:
        if not self._same(key, folder):
            for name, path in _files(self.root / key).items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, folder / name)
        return bool(_files(self.root / key))

    def push(self, key: str, folder: Path) -> int:
        if self._same(key, folder):
            return 0
        files = _files(folder)
        for name, path in files.items():
            (self.root / key / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, self.root / key / name)
        return len(files)

    def read_json(self, key: str) -> Any | None:
        try:
            return json.loads((self.root / key).read_text())
        except (OSError, ValueError):
            return None

    def create_json(self, key: str, value: Any) -> bool:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with path.open("x") as f:
                json.dump(value, f, indent=2)
        except FileExistsError:
            return False
        return True


class S3Store:
    """An S3-API bucket; `prefix` is prepended to every key."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str = "") -> None:
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint_url or None,
            region_name=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        )

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "?")
            raise StoreError(f"{what} in s3://{self.bucket}: {code}: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreError(f"{what} in s3://{self.bucket}: {exc}") from exc

    def _listing(self, key: str) -> dict[str, tuple[int, str]]:
        """Relative name -> (size, ETag without quotes) of the objects under `key`/."""
        base = self._key(key).rstrip("/") + "/"
        found: dict[str, tuple[int, str]] = {}
        token: dict[str, str] = {}
        while True:
            page = self._call(f"listing {base}", self.client.list_objects_v2, Prefix=base, **token)
            for item in page.get("Contents", []):
                found[item["Key"][len(base) :]] = (item["Size"], item["ETag"].strip('"'))
            if not page.get("IsTruncated"):
                return found
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def pull(self, key: str, folder: Path) -> bool:
        listing = self._listing(key)
        for name, (size, etag) in listing.items():
            target = folder / name
            if target.is_file() and target.stat().st_size == size and _md5(target) == etag:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".tmp-{target.name}-{uuid.uuid4().hex[:8]}")
            try:
                self._call(f"reading {key}/{name}", self.client.download_file,
                           Key=f"{self._key(key)}/{name}", Filename=str(tmp))  # fmt: skip
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
        return bool(listing)

    def push(self, key: str, folder: Path) -> int:
        stored = self._listing(key)
        uploaded = 0
        for name, path in _files(folder).items():
            if stored.get(name) == (path.stat().st_size, _md5(path)):
                continue
            self._call(f"writing {key}/{name}", self.client.upload_file,
                       Key=f"{self._key(key)}/{name}", Filename=str(path))  # fmt: skip
            uploaded += 1
        return uploaded

    def read_json(self, key: str) -> Any | None:
        from botocore.exceptions import ClientError

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise StoreError(f"reading {key} in s3://{self.bucket}: {exc}") from exc
        return json.loads(body)

    def create_json(self, key: str, value: Any) -> bool:
        from botocore.exceptions import ClientError

        body = json.dumps(value, indent=2).encode()
        try:  # a conditional write: S3 refuses it when the key exists (412)
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body,
                                   IfNoneMatch="*")  # fmt: skip
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise StoreError(f"writing {key} in s3://{self.bucket}: {exc}") from exc
        return True


def make_store(settings: Settings) -> ArtifactStore:
    """The store `settings.artifacts_url` names: empty -> LocalStore($APPRENTICE_HOME)."""
    url = settings.artifacts_url.strip()
    if not url:
        return LocalStore(settings.home)
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(
            f"APPRENTICE_ARTIFACTS_URL={url!r}: use s3://bucket/prefix, or leave it empty "
            "for a local directory ($APPRENTICE_HOME)"
        )
    return S3Store(parts.netloc, parts.path, endpoint_url=settings.s3_endpoint_url)
