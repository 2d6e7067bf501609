"""transformers' `generate` run alone, as a user runs it, to check a generate job's `transformers-generate` row.

A generate job times that reference in the process that has just compiled and timed padbench's own rows.
`generate` is bound by the host (one Python step per token), so anything that process left behind (compiled
graphs, threads, a large heap) could slow it and flatter padbench's ratio. This script does the same work in
a process of its own: the spec's model built from its config by transformers (random weights, the spec's
dtype, SDPA), the spec's prompts drawn by padbench's loader with the spec's seed, batches of `batch_size`
requests in arrival order, left-padded, greedy, EOS off so that each batch generates its longest request's
output length.
Each repeat times every batch; the figure is output tokens over the repeats' total time, as the job's is.

    python3 scripts/plain_generate_baseline.py examples/gpu-generate-qwen3-1.7b-code.yaml --repeats 3 \\
        --json plain-generate.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch
import transformers
from transformers import AutoModelForCausalLM

from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.specfile import load_spec
from padbench.worker.engine.model.build import model_config
from padbench.worker.jobs.generate.requests import load_requests
from padbench.worker.runtime.device import torch_dtype


def plain_model(spec: GenerateJobSpec, device: torch.device) -> Any:
    config = model_config(spec.model)
    config._attn_implementation = "sdpa"
    # padbench's forward jobs switch the KV cache off in the configs they build; a model's own config, which a
    # user's `from_pretrained` reads, keeps transformers' default: generation through the cache.
    config.use_cache = True
    torch.manual_seed(spec.data.seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=torch_dtype(spec.dtype)).eval()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def generate_all(model: Any, batches: list[list[tuple[list[int], int]]], pad_id: int) -> float:
    """Seconds to generate every batch, the way a batched loop over `model.generate` does."""
    synchronize(model.device)
    started = time.perf_counter()
    for batch in batches:
        width = max(len(prompt) for prompt, _ in batch)
        padding = [width - len(prompt) for prompt, _ in batch]
        input_ids = torch.tensor([[pad_id] * pad + prompt for pad, (prompt, _) in zip(padding, batch, strict=True)],
                                 device=model.device)
        attention_mask = torch.tensor([[0] * pad + [1] * (width - pad) for pad in padding], device=model.device)
        new_tokens = max(length for _, length in batch)
        model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad_id, eos_token_id=None)
    synchronize(model.device)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="a generate job's spec file (its model, data, output_length, batch_size)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup-batches", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    spec = load_spec(args.spec)
    if not isinstance(spec, GenerateJobSpec) or not isinstance(spec.batch_size, int):
        raise SystemExit(f"{args.spec}: needs a generate job with a fixed batch_size")
    model = plain_model(spec, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    requests, _, pad_id = load_requests(spec, spec.data, model.config.vocab_size, lambda *_: None)
    batches = [[(list(r.prompt), r.output_length) for r in requests[start:start + spec.batch_size]]
               for start in range(0, len(requests), spec.batch_size)]
    output_tokens = sum(request.output_length for request in requests)

    with torch.inference_mode():
        warmup = generate_all(model, batches[: args.warmup_batches], pad_id)
        print(f"warm-up: {warmup:.1f} s", file=sys.stderr, flush=True)
        seconds = []
        for repeat in range(args.repeats):
            seconds.append(generate_all(model, batches, pad_id))
            print(f"repeat {repeat + 1}: {output_tokens / seconds[-1]:,.0f} output tokens/s", file=sys.stderr,
                  flush=True)
    rates = [output_tokens / s for s in seconds]
    device = torch.cuda.get_device_name() if model.device.type == "cuda" else "cpu"
    result = {"spec": args.spec, "device": device, "torch": torch.__version__, "transformers": transformers.__version__,
              "requests": len(requests), "output_tokens": output_tokens,
              "batch_size": spec.batch_size, "repeat_tokens_per_s": rates,
              "output_tokens_per_s": output_tokens * len(seconds) / sum(seconds),
              "cv": statistics.stdev(rates) / statistics.mean(rates) if len(rates) > 1 else None}
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(result, file, indent=2)


if __name__ == "__main__":
    main()
