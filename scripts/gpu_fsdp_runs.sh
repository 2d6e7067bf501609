#!/usr/bin/env bash
# The two-GPU training measurements of docs/benchmarks.md: Llama-3.1-8B's shape sharded with FSDP2 over two GPUs
# of one host, padbench (examples/gpu-fsdp-llama-3.1-8b.yaml) beside the plain FSDP2 loop
# (scripts/plain_fsdp_training_baseline.py) on the same sequences, dealt to the ranks the same way.
# Usage: scripts/gpu_fsdp_runs.sh PART OUTDIR, PART one of (each about one device call of 10 minutes: a repeat is
# a whole pass over a rank's 59 packs, about 85 s on two H100s)
#   plain    the plain loop on First-Fit-Decreasing packs of 8 × 1024 tokens a rank, then on binned[16]'s padded
#            batches (transformers' sdpa attention)
#   packed   padbench's packed row with compiled decoder layers
#   binned   padbench's binned[16] row;  static: its static row
#   auto     batch_size auto on the packed row
#   http     the packed row submitted over HTTP to a worker owning both GPUs (`padbench demo --gpus 0,1`: a
#            loopback server with an embedded SQLite database)
# Output: one JSON per run and one log per part. Expects padbench importable (installed, or the offline wheels on
# PYTHONPATH) and .data/bert-base-uncased; writes .data/code.jsonl from this machine's Python standard library.
set -uo pipefail
part=$1 out=$(realpath -m "$2")
spec=examples/gpu-fsdp-llama-3.1-8b.yaml
log="$out/fsdp-$part.log"
source scripts/gpu_host_setup.sh "$log"
# A step's activations (8 × 1024 tokens a rank) do not fit beside the model's 62.6 GiB of state per rank on an
# 80 GB card: there both loops recompute each decoder layer in the backward, and drop to 4 rows a rank if the
# plain loop's full logits still do not fit.
memory_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0)
if (( memory_mib < 100000 )); then checkpointing=full plain_options=(--checkpointing); else checkpointing=none plain_options=(); fi
batch=8
run() {  # NAME SECONDS, then --set arguments: one padbench job, stopped after SECONDS with the rows it finished
  local name=$1 seconds=$2; shift 2
  echo "== $name: --set batch_size=$batch --set training.activation_checkpointing=$checkpointing $*" >> "$log"
  python3 -P -m padbench.cli run "$spec" --timeout "$seconds" --set batch_size=$batch \
    --set training.activation_checkpointing=$checkpointing "$@" --json "$out/$name.json" >> "$log" 2>&1
  echo "== $name exit $?" >> "$log"
}
plain() {  # LAYOUT SECONDS: the plain FSDP2 loop on two GPUs at $batch rows a rank; fails when it wrote nothing
  echo "== plain FSDP2 loop ($1, batch $batch, ${plain_options[*]})" >> "$log"
  timeout "$2" torchrun --standalone --nproc_per_node 2 scripts/plain_fsdp_training_baseline.py --preset llama-3.1-8b \
    --source .data/code.jsonl --tokenizer .data/bert-base-uncased --max-length 1024 --batch-size $batch \
    --num-samples 4000 --layout "$1" "${plain_options[@]}" --json "$out/plain-fsdp-$1-$batch.json" >> "$log" 2>&1
  echo "== plain ($1) exit $?" >> "$log"
  [[ -f "$out/plain-fsdp-$1-$batch.json" ]]
}
fitting_plain() {  # LAYOUT SECONDS: the plain loop at 8 rows a rank, else at 4
  plain "$@" || { batch=4; plain "$@"; }
}
case $part in
  plain)
    fitting_plain packed 240
    fitting_plain binned 240 ;;
  packed) run packed-compiled 560 --set "strategies=[packed]" --set compile=true ;;
  binned) run binned 560 --set "strategies=[{name: binned, n_bins: 16}]" ;;
  static) run static 560 --set "strategies=[static]" ;;
  auto)
    run packed-auto 560 --set "strategies=[packed]" --set batch_size=auto --set measurement.repeats=1 \
      --set probe.cap=32 ;;
  http)
    # One repeat of the packed row; the demo's worker reads the spec's files from here.
    sed "s#^name: .*#name: gpu-fsdp-llama-3.1-8b-over-http#; s#repeats: 3#repeats: 1#;
         s#^strategies: .*#strategies: [packed]#; s#^batch_size: .*#batch_size: $batch#" "$spec" > "$out/over-http.yaml"
    echo "training: {activation_checkpointing: $checkpointing}" >> "$out/over-http.yaml"
    echo "== padbench demo --gpus 0,1 (server, worker, submit over HTTP)" >> "$log"
    timeout 560 python3 -m padbench.cli demo --spec "$out/over-http.yaml" --gpus 0,1 > "$out/over-http.txt" 2>&1
    echo "== demo exit $?" >> "$log" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
