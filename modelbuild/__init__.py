"""Model building: the models this project trains from scratch or continues pretraining.

A room of its own (docs/architecture.md): it uses the agent harness and the learner's task
tools to make training data, and nothing but the entry points (`apprentice model build-dev`,
`apprentice model build-agent`, first start's dev model in apprentice/prepare.py), tests and
benches import it. Talking to a model (backends, decoding, installing) stays in
agent_server/models/; mining and running tasks stays in learner/synth/.

The package map:
- dev/         the small dev model (`apprentice model build-dev`)
  - build.py     `build_dev_model`, the manifest, `build_key` (the builder's code and its
                 corpus: what a cached dev model is checked against), atomic publishing
  - corpus.py    the training text: the standard library and this repository's `.py` files
                 at a pinned commit; the held-out split; chat-formatted examples
  - tokenizer.py byte-level BPE trained here, the ChatML-style chat template
  - train.py     CPU continued pretraining: packing, evaluation, AdamW with warmup + cosine
- agent/       the agent model: the dev model continued-pretrained (`apprentice model build-agent`)
  - pretrain.py  `build_agent_model`: copy rows first, then oracle agent traces; the manifest
  - copyrows.py  copy rows: a file, its faulty line, the edit action copied from them
  - traces.py    oracle agent traces made by the product's own agent loop on corpus modules
"""
