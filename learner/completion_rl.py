"""RL on completion tasks from the person's history: sampled through the serving path, rewarded.

    calls, stats = completion_calls(ctx, run_id, config)   # CallSamples for the task objective

Each cycle with `code.repo` and `code.completion_tasks` > 0 mines that many completion tasks
of the train split from the repository's history (learner/synth/completion.py: next line,
rest of line, quiet; never a held-out commit or file), seeded by the run id so each cycle
sees other ones. Each task is completed `code.samples` times by the policy serving now,
through the product's own inline path (agent_server/session/completion.py `call_inline`: the
same prompt, stop strings and shown text as production, on the backend the settings name),
at `code.temperature`. Each completion is rewarded on what would be shown
(learner/synth/completion_reward.py: the exact first line 1, similarity below it, silence
right where the author wrote nothing, penalties for breaking the parse or repeating), and a
task's completions are a group: advantage = reward - the mean of the others' (the
leave-one-out baseline of learner/grpo.py); groups whose rewards are all equal are dropped
(no signal). The calls, with the token ids the backend fed and sampled and its behaviour
logprobs, go to the task objective (learner/grpo.py, named "completions", weight
`mix.completions`) beside the cycle's other objectives, in the one update.
Tested in tests/learner/test_completion_rl.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from feedback.vocab import adapter_name
from learner.config import LearnerConfig
from learner.runs import Context
from learner.trajectories import CallSample


def advantages(rewards: Sequence[float]) -> list[float]:
    """Leave-one-out: each reward less the mean of the group's others."""
    n, total = len(rewards), sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def completion_calls(ctx: Context, run_id: int, config: LearnerConfig
                     ) -> tuple[list[CallSample], dict[str, Any]]:  # fmt: skip
    from agent_server.session.completion import InlineRequest, call_inline
    from learner.synth.completion import mine_completion_tasks
    from learner.synth.completion_reward import completion_reward

    code = config.code
    tasks = mine_completion_tasks(code.repo, max_tasks=code.completion_tasks, seed=run_id,
                                  splits=("train",))  # fmt: skip
    version, folder = ctx.serving_adapter()
    name = adapter_name(version) if version and folder is not None else None

    async def sample() -> list[list[tuple[Any, float]]]:
        backend = ctx.backend(ctx.settings)
        try:
            if name is not None and folder is not None:
                await backend.load_adapter(name, folder)
            groups = []
            for task in tasks:
                request = InlineRequest(task.path, task.language, task.prefix[-6000:],
                                        task.suffix[:3000], code.max_tokens)  # fmt: skip
                calls = await asyncio.gather(*(
                    call_inline(backend, request, temperature=code.temperature, adapter=name)
                    for _ in range(code.samples)))  # fmt: skip
                groups.append([(c, completion_reward(task, c.shown)) for c in calls])
            return groups
        finally:
            await backend.aclose()

    groups = asyncio.run(sample())
    out: list[CallSample] = []
    equal = missing = 0
    for task, group in zip(tasks, groups, strict=True):
        rewards = [r for _, r in group]
        if max(rewards) == min(rewards):
            equal += 1
            continue
        for k, ((call, _), advantage) in enumerate(zip(group, advantages(rewards), strict=True)):
            done = call.completion
            if not done.prompt_token_ids or not done.token_ids:
                missing += 1
                continue
            out.append(CallSample(rollout_id=f"{task.id}:{k}", seq=1, kind="completion",
                                  prompt_ids=done.prompt_token_ids, completion_ids=done.token_ids,
                                  behaviour_logprobs=list(done.logprobs),
                                  advantage=advantage))  # fmt: skip
    rewards = [r for group in groups for _, r in group]
    stats = {"tasks": len(tasks), "completions": len(rewards), "groups_equal": equal,
             "calls": len(out), "missing_ids": missing,
             "reward_mean": round(sum(rewards) / len(rewards), 4) if rewards else None,
             "adapter": name}  # fmt: skip
    return out, stats
