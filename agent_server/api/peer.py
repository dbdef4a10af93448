"""`Peer`: what the session side of the web wing needs of a connection (the seam).

`sessions.py` and `bridge.py` talk to the editor through this Protocol, never through
`connection.Connection` itself, so imports run one way: connection -> sessions -> peer.
Nothing to run.
"""

from __future__ import annotations

from typing import Any, Protocol

from agent_server.protocol import messages as p


class Peer(Protocol):
    id: str  # the connection's id: the owner of the sessions it opened
    client: str  # the client's name from `hello`

    @property
    def user_id(self) -> int | None:
        """The person whose token opened it; None: the shared token."""
        ...

    async def send(self, message: p._Message) -> None:
        """Send one message; a closed connection drops it."""
        ...

    async def request(
        self, key: str, message: p._Message, timeout_s: float | None, *, kind: str
    ) -> Any:
        """Send `message`, then wait for the client message that answers `key`."""
        ...

    def new_request_id(self) -> str: ...
