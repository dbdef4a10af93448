"""Model backends behind the `ModelBackend` protocol (base.py): the only code that calls a model."""
