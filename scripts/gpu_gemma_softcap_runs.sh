#!/usr/bin/env bash
# Gemma 2's soft-capping on flex against the eager kernels (examples/gpu-gemma2-softcap.yaml), beside the plain
# transformers model on the same packs with its own flex attention. Usage: scripts/gpu_gemma_softcap_runs.sh
# MODE OUTDIR [--set KEY=VALUE ...], MODE inference or training; the --set arguments go to the padbench job
# (e.g. --set "strategies=[packed, {name: packed, attention: eager}]" for the packed rows alone). Expects padbench importable and .data/bert-base-uncased; writes
# .data/code.jsonl from this machine's Python standard library when it is missing. Output: one JSON per run and
# one log, so a device call's few returned files hold it all. BATCH=N sets the rows of 1024 tokens a batch (8 by
# default) for both padbench and the plain model: training's plain loop, with full logits, runs out of memory
# at 8 on an 80 GB GPU.
set -uo pipefail
mode=$1 out=$2 batch=${BATCH:-8}
shift 2
mkdir -p "$out" .data
[[ -f .data/code.jsonl ]] || python3 scripts/code_corpus.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl
python3 -P -m padbench.cli run examples/gpu-gemma2-softcap.yaml --set "mode=$mode" --set "batch_size=$batch" "$@" \
  --json "$out/gemma2-softcap-$mode-$batch.json" >> "$out/gemma2-$mode.log" 2>&1
baseline=scripts/plain_packed_baseline.py
[[ $mode == training ]] && baseline=scripts/plain_training_baseline.py
python3 "$baseline" --preset gemma-2-2b --attention flex_attention --source .data/code.jsonl \
  --tokenizer .data/bert-base-uncased --max-length 1024 --num-samples 3000 --batch-size "$batch" \
  --json "$out/gemma2-plain-flex-$mode-$batch.json" >> "$out/gemma2-$mode.log" 2>&1
