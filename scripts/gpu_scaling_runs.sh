#!/usr/bin/env bash
# Several GPUs in one device call of 10 minutes: Llama-3.1-8B's shape packed 8 × 1024 tokens a rank on GPUS GPUs
# beside the plain FSDP2 loop at the same checkpointing (full recompute, eager on both sides), then the scaling
# axis on Llama-3.2-1B's shape (gpus: [1, 2, 4], packed training).
# Usage: scripts/gpu_scaling_runs.sh GPUS OUTDIR
# Output: plain-fsdp-packed-8.json, padbench-8b-full.json/.txt, scaling-1b.json/.txt and scaling.log. Expects
# padbench importable and .data/ (bert-base-uncased, wikitext/all.raw); writes .data/code.jsonl from this
# machine's Python standard library.
set -uo pipefail
gpus=$1 out=$(realpath -m "$2")
log="$out/scaling.log"
source scripts/gpu_host_setup.sh "$log"
echo "== plain FSDP2 loop, packed, batch 8, full recompute $(date -u +%T)" >> "$log"
timeout 150 torchrun --standalone --nproc_per_node "$gpus" scripts/plain_fsdp_training_baseline.py \
  --preset llama-3.1-8b --source .data/code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 \
  --batch-size 8 --num-samples 4000 --layout packed --checkpointing --json "$out/plain-fsdp-packed-8.json" >> "$log" 2>&1
echo "== plain exit $? $(date -u +%T)" >> "$log"
python3 -P -m padbench.cli run examples/gpu-fsdp-llama-3.1-8b.yaml --timeout 230 --set gpus="$gpus" \
  --set batch_size=8 --set "strategies=[packed]" --set compile=false --set training.activation_checkpointing=full \
  --set measurement.repeats=2 --json "$out/padbench-8b-full.json" > "$out/padbench-8b-full.txt" 2>&1
echo "== padbench 8B exit $? $(date -u +%T)" >> "$log"
python3 -P -m padbench.cli run examples/gpu-llm-llama-3.2-1b-training.yaml --timeout 170 --set "gpus=[1,2,$gpus]" \
  --set "strategies=[packed]" --set measurement.max_batches=40 --json "$out/scaling-1b.json" > "$out/scaling-1b.txt" 2>&1
echo "== padbench 1B scaling exit $? $(date -u +%T)" >> "$log"
