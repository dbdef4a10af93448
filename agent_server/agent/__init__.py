"""The agent harness: loop, tools, edit application, workspaces, summarizer; no web framework."""
