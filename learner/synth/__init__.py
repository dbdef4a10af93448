"""Synthetic tasks: real tasks mined from a repository's git history, verified, and run.

The package map (issue 12):
- records.py   `TaskRecord` (the SWE-bench fields plus kind, difficulty, test command),
               `read_tasks` / `write_tasks` (atomic JSONL), `starting_tree`
- testrun.py   `run_tests`: a pytest run in a child process, per-test outcomes, a timeout
               that kills the process group
- paths.py     `is_test_path`: the one rule for test files, mining's and grading's
- gitrepo.py   gitpython helpers: clean-tree check, commits, test / non-test diffs, trees
- mutate.py    procedural AST mutations of functions (operators, comparisons, constants,
               removed statements and branches, swapped arguments)
- mine.py      `mine_tasks`: revert and mutate tasks, validated by running the tests,
               problem statements (precise and vague), difficulty tiers
- verify.py    `verify_tasks`: the reference patch must score 1.0, the empty patch 0.0
- sandbox.py   a fresh one-commit workspace per rollout, commands under limits
- reward.py    the reward terms of a rollout
- rollout.py   one rollout of the product's own agent on a sandbox
- solve_rates.py  `apprentice tasks eval`: rollouts in parallel, solve rates as JSON
- completion.py, completion_git.py   inline-completion tasks from commits that add lines
               (next_line, rest_of_line, quiet), held out by time and by file
- completion_reward.py   their reward; completion_eval.py   `apprentice eval completions`

Mining and running tasks only: the agent model's training data (copy rows, oracle traces
on the dev model's corpus, made with mutate.py and statements.py) is modelbuild/agent/'s.
"""
