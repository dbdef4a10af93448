"""The values and errors of the `Workspace` seam (see workspace.py for the protocol itself).

Every error is a `WorkspaceError` with a stable `code` (sent over the WebSocket as
`ToolError.code`) and a message written to be handed to the model as an observation: it says
what went wrong and what to do instead. `error_from_code` rebuilds the right class from a
code, so `ClientWorkspace` raises the same types as `LocalWorkspace`.

Nothing to run here; tests/agent/test_workspace.py exercises every class.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal


class WorkspaceError(Exception):
    """A workspace call failed in a way the model can usually fix; `message` says how."""

    code = "workspace_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class InvalidPath(WorkspaceError):
    """The path is malformed: NUL byte, over-long name, backslash, empty, bad encoding."""

    code = "invalid_path"


class PathOutsideWorkspace(WorkspaceError):
    """Absolute path, `..` out of the root, or a symlink whose target lies outside."""

    code = "path_outside_workspace"


class FileNotFound(WorkspaceError):
    code = "file_not_found"


class NotAFile(WorkspaceError):
    """A directory, FIFO, device or socket where a regular file was expected."""

    code = "not_a_file"


class NotADirectory(WorkspaceError):
    code = "not_a_directory"


class FileTooLarge(WorkspaceError):
    code = "file_too_large"


class FileChanged(WorkspaceError):
    """The person changed the file since the agent read it; the write was refused."""

    code = "file_changed"


class BinaryFile(WorkspaceError):
    """The file is not UTF-8 text (NUL bytes or undecodable)."""

    code = "binary_file"


class PermissionDenied(WorkspaceError):
    code = "permission_denied"


class InvalidPattern(WorkspaceError):
    """A search regex that does not compile."""

    code = "invalid_pattern"


class CommandError(WorkspaceError):
    """The command could not be started (empty, not found, not executable)."""

    code = "command_error"


class WorkspaceUnavailable(WorkspaceError):
    """The editor did not answer in time, or the connection to it broke."""

    code = "workspace_unavailable"


def _all_subclasses(cls: type[WorkspaceError]) -> list[type[WorkspaceError]]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


def error_from_code(code: str, message: str) -> WorkspaceError:
    """The WorkspaceError subclass for `code` (EditError included once the edits package is
    imported); an unknown code becomes a plain WorkspaceError carrying the message."""
    for cls in _all_subclasses(WorkspaceError):
        if cls.code == code:
            return cls(message)
    return WorkspaceError(message)


EntryKind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class DirEntry:
    """One listing entry; `path` is workspace-relative with '/' separators. Symlinks are
    listed as such and never followed (a link may point out of the workspace)."""

    path: str
    kind: EntryKind
    size: int | None = None  # bytes, for files


@dataclass(frozen=True)
class Listing:
    entries: list[DirEntry]
    truncated: bool = False  # the limit was reached; list a subdirectory for the rest

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Listing:
        return cls([DirEntry(**e) for e in data["entries"]], bool(data.get("truncated")))


@dataclass(frozen=True)
class SearchMatch:
    path: str
    line: int  # 1-based, as editors and grep show it
    text: str  # the line, shortened when very long


@dataclass(frozen=True)
class SearchResult:
    matches: list[SearchMatch]
    truncated: bool = False  # max_results was reached

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchResult:
        return cls([SearchMatch(**m) for m in data["matches"]], bool(data.get("truncated")))


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when it was killed for the timeout; negative = signal
    output: str  # stdout and stderr interleaved, decoded as UTF-8 (errors replaced)
    timed_out: bool = False
    truncated: bool = False  # output was over the cap; head and tail are kept

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommandResult:
        return cls(**{k: data[k] for k in ("exit_code", "output", "timed_out", "truncated")})


@dataclass(frozen=True)
class EditResult:
    """What `Workspace.apply_edit` did: the file's old and new text and the unified diff."""

    path: str
    old_text: str
    new_text: str
    diff: str
    created: bool = False
    strategies: list[str] = field(default_factory=list)  # how each block matched
