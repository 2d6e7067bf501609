#!/usr/bin/env bash
# mypy over the package as it installs: server/, worker/ and client/ are `padbench.server`, `padbench.worker`
# and `padbench.client` (setup.py maps them), a mapping mypy cannot read from an editable install. So this
# builds .typecheck/padbench, a tree of links in the installed layout, and checks that.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .typecheck && mkdir -p .typecheck/padbench
for entry in padbench/*; do
  case "$(basename "$entry")" in __pycache__|migrations|examples) continue ;; esac
  ln -s "../../$entry" ".typecheck/padbench/$(basename "$entry")"
done
for folder in server worker client; do ln -s "../../$folder" ".typecheck/padbench/$folder"; done
exec "${MYPY:-.venv/bin/mypy}" "$@"
