"""`batch_size: auto` in a generate job: the most sequences decoding at once whose KV cache and step fit.

- `probe`: the parent side, run before the job's model is built: the search over sizes in child processes;
- `child`: the child target that tries one size: the cache allocated, then a job's worst steps;
- `protocol`: the request a child gets (torch-free, so it unpickles before the device is touched).
"""
