"""The dev model's cache key (modelbuild/dev/build.py `build_key`): the builder's code and
the text of the corpus it reads, so a changed corpus rebuilds the cached dev model
(tests/fixtures/models.py). No build here: corpora of a few files on disk.

    .venv/bin/python -m pytest tests/modelbuild/dev/test_build_key.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelbuild.dev import MANIFEST, build, build_key, corpus
from tests.fixtures import models as fixture

PROJECT = {"pkg/a.py": "x = 1\n", "pkg/b.py": "def f():\n    return 2\n"}
STDLIB = {"json/decoder.py": "def decode(s):\n    return s\n"}


def _corpus(root: Path, project: dict[str, str], stdlib: dict[str, str] = STDLIB):
    """What corpus.collect reads from a standard library and a project folder under `root`."""
    for folder, files in (("stdlib", stdlib), ("project", project)):
        (root / folder).mkdir(parents=True)
        for name, text in files.items():
            (root / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (root / folder / name).write_text(text)
    return corpus.collect(stdlib_root=root / "stdlib", project_root=root / "project")


def test_the_key_changes_with_the_corpus_text_and_only_with_it(tmp_path: Path) -> None:
    key = build_key(_corpus(tmp_path / "same", PROJECT))
    assert build_key(_corpus(tmp_path / "again", PROJECT)) == key  # another folder, same text
    renamed = {"pkg/a2.py": PROJECT["pkg/a.py"], "pkg/b.py": PROJECT["pkg/b.py"]}
    other_stdlib = {"json/decoder.py": "def decode(s):\n    return 1\n"}
    others = {
        "edited": _corpus(tmp_path / "edited", {**PROJECT, "pkg/a.py": "x = 2\n"}),
        "added": _corpus(tmp_path / "added", {**PROJECT, "pkg/c.py": "y = 3\n"}),
        "renamed": _corpus(tmp_path / "renamed", renamed),
        "stdlib": _corpus(tmp_path / "stdlib", PROJECT, other_stdlib),
    }
    keys = {name: build_key(files) for name, files in others.items()}
    assert key not in keys.values() and len(set(keys.values())) == len(keys), keys


def test_the_key_changes_with_the_builder_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _corpus(tmp_path, PROJECT)
    key = build_key(files)
    monkeypatch.setattr(build, "builder_version", lambda: "0" * 16)
    assert build_key(files) != key


def test_a_cached_model_from_another_corpus_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session fixture's check: a model is current only under today's build key."""
    folder = tmp_path / "dev"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_text("{}")
    built_from = build_key(_corpus(tmp_path / "then", PROJECT))
    (folder / MANIFEST).write_text(json.dumps({"build_key": built_from}))
    monkeypatch.setattr(fixture, "current_build_key", lambda: built_from)
    assert fixture._is_current(folder)
    now = build_key(_corpus(tmp_path / "now", {**PROJECT, "pkg/a.py": "x = 2\n"}))
    monkeypatch.setattr(fixture, "current_build_key", lambda: now)
    assert not fixture._is_current(folder)
