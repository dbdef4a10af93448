"""The agent model: the dev model continued-pretrained on copy rows, then on oracle agent
traces (`apprentice model build-agent`; pretrain.py, copyrows.py, traces.py, docs/tasks.md)."""
