#!/usr/bin/env bash
# A tune of Llama-3.1-8B's shape on several GPUs (examples/gpu-tune-llama-3.1-8b.yaml) and the plain FSDP2 loop it
# is compared with, on the same packed sequences.
#   plain: the plain loop at batch 8 with full recompute (its working setting on 80 GB cards), then without
#          recompute (where the GPU's memory lets it run that way);
#   tune:  `padbench tune` with the example's 15-minute budget (TUNE_BUDGET, e.g. 12m, states another), its wall
#          time in the log.
# Usage: scripts/gpu_tune_8b_runs.sh plain|tune GPUS OUTDIR
# Output: PART.log, plain-fsdp-packed-8-full.json, plain-fsdp-packed-8-none.json, tune.json/.txt. Expects padbench
# importable and .data/ (bert-base-uncased); writes .data/code.jsonl from this machine's Python standard library.
set -uo pipefail
part=$1 gpus=$2 out=$(realpath -m "$3")
log="$out/$part.log"
source scripts/gpu_host_setup.sh "$log"

plain() {  # LEVEL [--checkpointing]
  echo "== plain FSDP2 loop, packed, batch 8, $1 recompute $(date -u +%T)" >> "$log"
  timeout 150 torchrun --standalone --nproc_per_node "$gpus" scripts/plain_fsdp_training_baseline.py \
    --preset llama-3.1-8b --source .data/code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 \
    --batch-size 8 --num-samples 4000 --layout packed "${@:2}" --json "$out/plain-fsdp-packed-8-$1.json" >> "$log" 2>&1
  echo "== plain $1 exit $? $(date -u +%T)" >> "$log"
}

case $part in
  plain)
    plain full --checkpointing
    plain none
    ;;
  tune)
    echo "== padbench tune $(date -u +%T)" >> "$log"
    start=$(date +%s)
    python3 -P -m padbench.cli tune examples/gpu-tune-llama-3.1-8b.yaml --set gpus="$gpus" \
      ${TUNE_BUDGET:+--set tune.budget="$TUNE_BUDGET"} \
      --json "$out/tune.json" > "$out/tune.txt" 2>&1
    echo "== tune exit $? after $(( $(date +%s) - start )) s $(date -u +%T)" >> "$log"
    ;;
  *) echo "usage: $0 plain|tune GPUS OUTDIR" >&2; exit 2 ;;
esac
