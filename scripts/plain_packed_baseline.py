"""A plain transformers implementation of packed inference, to compare padbench's packed + flash figure with.

What a user writes without padbench: the model from transformers in bf16, its own attention function
registered with transformers that calls torch's varlen flash kernel, cumulative sequence lengths found
from the position ids inside that function (one device scan and one host read per layer, as plain
implementations do), full logits, every pack timed in one loop. It packs the same sequences, drawn by
padbench's data loader with the same seed, into the same packs as padbench's `packed` strategy, so the
two figures differ only in how the forward is run.

torch's varlen kernel takes no logit soft-capping and no attention sinks, so a model with either (Gemma 2,
gpt-oss) runs on transformers' own attention instead: `--attention flex_attention` or `eager`, given the
packs' position ids, from which transformers builds each forward's document mask itself.

    python3 scripts/plain_packed_baseline.py --preset llama-3.2-1b --source .data/wikitext/all.raw \\
        --tokenizer .data/bert-base-uncased --batch-size 32 --json plain.json
    python3 scripts/plain_packed_baseline.py --preset gemma-2-2b --attention flex_attention ...

`--attention sdpa` runs transformers' SDPA attention, which finds the packed sequences in the position ids and
masks across them. A mixture of experts (`--preset qwen3-30b-a3b`) runs its experts as transformers chooses by
default, as a user's `from_pretrained` model would; the result records the implementation.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch
from transformers import AttentionInterface, AutoModelForCausalLM

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.model_spec import ModelSpec
from padbench.contract.spec import DataSpec, StrategySpec
from padbench.worker.engine.attention.ops import torch_varlen
from padbench.worker.engine.data.batches import STRATEGIES, PackedBatch
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.engine.model import flops
from padbench.worker.engine.model.build import model_config

PLAIN_VARLEN = "plain-varlen"
# What --attention takes: this script's varlen function, or transformers' own implementations: flex_attention and
# eager apply soft-capping and sinks; sdpa finds the packed sequences in the position ids and masks across them.
ATTENTION_CHOICES = (PLAIN_VARLEN, "flex_attention", "eager", "sdpa")


def plain_varlen_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                           position_ids: torch.Tensor | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    assert position_ids is not None, "packed inputs need position ids"
    if kwargs.get("softcap") or kwargs.get("s_aux") is not None:
        raise SystemExit("the model soft-caps its attention logits or has attention sinks, which torch's varlen "
                         "kernel does not apply: pass --attention flex_attention (or eager)")
    flat = position_ids[0]
    starts = torch.nonzero(flat == 0).flatten().to(torch.int32)
    total = torch.tensor([flat.numel()], dtype=torch.int32, device=flat.device)
    cu_seqlens = torch.cat([starts, total])
    max_seqlen = int(cu_seqlens.diff().max())
    output = torch_varlen(query.transpose(1, 2)[0], key.transpose(1, 2)[0], value.transpose(1, 2)[0], cu_seqlens,
                          cu_seqlens, max_seqlen, max_seqlen, causal=True, scale=scaling)
    return output.unsqueeze(0), None


def plain_model(preset: str, device: torch.device, dtype: torch.dtype,
                attention: str = PLAIN_VARLEN) -> torch.nn.Module:
    """The preset's model from transformers, seeded, its attention torch's varlen flash kernel or `attention`."""
    AttentionInterface.register(PLAIN_VARLEN, plain_varlen_attention)
    config = model_config(ModelSpec(preset=preset))
    config._attn_implementation = attention
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)


def same_packs(data: DataSpec, vocab_size: int, batch_size: int) -> list[PackedBatch]:
    """The packs padbench's `packed` strategy makes of the same sequences."""
    sequences = load_sequences(data, vocab_size).sequences
    return [batch for batch in STRATEGIES.get("packed").batches(
        sequences, StrategySpec(name="packed"), batch_size, data.max_length, 0, 0) if isinstance(batch, PackedBatch)]


def add_attention_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attention", choices=ATTENTION_CHOICES, default=PLAIN_VARLEN,
                        help="the attention the model runs: this script's varlen function (default) or "
                             "transformers' own (flex_attention and eager apply soft-capping and sinks)")


def report(result: dict[str, Any], json_path: str | None) -> None:
    print(json.dumps(result, indent=2))
    if json_path:
        with open(json_path, "w") as file:
            json.dump(result, file, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--num-samples", type=int, default=8000)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32, help="pack budget in rows of max_length tokens")
    parser.add_argument("--warmup", type=int, default=3)
    add_attention_argument(parser)
    parser.add_argument("--json")
    args = parser.parse_args()

    device, dtype = torch.device("cuda"), torch.bfloat16
    model = plain_model(args.preset, device, dtype, args.attention).eval()
    data = DataSpec(source=args.source, tokenizer=args.tokenizer, max_length=args.max_length,
                    num_samples=args.num_samples)
    packs = same_packs(data, model.config.vocab_size, args.batch_size)
    inputs = [(pack.input_ids.to(device), pack.position_ids.to(device)) for pack in packs]

    with torch.inference_mode():
        for input_ids, position_ids in inputs[: args.warmup]:
            _ = model(input_ids=input_ids, position_ids=position_ids).logits
        torch.cuda.synchronize()
        start = time.perf_counter()
        for input_ids, position_ids in inputs:
            _ = model(input_ids=input_ids, position_ids=position_ids).logits
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start

    shape = flops.ModelShape.of(model)
    work = sum(flops.batch_flops(shape, pack).total for pack in packs)
    matmul = measure_matmul_tflops(device, dtype) * 1e12
    real_tokens = sum(pack.real_tokens for pack in packs)
    result = {"preset": args.preset, "attention": args.attention, "gpu": torch.cuda.get_device_name(),
              "torch": torch.__version__, "experts": getattr(model.config, "_experts_implementation", None),
              "packs": len(packs), "real_tokens": real_tokens, "seconds": seconds,
              "tokens_per_s": real_tokens / seconds, "matmul_tflops": matmul / 1e12,
              "mfu_vs_matmul": work / seconds / matmul,
              "peak_allocated_bytes": torch.cuda.max_memory_allocated()}
    report(result, args.json)


if __name__ == "__main__":
    main()
