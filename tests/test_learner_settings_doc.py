"""docs/configuration.md lists every learner setting with its default and meaning, exactly as
the models say (scripts/learner_settings_doc.py prints the table; regenerate it after changing
a field: the command is in the failure message).

    .venv/bin/python -m pytest tests/test_learner_settings_doc.py -q
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- learner-settings:begin -->", "<!-- learner-settings:end -->"


def test_the_learner_settings_table_is_the_models() -> None:
    spec = importlib.util.spec_from_file_location("doc", REPO / "scripts/learner_settings_doc.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (REPO / "docs" / "configuration.md").read_text()
    documented = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert documented == module.table(), (
        "docs/configuration.md's learner settings differ from learner/config.py: run "
        ".venv/bin/python scripts/learner_settings_doc.py and paste its table between the "
        "learner-settings markers"
    )
    assert "| `data.exclude_users` | `[]` |" in documented  # one row, spelled out
