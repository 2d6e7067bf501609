"""`padbench worker --server URL --token-file PATH [--gpus 0,1,…] [--name NAME] [--label NAME …] [--once]
[--slurm …]`."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
from types import FrameType

from pydantic import ValidationError

from padbench.contract.api import Capabilities
from padbench.contract.bounds import MAX_NAME_LENGTH
from padbench.http import TokenFileUnreadable, token_from_file
from padbench.specfile import format_validation_error
from padbench.worker.cli.sizing import cpu_matmul_flops
from padbench.worker.cli.slurm_worker import SlurmStartRefused, add_slurm_options, node_capabilities, slurm_options
from padbench.worker.runtime.settings import DEFAULT_JOB_TIMEOUT_S, WorkerSettings
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.capabilities import CapabilityError, detect_capabilities
from padbench.worker.supervisor.loop import FatalWorkerError, Supervisor, WorkerConfig
from padbench.worker.supervisor.outbox import outbox_directory
from padbench.worker.supervisor.slurm_backend import SlurmBackend, SlurmOptions

log = logging.getLogger("padbench.worker")


def add_worker_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="pull jobs from a padbench server and run them on this machine's GPU",
        description="Register with the server, then claim, run and report jobs until SIGTERM: on a worker with "
                    "GPUs, as many at once as its free GPUs allow; on a CPU worker, one at a time.",
    )
    # Defaults come from WorkerSettings (PADBENCH_* variables) when the command runs, not when it is parsed.
    parser.add_argument("--server", default=None, help="server base URL (default: $PADBENCH_SERVER)")
    parser.add_argument("--token", default=None,
                        help="a worker-role token (default: $PADBENCH_TOKEN); it shows in `ps`: prefer --token-file")
    parser.add_argument("--token-file", default=None, metavar="PATH",
                        help="a file whose first line is the token (default: $PADBENCH_TOKEN_FILE)")
    gpus = parser.add_mutually_exclusive_group()
    gpus.add_argument("--gpus", default=None, metavar="LIST",
                      help="the GPUs this worker owns, as indices or UUIDs separated by commas (0,1,2,3); it runs "
                           "jobs at once while their GPUs do not overlap, each seeing only its own through "
                           "CUDA_VISIBLE_DEVICES (default: $PADBENCH_GPUS, else every GPU visible to it)")
    gpus.add_argument("--gpu", default=None, metavar="N",
                      help="one GPU index or UUID: the same as --gpus N (default: $PADBENCH_GPU)")
    parser.add_argument("--name", default=None,
                        help="worker name shown on jobs (default: $PADBENCH_WORKER_NAME, else HOST-gpuLIST for "
                             "the GPUs given, or HOST)")
    parser.add_argument("--label", action="append", default=None, metavar="NAME", dest="labels",
                        help="a label this worker carries (repeatable: --label nvlink --label team-a); a job whose "
                             "spec names worker_labels runs only on a worker carrying all of them (default: "
                             "$PADBENCH_WORKER_LABELS, separated by commas)")
    parser.add_argument("--price-per-gpu-hour", type=float, default=None, metavar="P",
                        help="what an hour of one of its GPUs costs (on a worker without GPUs, an hour of the "
                             "machine), stamped on its results to price each row per million tokens (default: "
                             "$PADBENCH_PRICE_PER_GPU_HOUR, else no cost is shown)")
    parser.add_argument("--once", action="store_true", help="run one job, then exit")
    parser.add_argument("--job-timeout", type=float, default=None, metavar="SECONDS",
                        help="wall-clock limit for one job's child process "
                             f"(default: $PADBENCH_JOB_TIMEOUT_S, else {DEFAULT_JOB_TIMEOUT_S:.0f})")
    add_slurm_options(parser)
    parser.set_defaults(handler=run_worker)


def load_settings(args: argparse.Namespace) -> WorkerSettings | None:
    """PADBENCH_* settings with the command line's options on top; None (after saying why) when refused."""
    overrides = {"server": args.server, "token": args.token, "token_file": args.token_file, "gpu": args.gpu,
                 "gpus": args.gpus, "worker_name": args.name, "job_timeout_s": args.job_timeout,
                 "price_per_gpu_hour": args.price_per_gpu_hour,
                 "worker_labels": None if args.labels is None else ",".join(args.labels)}
    # A GPU option on the command line replaces the other one's variable, as any option replaces its own.
    if args.gpus is not None:
        overrides["gpu"] = ""
    elif args.gpu is not None:
        overrides["gpus"] = ""
    try:
        return WorkerSettings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        print(f"padbench worker: invalid settings: {format_validation_error(error)}", file=sys.stderr)
        return None


def resolved_token(settings: WorkerSettings) -> str | None:
    """The token given directly, else the one in the token file; TokenFileUnreadable says why not."""
    if settings.token is not None:
        return settings.token.get_secret_value()
    return None if settings.token_file is None else token_from_file(settings.token_file)


def default_name(gpus: tuple[str, ...] | None) -> str:
    """HOST-gpu0 (HOST-gpu0,1 for several): two workers on one host, given different GPUs, never share a name."""
    host = socket.gethostname()
    return f"{host}-gpu{','.join(gpus)}"[:MAX_NAME_LENGTH] if gpus else host


def cpu_flops_per_job(capabilities: Capabilities, settings: WorkerSettings) -> float | None:
    """What a CPU worker's CPU multiplies within a job's timeout (measured here in about 0.15 s), so the server
    hands it no `device: auto` job it would run for longer; None on a worker with GPUs."""
    if capabilities.device != "cpu":
        return None
    return cpu_matmul_flops() * settings.job_timeout_s


def install_stop_handlers(stop_event: threading.Event) -> None:
    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("%s received: no new jobs; releasing the running ones", signal.Signals(signum).name)
        stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def local_capabilities(settings: WorkerSettings, stop_event: threading.Event) -> Capabilities:
    """What this host runs: its GPUs (those given), kernels and kinds, and a CPU worker's reach per job."""
    capabilities = detect_capabilities(settings.gpu_list, should_stop=stop_event.is_set)
    return capabilities.model_copy(update={"cpu_flops_per_job": cpu_flops_per_job(capabilities, settings)})


def slurm_capabilities(options: SlurmOptions, settings: WorkerSettings, stop_event: threading.Event) -> Capabilities:
    """What a node of the Slurm partition runs, asked there."""
    capabilities, flops = node_capabilities(options, stop_event)
    reach = flops * settings.job_timeout_s if capabilities.device == "cpu" else None
    return capabilities.model_copy(update={"cpu_flops_per_job": reach})


def run_worker(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per heartbeat drowns the job's story
    settings = load_settings(args)
    if settings is None:
        return 2
    slurm: SlurmOptions | None = None
    if args.slurm:
        try:
            slurm = slurm_options(args, settings)
        except SlurmStartRefused as refused:
            print(f"padbench worker --slurm: {refused}", file=sys.stderr)
            return 2
    try:
        token = resolved_token(settings)
    except TokenFileUnreadable as error:
        print(f"padbench worker: {error}", file=sys.stderr)
        return 2
    if settings.server is None or token is None:
        print("padbench worker: --server and --token-file or --token (or PADBENCH_SERVER and PADBENCH_TOKEN_FILE "
              "or PADBENCH_TOKEN) are required", file=sys.stderr)
        return 2
    stop_event = threading.Event()
    install_stop_handlers(stop_event)
    try:
        capabilities = (local_capabilities(settings, stop_event) if slurm is None
                        else slurm_capabilities(slurm, settings, stop_event))
    except (CapabilityError, SlurmStartRefused) as error:
        if stop_event.is_set():
            return 0
        print(f"padbench worker: {error}", file=sys.stderr)
        return 1
    capabilities = capabilities.model_copy(update={"labels": settings.label_list,  # checked by the settings
                                                   "job_memory_bytes": settings.memory_cap_bytes})
    log.info("capabilities: %s", capabilities.model_dump_json())
    name = settings.worker_name or default_name(settings.gpu_list)
    config = WorkerConfig(name=name, job_timeout_s=settings.job_timeout_s,
                          job_memory_cap_bytes=settings.memory_cap_bytes, once=args.once,
                          outbox_dir=outbox_directory(settings.cache_dir, name),
                          data_roots=settings.data_root_paths, model_roots=settings.model_root_paths,
                          price_per_gpu_hour=settings.price_per_gpu_hour, node_address=settings.node_address)
    # On a cluster the nodes' own memory bounds each job: only a cap the operator set travels with it.
    backend = None if slurm is None else SlurmBackend(slurm, name, config.job_target, settings.job_timeout_s,
                                                      settings.job_memory_cap_bytes)
    with WorkerApi(settings.server, token) as api:
        supervisor = Supervisor(api, config, capabilities, stop_event, backend)
        try:
            supervisor.run()
        except FatalWorkerError as error:
            print(f"padbench worker: {error}", file=sys.stderr)
            return 1
    log.info("worker stopped after %d job(s)", supervisor.jobs_run)
    return 0
