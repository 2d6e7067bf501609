#!/usr/bin/env bash
# Create ./.venv and install padbench with its test tools. torch is installed first, pinned, so the
# dependency range in pyproject.toml is already satisfied and pip never pulls a CUDA build on a CPU box.
# PADBENCH_TORCH overrides the pin (e.g. PADBENCH_TORCH="torch==2.11.0" on a GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "${PADBENCH_TORCH:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e '.[dev,postgres]'
