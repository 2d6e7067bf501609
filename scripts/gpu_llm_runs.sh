#!/usr/bin/env bash
# The causal-LM measurements of docs/benchmarks.md on one GPU: padbench's example specs for each model
# shape and, in the same run, the plain transformers packed baseline (scripts/plain_packed_baseline.py)
# on the same packs. Usage: scripts/gpu_llm_runs.sh qwen|small|large|fa4|fa4-more|moe|profile OUTDIR
#   qwen: qwen2.5-0.5b inference, eager and compiled
#   small: llama-3.2-1b inference, eager and compiled, and training
#   large: llama-3.1-8b inference, eager and compiled;  fa4, fa4-more: the three shapes on flash-attn-4
#   profile: where llama-3.1-8b's packed forward spends time
#   moe: olmoe-1b-7b (grouped_mm and eager experts) and qwen3-30b-a3b inference, each beside the plain baseline
#        running transformers' own sdpa attention and default experts on the same packs
#   moe-large: qwen3-30b-a3b's part of moe alone
#   moe-training: olmoe-1b-7b training (grouped_mm and eager experts, 4 × 1024 tokens a step) beside the plain
#        training loop (transformers' sdpa attention and default experts, full logits, foreach AdamW)
# Expects padbench importable (installed, or the offline wheels on PYTHONPATH; `-P` keeps the checkout's
# padbench/ folder, which holds only the contract, from shadowing the installed package) and .data/.
# PADBENCH_RUN_TIMEOUT=SECONDS stops each padbench job after that long, keeping (and writing) the rows it finished.
set -uo pipefail
limit=(${PADBENCH_RUN_TIMEOUT:+--timeout "$PADBENCH_RUN_TIMEOUT"})
part=$1 out=$2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu-$part.txt" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' >> "$out/gpu-$part.txt"
run() {  # NAME SPEC: one padbench job, its table and JSON
  python3 -P -m padbench.cli run "examples/$2" "${limit[@]}" --json "$out/$1.json" > "$out/$1.txt" 2>&1
}
plain() {  # PRESET BATCH [ATTENTION SAMPLES SOURCE]: the plain baseline on the same packs
  python3 scripts/plain_packed_baseline.py --preset "$1" --source "${5:-.data/wikitext/all.raw}" \
    --tokenizer .data/bert-base-uncased --batch-size "$2" --attention "${3:-plain-varlen}" \
    --num-samples "${4:-8000}" --json "$out/plain-$1.json" > "$out/plain-$1.txt" 2>&1
}
case "$part" in
  qwen)
    run qwen2.5-0.5b gpu-llm-qwen2.5-0.5b.yaml; plain qwen2.5-0.5b 32
    run qwen2.5-0.5b-compiled gpu-llm-qwen2.5-0.5b-compiled.yaml ;;
  small)
    run llama-3.2-1b gpu-llm-llama-3.2-1b.yaml; plain llama-3.2-1b 32
    run llama-3.2-1b-training gpu-llm-llama-3.2-1b-training.yaml
    run llama-3.2-1b-compiled gpu-llm-llama-3.2-1b-compiled.yaml ;;
  large)
    run llama-3.1-8b gpu-llm-llama-3.1-8b.yaml; plain llama-3.1-8b 16
    run llama-3.1-8b-compiled gpu-llm-llama-3.1-8b-compiled.yaml ;;
  fa4)  # needs flash-attn-4 importable (flash_attn.cute)
    run llama-3.2-1b-fa4 gpu-llm-llama-3.2-1b-fa4.yaml ;;
  fa4-more)  # the same for the other two shapes
    run qwen2.5-0.5b-fa4 gpu-llm-qwen2.5-0.5b-fa4.yaml
    run llama-3.1-8b-fa4 gpu-llm-llama-3.1-8b-fa4.yaml ;;
  moe|moe-large|moe-training)
    [[ -f .data/code.jsonl ]] || python3 scripts/code_corpus.py \
      "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl ;;&
  moe)
    run olmoe-1b-7b gpu-moe-olmoe-1b-7b.yaml; plain olmoe-1b-7b 32 sdpa 4000 .data/code.jsonl ;;&
  moe|moe-large)
    run qwen3-30b-a3b gpu-moe-qwen3-30b-a3b.yaml; plain qwen3-30b-a3b 8 sdpa 2000 .data/code.jsonl ;;
  moe-training)
    # The packed rows first: they are what the plain loop compares with, so a time limit keeps them.
    python3 -P -m padbench.cli run examples/gpu-moe-olmoe-1b-7b.yaml --set mode=training --set batch_size=4 \
      --set "strategies=[packed, binned]" "${limit[@]}" \
      --json "$out/olmoe-1b-7b-training.json" > "$out/olmoe-1b-7b-training.txt" 2>&1
    python3 scripts/plain_training_baseline.py --preset olmoe-1b-7b --attention sdpa --source .data/code.jsonl \
      --tokenizer .data/bert-base-uncased --max-length 1024 --batch-size 4 --num-samples 4000 \
      --json "$out/plain-olmoe-1b-7b-training.json" > "$out/plain-olmoe-1b-7b-training.txt" 2>&1 ;;
  profile)
    python3 -P scripts/profile_forward.py --preset llama-3.1-8b --tokens 16384 > "$out/profile-llama-3.1-8b.txt" 2>&1 ;;
esac
tail -n 3 "$out"/*.txt
