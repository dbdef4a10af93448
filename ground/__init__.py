"""The ground room: what every Apprentice process shares and that imports nothing of ours.

- `settings.py` — the one `Settings` object (only entry points build it);
- `broker.py` — the learner's broker contract (task names, Celery options, a sending client);
- `progress.py` — rich's progress bar, plus plain lines where no terminal shows it;
- `__version__`.

Every other room may import this one; it imports none of them (tests/test_imports.py).
"""

__version__ = "0.1.0"
