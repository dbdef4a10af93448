"""The agent server: model backends (models/), the agent harness (agent/) and the web API (api/).

Wings: `models/` is the only code that talks to a model; `agent/` (loop, tools, edits,
workspaces, summarizer) imports no web framework; `api/` is FastAPI. The learner's rollouts
import `agent/` and `models/`, never `api/`.
"""
