#!/usr/bin/env bash
# The generate measurements of docs/benchmarks.md §8 on one GPU: the code corpus, then each example spec.
# Usage: scripts/gpu_generate_runs.sh OUTDIR [NAME ...], NAME one of code, code-uniform, context (all three
# when none is named) or code-flex (the code spec on flex-kvcache, FlexAttention over the cache). Expects padbench importable (installed, or the offline wheels on
# PYTHONPATH) and .data/bert-base-uncased; writes .data/code.jsonl from this machine's Python standard library.
# PADBENCH_RUN_TIMEOUT=SECONDS stops each padbench job after that long, keeping (and writing) the rows it finished.
set -uo pipefail
limit=(${PADBENCH_RUN_TIMEOUT:+--timeout "$PADBENCH_RUN_TIMEOUT"})
out=$1
mkdir -p "$out" .data
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu-generate.txt" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' >> "$out/gpu-generate.txt"
python3 scripts/code_corpus.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl
shift
names=("${@:-code code-uniform context}")
for name in ${names[*]}; do
  spec=${name%-flex} overrides=()
  [[ $name == *-flex ]] && overrides=(--set attention=flex)
  python3 -P -m padbench.cli run "examples/gpu-generate-qwen3-1.7b-$spec.yaml" "${overrides[@]}" "${limit[@]}" \
    --json "$out/generate-$name.json" > "$out/generate-$name.txt" 2>&1
done
