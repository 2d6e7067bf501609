"""The worker side's settings: ONE pydantic-settings class, read from `PADBENCH_*` environment variables.

Command-line options override them (`padbench worker --server …`); what is refused here is refused at
start-up, with the variable's name in the message. Nothing here changes the process environment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs
from pydantic import Field, SecretStr, TypeAdapter, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from padbench.contract.bounds import WorkerLabels
from padbench.contract.parallel import MAX_GPUS
from padbench.worker.runtime.procfs import host_memory_bytes

# Two hours is several times the longest example job on an H200; a job that needs more says so explicitly.
DEFAULT_JOB_TIMEOUT_S = 2 * 3600.0
# The share of the host's memory a job's processes may hold before they are killed: the rest keeps the
# worker itself, the OS and anything else on the box alive.
DEFAULT_JOB_MEMORY_FRACTION = 0.8
KERNEL_SPEEDS_FILE_NAME = "kernel-speeds.json"


# How CUDA_VISIBLE_DEVICES names a GPU: an index, or a UUID (`GPU-…`, `MIG-…`).
GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}")


def gpu_list(text: str) -> tuple[str, ...]:
    """`0,1,3` as ("0", "1", "3"); ValueError naming what is wrong (a blank entry, a repeat, a bad name)."""
    entries = tuple(entry.strip() for entry in text.split(","))
    if "" in entries:
        raise ValueError(f"{text!r} has an empty entry; list GPU indices or UUIDs between commas (e.g. 0,1,2,3)")
    bad = [entry for entry in entries if not GPU_NAME.fullmatch(entry)]
    if bad:
        raise ValueError(f"{text!r} is not a comma-separated list of GPU indices or UUIDs (e.g. 0,1,2,3): "
                         f"{bad[0]!r}")
    if len(set(entries)) != len(entries):
        raise ValueError(f"{text!r} names a GPU twice")
    if len(entries) > MAX_GPUS:
        raise ValueError(f"{text!r} names more than {MAX_GPUS} GPUs")
    return entries


_LABELS = TypeAdapter(WorkerLabels)


def label_list(text: str) -> list[str]:
    """`nvlink, team-a` as ["nvlink", "team-a"] (lower case, each once); ValueError naming a bad label."""
    entries = [entry.strip() for entry in text.split(",")] if text.strip() else []
    if "" in entries:
        raise ValueError(f"{text!r} has an empty entry; list labels between commas (e.g. nvlink,team-a)")
    return _LABELS.validate_python(entries)


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("padbench"))


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PADBENCH_", extra="ignore", frozen=True)

    # The server to pull jobs from and a worker-role token for it (`padbench worker` needs both).
    server: str | None = None
    token: SecretStr | None = None
    # Or a file holding it (first line), so the token is neither on the command line nor in `ps`.
    token_file: Path | None = None
    # The GPUs this worker owns, as CUDA_VISIBLE_DEVICES names them (`0,1,2,3`, or UUIDs), separated by
    # commas; unset: every GPU visible to the worker. Each job sees only the GPUs it holds.
    gpus: str | None = None
    # One GPU (index or UUID): the same as `gpus` naming only it, kept for existing setups.
    gpu: str | None = None
    worker_name: str | None = None
    # Labels its operator gives this worker, separated by commas (`nvlink,team-a`): a job naming
    # `worker_labels` runs only on a worker carrying all of them. Kept as text: one variable, one list.
    worker_labels: str = ""
    # A job's child process is killed past this wall-clock limit and the job fails, naming the limit.
    job_timeout_s: float = Field(default=DEFAULT_JOB_TIMEOUT_S, gt=0, le=7 * 24 * 3600)
    # What an hour of one of this worker's GPUs costs (on a worker without GPUs, an hour of the machine):
    # stamped on every result it reports, which prices each row per million tokens. None: no cost is shown.
    price_per_gpu_hour: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    # The address other workers reach this one at, should it host the rendezvous of a job across several
    # workers (PADBENCH_NODE_ADDRESS); unset: what its host name resolves to.
    node_address: str | None = Field(default=None, max_length=255)
    # A job's processes (resident memory, summed) are killed past this; unset: 80% of the host's memory.
    job_memory_cap_bytes: int | None = Field(default=None, ge=2**26)
    # Tokenized data sets and OOM-probe limits, kept between jobs; a shared box may point all its
    # workers at one directory.
    cache_dir: Path = Field(default_factory=default_cache_dir)
    # Directories (separated like PATH) that service jobs may read data files, tokenizers and models from;
    # spec names are relative to them. Unset: only synthetic data and hub names.
    data_roots: str = ""
    model_roots: str = ""
    # The table of measured attention kernel speeds that `attention: auto` reads; unset: in the cache directory.
    kernel_speeds_file: Path | None = None

    @field_validator("server", "gpu", "gpus", "worker_name", "token_file", "kernel_speeds_file", mode="before")
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("gpus", "gpu")
    @classmethod
    def _gpu_names(cls, value: str | None) -> str | None:
        if value is not None:
            gpu_list(value)  # refused here, at start-up, with the reason
        return value

    @field_validator("worker_labels")
    @classmethod
    def _labels(cls, value: str) -> str:
        label_list(value)  # refused here, at start-up, with the reason
        return value

    @model_validator(mode="after")
    def _one_way_to_name_gpus(self) -> WorkerSettings:
        if self.gpu is not None and self.gpus is not None:
            raise ValueError("gpu and gpus both name this worker's GPUs: give one (gpus takes a list: 0,1)")
        return self

    @property
    def gpu_list(self) -> tuple[str, ...] | None:
        """The GPUs this worker was given, in order; None: every GPU visible to it."""
        given = self.gpus if self.gpus is not None else self.gpu
        return None if given is None else gpu_list(given)

    @property
    def label_list(self) -> list[str]:
        return label_list(self.worker_labels)

    @property
    def memory_cap_bytes(self) -> int:
        return self.job_memory_cap_bytes or int(host_memory_bytes() * DEFAULT_JOB_MEMORY_FRACTION)

    @property
    def data_root_paths(self) -> tuple[Path, ...]:
        return tuple(Path(part) for part in self.data_roots.split(os.pathsep) if part)

    @property
    def model_root_paths(self) -> tuple[Path, ...]:
        return tuple(Path(part) for part in self.model_roots.split(os.pathsep) if part)

    @property
    def kernel_speeds_path(self) -> Path:
        return self.kernel_speeds_file or self.cache_dir / KERNEL_SPEEDS_FILE_NAME

    @property
    def datasets_cache_dir(self) -> Path:
        return self.cache_dir / "datasets"
