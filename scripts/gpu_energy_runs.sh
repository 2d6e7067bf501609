#!/usr/bin/env bash
# Joules per token on one GPU, for a padding job and a generate job, beside the GPU's power as nvidia-smi
# samples it every 100 ms over the same jobs (an independent reading of the same watts).
# Usage: scripts/gpu_energy_runs.sh OUTDIR (expects padbench importable and .data/ as examples/gpu-demo.yaml and
# examples/gpu-generate-qwen3-1.7b-code.yaml read it; writes .data/code.jsonl from the Python standard library)
# Output: padding.json/.txt, generate.json/.txt, power.csv (timestamp, watts) and energy.log (card, versions, and
# each row's joules per token with the mean power it implies).
set -uo pipefail
out=$(realpath -m "$1")
mkdir -p "$out"
log="$out/energy.log"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > "$log" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' >> "$log"
nvidia-smi --query-gpu=timestamp,power.draw --format=csv,noheader,nounits -lms 100 > "$out/power.csv" 2>/dev/null &
sampler=$!
[[ -f .data/code.jsonl ]] || python3 scripts/code_corpus.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl
echo "== padding $(date -u +%T)" >> "$log"
python3 -P -m padbench.cli run examples/gpu-demo.yaml --set "strategies=[static,packed]" --timeout 200 \
  --json "$out/padding.json" > "$out/padding.txt" 2>&1
echo "== generate $(date -u +%T)" >> "$log"
python3 -P -m padbench.cli run examples/gpu-generate-qwen3-1.7b-code.yaml\
  --set "strategies=[static,continuous]" --set "references=[]" --set attention=flex --timeout 200 \
  --json "$out/generate.json" > "$out/generate.txt" 2>&1
echo "== done $(date -u +%T)" >> "$log"
kill "$sampler"
python3 - "$out" >> "$log" <<'PY'
import json, sys
from pathlib import Path
for name in ("padding", "generate"):
    path = Path(sys.argv[1]) / f"{name}.json"
    if not path.exists():
        print(name, "no result"); continue
    result = json.loads(path.read_text())
    for row in result.get("strategies") or result.get("rows") or []:
        energy = row.get("energy")
        if not energy or not energy.get("tokens"):
            print(name, row.get("strategy"), "energy not measured"); continue
        print(f"{name} {row.get('strategy')}: {energy['joules'] / energy['tokens']:.4f} J/token over "
              f"{energy['seconds']:.1f} s, mean {energy['joules'] / energy['seconds']:.0f} W ({energy['source']})")
PY
