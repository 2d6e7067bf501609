#!/usr/bin/env bash
# Install (scripts/install.sh) and run the test suite: unit, integration and acceptance tiers.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# The dashboard's browser test drives the distribution's Chromium (Playwright's own download is not needed).
# Install it where this machine allows (root with apt-get); without it that one test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  echo "test: installing chromium with apt-get for the dashboard browser test (README: Developing)" >&2
  { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/dev/null 2>&1 \
    || echo "test: could not install chromium; the dashboard browser test will skip" >&2
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
bash scripts/typecheck.sh
.venv/bin/python -m pytest "$@"
