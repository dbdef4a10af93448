"""Tests of the agent server's web wing (agent_server/api/), against real servers."""
