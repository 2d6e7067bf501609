#!/usr/bin/env bash
# The main job in one command: install (scripts/install.sh), then start a server and one local worker on
# loopback with an embedded SQLite database, submit a demo job (CPU-sized when no GPU is present), wait,
# print the results table and shut everything down. Extra arguments go to `padbench demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
PADBENCH_INSTALL_NO_HINT=1 bash scripts/install.sh
exec .venv/bin/padbench demo "$@"
