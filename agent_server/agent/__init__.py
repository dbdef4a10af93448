"""The agent harness: loop, tools, edit application, workspaces, summarizer. No web framework here."""
