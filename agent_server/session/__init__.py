"""The transport-neutral session layer: what every caller of the agent shares.

The WebSocket API (`agent_server.api`), the language server's local mode (`lsp.local`) and
the learner's rollouts run the agent through this layer, so a session recorded by one is
the same as a session recorded by another.

- `store.py` — `Store`, the async face on the feedback database (sessions, events,
  suggestions, outcomes).
- `recorder.py` — `RecordingSink`, the loop's EventSink: every event and every edit
  proposal's completion (with its exact prompt and sampling) into the store; a transport
  hears of each stored event through its `EventListener`.
- `turns.py` — `Turn` (a fresh Agent on the stored trajectory; the task or a follow-up) and
  `fit_config` (the agent config with max_tokens that fit the model's window).
- `prompts.py` — the task text, the follow-up, the inline-completion prompt and its fitting.
- `completion.py` — `complete_inline`: one inline completion, stored before it is returned.
"""
