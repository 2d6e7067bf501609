"""Server subcommands: `padbench server [--host H] [--port P] [--workers N] [--health-port P] [--dev]` and
`padbench token new ROLE NAME` (`padbench db …` is in `db_cli`)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from padbench.server.core.config import Settings
from padbench.server.core.security import (
    Role,
    TokenFileError,
    TokenStore,
    dev_token_store,
    generate_dev_tokens,
    new_token,
    token_file_line,
)
from padbench.specfile import format_validation_error

if TYPE_CHECKING:
    pass

# How long an idle kept-alive connection stays open: longer than a worker's idle poll (0.5 s) and its
# backoff while the server errs (5 s), so a polling worker keeps one connection; short enough that idle
# connections, which count against PADBENCH_LIMIT_CONCURRENCY, give their slot back soon.
KEEP_ALIVE_SECONDS = 15
# Connections the kernel holds for accept() while the server is busy (Linux caps it at net.core.somaxconn).
LISTEN_BACKLOG = 2048
# The most of an unfinished request line and headers h11 buffers: a connection that sends more without
# ending its headers is answered 400, which bounds the memory a slow or endless head can hold. (A head that
# arrives complete is parsed whatever its size; the proxy's large_client_header_buffers bounds those.)
# A bearer token is ~50 bytes: 16 KiB is ample for any client.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
# Server processes started by default: each costs a core under load and ~100 MB of memory, and a GPU box
# needs its cores for the jobs' data loading and the worker, so a few are enough for a team's queue.
DEFAULT_MAX_PROCESSES = 4
# The import string uvicorn's process manager imports in each process it starts.
WORKER_PROCESS_APP = "padbench.server.main:create_worker_process_app"


def default_server_processes() -> int:
    """The cores this process may use, less one left to the rest of the host, at most DEFAULT_MAX_PROCESSES."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores - 1, DEFAULT_MAX_PROCESSES))


def load_settings(**overrides: Any) -> Settings | None:
    """Settings from PADBENCH_* plus command-line overrides; None (after saying why) when they are refused."""
    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        print(f"padbench: invalid settings: {format_validation_error(error)}", file=sys.stderr)
        return None


def announce_dev_tokens(settings: Settings) -> TokenStore:
    tokens = generate_dev_tokens()
    print("padbench server --dev: generated tokens (shown once, valid until the server stops):")
    for role, token in tokens.items():
        print(f"  {role.value:<9} {token}")
    print(f"  e.g. export PADBENCH_SERVER=http://{settings.host}:{settings.port} "
          f"PADBENCH_TOKEN={tokens[next(iter(tokens))]}", flush=True)
    return dev_token_store(tokens)


def uvicorn_options(settings: Settings, log_level: str) -> dict[str, Any]:
    """How uvicorn serves the app (`uvicorn.run` keyword arguments). uvicorn has no timeout for reading a
    request's headers, so a client sending them slowly holds its connection: deployments reachable by
    untrusted clients put a reverse proxy with header and body timeouts in front (docker/nginx.conf)."""
    return {
        "host": settings.host, "port": settings.port, "log_level": log_level,
        # h11 explicitly: with httptools installed, "auto" would pick it, and it ignores the head limit.
        "http": "h11",
        "h11_max_incomplete_event_size": MAX_REQUEST_HEAD_BYTES,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "limit_concurrency": settings.limit_concurrency,  # beyond it, 503 at once rather than an unbounded queue
        "backlog": LISTEN_BACKLOG,
        **forwarded_options(settings),
    }


def forwarded_options(settings: Settings) -> dict[str, Any]:
    """X-Forwarded-For is read only from PADBENCH_TRUSTED_PROXIES. uvicorn's own default trusts it from
    loopback (or from FORWARDED_ALLOW_IPS), so any local process could name another address and escape the
    per-address limit on failed authentications, or put a forged address in the log. The list is always
    passed, even empty, so FORWARDED_ALLOW_IPS in the environment cannot widen it."""
    proxies = settings.trusted_proxy_list
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": proxies}


def run_server(args: argparse.Namespace) -> int:
    settings = load_settings(host=args.host, port=args.port, dev=args.dev or None, server_processes=args.workers,
                             health_port=args.health_port)
    if settings is None:
        return 2
    if settings.dev and server_processes(settings) > 1:
        print("padbench server: --dev generates its tokens in one process: run it with --workers 1 "
              "(the default with --dev), or give the processes a tokens file (PADBENCH_TOKENS_FILE)", file=sys.stderr)
        return 2
    if settings.health_port is None:
        return serve_api(settings, args.log_level)
    from padbench.server.health_process import beats_directory

    with beats_directory(settings) as beating:
        return serve_api(beating, args.log_level)


def serve_api(settings: Settings, log_level: str) -> int:
    """The API's processes (and the health process beside them, with a health port) until a signal stops them."""
    import uvicorn

    from padbench.server.main import create_app

    try:
        # Built here even for several processes: a bad tokens file is refused once, in one line.
        app = create_app(settings, tokens=announce_dev_tokens(settings) if settings.dev else None)
    except TokenFileError as error:
        print(f"padbench server: {error}", file=sys.stderr)
        return 2
    problem = database_problem_at_start(settings)  # applies pending migrations, once, before any process serves
    if problem is not None:
        print(f"padbench server: cannot start: {problem}", file=sys.stderr)
        return 1
    with ExitStack() as stack:
        if settings.health_port is not None:
            from padbench.server.health_process import HealthProcessFailed, health_process

            try:
                stack.enter_context(health_process(settings, log_level))
            except HealthProcessFailed as error:
                print(f"padbench server: cannot start: {error}", file=sys.stderr)
                return 1
        processes = server_processes(settings)
        if processes == 1:
            uvicorn.run(app, **uvicorn_options(settings, log_level))
        else:
            # uvicorn's process manager starts each process on the shared socket, restarts one that dies and
            # stops them all on SIGINT/SIGTERM. The command line's settings reach them through the environment.
            os.environ.update(settings_environment(settings))
            uvicorn.run(WORKER_PROCESS_APP, factory=True, workers=processes, **uvicorn_options(settings, log_level))
    return 0


def server_processes(settings: Settings) -> int:
    """--workers (PADBENCH_SERVER_PROCESSES); unset, one with --dev or a SQLite database, else what the host can
    spare.

    A SQLite file takes one write at a time whatever the processes: on 16 cores with 200 clients, four
    processes served 2.9× the requests of one, but their submits queued for the file's lock and the p99 rose to
    13–45× the median, where one process kept it within 1.6× (docs/reliability.md). PostgreSQL takes writes
    side by side.
    """
    if settings.server_processes is not None:
        return settings.server_processes
    if settings.dev or settings.database_url.startswith("sqlite"):
        return 1
    return default_server_processes()


def settings_environment(settings: Settings) -> dict[str, str]:
    """The PADBENCH_* variables that give a server process started by uvicorn the settings the command line
    gave this one (the rest it reads from the same environment)."""
    moved = {"PADBENCH_HOST": settings.host, "PADBENCH_PORT": str(settings.port)}
    if settings.health_beats_dir is not None:
        moved["PADBENCH_HEALTH_BEATS_DIR"] = str(settings.health_beats_dir)
    return moved


def database_problem_at_start(settings: Settings) -> str | None:
    from padbench.server.db.engine import Database
    from padbench.server.db.integrity import problem_at_start

    database = Database.connect(settings)
    try:
        return problem_at_start(database)
    finally:
        database.dispose()


def print_new_token(args: argparse.Namespace) -> int:
    """A fresh token, shown this once, and the line for the tokens file (which keeps only its digest)."""
    token = new_token()
    print(f"token (shown once; give it to {args.role}:{args.name}): {token}")
    print("line to add to PADBENCH_TOKENS_FILE (then restart the server):")
    print(token_file_line(Role(args.role), args.name, token))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    server = subparsers.add_parser("server", help="run the padbench API server (uvicorn)")
    server.add_argument("--host", help="address to listen on (default 127.0.0.1; PADBENCH_HOST)")
    server.add_argument("--port", type=int, help="port (default 8000; PADBENCH_PORT)")
    server.add_argument("--workers", type=int, metavar="N",
                        help="server processes serving the port (default: the cores the host can spare, at most "
                             f"{DEFAULT_MAX_PROCESSES}; 1 with --dev; PADBENCH_SERVER_PROCESSES)")
    server.add_argument("--health-port", type=int, metavar="PORT",
                        help="answer /healthz and /livez on PORT too, from a process of their own that a busy API "
                             "never delays: point load balancers and orchestrators there (PADBENCH_HEALTH_PORT)")
    server.add_argument("--dev", action="store_true", help="generate tokens for each role and print them once")
    server.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    server.set_defaults(handler=run_server)

    token = subparsers.add_parser("token", help="make tokens for the tokens file")
    token_actions = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    new = token_actions.add_parser("new", help="print a new token once and the tokens-file line holding its digest")
    new.add_argument("role", choices=[role.value for role in Role])
    new.add_argument("name", help="who the token is for (owns the jobs or workers it creates)")
    new.set_defaults(handler=print_new_token)
