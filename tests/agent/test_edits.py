"""Edit application: every matching strategy and failure mode, the parser, whole-file
replacement, diffs and partial hunk acceptance (plus hypothesis properties).

Run: .venv/bin/python -m pytest tests/agent/test_edits.py -q
"""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.edits import (
    EditConfig,
    EditError,
    SearchReplace,
    apply_edits,
    apply_hunks,
    parse_search_replace,
    plan_edits,
    replace_whole_file,
    split_hunks,
    unified_diff,
)

PY = """import os


class Greeter:
    def __init__(self, name):
        self.name = name

    def greet(self):
        if self.name:
            return "hello " + self.name
        return "hello"


def main():
    print(Greeter("x").greet())
"""


def plan(text: str, search: str, replace: str):
    return plan_edits(text, [SearchReplace(search, replace)])


def test_exact() -> None:
    p = plan(PY, '        return "hello"\n', '        return "hi"\n')
    assert p.strategies == ["exact"]
    assert p.text == PY.replace('return "hello"\n', 'return "hi"\n')


def test_trailing_whitespace_and_blank_lines_are_tolerated() -> None:
    search = "    def __init__(self, name):   \n\n        self.name = name\t\n"
    p = plan(PY, search, "    def __init__(self, name):\n        self.name = name.title()\n")
    assert p.strategies == ["whitespace"]
    assert "        self.name = name.title()\n\n    def greet" in p.text


def test_tabs_for_spaces_and_spaces_for_tabs() -> None:
    search = "\tdef greet(self):\n\t\tif self.name:\n"
    replace = "\tdef greet(self):\n\t\tif self.name is not None:\n\t\t\tself.seen = True\n"
    p = plan(PY, search, replace)
    assert p.strategies == ["whitespace"]
    assert "        if self.name is not None:\n            self.seen = True\n" in p.text
    tabbed = "func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n"
    p = plan(tabbed, "    if x {\n        return 1\n", "    if x {\n        return 2\n")
    assert p.text == tabbed.replace("return 1", "return 2")


def test_reindented_block_is_reindented_back() -> None:
    search = 'if self.name:\n    return "hello " + self.name\n'
    replace = 'if self.name:\n    name = self.name.strip()\n    return "hello " + name\n'
    p = plan(PY, search, replace)
    assert p.strategies == ["indent"]
    assert (
        "        if self.name:\n            name = self.name.strip()\n"
        '            return "hello " + name\n'
    ) in p.text


def test_other_indent_unit_is_scaled() -> None:
    two = "function f() {\n  if (a) {\n    g();\n  }\n}\n"
    search = "    if (a) {\n        g();\n    }\n"
    replace = "    if (a) {\n        g();\n        h();\n    }\n"
    p = plan(two, search, replace)
    assert p.text == "function f() {\n  if (a) {\n    g();\n    h();\n  }\n}\n"


def test_crlf_file_and_crlf_blocks() -> None:
    crlf = PY.replace("\n", "\r\n")
    out = apply_edits(crlf, [SearchReplace("import os\n", "import os\nimport sys\n")])
    assert out == crlf.replace("import os\r\n", "import os\r\nimport sys\r\n")
    out = apply_edits(PY, [SearchReplace("import os\r\n", "import re\r\n")])
    assert out == PY.replace("import os", "import re") and "\r" not in out


def test_elided_context_lines() -> None:
    search = "class Greeter:\n    ...\n    def greet(self):\n"
    replace = "class Greeter:\n    ...\n    def greet(self, loud=False):\n"
    p = plan(PY, search, replace)
    assert p.strategies == ["elided"]
    assert p.text == PY.replace("def greet(self):", "def greet(self, loud=False):")
    with pytest.raises(EditError, match="same places"):
        plan(PY, 'class Greeter:\n...\n        return "hello"\n', "x\n")
    stub = "class P(Protocol):\n    def f(self): ...\n    ...\n"
    p = plan(stub, "    def f(self): ...\n    ...\n", "    def f(self) -> int: ...\n")
    assert p.strategies == ["exact"]  # a literal '...' line is matched as text first
    search = "class Greeter:\n    # ... existing code ...\n    def greet(self):\n"
    replace = "class Greeter:\n    # ... existing code ...\n    def greet(self, n=1):\n"
    assert plan(PY, search, replace).text == PY.replace("greet(self)", "greet(self, n=1)")


def test_partial_line_substring() -> None:
    p = plan(PY, 'Greeter("x")', 'Greeter("world")')
    assert p.strategies == ["substring"]
    assert 'print(Greeter("world").greet())' in p.text


def test_several_blocks_any_order_applied_against_the_original() -> None:
    blocks = [
        SearchReplace("def main():\n", "def run():\n"),
        SearchReplace("import os\n", "import os\nimport sys\n"),
        SearchReplace("        self.name = name\n", "        self.name = name or 'anon'\n"),
    ]
    p = plan_edits(PY, blocks)
    assert p.strategies == ["exact", "exact", "exact"]
    assert "import sys" in p.text and "def run():" in p.text and "or 'anon'" in p.text


def test_overlapping_blocks_are_rejected() -> None:
    blocks = [
        SearchReplace("    def greet(self):\n        if self.name:\n", "x\n"),
        SearchReplace("        if self.name:\n            return", "y"),
    ]
    with pytest.raises(EditError, match="overlap"):
        apply_edits(PY, blocks)


def test_ambiguous_match_asks_for_more_context() -> None:
    text = "a = 1\nb = 2\na = 1\n"
    with pytest.raises(EditError, match=r"matches 2 places \(starting at lines 1, 3\)") as e:
        apply_edits(text, [SearchReplace("a = 1\n", "a = 3\n")])
    assert "neighbouring lines" in e.value.message
    with pytest.raises(EditError, match="matches 2 places"):  # also modulo whitespace
        apply_edits("if x:\n    y()\nif z:\n    y()\n", [SearchReplace("  y()\n", "  w()\n")])


def test_no_match_says_did_you_mean_and_names_the_block() -> None:
    blocks = [
        SearchReplace("import os\n", "import re\n"),
        SearchReplace("    def greet(self):\n        if self.nam:\n", "x\n"),
    ]
    with pytest.raises(EditError) as info:
        apply_edits(PY, blocks)
    err = info.value
    assert err.block == 1 and "SEARCH block 2 of 2 does not match" in err.message
    assert "Did you mean lines 8-9" in err.message and "Nothing was changed" in err.message
    assert err.hint == "    def greet(self):\n        if self.name:"
    with pytest.raises(EditError, match="Read the file again"):
        apply_edits(PY, [SearchReplace("zzzz qqqq\n", "x")])


def test_create_append_and_empty_input() -> None:
    assert plan("", "", "new file\n").strategies == ["create"]
    assert apply_edits("", [SearchReplace("", "new file\n")]) == "new file\n"
    assert apply_edits("a\n", [SearchReplace("", "b\n")]) == "a\nb\n"
    with pytest.raises(EditError, match="single block"):
        apply_edits("", [SearchReplace("", "a"), SearchReplace("", "b")])
    with pytest.raises(EditError, match="No edit blocks"):
        apply_edits("a", [])


def test_trailing_newline_is_preserved_or_absent() -> None:
    assert apply_edits("a\nb", [SearchReplace("b\n", "c\n")]) == "a\nc"
    assert apply_edits("a\nb\n", [SearchReplace("b", "c")]) == "a\nc\n"
    assert apply_edits("a\nb\n", [SearchReplace("b\n", "")]) == "a\n"


def test_parse_aider_format() -> None:
    text = (
        "Here is the change.\n\nsrc/app.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\n"
        "x = 2\n>>>>>>> REPLACE\n```\n\n<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n"
    )
    blocks = parse_search_replace(text)
    assert blocks == [
        SearchReplace("x = 1\n", "x = 2\n", "src/app.py"),
        SearchReplace("", "new\n", None),
    ]
    with pytest.raises(EditError, match="no ======="):
        parse_search_replace("<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n")
    with pytest.raises(EditError, match="no >>>>>>> REPLACE"):
        parse_search_replace("<<<<<<< SEARCH\nx\n=======\ny\n")
    with pytest.raises(EditError, match="No SEARCH/REPLACE block"):
        parse_search_replace("just prose")


def test_whole_file_replacement() -> None:
    assert replace_whole_file("a\r\nb\r\n", "x\ny") == "x\r\ny\r\n"
    assert replace_whole_file("a", "x\n") == "x"
    with pytest.raises(EditError, match="SEARCH/REPLACE blocks instead"):
        replace_whole_file("x" * 100, "y", EditConfig(whole_file_max_bytes=50))
    with pytest.raises(ValueError, match="whole_file_max_bytes must be >= 0"):
        EditConfig(whole_file_max_bytes=-1)


OLD = "".join(f"line {i}\n" for i in range(1, 31))
NEW = OLD.replace("line 2\n", "line two\n").replace("line 25\n", "line 25\nextra\n")


def test_diff_and_hunks() -> None:
    hunks = split_hunks(OLD, NEW)
    assert [h.index for h in hunks] == [0, 1]
    assert hunks[0].header == "@@ -1,5 +1,5 @@" and "-line 2\n+line two\n" in hunks[0].diff
    diff = unified_diff(OLD, NEW, "f.txt")
    assert diff.startswith("--- a/f.txt\n+++ b/f.txt\n@@ -1,5 +1,5 @@")
    assert apply_hunks(OLD, NEW, [1]) == OLD.replace("line 25\n", "line 25\nextra\n")
    assert apply_hunks(OLD, NEW, [0]) == OLD.replace("line 2\n", "line two\n")
    assert apply_hunks(OLD, NEW, [0, 1]) == NEW and apply_hunks(OLD, NEW, []) == OLD
    with pytest.raises(EditError, match="do not exist"):
        apply_hunks(OLD, NEW, [2])
    assert "\\ No newline at end of file" in unified_diff("a", "b")
    assert unified_diff("", "x\n", "n.txt").startswith("--- /dev/null")


def test_a_git_diff_applies_with_git_apply(tmp_path) -> None:
    """`git=True` (what mined tasks' patches are): a `diff --git` line, a/ b/ on both sides
    (an empty old text is an existing empty file), and `git apply` takes it."""
    diff = unified_diff(OLD, NEW, "d/f.txt", git=True)
    assert diff == "diff --git a/d/f.txt b/d/f.txt\n" + unified_diff(OLD, NEW, "d/f.txt")
    assert unified_diff("", "x\n", "e.txt", git=True).startswith(
        "diff --git a/e.txt b/e.txt\n--- a/e.txt\n+++ b/e.txt\n"
    )
    assert unified_diff(OLD, OLD, "d/f.txt", git=True) == ""
    (tmp_path / "d").mkdir()
    for old, new, path in ((OLD, NEW + "no end", "d/f.txt"), ("", "x\n", "e.txt")):
        (tmp_path / path).write_text(old)
        patch = unified_diff(old, new, path, git=True).encode()
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp_path.parent))
        subprocess.run(["git", "apply"], cwd=tmp_path, input=patch, env=env, check=True)
        assert (tmp_path / path).read_text() == new


lines_st = st.lists(st.sampled_from(["a", "b", "  c", "\td", "", "e  ", "f\r"]), max_size=25)


@settings(max_examples=300, deadline=None)
@given(old=lines_st, new=lines_st, pick=st.sets(st.integers(0, 10)), eol=st.booleans())
def test_hunk_selection_properties(old, new, pick, eol) -> None:
    a = "\n".join(old) + ("\n" if eol and old else "")
    b = "\n".join(new) + ("\n" if new else "")
    n = len(split_hunks(a, b))
    assert apply_hunks(a, b, range(n)) == b and apply_hunks(a, b, []) == a
    chosen = [i for i in pick if i < n]
    mixed = apply_hunks(a, b, chosen)
    assert len(split_hunks(a, mixed)) <= len(chosen) or not chosen


def _tabbed(line: str) -> str:
    body = line.lstrip(" ")
    return "\t" * ((len(line) - len(body)) // 4) + body


words = st.text(alphabet="abcdefgh(): =", min_size=1, max_size=12).map(str.strip).filter(bool)


@settings(max_examples=300, deadline=None)
@given(
    body=st.lists(
        st.tuples(st.integers(0, 3), words), min_size=3, max_size=30, unique_by=lambda t: t[1]
    ),
    data=st.data(),
)
def test_unique_region_edits_match_a_plain_splice(body, data) -> None:
    """Any region of distinct lines, given exactly, tab-converted or dedented, lands at the
    same place as a plain list splice, and the replacement keeps the file's indentation."""
    lines = ["    " * depth + word for depth, word in body]
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(i + 1, len(lines)))
    new = ["    " * body[i][0] + "changed()"]
    expected = "\n".join(lines[:i] + new + lines[j:]) + "\n"
    region = lines[i:j]
    margin = min(len(x) - len(x.lstrip()) for x in region)
    variants = [
        region,
        [_tabbed(x) for x in region],
        [x[margin:] for x in region],
        [x + "  " for x in region],
    ]
    for k, search in enumerate(variants):
        rep = new if k != 2 else [x[margin:] for x in new]
        rep = [_tabbed(x) for x in rep] if k == 1 else rep
        out = apply_edits(
            "\n".join(lines) + "\n", [SearchReplace("\n".join(search), "\n".join(rep))]
        )
        assert out == expected, (k, search)


def test_inconsistent_indentation_is_refused_not_guessed() -> None:
    text = "def f():\n    b = 1\n    c = 2\n"
    with pytest.raises(EditError, match="Did you mean lines 1-3"):
        apply_edits(text, [SearchReplace("def f():\nb = 1\n    c = 2\n", "x\n")])


def test_dots_are_an_elision_before_a_literal_stub_line() -> None:
    stubs = (
        "class A:\n    @overload\n    def f(self, x: int) -> int:\n        ...\n\n"
        "    @overload\n    def f(self, x: str) -> str:\n        ...\n\n"
        "    def g(self):\n        return 1\n"
    )
    search = "    def f(self, x: str) -> str:\n...\n    def g(self):\n        return 1\n"
    replace = "    def f(self, x: str) -> str:\n...\n    def g(self):\n        return 2\n"
    p = plan(stubs, search, replace)
    assert p.strategies == ["elided"] and p.text == stubs.replace("return 1", "return 2")
