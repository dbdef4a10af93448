"""Positions, offsets and line edits (lsp/text.py), and the config's rules (lsp/config.py).

Property tests: line edits computed from any old/new text (CRLF, lone CR, astral-plane
characters, no final newline) turn old into new when a client applies them; positions are
UTF-16 code units and anything outside the text is an InvalidParams error.
Run: .venv/bin/python -m pytest tests/lsp/test_text.py -q
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ground.settings import Settings
from lsp.config import LspConfig, parse_host_port
from lsp.text import (
    apply_text_edits,
    end_position,
    line_edits,
    offset_in,
    split_lines,
    utf16_units,
)

ALPHABET = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r", "é", "😋", "\t", "x = 1\n"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)


def pos(line: int, character: int) -> types.Position:
    return types.Position(line, character)


@settings(max_examples=400, deadline=None)
@given(old=TEXTS, new=TEXTS)
def test_line_edits_turn_old_into_new(old: str, new: str):
    edits = line_edits(old, new, utf16_units)
    assert apply_text_edits(old, edits) == new
    assert (edits == []) == (old == new)


@settings(max_examples=200, deadline=None)
@given(text=TEXTS)
def test_every_position_in_the_text_maps_to_its_offset(text: str):
    offset = 0
    for number, line in enumerate(split_lines(text)):
        body = line.rstrip("\r\n")
        units = 0
        for index, char in enumerate(body):
            assert offset_in(text, pos(number, units), utf16_units) == offset + index
            units += utf16_units(char)
        assert offset_in(text, pos(number, units), utf16_units) == offset + len(body)
        with pytest.raises(JsonRpcInvalidParams):
            offset_in(text, pos(number, units + 1), utf16_units)
        offset += len(line)
    end = end_position(text, utf16_units)
    assert offset_in(text, end, utf16_units) == len(text)
    with pytest.raises(JsonRpcInvalidParams):
        offset_in(text, pos(end.line + 1, 0), utf16_units)


def test_utf16_positions_count_surrogate_pairs():
    text = 'x = "😋"\n'
    # The closing quote is at UTF-16 column 7 (the emoji is two code units), index 6.
    assert offset_in(text, pos(0, 7), utf16_units) == 6
    assert offset_in(text, pos(0, 5), utf16_units) == 5  # the emoji itself
    assert offset_in(text, pos(1, 0), utf16_units) == len(text)
    with pytest.raises(JsonRpcInvalidParams, match="line 0 has 8 characters"):
        offset_in(text, pos(0, 9), utf16_units)
    with pytest.raises(ValueError):  # lsprotocol refuses negative positions on its own
        pos(-1, 0)


def test_config_rules(tmp_path):
    s = Settings(home=tmp_path)
    config = LspConfig.from_settings(s, tcp="0.0.0.0:9000")
    assert (config.transport, config.host, config.port, config.mode) == ("tcp", "0.0.0.0", 9000,
                                                                         "local")  # fmt: skip
    assert config.database_url == s.database_url
    for bad in ("9000", "host:", ":80", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_host_port(bad)
    with pytest.raises(ValueError, match="WebSocket URL"):
        LspConfig(server_url="http://127.0.0.1:8765", database_url="sqlite://")
    with pytest.raises(ValueError, match="transport"):
        LspConfig(transport="pipe", database_url="sqlite://")
    remote = LspConfig.from_settings(Settings(home=tmp_path, token="t" * 20),
                                     server="ws://127.0.0.1:1/v1/ws")  # fmt: skip
    assert remote.mode == "remote" and remote.token == "t" * 20
    assert "t" * 20 not in repr(remote)


@settings(max_examples=400, deadline=None)
@given(old=TEXTS, new=TEXTS)
def test_unified_diffs_from_the_agent_server_apply_back(old: str, new: str):
    from agent_server.agent.edits.diff import unified_diff
    from lsp.patch import apply_unified

    assert apply_unified(old, unified_diff(old, new, "a.py")) == new


def test_a_diff_that_does_not_fit_is_refused():
    from agent_server.agent.edits.diff import unified_diff
    from lsp.patch import PatchError, apply_unified

    diff = unified_diff("a\nb\nc\n", "a\nB\nc\n", "a.py")
    with pytest.raises(PatchError, match="is not"):
        apply_unified("a\nx\nc\n", diff)
    with pytest.raises(PatchError):
        apply_unified("", diff)
