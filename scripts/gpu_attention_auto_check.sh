#!/usr/bin/env bash
# `attention: auto` on a GPU, from an empty table of kernel speeds: Llama-3.2-1B's shape, packed inference on
# WikiText. First a job that measures three families side by side on the same packs (flash, sdpa, flex), which
# the worker's table records; then the same job left at `auto`, which must run the fastest of them and say why.
# Usage: scripts/gpu_attention_auto_check.sh OUTDIR
# Output: measured.json/.txt, auto.json/.txt and kernel-speeds.json (the table after both). Expects padbench
# importable and .data/ (bert-base-uncased, wikitext/all.raw).
set -uo pipefail
out=$(realpath -m "$1")
mkdir -p "$out"
export PADBENCH_CACHE_DIR="$out/cache" PADBENCH_KERNEL_SPEEDS_FILE="$out/kernel-speeds.json"
rm -f "$PADBENCH_KERNEL_SPEEDS_FILE"
common=(--set data.num_samples=4000 --set compile=false --set measurement.repeats=2 --set measurement.min_seconds=3)
python3 -P -m padbench.cli run examples/gpu-llm-llama-3.2-1b.yaml --timeout 200 "${common[@]}" \
  --set "strategies=[{name: packed, attention: flash}, {name: packed, attention: sdpa}, {name: packed, attention: flex}]" \
  --json "$out/measured.json" > "$out/measured.txt" 2>&1
echo "== measured exit $? $(date -u +%T)"
python3 -P -m padbench.cli run examples/gpu-llm-llama-3.2-1b.yaml --timeout 120 "${common[@]}" \
  --set "strategies=[packed]" --set attention=auto --json "$out/auto.json" > "$out/auto.txt" 2>&1
echo "== auto exit $? $(date -u +%T)"
