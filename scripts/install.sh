#!/usr/bin/env bash
# Create ./.venv and install padbench with what its commands need: the CLI, the server and the worker
# (init, check, plan, run, submit, demo, plot). `--dev` adds the test and lint tools (pytest, ruff, mypy,
# playwright, schemathesis) and the PostgreSQL driver the tests use; scripts/test.sh passes it.
# torch is installed first, pinned, so the dependency range in pyproject.toml is already satisfied and pip
# never pulls a multi-gigabyte CUDA build on a CPU box. PADBENCH_TORCH overrides the pin (e.g.
# PADBENCH_TORCH="torch==2.11.0" on a GPU machine).
# The install is editable, so source edits need no reinstall. What does need one (the metadata and
# dependencies in pyproject.toml, the package layout in setup.py, the torch pin, the Python version, the
# extras) is hashed into .venv/.padbench-install-stamp after a successful install; when the stamp still
# matches, this does nothing. A --dev install also satisfies a plain one.
# pip's output (hundreds of setuptools deprecation lines from the editable build) goes to a log file; on a
# failure its last lines are printed, so errors stay visible.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") dev=false ;;
  --dev) dev=true ;;
  *) echo "usage: bash scripts/install.sh [--dev]" >&2; exit 2 ;;
esac
user_extras="server,worker,plot"
dev_extras="dev,postgres"
torch_pin="${PADBENCH_TORCH:-torch==2.13.0}"
stamp_file=.venv/.padbench-install-stamp
log_file=.venv/padbench-install.log

stamp_for() {  # the stamp of an install with the given extras
  {
    sha256sum pyproject.toml setup.py
    printf 'torch pin: %s\nextras: %s\n' "$torch_pin" "$1"
    python3 -c 'import sys; print("python:", sys.version)'
  } | sha256sum | cut -d' ' -f1
}

next_step() {  # the command to run next; not when a script that goes on to run it called this one
  if [[ -n "${PADBENCH_INSTALL_NO_HINT:-}" ]]; then
    return
  elif [[ "$dev" == true ]]; then
    echo "next: bash scripts/test.sh    (or: source .venv/bin/activate && pytest tests/unit)"
  else
    echo "next: bash scripts/demo.sh    (or: source .venv/bin/activate && padbench init my-model.yaml)"
  fi
}

if [[ "$dev" == true ]]; then extras="$dev_extras"; else extras="$user_extras"; fi
stamp="$(stamp_for "$extras")"
installed="$(cat "$stamp_file" 2>/dev/null || true)"
if [[ -x .venv/bin/python && -n "$installed" ]] \
    && [[ "$installed" == "$stamp" || ( "$dev" == false && "$installed" == "$(stamp_for "$dev_extras")" ) ]]; then
  echo "install: up to date (.venv)"
  next_step
  exit 0
fi

pip_quietly() {  # pip with its output in the log; the log's tail and a pointer to it on a failure
  if ! .venv/bin/python -m pip install --disable-pip-version-check "$@" >>"$log_file" 2>&1; then
    tail -n 40 "$log_file" >&2
    echo "install: pip install $* failed; the full log is $log_file" >&2
    exit 1
  fi
}

# An existing venv is reused: recreating it would throw away every installed package.
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
rm -f "$stamp_file"
: >"$log_file"
echo "install: $torch_pin and padbench[$extras] into .venv (pip's log: $log_file)"
pip_quietly --upgrade pip
pip_quietly "$torch_pin"
pip_quietly -e ".[$extras]"
echo "$stamp" >"$stamp_file"
echo "install: done"
next_step
