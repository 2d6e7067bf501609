"""The worker side's settings: ONE pydantic-settings class, read from `PADBENCH_*` environment variables.

Command-line options override them (`padbench worker --server …`); what is refused here is refused at
start-up, with the variable's name in the message. Nothing here changes the process environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from padbench.worker.runtime.procfs import host_memory_bytes

# Two hours is several times the longest example job on an H200; a job that needs more says so explicitly.
DEFAULT_JOB_TIMEOUT_S = 2 * 3600.0
# The share of the host's memory a job's processes may hold before they are killed: the rest keeps the
# worker itself, the OS and anything else on the box alive.
DEFAULT_JOB_MEMORY_FRACTION = 0.8


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("padbench"))


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PADBENCH_", extra="ignore", frozen=True)

    # The server to pull jobs from and a worker-role token for it (`padbench worker` needs both).
    server: str | None = None
    token: SecretStr | None = None
    # Or a file holding it (first line), so the token is neither on the command line nor in `ps`.
    token_file: Path | None = None
    # The GPU index (or UUID) this worker owns; its jobs see only that GPU.
    gpu: str | None = None
    worker_name: str | None = None
    # A job's child process is killed past this wall-clock limit and the job fails, naming the limit.
    job_timeout_s: float = Field(default=DEFAULT_JOB_TIMEOUT_S, gt=0, le=7 * 24 * 3600)
    # A job's processes (resident memory, summed) are killed past this; unset: 80% of the host's memory.
    job_memory_cap_bytes: int | None = Field(default=None, ge=2**26)
    # Tokenized data sets and OOM-probe limits, kept between jobs; a shared box may point all its
    # workers at one directory.
    cache_dir: Path = Field(default_factory=default_cache_dir)
    # Directories (separated like PATH) that service jobs may read data files, tokenizers and models from;
    # spec names are relative to them. Unset: only synthetic data and hub names.
    data_roots: str = ""
    model_roots: str = ""

    @field_validator("server", "gpu", "worker_name", "token_file", mode="before")
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
        return None if value == "" else value

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
    def datasets_cache_dir(self) -> Path:
        return self.cache_dir / "datasets"
