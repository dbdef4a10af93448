"""Apprentice's entry points: the `apprentice` CLI (`cli.py`) and the process wiring behind
it (`run.py`: serve / up / chat, `processes.py`: the learner's child processes, `chat.py`:
the terminal client).

This room sits at the top: it may import every other room (lazily, inside each command);
nothing imports it. Components never read the environment; the CLI builds a
`ground.settings.Settings` and hands it, or a config derived from it, down.
"""

from ground import __version__ as __version__
