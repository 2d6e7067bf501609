"""The attention kernel sweep (`kind: attention`): each kernel × sequence length measured in child processes.

- `kernels`: the kernel plugin family (SWEEP_KERNELS) and `available_sweep_kernels(device)` for capabilities;
- `inputs`: a cell's problem and its random tensors (dense, or documents packed into rows for `varlen`);
- `measure`: time, TFLOP/s, peak memory and error against float64 for one cell;
- `cells`: cells run in children, so an OOM or a sticky CUDA error costs one child;
- `matmul`: the device's measured matmul rate and environment, for context;
- `runner`: `run_attention_job(spec, progress) -> AttentionResult`.

Nothing is imported here, so listing capabilities loads only `kernels`.
"""
