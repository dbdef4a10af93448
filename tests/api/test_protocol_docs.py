"""docs/protocol.md and docs/protocol.schema.json are generated from agent_server/protocol/ and
current.

Run: .venv/bin/python -m pytest tests/api/test_protocol_docs.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema

from agent_server.protocol import messages as p
from agent_server.protocol.docs import MD_PATH, SCHEMA_PATH, render_markdown, render_schema
from agent_server.protocol.errors import ErrorCode
from feedback.vocab import EDITOR_OUTCOME_KINDS
from tests.fixtures.settings import REPO


def test_generated_docs_are_up_to_date() -> None:
    assert MD_PATH.read_text() == render_markdown(), "run: python -m agent_server.protocol.docs"
    assert SCHEMA_PATH.read_text() == render_schema(), "run: python -m agent_server.protocol.docs"
    check = subprocess.run(
        [sys.executable, "-m", "agent_server.protocol.docs", "--check"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_message_and_error_code_is_documented() -> None:
    text = MD_PATH.read_text()
    for model in p.CLIENT_MESSAGES + p.SERVER_MESSAGES:
        assert f"### `{p.message_type(model)}`" in text
    for code in ErrorCode:
        assert f"| `{code.value}` |" in text


def test_the_schema_accepts_real_messages_and_refuses_bad_ones() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = [
        p.Hello(id="1", protocol_version=p.PROTOCOL_VERSION),
        p.UserMessage(session_id="s", text="hi", context=p.EditorContext(path="a.py")),
        p.EditOutcome(suggestion_id="x", outcome="partially_accepted", client_event_id="e",
                      accepted_hunks=[0, 2]),
        p.EditProposed(session_id="s", suggestion_id="x", path="a.py", diff="d",
                       hunks=[p.Hunk(index=0, header="@@", diff="@@")]),
        p.Error(code="bad_json", message="m"),
    ]  # fmt: skip
    for message in good:
        validator.validate(json.loads(p.encode(message)))
    for bad in ({"type": "hello"}, {"type": "nope"}, {"type": "ping", "extra": 1}, {"id": "x"}):
        assert not validator.is_valid(bad), bad


def test_the_outcome_kinds_on_the_wire_are_the_vocabularys() -> None:
    # feedback/vocab.py is their one home; the schema (and the extension's types made from it)
    # must list exactly those, in that order.
    schema = json.loads(SCHEMA_PATH.read_text())
    outcome = schema["$defs"]["EditOutcome"]["properties"]["outcome"]
    assert outcome["enum"] == list(EDITOR_OUTCOME_KINDS)
    assert outcome["enum"] == [
        "accepted", "rejected", "partially_accepted", "edited_after_accept", "reverted",
        "persisted", "shown", "written",
    ]  # fmt: skip
