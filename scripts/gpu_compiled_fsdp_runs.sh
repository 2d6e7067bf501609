#!/usr/bin/env bash
# Compiled decoder layers sharded over several GPUs, in device calls of 10 minutes each: Llama-3.1-8B's shape
# packed 8 × 1024 tokens a rank (examples/gpu-fsdp-llama-3.1-8b.yaml).
#   full: the plain FSDP2 loop at its working setting (full recompute, eager), then padbench at the same
#         recompute with compiled layers;
#   ops:  padbench with op-level recompute and compiled layers, then the scaling axis;
#   none: padbench with no recompute and compiled layers, the allocator's expandable segments on (PyTorch's
#         answer to a reserved pool that outgrows what is allocated, as the eager step did here: 66 of 76.5 GiB);
#   selective: padbench with selective recompute (every other layer) and compiled layers;
#   scaling: the scaling axis alone, on Llama-3.2-1B's shape (gpus: [1, 2, GPUS], packed training, eager, one
#         precision for every count).
# Usage: scripts/gpu_compiled_fsdp_runs.sh full|ops|none|selective|scaling GPUS OUTDIR
# Output: PART.log, plain-fsdp-packed-8.json, padbench-8b-compiled-LEVEL.json/.txt, scaling-1b.json/.txt. Expects
# padbench importable and .data/ (bert-base-uncased, wikitext/all.raw); writes .data/code.jsonl from this
# machine's Python standard library. Compiles land in inductor's cache, so a later part on the same machine
# compiles what the earlier one did from there; each job reports its compile seconds apart from its figures.
set -uo pipefail
part=$1 gpus=$2 out=$(realpath -m "$3")
spec=examples/gpu-fsdp-llama-3.1-8b.yaml
log="$out/$part.log"
source scripts/gpu_host_setup.sh "$log"

compiled_8b() {  # LEVEL TIMEOUT_S
  echo "== padbench 8B, compiled layers, $1 recompute $(date -u +%T)" >> "$log"
  python3 -P -m padbench.cli run "$spec" --timeout "$2" --set gpus="$gpus" --set batch_size=8 \
    --set "strategies=[packed]" --set compile=true --set training.activation_checkpointing="$1" \
    --set measurement.repeats=2 --json "$out/padbench-8b-compiled-$1.json" > "$out/padbench-8b-compiled-$1.txt" 2>&1
  echo "== padbench 8B $1 exit $? $(date -u +%T)" >> "$log"
}

case $part in
  full)
    echo "== plain FSDP2 loop, packed, batch 8, full recompute $(date -u +%T)" >> "$log"
    timeout 130 torchrun --standalone --nproc_per_node "$gpus" scripts/plain_fsdp_training_baseline.py \
      --preset llama-3.1-8b --source .data/code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 \
      --batch-size 8 --num-samples 4000 --layout packed --checkpointing --json "$out/plain-fsdp-packed-8.json" >> "$log" 2>&1
    echo "== plain exit $? $(date -u +%T)" >> "$log"
    compiled_8b full 420
    ;;
  none)
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True compiled_8b none 330
    ;;
  selective)
    compiled_8b selective 300
    ;;
  ops|scaling)
    [[ $part == ops ]] && compiled_8b ops 360
    python3 -P -m padbench.cli run examples/gpu-llm-llama-3.2-1b-training.yaml --timeout 170 --set "gpus=[1,2,$gpus]" \
      --set "strategies=[packed]" --set compile=false --set measurement.max_batches=40 \
      --json "$out/scaling-1b.json" > "$out/scaling-1b.txt" 2>&1
    echo "== padbench 1B scaling exit $? $(date -u +%T)" >> "$log"
    ;;
  *) echo "usage: $0 full|ops|none|selective|scaling GPUS OUTDIR" >&2; exit 2 ;;
esac
