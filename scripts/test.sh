#!/usr/bin/env bash
# Install (scripts/install.sh) and run the test suite: unit, integration and acceptance tiers.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
bash scripts/typecheck.sh
.venv/bin/python -m pytest "$@"
