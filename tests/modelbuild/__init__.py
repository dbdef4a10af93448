"""Tests of modelbuild/: the dev model builder, the agent model's copy rows and traces."""
