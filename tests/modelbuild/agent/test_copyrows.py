"""Copy rows (modelbuild/agent/copyrows.py): the agent stage's first part, with the dev model's
real tokenizer and weights.

.venv/bin/python -m pytest tests/modelbuild/agent/test_copyrows.py -q
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from modelbuild.agent.copyrows import (
    ACTION,
    copy_row,
    corpus_chunks,
    exact_copies,
    invented_path,
    path_words,
    slip,
)
from modelbuild.dev import corpus
from modelbuild.dev.corpus import SourceFile, is_held_out

LINES = [f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 17)]
LINES[7] = '    return "hello " + name  # a quote to escape'


def _file(held_out: bool) -> SourceFile:
    for i in range(1000):
        name = f"stdlib/pkg/mod{i}.py"
        if is_held_out(name) == held_out:
            return SourceFile(name, "\n".join(LINES) + "\n")
    raise AssertionError("no name found")


@pytest.fixture(scope="module")
def tokenizer(dev_model_dir: Path):
    return AutoTokenizer.from_pretrained(dev_model_dir)


def test_a_copy_row_labels_the_path_and_the_faulty_line_as_the_edit_action_writes_them(
    tokenizer,
) -> None:
    chunks = corpus_chunks([_file(False), _file(True)], held_out=False)
    assert [path for path, _ in chunks] == ["pkg/" + _file(False).name.rsplit("/", 1)[1]]
    path = chunks[0][0]
    seen_quote = False
    for seed in range(100):
        ids, labels = copy_row(tokenizer, chunks, random.Random(seed))
        text = tokenizer.decode(ids)
        prompt, _, answer = text.partition(ACTION)
        target = prompt.split("The faulty line: `", 1)[1].split("`\n", 1)[0]
        assert answer == f'{path}","search":{json.dumps(target)},"replace":"'
        assert f"The file {path}:" in prompt and target in prompt.split("```", 1)[1]
        labelled = tokenizer.decode([t for t in labels if t != -100])
        assert labelled.endswith(answer[1:]) and labels[0] == -100
        assert len(labelled) <= len(answer) + 4  # the tail only, not the prompt
        seen_quote |= '\\"hello' in answer
    assert seen_quote  # a line with a quote is copied escaped, as JSON needs it


def test_a_dictated_row_shows_a_slip_and_labels_the_whole_edit(tokenizer) -> None:
    chunks = corpus_chunks([_file(False)], held_out=False)
    path = chunks[0][0]
    for seed in range(50):
        ids, labels = copy_row(tokenizer, chunks, random.Random(seed), dictated=True)
        prompt, _, answer = tokenizer.decode(ids).partition(ACTION)
        faulty = prompt.split("The faulty line: `", 1)[1].split("`\n", 1)[0]
        right = prompt.split("It should read: `", 1)[1].split("`\n", 1)[0]
        assert faulty != right
        shown = prompt.split("```\n", 1)[1]
        assert faulty in shown and right.strip() not in [s.strip() for s in shown.splitlines()]
        assert right in [line.strip() for line in LINES]  # the file's own line, as it was
        edit = json.loads('{"path":"' + answer.removesuffix("}"))  # the args' object
        assert edit == {"path": path, "search": faulty, "replace": right}
        labelled = tokenizer.decode([t for t in labels if t != -100])
        assert labelled.endswith(answer[1:]) and len(labelled) <= len(answer) + 4


def test_quoted_rows_copy_a_line_holding_a_double_quote(tokenizer) -> None:
    chunks = corpus_chunks([_file(False)], held_out=False)  # one line of 16 holds a quote

    def share(quoted: float) -> float:
        rng = random.Random(0)
        answers = [tokenizer.decode(copy_row(tokenizer, chunks, rng, quoted=quoted)[0])
                   for _ in range(60)]  # fmt: skip
        return sum('\\"hello' in a.partition(ACTION)[2] for a in answers) / len(answers)

    assert share(1.0) == 1.0
    assert share(0.5) > 0.3 > share(0.0)


def test_a_slip_changes_one_operator_or_number_and_none_where_none_is() -> None:
    rng = random.Random(0)
    assert {slip("if a < b:", rng) for _ in range(20)} == {"if a <= b:"}
    assert {slip("x = y + 1", rng) for _ in range(50)} == {"x = y - 1", "x = y + 2"}
    assert slip("print(name)", rng) is None


def test_invented_paths_are_made_of_train_words_and_rarely_repeat(tokenizer) -> None:
    train = SourceFile("stdlib/pkg/train.py", "ledger_fold = quota(Ab, xy)\n")
    held = next(SourceFile(f"stdlib/pkg/h{i}.py", "secret = 1\n") for i in range(1000)
                if is_held_out(f"stdlib/pkg/h{i}.py"))  # fmt: skip
    words = path_words([train, held])
    assert words == ["fold", "ledger", "quota"]  # 3-10 lower-case letters, train files only
    rng = random.Random(0)
    paths = [invented_path(words, rng) for _ in range(200)]
    for path in paths:
        parts = path.removesuffix(".py").split("/")
        assert path.endswith(".py") and 1 <= len(parts) <= 3
        assert all(w in words for part in parts for w in part.split("_"))
    assert len(set(paths)) > 40 and any("/" in p for p in paths) and any("_" in p for p in paths)
    # A row under an invented path shows the chunk under it and labels it as the edit's path.
    chunks = corpus_chunks([_file(False)], held_out=False)
    many = path_words(corpus.collect())
    seen = set()
    for seed in range(20):
        ids, _ = copy_row(tokenizer, chunks, random.Random(seed), dictated=True, words=many)
        prompt, _, answer = tokenizer.decode(ids).partition(ACTION)
        path = answer.split('"', 1)[0]
        assert path != chunks[0][0] and f"The file {path}:" in prompt
        assert f"The fix belongs in {path} (not" in prompt
        seen.add(path)
    assert len(seen) == 20


def test_held_out_files_give_only_held_out_chunks() -> None:
    files = [_file(False), _file(True)]
    held = corpus_chunks(files, held_out=True)
    assert len(held) == 1 and held[0][0] != corpus_chunks(files, held_out=False)[0][0]


def test_exact_copies_counts_a_row_only_when_greedy_decoding_writes_its_whole_tail(
    tokenizer, dev_model_dir: Path
) -> None:
    model = AutoModelForCausalLM.from_pretrained(dev_model_dir, dtype=torch.float32)
    ids, labels = copy_row(tokenizer, corpus_chunks([_file(False)], False), random.Random(0))
    cut = labels.count(-100)
    greedy = model.generate(torch.tensor([ids[:cut]]), max_new_tokens=5, do_sample=False,
                            pad_token_id=0)[0, cut:].tolist()  # fmt: skip
    written = (ids[:cut] + greedy, [-100] * cut + greedy)
    other = [(greedy[0] + 1) % len(tokenizer)] + greedy[1:]
    wrong = (ids[:cut] + other, [-100] * cut + other)
    model.train()
    assert exact_copies(model, [written, wrong], pad_id=0) == 1
    assert model.training  # left as it was found
