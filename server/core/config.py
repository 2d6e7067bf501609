"""The server's settings: ONE pydantic-settings class, read from `PADBENCH_*` environment variables.

Defaults are safe to run as they are: loopback only, a SQLite file in the user's data directory, no
built-in tokens. Values that would make the server unsafe or the queue meaningless are refused here,
at start-up, with the variable's name in the message.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import platformdirs
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from padbench.contract.bounds import MAX_RETENTION_DAYS

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def default_database_url() -> str:
    data_dir = Path(platformdirs.user_data_dir("padbench", appauthor=False))
    return f"sqlite:///{data_dir / 'padbench.sqlite3'}"


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_proxies(value: str) -> list[str]:
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def check_proxy(entry: str) -> None:
    """Refuse what uvicorn would not read as an address or a network: it would keep such an entry as a
    name that never matches, so the proxy would silently go untrusted (or `*` would trust everyone)."""
    try:
        if "/" in entry:
            ipaddress.ip_network(entry)  # strict, as uvicorn reads it: `10.0.0.1/8` is refused, not widened
        else:
            ipaddress.ip_address(entry)
    except ValueError:
        raise ValueError(f"PADBENCH_TRUSTED_PROXIES: {entry!r} is not an IP address or network (e.g. 172.28.0.10, "
                         "10.0.0.0/8); name the reverse proxy in front of the server") from None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PADBENCH_", extra="ignore", frozen=True)

    database_url: str = Field(default_factory=default_database_url)
    # `role:name:token` per line; required unless the server runs with --dev.
    tokens_file: Path | None = None
    lease_seconds: int = Field(default=60, ge=5, le=24 * 3600)
    # How long past its deadline a lease must have been missed before its job goes to another worker. A
    # holder that is only unreachable (this server restarting, a network outage) beats again within it and
    # keeps its job, so a GPU run is not started twice; a dead worker's job waits this much longer.
    lease_grace_seconds: int = Field(default=120, ge=0, le=24 * 3600)
    max_attempts: int = Field(default=3, ge=1, le=100)
    # How long a gang of workers may take to fill for a job across several of them: a gang not full by then is
    # dissolved, so no worker holds its GPUs waiting for others that never come.
    gang_form_seconds: int = Field(default=300, ge=5, le=24 * 3600)
    # Results are the largest bodies (a padding result with probe logs is tens of kB); 8 MiB is ample.
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # Generated tokens printed to the console: only acceptable when nobody else can reach the port.
    dev: bool = False
    # Server processes serving the port (uvicorn's process manager); unset, `padbench server` picks the cores
    # the host can spare. Every state they share lives in the database; admission lanes, connection pools and
    # limit_concurrency are per process.
    server_processes: int | None = Field(default=None, ge=1, le=64)
    # How often the server itself returns expired leases to the queue (claims also do it first).
    reaper_interval_seconds: float = Field(default=5.0, gt=0)
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0)
    # Jobs estimated above these are refused at submission (see padbench.server.cost). The defaults fit a
    # two-hour job on one H200: 5e10 tokens is ~1.4 h at 10M tokens/s (a small model), 1e19 FLOPs ~2.8 h at
    # its 989 TFLOP/s dense bf16 peak.
    max_job_tokens: int = Field(default=50_000_000_000, ge=1)
    max_job_flops: float = Field(default=1e19, gt=0, allow_inf_nan=False)
    # Access-log the polls too (empty claims, heartbeats, health checks); off, only state changes are logged.
    log_polls: bool = False
    # One wrong (or missing) token tried this many times from one address within the window gets 429 until
    # the oldest try ages out: a person who mistyped a token is not hindered, a client stuck on a stale token
    # is slowed to a few tries a minute. A valid token is never refused, whatever its address has done.
    auth_failure_limit: int = Field(default=20, ge=1)
    auth_failure_window_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    # Admission lanes (see padbench.server.api.admission): requests of each class running at once. Workers
    # have their own lane so a crowd of pollers never delays a heartbeat. A server process spends about 4 ms of
    # its one interpreter lock on a request, so places beyond a few only add threads that wait for the lock:
    # on 16 cores with 50 and 200 back-to-back clients, 2/2/4 places against 8/4/16 served up to 25% more
    # requests, with the p99 at 1.2–1.6× the median instead of 1.5–3.3× and heartbeats' p99 at 60–190 ms instead
    # of 210–440 ms (docs/reliability.md).
    lane_worker: int = Field(default=2, ge=1, le=256)
    lane_write: int = Field(default=2, ge=1, le=256)
    lane_read: int = Field(default=4, ge=1, le=1024)
    # /healthz and /livez: their own places, so a load balancer's probe never waits behind pollers.
    lane_health: int = Field(default=4, ge=1, le=64)
    # A port on which a process of its own answers /healthz and /livez (`padbench server --health-port`). The
    # API's processes answer them too, in their health lane, but a busy process's requests hold its one
    # interpreter lock, and there a probe waits its turn at it (p99 0.2-0.4 s at 200 clients on 16 cores); the
    # health process holds no request, so its answer waits for nothing. Unset: no health process.
    health_port: int | None = Field(default=None, ge=1, le=65535)
    # The health process's /livez and /healthz answer 503 for an API process whose event loop has not run for
    # this long (a hung process, which an orchestrator should restart).
    health_stall_seconds: float = Field(default=10.0, ge=1, le=600, allow_inf_nan=False)
    # Where the API processes leave their beats for the health process: a private directory `padbench server`
    # makes when health_port is set and hands to its processes. Not a setting to give by hand.
    health_beats_dir: Path | None = None
    # A request that waits this long for a place in its lane gets 503 with Retry-After; so does one that
    # finds this many already waiting. Both mean the server is saturated, not that the request failed.
    lane_max_wait_seconds: float = Field(default=5.0, gt=0, le=300, allow_inf_nan=False)
    lane_max_queue: int = Field(default=2000, ge=1, le=1_000_000)
    # Invalid attempts from one address within the window, whatever was presented, before all of that
    # address's invalid attempts get 429: a client varying its guesses is held back as well. Room for a few
    # stale clients behind one proxy each reaching the limit above.
    auth_failure_address_limit: int = Field(default=100, ge=1)
    # Connections and requests uvicorn serves at once; beyond it, it answers 503 at once instead of queuing
    # without bound. Ample for a team: a worker polls over one kept-alive connection, a client uses a few.
    limit_concurrency: int = Field(default=1000, ge=1)
    # /healthz answers 503 when the filesystem holding a SQLite database has less free space than this: a
    # full disk refuses new jobs and results (507), so the alarm should come first.
    min_free_disk_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    # /healthz answers 503 for this long after a request met a database failure (a full disk, a corrupted
    # file): its own small probe write can still succeed on a database that refuses every submit.
    health_failure_window_seconds: float = Field(default=60.0, gt=0, le=24 * 3600, allow_inf_nan=False)
    # How often a SQLite database's pages are read through by PRAGMA quick_check, in the background; /healthz
    # reports the last verdict. It costs time in proportion to the file, so not on every probe.
    integrity_check_interval_seconds: float = Field(default=300.0, ge=1, le=7 * 24 * 3600, allow_inf_nan=False)
    # Finished jobs (succeeded, failed, cancelled) are removed, with their results, this many days after they
    # ended; unset keeps them forever. Queued and running jobs are never removed.
    retention_days: int | None = Field(default=None, ge=1, le=MAX_RETENTION_DAYS)
    # The reverse proxies whose X-Forwarded-For names the client (comma-separated addresses and networks,
    # `10.0.0.5,fd00::/64`). Empty, the header is ignored from everyone: whoever may send it decides the
    # address that failed authentications are counted and logged under, so only a proxy that replaces it
    # with the address it saw may be trusted. A string, not a list: settings would read a list as JSON.
    trusted_proxies: str = ""
    # Where a regression is posted, as JSON, when a new result is slower than a baseline's rows of the same
    # fingerprint beyond noise; unset, nothing is posted. The post follows the stored result and never delays
    # or fails it; it gives up after webhook_timeout_seconds.
    webhook_url: str | None = Field(default=None, pattern=r"^https?://", max_length=2000)
    webhook_timeout_seconds: float = Field(default=5.0, gt=0, le=60, allow_inf_nan=False)
    # The automatic check of a new result ignores slowdowns smaller than this share even when they are real
    # (`padbench baseline check --tolerance`): 0.03 flags only those of 3% or more.
    regression_tolerance: float = Field(default=0.0, ge=0, lt=1, allow_inf_nan=False)

    @field_validator("tokens_file", "retention_days", "server_processes", "health_port", "health_beats_dir",
                     mode="before")
    @classmethod
    def _empty_means_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("webhook_url", mode="before")
    @classmethod
    def _no_webhook_when_empty(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: str) -> str:
        for entry in split_proxies(value):
            check_proxy(entry)
        return value

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if self.dev and not is_loopback(self.host):
            raise ValueError(
                f"PADBENCH_HOST={self.host!r}: --dev (generated tokens) is only allowed on a loopback address"
            )
        if not self.database_url.strip():
            raise ValueError("PADBENCH_DATABASE_URL is empty")
        if self.health_port is not None and self.health_port == self.port:
            raise ValueError(f"PADBENCH_HEALTH_PORT={self.health_port}: the health process needs a port of its "
                             "own, not the API's (PADBENCH_PORT)")
        return self

    @property
    def worker_threads(self) -> int:
        """Threads (and database connections) for request work: every lane's places, plus a few for the
        reaper and for requests outside the lanes (the dashboard's pages)."""
        return self.lane_worker + self.lane_write + self.lane_read + self.lane_health + 4

    @property
    def trusted_proxy_list(self) -> list[str]:
        return split_proxies(self.trusted_proxies)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
