"""File-system access confined to one root directory (LocalWorkspace's lower half; sync code).

Two layers of defence:
1. `resolve(path)` checks the text (relative, no NUL, no backslash, names <= 255 bytes, `..`
   not leaving the root), then `os.path.realpath` + `os.path.commonpath` against the real
   root: symlinks are resolved, and a target outside the root is refused.
2. Every open walks the resolved parts from a descriptor of the root, one component at a time
   with O_NOFOLLOW (`dir_fd=`), so a directory swapped for a symlink between the check and the
   use (TOCTOU) makes the open fail (ELOOP) instead of escaping. Writes go to a temp file in
   the same directory (O_EXCL|O_NOFOLLOW), are fsynced, then renamed over the target with
   `os.replace(..., src_dir_fd=, dst_dir_fd=)`: atomic, keeping the old file's mode.
   Listing and search walk by descriptor too and never follow a symlink.

Nothing to run here; tests/agent/test_workspace.py attacks it with hypothesis.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from agent_server.agent.workspace_types import (
    EntryKind,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    NotADirectory,
    NotAFile,
    PathOutsideWorkspace,
    PermissionDenied,
    WorkspaceError,
)

NAME_MAX = 255  # bytes per path component (Linux)
PATH_MAX = 4000  # bytes for the whole relative path, under the kernel's 4096
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: FIFOs
_DRIVE = re.compile(r"^[A-Za-z]:")


def _oserror(err: OSError, path: str) -> WorkspaceError:
    code = err.errno
    if code == errno.ENOENT:
        return FileNotFound(f"'{path}' does not exist. Use list_dir to see what is there.")
    if code == errno.ENOTDIR:
        return NotADirectory(f"A part of '{path}' is a file, not a directory.")
    if code == errno.EISDIR:
        return NotAFile(f"'{path}' is a directory; use list_dir to see its contents.")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PermissionDenied(f"Permission denied for '{path}'.")
    if code == errno.ENAMETOOLONG:
        return InvalidPath(f"'{path[:80]}...' is too long a name.")
    if code == errno.ELOOP:
        return PathOutsideWorkspace(f"'{path}' goes through a symlink; it was refused.")
    return WorkspaceError(f"'{path}': {os.strerror(code or 0)}.")


@dataclass(frozen=True)
class Walked:
    rel: str  # workspace-relative, '/'-separated
    kind: EntryKind
    size: int | None
    dir_fd: int  # open while the entry is being handled; do not keep it
    name: str
    depth: int


class ConfinedFS:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ValueError(f"workspace root {root!r} is not a directory; create it first")
        self.root = real

    # -- checking paths ----------------------------------------------------------------------

    def resolve(self, path: str, *, allow_root: bool = False) -> tuple[str, ...]:
        """The real path's components under the root, or a WorkspaceError saying why not."""
        if not isinstance(path, str):
            raise InvalidPath(f"A path must be a string, got {type(path).__name__}.")
        shown = path if len(path) <= 200 else path[:200] + "..."
        if "\x00" in path:
            raise InvalidPath("The path contains a NUL byte; use a plain relative path.")
        if "\\" in path:
            raise InvalidPath(f"'{shown}' contains '\\'; separate directories with '/'.")
        if path.startswith("/") or _DRIVE.match(path) or path.startswith("~"):
            raise PathOutsideWorkspace(
                f"'{shown}' is absolute; use a path relative to the workspace root, "
                "e.g. 'src/main.py' or '.'."
            )
        try:
            encoded = os.fsencode(path)
        except UnicodeError:
            raise InvalidPath("The path is not valid Unicode text.") from None
        if len(encoded) > PATH_MAX or any(len(p) > NAME_MAX for p in encoded.split(b"/")):
            raise InvalidPath(f"'{shown}' is too long (names <= {NAME_MAX} bytes).")
        norm = posixpath.normpath(path) if path.strip() else ""
        if norm == ".." or norm.startswith("../"):
            raise PathOutsideWorkspace(f"'{shown}' leaves the workspace; '..' cannot go above it.")
        if norm in ("", ".") and not allow_root:
            raise InvalidPath("The path is empty; name a file, e.g. 'README.md'.")
        try:
            real = os.path.realpath(os.path.join(self.root, path))
        except (OSError, ValueError) as err:
            raise InvalidPath(f"'{shown}' cannot be resolved: {err}.") from None
        if os.path.commonpath([self.root, real]) != self.root:
            raise PathOutsideWorkspace(
                f"'{shown}' resolves outside the workspace (through a symlink); refused."
            )
        rel = os.path.relpath(real, self.root)
        if rel == "." and not allow_root:  # e.g. a link to "." (tests/agent/test_workspace_fuzz.py)
            raise NotAFile(f"'{shown}' is the workspace root; use list_dir to see its contents.")
        return () if rel == "." else tuple(rel.split(os.sep))

    # -- descriptors ---------------------------------------------------------------------------

    @contextmanager
    def dir_fd(self, parts: tuple[str, ...], shown: str, *, create: bool = False):
        """A descriptor of the directory `parts`, opened component by component."""
        fd = os.open(self.root, _DIR)
        try:
            for part in parts:
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nxt = os.open(part, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
            yield fd
        except OSError as err:
            raise _oserror(err, shown) from None
        finally:
            os.close(fd)

    def read_bytes(self, path: str, max_bytes: int) -> bytes:
        parts = self.resolve(path)
        with self.dir_fd(parts[:-1], path) as parent:
            try:
                fd = os.open(parts[-1], _READ, dir_fd=parent)
            except OSError as err:
                raise _oserror(err, path) from None
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    raise NotAFile(f"'{path}' is a directory; use list_dir to see its contents.")
                if not stat.S_ISREG(st.st_mode):
                    raise NotAFile(f"'{path}' is not a regular file (a device, FIFO or socket).")
                if st.st_size > max_bytes:
                    raise FileTooLarge(
                        f"'{path}' has {st.st_size} bytes, over the {max_bytes}-byte limit; "
                        "use search to find the lines you need."
                    )
                chunks, total = [], 0
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                    total += len(chunk)
                    if total > max_bytes:  # it grew while we read
                        raise FileTooLarge(f"'{path}' is over the {max_bytes}-byte limit.")
                return b"".join(chunks)
            except OSError as err:
                raise _oserror(err, path) from None
            finally:
                os.close(fd)

    def write_atomic(self, path: str, data: bytes) -> bool:
        """Replace (or create) the file; True when it was created. Parents are created."""
        parts = self.resolve(path)
        with self.dir_fd(parts[:-1], path, create=True) as parent:
            name = parts[-1]
            try:
                old = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            except OSError as err:
                raise _oserror(err, path) from None
            if old is not None and stat.S_ISLNK(old.st_mode):
                raise PathOutsideWorkspace(f"'{path}' became a symlink; refused.")
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise NotAFile(f"'{path}' exists and is not a regular file.")
            tmp = f".apprentice-{secrets.token_hex(6)}.tmp"  # short: name may be NAME_MAX
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(tmp, flags, 0o666, dir_fd=parent)  # the umask applies
            except OSError as err:
                raise _oserror(err, path) from None
            try:
                try:
                    if old is not None:
                        os.fchmod(fd, stat.S_IMODE(old.st_mode))
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                os.fsync(parent)
            except OSError as err:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise _oserror(err, path) from None
            return old is None

    def kind(self, parts: tuple[str, ...], shown: str) -> EntryKind:
        if not parts:
            return "dir"
        with self.dir_fd(parts[:-1], shown) as parent:
            try:
                st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except OSError as err:
                raise _oserror(err, shown) from None
        return _kind(st.st_mode)

    def walk(
        self, parts: tuple[str, ...], shown: str, max_depth: int, ignore: frozenset[str]
    ) -> Iterator[Walked]:
        """Entries under directory `parts`, depth-first in name order; symlinks are reported
        and never followed, names in `ignore` are skipped."""
        with self.dir_fd(parts, shown) as fd:
            yield from self._walk(fd, "/".join(parts), 1, max_depth, ignore)

    def _walk(
        self, fd: int, rel: str, depth: int, max_depth: int, ignore: frozenset[str]
    ) -> Iterator[Walked]:
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # unreadable directory: skip it, as grep -r does
        for entry in entries:
            if entry.name in ignore:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = _kind(st.st_mode)
            child = f"{rel}/{entry.name}" if rel else entry.name
            size = st.st_size if kind == "file" else None
            yield Walked(child, kind, size, fd, entry.name, depth)
            if kind == "dir" and depth < max_depth:
                try:
                    sub = os.open(entry.name, _DIR, dir_fd=fd)
                except OSError:
                    continue  # swapped for a symlink meanwhile, or unreadable
                try:
                    yield from self._walk(sub, child, depth + 1, max_depth, ignore)
                finally:
                    os.close(sub)

    @staticmethod
    def read_in(dir_fd: int, name: str, max_bytes: int) -> bytes | None:
        """A regular file's bytes next to `dir_fd`, or None (symlink, special, too large)."""
        try:
            fd = os.open(name, _READ, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                return None
            return os.read(fd, max_bytes + 1)[:max_bytes]
        except OSError:
            return None
        finally:
            os.close(fd)


def _kind(mode: int) -> EntryKind:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"
