# Sourced by the several-GPU scripts: the environment every rank inherits, the machine's versions in the log, and
# the code corpus the 8B runs read.
# Usage: source scripts/gpu_host_setup.sh LOG   (LOG: the file the versions go to; its folder is created)

# NVLink multicast stays off on shared hosts (it can take the host's GPUs out of service); every rank inherits it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$(dirname "$1")" .data
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader > "$1" 2>&1
nvidia-smi topo -m >> "$1" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "transformers", transformers.__version__)' >> "$1"
[[ -f .data/code.jsonl ]] || python3 scripts/code_corpus.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" .data/code.jsonl
