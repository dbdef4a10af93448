"""Apprentice's entry points: the `apprentice` CLI and the one `Settings` object.

Components (feedback/, agent_server/, lsp/, learner/) never read the environment; the CLI
builds a `Settings` and hands it, or a config derived from it, to them.
"""

__version__ = "0.1.0"
