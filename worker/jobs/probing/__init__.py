"""The OOM probe's kind-neutral parts, shared by every job kind whose `batch_size: auto` it answers.

- `search` and `curves`: the search policy (`search_limit`), pure, driven by a `probe(size) -> Reading` oracle;
- `protocol`: what a probe child reports (`ProbeMeasurement`) and what the device was (`DeviceFacts`);
- `child`: child-side helpers: the memory frame (a CPU budget by RLIMIT_AS, or the GPU's free memory), peaks,
  reading the GPU before a CUDA context exists;
- `oracle`: parent-side: one size per call in a `ChildSession`, every attempt logged for the `ProbeReport`.

A job kind supplies only its child target (what the worst case of one size is) and the request it sends.
"""
