"""LSP features: one module per area, each a `register(server)` of small decorated handlers.

lifecycle.py (initialize, documents, shutdown), inline.py (textDocument/inlineCompletion),
actions.py (textDocument/codeAction + codeAction/resolve), commands.py (apprentice.*).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lsp.server import ApprenticeServer


def register_all(server: ApprenticeServer) -> None:
    from lsp.features import actions, commands, inline, lifecycle

    for module in (lifecycle, inline, actions, commands):
        module.register(server)
