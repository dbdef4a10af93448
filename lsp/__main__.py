"""`python -m lsp [--tcp HOST:PORT] [--server URL]`: the same server as `apprentice lsp`.

One addition, for tests only: `APPRENTICE_LSP_TEST_BACKEND=package.module:function` names a
function returning the `ModelBackend` to use instead of the one Settings picks (the tests'
scripted model, when a test needs a particular edit). It is read here and nowhere else;
`apprentice lsp` never looks at it.
"""

from __future__ import annotations

import argparse
import importlib
import os

from ground.settings import Settings
from lsp.run import make_config, run

TEST_BACKEND = "APPRENTICE_LSP_TEST_BACKEND"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lsp", description=__doc__)
    parser.add_argument("--tcp", metavar="HOST:PORT", help="serve over TCP instead of stdio")
    parser.add_argument("--server", metavar="URL", help="agent server WebSocket URL")
    args = parser.parse_args()
    factory = None
    if spec := os.environ.get(TEST_BACKEND):
        module, _, name = spec.partition(":")
        factory = getattr(importlib.import_module(module), name or "build")
    settings = Settings()
    try:
        config = make_config(settings, tcp=args.tcp, server=args.server)
    except ValueError as exc:
        parser.error(str(exc))
    run(settings, config, backend_factory=factory)


if __name__ == "__main__":
    main()
