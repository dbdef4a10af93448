"""LocalWorkspace on a real temporary directory: reads, atomic writes, listing, search, edits
that leave the file untouched on failure, and run_command (timeout kills the whole process
group, output cap, no secrets in the environment).

Run: .venv/bin/python -m pytest tests/agent/test_workspace.py -q
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from agent_server.agent.edits import EditError, SearchReplace
from agent_server.agent.workspace import LocalWorkspace, LocalWorkspaceConfig, Workspace
from agent_server.agent.workspace_types import (
    BinaryFile,
    CommandError,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    InvalidPattern,
    NotADirectory,
    NotAFile,
    PathOutsideWorkspace,
    WorkspaceError,
    error_from_code,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / "src" / "pkg").mkdir(parents=True)
    (r / ".git").mkdir()
    (r / ".git" / "config").write_text("[core]\nneedle = hidden\n")
    (r / "README.md").write_text("# Project\nneedle in the readme\n")
    (r / "src" / "app.py").write_text("def main():\n    return 'needle'\n")
    (r / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    return r


@pytest.fixture
def ws(root: Path) -> LocalWorkspace:
    return LocalWorkspace(root, LocalWorkspaceConfig(max_file_bytes=10_000))


def test_it_is_a_workspace(ws: LocalWorkspace) -> None:
    assert isinstance(ws, Workspace)


async def test_read_and_errors(ws: LocalWorkspace, root: Path) -> None:
    assert await ws.read_file("src/app.py") == "def main():\n    return 'needle'\n"
    assert await ws.read_file("./src/../src/app.py") == await ws.read_file("src/app.py")
    with pytest.raises(FileNotFound, match="list_dir"):
        await ws.read_file("nope.py")
    with pytest.raises(NotAFile, match="directory"):
        await ws.read_file("src")
    with pytest.raises(NotADirectory):
        await ws.read_file("README.md/x")
    (root / "big.txt").write_text("x" * 20_000)
    with pytest.raises(FileTooLarge, match="20000 bytes"):
        await ws.read_file("big.txt")
    (root / "img.bin").write_bytes(b"\x89PNG\x00\x01")
    with pytest.raises(BinaryFile):
        await ws.read_file("img.bin")
    (root / "latin.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(BinaryFile, match="UTF-8"):
        await ws.read_file("latin.txt")
    os.mkfifo(root / "pipe")
    with pytest.raises(NotAFile, match="FIFO"):  # and it does not block waiting for a writer
        await ws.read_file("pipe")
    for bad, kind in [("/etc/passwd", PathOutsideWorkspace), ("../x", PathOutsideWorkspace),
                      ("a\x00b", InvalidPath), ("x" * 300, InvalidPath), ("", InvalidPath),
                      ("src\\app.py", InvalidPath)]:  # fmt: skip
        with pytest.raises(kind) as info:
            await ws.read_file(bad)
        assert info.value.code == kind.code and len(info.value.message) > 20


async def test_write_is_atomic_and_keeps_mode_and_newlines(ws: LocalWorkspace, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\r\necho hi\r\n")
    script.chmod(0o751)
    inode = script.stat().st_ino
    assert await ws.write_file("run.sh", "#!/bin/sh\necho bye\n") is False
    assert script.read_bytes() == b"#!/bin/sh\r\necho bye\r\n"  # CRLF kept
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert await ws.write_file("new/dir/file.txt", "x\n") is True  # parents created
    assert (root / "new" / "dir" / "file.txt").read_text() == "x\n"
    assert not [p for p in root.rglob("*.tmp")], "temp files left behind"
    with pytest.raises(FileTooLarge):
        await ws.write_file("huge.txt", "y" * 20_000)
    with pytest.raises(NotAFile):
        await ws.write_file("src", "x")


async def test_list_dir(ws: LocalWorkspace, root: Path) -> None:
    os.symlink("/etc", root / "etc_link")
    top = await ws.list_dir()
    assert [(e.path, e.kind) for e in top.entries] == [
        ("README.md", "file"), ("etc_link", "symlink"), ("src", "dir"),
    ]  # fmt: skip
    assert top.entries[0].size == len("# Project\nneedle in the readme\n")
    deep = await ws.list_dir(".", depth=3)
    assert "src/pkg/mod.py" in [e.path for e in deep.entries]
    assert not any(e.path.startswith(".git") for e in deep.entries)  # ignored
    assert not any(e.path.startswith("etc_link/") for e in deep.entries)  # never followed
    limited = await ws.list_dir(".", depth=3, limit=2)
    assert len(limited.entries) == 2 and limited.truncated
    assert [e.path for e in (await ws.list_dir("src")).entries] == ["src/app.py", "src/pkg"]
    with pytest.raises(NotADirectory, match="read_file"):
        await ws.list_dir("README.md")


async def test_search(ws: LocalWorkspace, root: Path) -> None:
    found = await ws.search("needle")
    assert [(m.path, m.line) for m in found.matches] == [("README.md", 2), ("src/app.py", 2)]
    assert found.matches[1].text == "    return 'needle'"
    assert (await ws.search("needle", path="src")).matches[0].path == "src/app.py"
    assert len((await ws.search("needle", path="src/app.py")).matches) == 1
    regex = await ws.search(r"^def \w+\(", regex=True)
    assert [m.path for m in regex.matches] == ["src/app.py"]
    assert (await ws.search("(", regex=False)).matches  # literal by default
    with pytest.raises(InvalidPattern, match="regex"):
        await ws.search("(", regex=True)
    with pytest.raises(InvalidPattern):
        await ws.search("")
    many = await ws.search("e", max_results=2)
    assert len(many.matches) == 2 and many.truncated


async def test_apply_edit_success_and_failure_leave_no_partial_file(
    ws: LocalWorkspace, root: Path
) -> None:
    path = root / "src" / "app.py"
    result = await ws.apply_edit(
        "src/app.py", [SearchReplace("    return 'needle'\n", "    return 'thread'\n")]
    )
    assert result.new_text == path.read_text() == "def main():\n    return 'thread'\n"
    assert "-    return 'needle'" in result.diff and "+    return 'thread'" in result.diff
    assert result.strategies == ["exact"] and not result.created
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    time.sleep(0.01)
    blocks = [SearchReplace("def main():\n", "def run():\n"), SearchReplace("no such line", "x")]
    with pytest.raises(EditError, match="block 2 of 2") as info:
        await ws.apply_edit("src/app.py", blocks)
    assert info.value.code == "edit_failed"
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime  # untouched
    created = await ws.apply_edit("docs/new.md", [SearchReplace("", "# New\n")])
    assert created.created and (root / "docs" / "new.md").read_text() == "# New\n"
    with pytest.raises(FileNotFound, match="empty SEARCH"):
        await ws.apply_edit("missing.py", [SearchReplace("x", "y")])


async def test_plan_edit_is_apply_edit_without_the_write(ws: LocalWorkspace, root: Path) -> None:
    path = root / "src" / "app.py"
    before = path.read_bytes()
    blocks = [SearchReplace("    return 'needle'\n", "    return 'thread'\n")]
    plan = await ws.plan_edit("src/app.py", blocks)
    assert path.read_bytes() == before  # nothing written
    assert plan.new_text == "def main():\n    return 'thread'\n" and plan.strategies == ["exact"]
    assert plan == await ws.apply_edit("src/app.py", blocks)
    assert path.read_text() == plan.new_text
    new = await ws.plan_edit("docs/new.md", [SearchReplace("", "# New\n")])
    assert new.created and not (root / "docs").exists()
    with pytest.raises(FileNotFound, match="empty SEARCH"):
        await ws.plan_edit("missing.py", [SearchReplace("x", "y")])


async def test_run_command_basics(ws: LocalWorkspace, root: Path) -> None:
    res = await ws.run_command(["ls"])
    assert res.exit_code == 0 and "README.md" in res.output and not res.timed_out
    res = await ws.run_command("sh -c 'echo out; echo err >&2; exit 3'")  # split, no shell
    assert res.exit_code == 3 and "out" in res.output and "err" in res.output
    res = await ws.run_command("echo $HOME | tr a-z A-Z", shell=True)
    assert res.exit_code == 0 and res.output.strip() == os.environ["HOME"].upper()
    res = await ws.run_command(["echo", "a;", "rm", "-rf", "x"])  # no shell: literal args
    assert res.output.strip() == "a; rm -rf x"
    with pytest.raises(CommandError, match="not found"):
        await ws.run_command(["definitely-not-a-command-xyz"])
    with pytest.raises(CommandError, match="empty"):
        await ws.run_command("")


async def test_run_command_timeout_kills_the_process_group(ws: LocalWorkspace, root: Path):
    script = "sleep 60 & echo $! > bg.pid; echo started; sleep 60"
    t0 = time.monotonic()
    res = await ws.run_command(script, shell=True, timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    assert res.timed_out and res.exit_code is None and "started" in res.output
    assert "timeout" in res.output
    pid = int((root / "bg.pid").read_text())
    for _ in range(50):  # the background sleep was in the group: it must be gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"background process {pid} survived the timeout")


async def test_run_command_output_cap(ws: LocalWorkspace) -> None:
    cmd = "for i in $(seq 1 20000); do echo line-$i; done"
    res = await ws.run_command(cmd, shell=True, output_cap_bytes=1000)
    assert res.truncated and res.exit_code == 0
    assert res.output.startswith("line-1\n") and res.output.rstrip().endswith("line-20000")
    assert "bytes of output omitted" in res.output and len(res.output) < 1200
    small = await ws.run_command(["echo", "hi"], output_cap_bytes=1000)
    assert small.output == "hi\n" and not small.truncated


async def test_run_command_env_has_no_secrets(
    ws: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPRENTICE_TOKEN", "tok-123")
    monkeypatch.setenv("GITHUB_TOKEN", "gh-456")
    monkeypatch.setenv("MY_DB_PASSWORD", "pw-789")
    monkeypatch.setenv("HARMLESS_VALUE", "kept")
    res = await ws.run_command(["env"])
    assert "HARMLESS_VALUE=kept" in res.output
    for secret in ("tok-123", "gh-456", "pw-789"):
        assert secret not in res.output


def test_config_and_error_codes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="list_limit must be >= 1"):
        LocalWorkspaceConfig(list_limit=0)
    with pytest.raises(ValueError, match="not a directory"):
        LocalWorkspace(tmp_path / "missing")
    for cls in (FileNotFound, PathOutsideWorkspace, BinaryFile, CommandError, EditError):
        err = error_from_code(cls.code, "msg")
        assert type(err) is cls and err.message == "msg"
    assert type(error_from_code("something_new", "m")) is WorkspaceError
