"""Hypothesis attacks LocalWorkspace with thousands of hostile paths: zero reads or writes
outside the root.

The tree: `base/outside/` holds a canary file with a secret and a marker file; `base/root/`
is the workspace, seeded with symlinks pointing out (relative, absolute, dangling, through a
parent directory, a loop) and a FIFO. Every generated path goes through read_file,
write_file, apply_edit, list_dir and search. Allowed outcomes: success or a WorkspaceError.
After every call: the canary is unchanged (bytes, inode, mtime), nothing new appeared outside
the root, a successful read or write really was inside the root (checked independently with
os.path.realpath), and no result ever carries the secret or the outside marker.

Run: .venv/bin/python -m pytest tests/agent/test_workspace_confinement.py -q
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_server.agent.edits import SearchReplace
from agent_server.agent.workspace import LocalWorkspace
from agent_server.agent.workspace_types import WorkspaceError

SECRET = "CANARY-" + secrets.token_hex(8)
MARKER = "outside_only_marker.txt"


def _snapshot(base: Path, root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under `base` except the root's inside, with (inode, size, mtime)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        if Path(dirpath) == root:
            dirnames.clear()
            continue
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if Path(p) == root:  # its own mtime changes when files inside are written
                continue
            s = os.lstat(p)
            out[p] = (s.st_ino, s.st_size, s.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("confine")
    outside, root = base / "outside", base / "root"
    (outside / "dir").mkdir(parents=True)
    (outside / "canary.txt").write_text(SECRET + "\n")
    (outside / MARKER).write_text(SECRET + " marker\n")
    (outside / "dir" / "secret.txt").write_text(SECRET + " deep\n")
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("hello\n")
    (root / "sub" / "b.txt").write_text("bee\n")
    (root / "sub" / "deep" / "c.txt").write_text("sea\n")
    links = {
        "link_out_file": "../outside/canary.txt",
        "link_out_dir": "../outside",
        "abs_link": str(outside / "canary.txt"),
        "abs_dir_link": str(outside),
        "sub/up": "../..",
        "sub/deep/upup": "../../..",
        "dangling_out": "../outside/created_through_link.txt",
        "dangling_dir_out": "../outside/newdir/x.txt",
        "loop": "loop",
        "link_in": "a.txt",
        "link_in_dir": "sub",
        "etc_link": "/etc",
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.mkfifo(root / "fifo")
    loop = asyncio.new_event_loop()
    yield base, outside, root, LocalWorkspace(root), loop
    loop.close()


NAMES = [
    "..", ".", "", "...", "a.txt", "sub", "deep", "b.txt", "c.txt", "link_out_file",
    "link_out_dir", "abs_link", "abs_dir_link", "up", "upup", "dangling_out", "dangling_dir_out",
    "loop", "link_in", "link_in_dir", "etc_link", "canary.txt", MARKER, "outside", "root",
    "dir", "secret.txt", "fifo", "passwd", "etc", "%2e%2e", "%2e%2e%2f", "..%2f..", "..\\..",
    "..;", "\u2024\u2024", "\uff0e\uff0e", "\u2215", "..\u2215..", "\x00", "a\x00b", "x" * 255,
    "x" * 256, "é" * 130, "~", "~root", "C:", "con", "\ud800", " ", "..\t", "\n..",
]  # fmt: skip
SEPARATORS = ["/", "//", "\\", "/./", "%2f", "/../", "\\/"]
PREFIXES = ["", "", "", "/", "//", "~/", "C:\\", "C:/", "file:///", "\\\\server\\share\\"]

component = st.one_of(st.sampled_from(NAMES), st.text(max_size=12))


@st.composite
def hostile_path(draw) -> str:
    prefix = draw(st.sampled_from(PREFIXES + ["{base}/", "{outside}/", "{root}/../"]))
    parts = draw(st.lists(component, min_size=1, max_size=6))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(parts), max_size=len(parts)))
    path = prefix + "".join(p + s for p, s in zip(parts, seps, strict=True))[: -len(seps[-1])]
    if draw(st.booleans()):
        path = "/".join(parts)  # plain joins are the most realistic
    if draw(st.integers(0, 20)) == 0:
        path = path * 40  # very long
    return path


OPS = ["read", "write", "edit", "create", "list", "list_deep", "search"]


def _inside(root: Path, rel: str) -> bool:
    real = os.path.realpath(os.path.join(root, rel))
    return os.path.commonpath([str(root.resolve()), real]) == str(root.resolve())


@settings(
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(raw=hostile_path(), op=st.sampled_from(OPS))
def test_hostile_paths_never_escape(tree, raw: str, op: str) -> None:
    base, outside, root, ws, loop = tree
    path = raw
    for token, value in (("{base}", base), ("{outside}", outside), ("{root}", root)):
        if raw.startswith(token):
            path = str(value) + raw[len(token) :]
    before = _snapshot(base, root)
    canary = (outside / "canary.txt").read_bytes()
    run = loop.run_until_complete
    try:
        if op == "read":
            text = run(ws.read_file(path))
            assert _inside(root, path), f"read outside: {path!r}"
            assert SECRET not in text
        elif op == "write":
            run(ws.write_file(path, "written by the hostile-path test\n"))
            assert _inside(root, path), f"wrote outside: {path!r}"
        elif op in ("edit", "create"):
            search = "hello" if op == "edit" else ""
            run(ws.apply_edit(path, [SearchReplace(search, "edited\n")]))
            assert _inside(root, path), f"edited outside: {path!r}"
        elif op in ("list", "list_deep"):
            listing = run(ws.list_dir(path, depth=10 if op == "list_deep" else 1))
            for entry in listing.entries:
                # Listed paths exist inside the root; a link is shown, never walked through.
                assert os.path.lexists(root / entry.path)
                assert entry.kind == "symlink" or _inside(root, entry.path)
        else:
            found = run(ws.search(SECRET[:10], path=path))
            assert found.matches == [], found
    except WorkspaceError as err:
        assert SECRET not in err.message
    assert (outside / "canary.txt").read_bytes() == canary
    assert _snapshot(base, root) == before, f"something changed outside the root via {path!r}"


def test_the_tree_really_has_escapes(tree) -> None:
    """Guard the attack itself: the links do lead out when followed naively."""
    _, outside, root, _, _ = tree
    assert (root / "link_out_file").read_text().startswith(SECRET)
    assert (root / "sub" / "up" / "outside" / "canary.txt").exists()
    assert not (outside / "created_through_link.txt").exists()
