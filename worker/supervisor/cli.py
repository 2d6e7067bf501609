"""`padbench worker --server URL --token T [--gpu N] [--name NAME] [--once]`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from types import FrameType

from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.capabilities import CapabilityError, detect_capabilities
from padbench.worker.supervisor.loop import FatalWorkerError, Supervisor, WorkerConfig

log = logging.getLogger("padbench.worker")


def add_worker_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="pull jobs from a padbench server and run them on this machine's GPU",
        description="Register with the server, then claim, run and report jobs one at a time until SIGTERM.",
    )
    parser.add_argument("--server", default=os.environ.get("PADBENCH_SERVER"),
                        help="server base URL (default: $PADBENCH_SERVER)")
    parser.add_argument("--token", default=os.environ.get("PADBENCH_TOKEN"),
                        help="a worker-role token (default: $PADBENCH_TOKEN; write --token=T if T starts with -)")
    parser.add_argument("--gpu", default=None,
                        help="GPU index (or UUID) this worker owns; jobs see only it via CUDA_VISIBLE_DEVICES")
    parser.add_argument("--name", default=None, help="worker name shown on jobs (default: HOST-gpuN)")
    parser.add_argument("--once", action="store_true", help="run one job, then exit")
    parser.add_argument("--job-timeout", type=float, default=WorkerConfig.job_timeout_s, metavar="SECONDS",
                        help="wall-clock limit for one job's child process (default: %(default).0f)")
    parser.set_defaults(handler=run_worker)


def default_name(gpu: str | None) -> str:
    host = socket.gethostname()
    return f"{host}-gpu{gpu}" if gpu is not None else host


def install_stop_handlers(stop_event: threading.Event) -> None:
    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("%s received: no new jobs; releasing the current one", signal.Signals(signum).name)
        stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def run_worker(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per heartbeat drowns the job's story
    if not args.server or not args.token:
        print("padbench worker: --server and --token (or PADBENCH_SERVER / PADBENCH_TOKEN) are required",
              file=sys.stderr)
        return 2
    if args.job_timeout <= 0:
        print("padbench worker: --job-timeout must be positive", file=sys.stderr)
        return 2
    stop_event = threading.Event()
    install_stop_handlers(stop_event)
    try:
        capabilities = detect_capabilities(args.gpu, should_stop=stop_event.is_set)
    except CapabilityError as error:
        if stop_event.is_set():
            return 0
        print(f"padbench worker: {error}", file=sys.stderr)
        return 1
    log.info("capabilities: %s", capabilities.model_dump_json())
    config = WorkerConfig(name=args.name or default_name(args.gpu), gpu=args.gpu,
                          job_timeout_s=args.job_timeout, once=args.once)
    with WorkerApi(args.server, args.token) as api:
        supervisor = Supervisor(api, config, capabilities, stop_event)
        try:
            supervisor.run()
        except FatalWorkerError as error:
            print(f"padbench worker: {error}", file=sys.stderr)
            return 1
    log.info("worker stopped after %d job(s)", supervisor.jobs_run)
    return 0
