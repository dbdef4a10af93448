"""The transport-neutral session layer: what every caller of the agent shares.

The WebSocket API (`agent_server.api`), the language server's local mode (`lsp.local`) and
the learner's rollouts run the agent through this layer, so a session recorded by one is
the same as a session recorded by another.

- `store.py` — `Store`, the async face on the feedback database (sessions, events,
  suggestions, outcomes).
"""
