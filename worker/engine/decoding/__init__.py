"""Batched decoding with a KV cache of one region per slot, on any transformers causal LM.

- `cache`: the cache (one region of `capacity` tokens per slot and layer) and a step's plan — which
  tokens go where, which cache range each slot's queries see;
- `kernels`: attention over the cache, registered in transformers' attention interface: torch's flash
  kernel reading each slot's range in place, and masked SDPA and eager math (soft-capping, windows);
- `decoder`: runs one step (a prefill, decodes, or both in one packed forward) and replays pure decode
  steps as CUDA graphs, never reading a token back to the host.
"""
