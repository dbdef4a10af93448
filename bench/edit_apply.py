"""Benchmark: search/replace edits mined from real git history, replayed with perturbations.

    .venv/bin/python bench/edit_apply.py                      # builds the history repo once
    .venv/bin/python bench/edit_apply.py --repo PATH --max-edits 300 --seed 1

The repository: `--repo` names any git repository with history (repeatable). Without it, the
bench makes one as the brief allows when no real history is on disk: it downloads released
wheels of a PyPI package (`--package`, default requests 2.20.0 ... 2.34.2) with pip and
commits each version's source as one commit (gitpython), cached under
~/.cache/apprentice/bench-history/. Those commits are real diffs between real releases.

Mining (gitpython): every modified UTF-8 file of every commit; each difflib hunk (3 lines of
context) becomes SEARCH (old lines) -> REPLACE (new lines) on the old file, with context
widened until SEARCH is unique in the file even modulo whitespace (what a model must supply).
Files with 2-8 hunks also give one multi-block edit (all hunks, shuffled).

Replay: each edit unperturbed and with each perturbation of bench/edit_perturb.py (tabs vs
spaces, trailing whitespace, re-indented blocks, extra/missing blank lines, CRLF, elided
context, a spurious blank line at the start or the end of SEARCH only). Ours =
LocalWorkspace.apply_edit on a real file; baseline = naive exact `str.replace` of each block,
in the same run. Success = the file equals the real after-text (modulo what the kind allows);
intact = on failure, the file's bytes are unchanged; a wrong text = a failure that changed
the file (written differently from the real after-text). Acceptance: success >= 0.995 per
kind, no wrong text, intact on every failure.
Prints JSON on stdout and the per-kind table (markdown) on stderr. Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from pathlib import Path

import git

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from edit_perturb import ALLOWED, KINDS, Case, typo  # noqa: E402

from agent_server.agent.edits import SearchReplace  # noqa: E402
from agent_server.agent.edits.tolerant import FileView, tolerant_candidates  # noqa: E402
from agent_server.agent.workspace import LocalWorkspace  # noqa: E402
from agent_server.agent.workspace_types import WorkspaceError  # noqa: E402

DEFAULT_VERSIONS = (
    "2.20.0 2.21.0 2.22.0 2.23.0 2.24.0 2.25.0 2.25.1 2.26.0 2.27.0 2.27.1 2.28.0 2.28.1 "
    "2.28.2 2.29.0 2.30.0 2.31.0 2.32.0 2.32.2 2.32.3 2.32.4 2.32.5 2.33.0 2.33.1 2.34.0 2.34.2"
)
TEXT_SUFFIXES = {".py", ".pyi", ".txt", ".md", ".rst", ".cfg", ".toml", ".ini", ".json"}


def build_history_repo(package: str, versions: list[str], cache: Path) -> Path:
    """A git repo with one commit per released version of `package` (wheel contents)."""
    repo_dir = cache / f"{package}-history"
    if (repo_dir / ".git").exists():
        return repo_dir
    wheels = cache / f"{package}-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    repo_dir.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(repo_dir)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "edit-apply bench")
        cw.set_value("user", "email", "bench@localhost")
    for version in versions:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
        subprocess.run(
            [*pip, "-q", "-d", str(wheels), f"{package}=={version}"], check=True, timeout=300
        )
        wheel = next(wheels.glob(f"{package.replace('-', '_')}-{version}-*.whl"))
        for child in repo_dir.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if ".dist-info/" not in m]
            zf.extractall(repo_dir, members)
        repo.git.add("-A")
        repo.index.commit(f"{package} {version}")
    return repo_dir


@dataclass
class Edit:
    path: str
    case: Case
    multi: list[tuple[list[str], list[str]]] | None = None  # all hunks of the file


def _unique(view: FileView, search: list[str]) -> bool:
    if not any(x.strip() for x in search):
        return False
    return len(tolerant_candidates(view, search, search)) == 1


def _hunks(before: str, after: str, cap: int) -> list[tuple[int, int, int, int]]:
    a, b = before.split("\n"), after.split("\n")
    view, out = FileView(a), []
    for group in SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        for step in range(20):  # widen the context until SEARCH is unique modulo whitespace
            if _unique(view, a[i1:i2]):
                break
            if step % 2 == 0 and i1 > 0 and j1 > 0 and a[i1 - 1] == b[j1 - 1]:
                i1, j1 = i1 - 1, j1 - 1
            elif i2 < len(a) and j2 < len(b) and a[i2] == b[j2]:
                i2, j2 = i2 + 1, j2 + 1
        else:
            continue
        if _unique(view, a[i1:i2]) and i2 - i1 <= cap:
            out.append((i1, i2, j1, j2))
    return out


def mine(repos: list[Path], cap: int) -> tuple[list[Edit], Counter]:
    edits, stats = [], Counter()
    for repo_dir in repos:
        repo = git.Repo(repo_dir)
        for commit in repo.iter_commits(reverse=True):
            if not commit.parents:
                continue
            stats["commits"] += 1
            for diff in commit.parents[0].diff(commit):
                if diff.change_type != "M" or Path(diff.b_path).suffix not in TEXT_SUFFIXES:
                    continue
                try:
                    before = diff.a_blob.data_stream.read().decode("utf-8")
                    after = diff.b_blob.data_stream.read().decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if "\r" in before or "\r" in after:
                    continue  # the CRLF kind makes its own
                a, b = before.split("\n"), after.split("\n")
                hunks = _hunks(before, after, cap)
                stats["files"] += 1
                for i1, i2, j1, j2 in hunks:
                    expected = "\n".join(a[:i1] + b[j1:j2] + a[i2:])
                    case = Case(before, a[i1:i2], b[j1:j2], expected, at=i1)
                    edits.append(Edit(diff.b_path, case))
                n = len(list(SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3)))
                if 2 <= len(hunks) == n <= 8:
                    multi = [(a[i1:i2], b[j1:j2]) for i1, i2, j1, j2 in hunks]
                    edits.append(Edit(diff.b_path, Case(before, [], [], after), multi))
    return edits, stats


def _text(lines: list[str], newline: str) -> str:
    return "".join(line + newline for line in lines)


MUST_FAIL = ("content_typo", "multi_block_one_bad")  # refused, file untouched, with a hint


def _variants(edit: Edit, rng: random.Random) -> dict[str, tuple[Case, list]]:
    """kind -> (case, [(search lines, replace lines), ...]) for one mined edit."""
    if edit.multi:
        pairs = rng.sample(edit.multi, len(edit.multi))  # blocks in any order
        bad = list(pairs)
        k = rng.randrange(len(bad))
        broken = typo(Case(edit.case.before, bad[k][0], bad[k][1], ""), rng)
        out = {"multi_block": (edit.case, pairs)}
        if broken is not None:
            bad[k] = (broken.search, broken.replace)
            out["multi_block_one_bad"] = (replace(edit.case, expected=edit.case.before), bad)
        return out
    out = {}
    for kind, fn in [*KINDS.items(), ("content_typo", typo)]:
        case = fn(edit.case, rng)
        if case is not None:
            out[kind] = (case, [(case.search, case.replace)])
    return out


async def replay(edits: list[Edit], seed: int) -> dict:
    rng = random.Random(seed)
    results: dict[str, dict[str, Counter]] = {}
    strategies: Counter = Counter()
    tmp = Path(tempfile.mkdtemp(prefix="edit-bench-"))
    ws = LocalWorkspace(tmp)
    try:
        for number, edit in enumerate(edits):
            for kind, (case, pairs) in _variants(edit, rng).items():
                nl = case.block_newline
                blocks = [SearchReplace(_text(s, nl), _text(r, nl)) for s, r in pairs]
                name = f"f{number}{Path(edit.path).suffix}"
                (tmp / name).write_bytes(case.before.encode())
                hint = False
                try:
                    res = await ws.apply_edit(name, blocks)
                    strategies.update(res.strategies)
                except WorkspaceError as err:
                    hint = "Did you mean" in err.message
                ours = (tmp / name).read_bytes().decode()
                base = case.before
                for block in blocks:
                    base = base.replace(block.search, block.replace)
                per = results.setdefault(kind, {})
                for who, got in (("ours", ours), ("baseline", base)):
                    counter = per.setdefault(who, Counter())
                    _score(counter, kind, case, got)
                    counter["hint"] += hint and who == "ours"
    finally:
        shutil.rmtree(tmp)
    return {"kinds": results, "strategies": dict(strategies)}


def _score(counter: Counter, kind: str, case: Case, got: str) -> None:
    norm = ALLOWED.get(kind, lambda t: t)
    counter["n"] += 1
    counter["exact"] += got == case.expected
    if norm(got) == norm(case.expected):
        counter["success"] += 1
    else:
        counter["failed"] += 1
        counter["intact"] += got == case.before
        counter["wrong"] += got != case.before


def _rates(c: Counter) -> dict:
    return {
        "n": c["n"],
        "apply_success_rate": round(c["success"] / c["n"], 4) if c["n"] else None,
        "exact_rate": round(c["exact"] / c["n"], 4) if c["n"] else None,
        "failures": c["failed"],
        "wrong_texts": c["wrong"],
        "intact_on_failure_rate": round(c["intact"] / c["failed"], 4) if c["failed"] else None,
    }


def _refusals(c: Counter) -> dict:
    """For edits that must fail: was the file left intact, and did the error say where?"""
    n = c["n"]
    return {
        "n": n,
        "intact_rate": round(c["success"] / n, 4) if n else None,
        "wrong_texts": c["wrong"],
        "did_you_mean_rate": round(c["hint"] / n, 4) if n else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", type=Path, help="git repo with history")
    ap.add_argument("--package", default="requests", help="PyPI package for the built repo")
    ap.add_argument("--versions", default=DEFAULT_VERSIONS, help="space-separated versions")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/apprentice/bench-history")
    ap.add_argument("--max-edits", type=int, default=300, help="single-hunk edits to replay")
    ap.add_argument("--max-lines", type=int, default=60, help="largest SEARCH, in lines")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.time()
    repos = args.repo or [build_history_repo(args.package, args.versions.split(), args.cache)]
    edits, stats = mine(repos, args.max_lines)
    rng = random.Random(args.seed)
    singles = [e for e in edits if not e.multi]
    multis = [e for e in edits if e.multi]
    chosen = rng.sample(singles, min(args.max_edits, len(singles)))
    chosen += rng.sample(multis, min(max(args.max_edits // 4, 1), len(multis)))
    out = asyncio.run(replay(chosen, args.seed))
    total = {"ours": Counter(), "baseline": Counter()}
    for kind, per in out["kinds"].items():
        for who, c in per.items():
            if kind not in MUST_FAIL:
                total[who].update(c)
    report = {
        "repos": [str(r) for r in repos],
        "commits": stats["commits"],
        "files_changed": stats["files"],
        "hunks_mined": len(singles),
        "multi_block_edits_mined": len(multis),
        "edits_replayed": len(chosen),
        "seed": args.seed,
        "kinds": {
            kind: {who: _rates(c) for who, c in per.items()}
            for kind, per in out["kinds"].items()
            if kind not in MUST_FAIL
        },
        "overall": {who: _rates(c) for who, c in total.items()},
        "must_fail": {
            kind: {who: _refusals(c) for who, c in out["kinds"][kind].items()}
            for kind in MUST_FAIL
            if kind in out["kinds"]
        },
        "strategies": out["strategies"],
        "seconds": round(time.time() - t0, 1),
    }
    print(json.dumps(report, indent=2))
    print(_table(report), file=sys.stderr)


def _table(report: dict) -> str:
    """The per-kind table of our applier: n, success rate, wrong texts, intact on failure."""
    rows = ["| kind | n | success | wrong texts | untouched on failure |", "|---|---|---|---|---|"]
    for kind, per in [*report["kinds"].items(), ("overall", report["overall"])]:
        r = per["ours"]
        intact = "-" if r["intact_on_failure_rate"] is None else r["intact_on_failure_rate"]
        rows.append(
            f"| {kind} | {r['n']} | {r['apply_success_rate']} | {r['wrong_texts']} | {intact} |"
        )
    for kind, per in report["must_fail"].items():  # success = refused with the file intact
        r = per["ours"]
        rows.append(
            f"| {kind} (must fail) | {r['n']} | {r['intact_rate']} | {r['wrong_texts']} "
            f"| {r['intact_rate']} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
