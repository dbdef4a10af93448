"""Print the table of the learner's settings for docs/configuration.md, from the models.

    .venv/bin/python scripts/learner_settings_doc.py > /tmp/table.md

One row per field of learner/config.py's LearnerConfig (nested tables as `data.settle_s`):
its default and its description, which is the one place each setting is explained.
tests/test_learner_settings_doc.py checks the doc has a row for every field with its default.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learner.config import LearnerConfig  # noqa: E402


def shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(shown(v) for v in value) + "]" if value else "[]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {shown(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def rows(model: type[BaseModel], instance: BaseModel, prefix: str = "") -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        value = getattr(instance, name)
        if isinstance(value, BaseModel):
            out += rows(type(value), value, f"{prefix}{name}.")
            continue
        text = (info.description or "").replace("|", "\\|").replace("\n", " ")
        out.append(f"| `{prefix}{name}` | `{shown(value)}` | {text} |")
    return out


def table() -> str:
    head = ["| Setting | Default | Meaning |", "|---|---|---|"]
    return "\n".join(head + rows(LearnerConfig, LearnerConfig()))


if __name__ == "__main__":
    print(table())
