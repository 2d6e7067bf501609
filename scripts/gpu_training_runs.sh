#!/usr/bin/env bash
# The training measurements of docs/benchmarks.md §10 on one GPU, each padbench run beside nothing else.
# Usage: scripts/gpu_training_runs.sh PART OUTDIR, PART one of
#   layers  the plain loop, then compiled decoder layers without and with selective checkpointing
#   more    ops-level and full checkpointing, fp8 and LoRA with compiled layers, batch_size auto with full
#           checkpointing
# Output: one JSON per run and one log per part, so a device call's few returned files hold it all.
# Expects padbench importable (installed, or the offline wheels on PYTHONPATH) and .data/bert-base-uncased;
# writes .data/code.jsonl from this machine's Python standard library.
set -uo pipefail
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
  python3 -P -m padbench.cli run "$spec" "$@" --json "$out/$name.json" >> "$log" 2>&1
}
case $part in
  layers)
    python3 scripts/plain_training_baseline.py --preset qwen3-1.7b --source .data/code.jsonl \
      --tokenizer .data/bert-base-uncased --max-length 640 --batch-size 16 --num-samples 3000 \
      --json "$out/plain-loop.json" >> "$log" 2>&1
    run compiled-layers
    run compiled-layers-selective --set training.activation_checkpointing=selective ;;
  more)
    run compiled-layers-ops --set training.activation_checkpointing=ops
    run compiled-layers-full --set training.activation_checkpointing=full
    run fp8-compiled-layers --set training.precision=fp8
    run lora-compiled-layers --set training.method=lora
    run auto-checkpointed --set batch_size=auto --set compile=false --set training.activation_checkpointing=full \
      --set probe.cap=1024 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
