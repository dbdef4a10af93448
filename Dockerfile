# syntax=docker/dockerfile:1
# The Apprentice image: the `apprentice` command with every room of the project installed.
#
#   docker build -t apprentice .                                    # CPU torch: agent server,
#                                                                   #   migrate, beat, CPU learner
#   docker build -t apprentice-gpu --build-arg TORCH_VARIANT=cu130 .  # CUDA torch: GPU learner
#
# The GPU learner worker gets the CUDA variant and trains on the GPU (learner/device.py: train
# .device `auto` picks CUDA when torch sees one); the other services run the CPU variant
# (docs/deploy.md).
#
# docker-compose.yml builds both. Data lives under APPRENTICE_HOME=/data (a volume in compose);
# the process runs as the unprivileged user `apprentice` (uid 10001). Checked without a Docker
# engine by tests/test_compose.py (entrypoint, user, home, torch pin).

# The admin dashboard (/admin/): built here with Node, only its static files reach the image.
FROM node:20-slim AS dashboard
WORKDIR /dashboard
COPY dashboard/package.json dashboard/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY dashboard/ ./
RUN npm run typecheck && npm run build

FROM python:3.11-slim

# torch is pinned to the version the project is tested with (pyproject.toml). The variant picks
# the PyTorch wheel index: `cpu`, or a CUDA one such as `cu130` for the learner's GPU image.
ARG TORCH_VERSION=2.13.0
ARG TORCH_VARIANT=cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    APPRENTICE_HOME=/data \
    HF_HOME=/data/hf-cache

# git: gitpython (a dependency) runs the git binary; the planned synthetic tasks are mined from
# git history with it. Nothing of today's code needs it at run time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# torch alone and first, from the PyTorch index of the wanted variant: it is the largest layer,
# so it stays cached across code changes, and a plain resolve from PyPI would pick a CUDA build.
RUN pip install "torch==${TORCH_VERSION}" --index-url "https://download.pytorch.org/whl/${TORCH_VARIANT}"

WORKDIR /app

# Dependencies before the code: with only pyproject.toml present the install finds no packages
# but resolves every dependency, so editing code does not reinstall them. torch is already
# satisfied (2.13.0+cpu matches ==2.13.0). torchvision & co. break `import transformers` beside
# this torch (docs/development.md), so none may stay.
COPY pyproject.toml README.md ./
RUN pip install . \
    && pip uninstall -y torchvision torchaudio torchcodec \
    && pip check

COPY . .
# Served at /admin/ from the tree's dashboard/dist (agent_server/api/dashboard.py).
COPY --from=dashboard /dashboard/dist ./dashboard/dist
# --no-deps: the layer above installed them. PYTHONPATH=/app makes the image import the same
# tree as a checkout, including folders that are not Python packages (migrations/).
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info \
    && useradd --create-home --uid 10001 --user-group apprentice \
    && mkdir -p /data/adapters /data/hf-cache \
    && chown -R apprentice:apprentice /data
ENV PYTHONPATH=/app
# The working directory stays /app so relative paths resolve as in a checkout.
# Named volumes mounted on /data and /data/adapters take this ownership on first use.
USER apprentice

# 8765: agent server (HTTP + WebSocket); 8766: `apprentice lsp --tcp`.
EXPOSE 8765 8766
ENTRYPOINT ["apprentice"]
CMD ["--help"]
