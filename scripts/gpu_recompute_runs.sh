#!/usr/bin/env bash
# `activation_checkpointing: auto` on several GPUs beside the plain FSDP2 loop at its working setting (full
# recompute): Llama-3.1-8B's shape, packed 8 × 1024 tokens a rank (examples/gpu-fsdp-llama-3.1-8b.yaml), in one
# device call of 10 minutes.
# Usage: scripts/gpu_recompute_runs.sh GPUS OUTDIR
# Output: plain-fsdp-packed-8.json (the plain loop, full recompute), packed-auto.json/.txt (padbench: auto recompute,
# compiled decoder layers) and recompute.log. Expects padbench importable and .data/bert-base-uncased; writes
# .data/code.jsonl from this machine's Python standard library.
set -uo pipefail
gpus=$1 out=$(realpath -m "$2")
spec=examples/gpu-fsdp-llama-3.1-8b.yaml
log="$out/recompute.log"
source scripts/gpu_host_setup.sh "$log"
echo "== plain FSDP2 loop, packed, batch 8, full recompute" >> "$log"
timeout 200 torchrun --standalone --nproc_per_node "$gpus" scripts/plain_fsdp_training_baseline.py \
  --preset llama-3.1-8b --source .data/code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 \
  --batch-size 8 --num-samples 4000 --layout packed --checkpointing --json "$out/plain-fsdp-packed-8.json" >> "$log" 2>&1
echo "== plain exit $?" >> "$log"
echo "== padbench: packed, batch 8, activation_checkpointing auto, compile true" >> "$log"
python3 -P -m padbench.cli run "$spec" --timeout 330 --set gpus="$gpus" --set batch_size=8 \
  --set "strategies=[packed]" --set compile=true --set training.activation_checkpointing=auto \
  --set measurement.repeats=2 --json "$out/packed-auto.json" > "$out/packed-auto.txt" 2>&1
echo "== padbench exit $?" >> "$log"
