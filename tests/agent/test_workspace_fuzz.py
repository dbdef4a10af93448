"""Ten thousand generated hostile paths against both workspaces: nothing outside the root is
ever read, listed, searched, written or created.

The tree: `top/` holds `outside_top/` and `base/`; `base/outside/` holds a canary with a
secret, a marker and a deeper secret; `base/root/` is the workspace, seeded with symlinks that
lead out (relative and absolute, to files and directories, through parent directories, chains
of links, dangling links, loops) and some that stay inside. A seeded generator builds paths
from `..` segments, absolute and drive prefixes, `~`, NUL bytes, backslashes, percent-encoded
and overlong-UTF-8 dots, Unicode look-alikes of `.` and `/`, RTL and zero-width marks, lone
surrogates, control characters, names up to past NAME_MAX and PATH_MAX, trailing slashes,
`.` and empty paths, and walks through the symlinks; every distinct path goes through
read_file, write_file, apply_edit (an edit and a creation), list_dir (1 and 10 levels deep)
and search, on `LocalWorkspace(root)` and on `ClientWorkspace` (JSON round trip to an editor
answering from a LocalWorkspace, as `apprentice chat` does).

Allowed: a result inside the root, or a WorkspaceError. Checked after every path: no result
or error message carries the secret, a successful read or write resolves inside the root
(os.path.realpath, independently), listings name only entries inside, searches for the secret
find nothing, and `top/` outside the root is unchanged (every entry's inode, size, mtime; no
new entry). The root is rebuilt whenever a write changed it, so listings and searches stay
small. Prints the figures. Run: .venv/bin/python -m pytest tests/agent/test_workspace_fuzz.py -s
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import shutil
import stat
from collections import Counter
from pathlib import Path
from typing import Any

from agent_server.agent.client_workspace import ClientWorkspace, answer_request
from agent_server.agent.edits import SearchReplace
from agent_server.agent.workspace import LocalWorkspace
from agent_server.agent.workspace_types import WorkspaceError

SEED, PATHS = 20260105, 10_000
SECRET = "CANARY-" + secrets.token_hex(8)
OUTSIDE_ONLY = ("canary.txt", "marker_outside.txt", "secret.txt")  # names never inside the root
FILES = {"a.txt": "hello\n", "sub/b.txt": "bee\n", "sub/deep/c.txt": "sea\n"}
LINKS = {  # name in the root -> target ({base}, {top}: absolute)
    "link_out_file": "../outside/canary.txt", "link_out_dir": "../outside",
    "abs_link": "{base}/outside/canary.txt", "abs_dir_link": "{base}/outside",
    "top_link": "{top}/outside_top", "dotdot": "..", "sub/up": "../..",
    "sub/deep/upup": "../../..", "chain1": "chain2", "chain2": "sub/deep/upup/outside",
    "dangling_out": "../outside/created_through_link.txt", "dangling_dir": "../newdir/x.txt",
    "loop_a": "loop_b", "loop_b": "loop_a", "self_loop": "self_loop", "link_in": "a.txt",
    "link_in_dir": "sub", "abs_in": "{base}/root/sub", "here": ".",
    "via_root": "{base}/root/../outside/dir",
}  # fmt: skip
NAMES = [
    "..", ".", "", "...", "....", ". .", ".. ", " ..", "..\t", "%2e%2e", "%2e", "%2E%2E%2F",
    "..%2f", "%252e%252e", "..%5c", "%c0%ae%c0%ae", "\u2024\u2024", "\uff0e\uff0e", "\u2025",
    "\u3002\u3002", "\u2215", "..\u2215..", "\u2044", "\uff0f", "\x00", "a\x00b", "..\x00",
    "..\\..", "\\", "sub\\b.txt", "~", "~root", "~/.ssh", "x" * 255, "x" * 256, "é" * 128,
    "é" * 127 + "e", "\u202e", "txt.a\u202e", "\u200b..", "..\u200b", "\ud800", "\udcff",
    "\n", "\r..", "con", "NUL", "a.txt:stream", "*", "?", "$HOME", "${HOME}", "`id`",
    *FILES, "a.txt", "sub", "deep", "b.txt", "c.txt", *(k.split("/")[-1] for k in LINKS),
    *OUTSIDE_ONLY, "outside", "outside_top", "root", "base", "top", "dir", "newdir",
]  # fmt: skip
SEPARATORS = ["/"] * 16 + ["//", "/./", "\\", "/../", "%2f", "\u2215", "/\x00/"]
PREFIXES = [""] * 12 + ["/", "//", "~/", "C:\\", "C:/", "c:", "file:///", "\\\\srv\\share\\",
                        "\\\\?\\C:\\", "./", "sub/../", "{top}/", "{outside}/", "{root}/../",
                        "{root}/"]  # fmt: skip
SUFFIXES = [""] * 10 + ["/", "/.", "//", "/..", "\\", " ", "\x00", "/x", "/../x"]
OPS = ("read", "write", "edit", "create", "list", "list_deep", "search")


def random_name(rng: random.Random) -> str:
    """Random code points: ASCII, Latin, RTL and zero-width marks, surrogates, astral."""
    pools = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x24F), (0x200B, 0x202E), (0xD800, 0xDFFF),
             (0xFF00, 0xFF5E), (0x1F600, 0x1F64F), (0x10000, 0x10FFFF)]  # fmt: skip
    chars = [chr(rng.randint(*rng.choice(pools))) for _ in range(rng.randint(1, 12))]
    return "".join(chars)


def hostile_path(rng: random.Random, dirs: dict[str, str]) -> str:
    shape = rng.random()
    if shape < 0.15:  # climbing out, in one of several disguises
        up = rng.choice(["../", "..//", "./../", "sub/../../", "link_in_dir/../../", "..\\"])
        tail = rng.choice(["outside/canary.txt", "outside/dir/secret.txt", "outside", "x.txt",
                           "root/a.txt", "outside_top", "base/outside/"])  # fmt: skip
        path = up * rng.randint(1, 6) + tail
    elif shape < 0.35:  # through the links
        link = rng.choice(list(LINKS))
        path = f"{link}/{'/'.join(rng.choice(NAMES) for _ in range(rng.randint(0, 3)))}"
    else:
        parts = [rng.choice(NAMES) if rng.random() < 0.8 else random_name(rng)
                 for _ in range(rng.randint(1, 6))]  # fmt: skip
        path = rng.choice(PREFIXES) + parts[0]
        for part in parts[1:]:
            path += rng.choice(SEPARATORS) + part
    path += rng.choice(SUFFIXES)
    if rng.random() < 0.03:
        path = path * rng.randint(20, 400)  # past PATH_MAX
    for key, value in dirs.items():
        path = path.replace("{" + key + "}", value)
    return path


def build(top: Path, *, outside_too: bool = False) -> tuple[Path, Path]:
    """The seeded root (again); with outside_too, first the secrets around it."""
    base, outside, root = top / "base", top / "base" / "outside", top / "base" / "root"
    if outside_too:
        (outside / "dir").mkdir(parents=True)
        (top / "outside_top").mkdir()
        secrets_at = [
            outside / "canary.txt",
            outside / "marker_outside.txt",
            outside / "dir" / "secret.txt",
            top / "outside_top" / "canary.txt",
        ]
        for where in secrets_at:
            where.write_text(f"{SECRET} {where.name}\n")
    if root.exists():
        shutil.rmtree(root)  # never follows the links it removes
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for name, target in LINKS.items():
        os.symlink(target.format(base=base, top=top), root / name)
    os.mkfifo(root / "fifo")
    return outside, root


def snapshot(top: Path, root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under `top` but the root's inside: (inode, size, mtime); of a directory only
    the inode (rebuilding the root touches its parent; new entries show up as new keys)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if Path(dirpath) == root:
            dirnames.clear()
            continue
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if Path(full) != root:
                st = os.lstat(full)
                is_dir = stat.S_ISDIR(st.st_mode)
                out[full] = (st.st_ino, 0, 0) if is_dir else (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def tree_of(root: Path) -> list[tuple[str, str]]:
    """The root's entries (name, link target or content): what a write may have changed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            kind = os.readlink(full) if os.path.islink(full) else ""
            if not kind and os.path.isfile(full):
                kind = Path(full).read_bytes().decode(errors="replace")
            out.append((os.path.relpath(full, root), kind))
    return sorted(out)


def inside(root: Path, rel: str) -> bool:
    # As the editor got it (JSON joins a surrogate pair into one character), then as bytes.
    rel = json.loads(json.dumps(rel))
    real = os.path.realpath(os.path.join(os.fsencode(root), os.fsencode(rel)))
    return os.path.commonpath([os.fsencode(root), real]) == os.fsencode(root)


class Editor:
    """The editor end of ClientWorkspace: JSON both ways, answered from a LocalWorkspace."""

    def __init__(self, root: Path) -> None:
        self.local = LocalWorkspace(root)

    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        wire = json.loads(json.dumps({"method": method, "params": params}))
        reply = await answer_request(self.local, wire["method"], wire["params"])
        return json.loads(json.dumps(reply))


async def attack(ws: Any, root: Path, path: str, op: str) -> tuple[str, str]:
    """Run one op; return (everything it returned or said, as text; "ok" or the error code).
    An escape fails an assertion here."""
    try:
        if op == "read":
            text = await ws.read_file(path)
            assert inside(root, path), f"read outside: {path!r}"
            return text, "ok"
        if op == "write":
            await ws.write_file(path, "written by the fuzz\n")
            assert inside(root, path), f"wrote outside: {path!r}"
            return "", "ok"
        if op in ("edit", "create"):
            search = "hello" if op == "edit" else ""
            result = await ws.apply_edit(path, [SearchReplace(search, "edited\n")])
            assert inside(root, path), f"edited outside: {path!r}"
            return result.old_text + result.diff, "ok"
        if op == "search":
            found = await ws.search(SECRET[:12], path=path)
            assert found.matches == [], (path, found)
            return repr(found), "ok"
        listing = await ws.list_dir(path, depth=10 if op == "list_deep" else 1)
        for entry in listing.entries:
            assert os.path.lexists(root / entry.path), (path, entry)
            assert entry.kind == "symlink" or inside(root, entry.path), (path, entry)
            assert os.path.basename(entry.path) not in OUTSIDE_ONLY, (path, entry)
        return repr(listing), "ok"
    except WorkspaceError as err:
        return err.message, err.code


def test_ten_thousand_hostile_paths_never_escape(tmp_path: Path) -> None:
    top = Path(os.path.realpath(tmp_path)) / "top"
    outside, root = build(top, outside_too=True)
    root = Path(os.path.realpath(root))
    seeded, before = tree_of(root), snapshot(top, root)
    dirs = {"top": str(top), "outside": str(outside), "root": str(root)}
    workspaces = {"local": LocalWorkspace(root), "client": ClientWorkspace(Editor(root))}
    rng = random.Random(SEED)
    paths: set[str] = set()
    while len(paths) < PATHS:
        paths.add(hostile_path(rng, dirs))
    outcomes: Counter[str] = Counter()
    escapes: list[str] = []
    as_text: Counter[bool] = Counter()  # paths refused on their text alone (invalid_path)

    async def run_all() -> None:
        nonlocal before
        for path in sorted(paths, key=lambda s: (len(s), s)):
            wrote, statuses = False, set()
            for name, ws in workspaces.items():
                for op in OPS:
                    outcomes["operations"] += 1
                    try:
                        said, status = await attack(ws, root, path, op)
                    except AssertionError as err:  # an escape: collect, go on, report all
                        escapes.append(f"{name} {op} {path[:120]!r}: {str(err)[:200]}")
                        continue
                    wrote |= op in ("write", "edit", "create") and status == "ok"
                    outcomes[status] += 1
                    statuses.add(status)
                    if SECRET in said:
                        escapes.append(f"{name} {op} {path[:120]!r}: the secret came back")
            as_text[statuses == {"invalid_path"}] += 1
            if (after := snapshot(top, root)) != before:
                changed = sorted(set(after.items()) ^ set(before.items()))[:3]
                escapes.append(f"{path[:120]!r}: changed outside the root: {changed}")
                before = after
            if wrote and tree_of(root) != seeded:
                build(top)  # back to the seeded root: listings and searches stay small

    asyncio.run(run_all())
    ops = outcomes.pop("operations")
    print(f"\nworkspace fuzz: {len(paths)} distinct hostile paths tried ({as_text[False]} got "
          f"past the text checks), {ops} operations on LocalWorkspace and ClientWorkspace; "
          f"outcomes {dict(outcomes.most_common())}; escapes={len(escapes)}")  # fmt: skip
    assert escapes == [], escapes[:10]
    assert len(paths) >= 10_000 and ops == len(paths) * len(OPS) * len(workspaces)
    assert (outside / "canary.txt").read_text() == f"{SECRET} canary.txt\n"
    assert not (outside / "created_through_link.txt").exists()
