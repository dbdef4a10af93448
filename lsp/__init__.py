"""The language server (pygls): LSP features mapped onto the agent."""
