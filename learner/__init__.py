"""The learner: feedback -> a gated LoRA update -> hot-deployed, as a chain of Celery tasks.

    config.py      LearnerConfig: data, train (KTO + LoRA), gate, deploy; every field documented
                   (config_gate.py, config_tasks.py: parts of it); learner_defaults reads
                   [learner] in config.toml (runs.py)
    data.py        collect: labelled samples from suggestions + outcomes, dataset snapshots
    kto.py         the feedback loss (why KTO, the loss, the simplifications)
    train.py       LoRA on the base model's linear layers; the feedback objective (kto.py)
    grpo.py        the task objective: policy gradients on the agent's own rollouts
    update.py      the one update loop every cycle runs, on the objectives it names
    candidate.py   the train and evaluate steps: objectives and gates from the cycle's config
    evaluate.py    the candidate vs the serving policy on held-out items, KL, perplexity
    evidence.py    the paired one-sided test (stratified bootstrap) the gate decides on
    gate.py        the verdict: deploy on evidence, refuse, or defer (too little evidence)
    general_code.py  the stdlib slice the perplexity rule reads
    publish.py     atomic adapters/policy-vN folders
    deploy.py      the Deployer seam: VLLMDeployer, EmbeddedDeployer, rollback
    pipeline.py    the steps as plain functions taking a run id; run_cycle (foreground)
    celery_app.py  `app` (worker, beat) from Settings; jobs.py: the thin Celery tasks

Run: `apprentice worker` (a worker), `apprentice learn` (one cycle in the foreground).
"""
