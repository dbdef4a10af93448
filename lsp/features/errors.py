"""Host failures as JSON-RPC errors the editor can show (code RequestFailed, -32803).

async with request_errors("inline completion"):
    suggestion = await ls.host.complete_inline(request)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pygls.exceptions import JsonRpcException

from agent_server.models.base import ModelError
from lsp.host import UnknownSuggestionError

log = logging.getLogger(__name__)
REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request failed"


@asynccontextmanager
async def request_errors(what: str) -> AsyncIterator[None]:
    try:
        yield
    except JsonRpcException:
        raise
    except UnknownSuggestionError as exc:
        raise JsonRpcException(f"unknown suggestion id {exc}", code=-32602) from None
    except ModelError as exc:
        raise RequestFailed(f"{what} failed: {exc.code}: {exc}") from None
    except Exception as exc:  # DB down, model folder missing...: the editor shows why
        log.exception("%s failed", what)
        raise RequestFailed(f"{what} failed: {type(exc).__name__}: {exc}") from None
