#!/usr/bin/env bash
# The training measurements of docs/benchmarks.md §10 on one GPU, each padbench run beside nothing else.
# Usage: scripts/gpu_training_runs.sh PART OUTDIR, PART one of
#   layers  the plain loop, then compiled decoder layers without and with selective checkpointing
#   ops     the plain loop, then compiled layers with ops-level checkpointing, LoRA with compiled layers, and
#           batch_size auto with ops-level checkpointing (eager, probed up to 256 rows)
#   binned  the plain loop on binned[16]'s padded batches (transformers' sdpa attention), then compiled layers
#           with ops-level checkpointing on the same batches
#   more    full checkpointing and fp8 with compiled layers
# Output: one JSON per run and one log per part, so a device call's few returned files hold it all.
# Expects padbench importable (installed, or the offline wheels on PYTHONPATH) and .data/bert-base-uncased;
# writes .data/code.jsonl from this machine's Python standard library.
# PADBENCH_RUN_TIMEOUT=SECONDS stops each padbench job after that long, keeping (and writing) the rows it finished.
set -uo pipefail
limit=(${PADBENCH_RUN_TIMEOUT:+--timeout "$PADBENCH_RUN_TIMEOUT"})
part=$1 out=$2
spec=examples/gpu-training-qwen3-1.7b.yaml
mkdir -p "$out" .data
log="$out/training-$part.log"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$log" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' >> "$log"
[[ -f .data/code.jsonl ]] || python3 scripts/code_corpus.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl
run() {  # NAME, then --set arguments
  local name=$1; shift
  echo "== $name: $*" >> "$log"
  python3 -P -m padbench.cli run "$spec" "$@" "${limit[@]}" --json "$out/$name.json" >> "$log" 2>&1
}
plain() {  # [LAYOUT]: the plain loop on the same packs, or on binned[16]'s batches
  local layout=${1:-packed}
  echo "== plain loop ($layout)" >> "$log"
  python3 scripts/plain_training_baseline.py --preset qwen3-1.7b --source .data/code.jsonl \
    --tokenizer .data/bert-base-uncased --max-length 640 --batch-size 16 --num-samples 3000 --layout "$layout" \
    --json "$out/plain-loop-$layout.json" >> "$log" 2>&1
}
case $part in
  layers)
    plain
    run compiled-layers
    run compiled-layers-selective --set training.activation_checkpointing=selective ;;
  ops)
    plain
    run compiled-layers-ops --set training.activation_checkpointing=ops
    run lora-compiled-layers --set training.method=lora
    run auto-ops --set batch_size=auto --set compile=false --set training.activation_checkpointing=ops \
      --set probe.cap=256 --set data.num_samples=5000 --set measurement.repeats=1 ;;
  binned)
    plain binned
    run binned-compiled-layers-ops --set "strategies=[{name: binned, n_bins: 16}]" \
      --set training.activation_checkpointing=ops ;;
  more)
    run compiled-layers-full --set training.activation_checkpointing=full
    run fp8-compiled-layers --set training.precision=fp8 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
