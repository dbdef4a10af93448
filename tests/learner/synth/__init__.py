"""Tests of learner/synth: tasks mined from git history, sandboxes, rollouts, rewards."""
