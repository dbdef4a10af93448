"""Tests of the agent harness (agent_server/agent)."""
