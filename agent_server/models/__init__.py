"""Model backends behind the `ModelBackend` protocol (base.py): the only code that calls a model.

Talking to models only: building one (the dev model, the agent model) is modelbuild/'s.
"""
