# A padbench GPU worker: one container per GPU. Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t padbench-worker .
# The base image brings CUDA and a matching torch; override it to pin another pair, e.g.
#   --build-arg BASE_IMAGE=pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=/cache/huggingface

RUN useradd --create-home --uid 1000 padbench && mkdir -p /cache /models && chown padbench /cache
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY padbench ./padbench
COPY alembic ./alembic
COPY examples ./examples
COPY server ./server
COPY worker ./worker
COPY client ./client
# torch is already in the base image and satisfies the `worker` extra's range, so pip keeps that CUDA build.
RUN pip install ".[worker,gpu,training]"

USER padbench
# Local models, tokenizers and datasets are mounted read-only under /models; the hub is never reached.
VOLUME /cache
# PADBENCH_SERVER and PADBENCH_TOKEN (a worker-role token) come from the environment; SIGTERM (docker stop)
# releases the current job so another worker picks it up.
ENTRYPOINT ["padbench", "worker"]
