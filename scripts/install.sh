#!/usr/bin/env bash
# Create ./.venv and install padbench with its test tools. torch is installed first, pinned, so the
# dependency range in pyproject.toml is already satisfied and pip never pulls a CUDA build on a CPU box.
# PADBENCH_TORCH overrides the pin (e.g. PADBENCH_TORCH="torch==2.11.0" on a GPU machine).
# The install is editable, so source edits need no reinstall. What does need one (the metadata and
# dependencies in pyproject.toml, the package layout in setup.py, the torch pin, the Python version) is
# hashed into .venv/.padbench-install-stamp after a successful install; when the stamp still matches,
# this does nothing. A clean clone has no .venv, so it always installs everything.
set -euo pipefail
cd "$(dirname "$0")/.."
torch_pin="${PADBENCH_TORCH:-torch==2.13.0}"
stamp_file=.venv/.padbench-install-stamp
stamp="$(
  {
    sha256sum pyproject.toml setup.py
    printf 'torch pin: %s\n' "$torch_pin"
    python3 -c 'import sys; print("python:", sys.version)'
  } | sha256sum | cut -d' ' -f1
)"
if [[ -x .venv/bin/python && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
  echo "install: up to date (.venv)"
  exit 0
fi
# An existing venv is reused: recreating it would throw away every installed package.
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
rm -f "$stamp_file"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "$torch_pin"
.venv/bin/python -m pip install -q -e '.[dev,postgres]'
echo "$stamp" > "$stamp_file"
