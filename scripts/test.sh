#!/usr/bin/env bash
# Install with the dev tools (scripts/install.sh --dev) and run the test suite: unit, integration and
# acceptance tiers.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
set -euo pipefail
cd "$(dirname "$0")/.."
PADBENCH_INSTALL_NO_HINT=1 bash scripts/install.sh --dev
# The dashboard's browser test drives the distribution's Chromium (Playwright's own download is not needed).
# Install it where this machine allows (root with apt-get); without it that one test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  echo "test: installing chromium with apt-get for the dashboard browser test (README: Developing)" >&2
  { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/dev/null 2>&1 \
    || echo "test: could not install chromium; the dashboard browser test will skip" >&2
fi
# The Slurm worker's test (tests/acceptance/test_slurm_worker.py) starts a real one-node Slurm (slurmctld and
# slurmd on private ports); install Debian's slurm-wlm where this machine allows, or that test skips and says why.
if ! command -v sbatch >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  echo "test: installing slurm-wlm with apt-get for the Slurm worker test (docs/running-across-nodes.md)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm; }; } >/dev/null 2>&1 \
    || echo "test: could not install slurm-wlm; the Slurm worker test will skip" >&2
fi
# The generated-client test (tests/unit/test_server_openapi.py) runs openapi-python-client, which pins its own
# typer, so it gets a venv of its own, reused while it holds this pin; without PyPI that one test skips.
openapi_pin="openapi-python-client==0.29.1"
openapi_venv=.venv-openapi
if [[ "$(cat "$openapi_venv/.padbench-pin" 2>/dev/null)" != "$openapi_pin" ]]; then
  echo "test: installing $openapi_pin into $openapi_venv/ for the generated-client test (README: Developing)" >&2
  rm -rf "$openapi_venv"
  if { python3 -m venv "$openapi_venv" && "$openapi_venv/bin/python" -m pip install -q "$openapi_pin"; } >/dev/null 2>&1
  then
    echo "$openapi_pin" > "$openapi_venv/.padbench-pin"
  else
    echo "test: could not install $openapi_pin; the generated-client test will skip" >&2
    rm -rf "$openapi_venv"
  fi
fi
if [[ -x "$openapi_venv/bin/openapi-python-client" ]]; then
  export PADBENCH_OPENAPI_PYTHON_CLIENT="$PWD/$openapi_venv/bin/openapi-python-client"
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/ruff check .
bash scripts/typecheck.sh
if (($#)); then
  exec .venv/bin/python -m pytest "$@"
fi
# Most tests spend their time waiting on processes they started (servers, workers, job children), so two at
# a time finish the suite in far less time, on two cores too. The tests that bound a latency (marked serial)
# run afterwards, alone, so what they time is the server and not their neighbours.
.venv/bin/python -m pytest -n 2 --dist loadfile -m "not bench and not gpu and not serial"
.venv/bin/python -m pytest -m "serial and not bench and not gpu"
