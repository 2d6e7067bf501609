"""docker/compose.yaml runs the server as several processes behind its nginx proxy, and the address the
server trusts X-Forwarded-For from is the proxy's own, fixed and out of every other container's reach.
(No docker daemon is needed: the files are read as the daemon would read them.)"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from padbench.cli import build_parser
from padbench.server.core.config import Settings

DOCKER = Path(__file__).resolve().parents[2] / "docker"
# Compose's `${NAME:-default}` interpolation, as `docker compose config` resolves it with NAME unset.
DEFAULTED_VARIABLE = re.compile(r"\$\{[A-Z_]+:-([^}]*)\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
    return document


def interpolated(value: str) -> str:
    return DEFAULTED_VARIABLE.sub(lambda match: match.group(1), value)


def test_the_server_runs_several_processes_with_a_command_padbench_accepts(compose: dict[str, Any]) -> None:
    command = [interpolated(part) for part in compose["services"]["server"]["command"]]
    assert command[:2] == ["padbench", "server"]
    args = build_parser().parse_args(command[1:])
    assert args.workers >= 2
    assert Settings(server_processes=args.workers).server_processes == args.workers  # within the settings' bounds


def test_the_server_trusts_forwarded_addresses_from_the_proxy_alone(compose: dict[str, Any]) -> None:
    services = compose["services"]
    proxy_address = services["proxy"]["networks"]["default"]["ipv4_address"]
    trusted = Settings(trusted_proxies=services["server"]["environment"]["PADBENCH_TRUSTED_PROXIES"])
    assert trusted.trusted_proxy_list == [proxy_address]
    pool = compose["networks"]["default"]["ipam"]["config"][0]
    assert ipaddress.ip_address(proxy_address) in ipaddress.ip_network(pool["subnet"])
    # Every other container takes its address from ip_range: none can be given the proxy's.
    assert ipaddress.ip_address(proxy_address) not in ipaddress.ip_network(pool["ip_range"])


def test_the_proxy_replaces_x_forwarded_for_and_reaches_the_servers_port(compose: dict[str, Any]) -> None:
    nginx = (DOCKER / "nginx.conf").read_text(encoding="utf-8")
    # Replaced by the peer's address, never appended to ($proxy_add_x_forwarded_for keeps what a client sent).
    assert re.search(r"proxy_set_header X-Forwarded-For \$remote_addr;", nginx)
    assert "$proxy_add_x_forwarded_for" not in nginx
    assert re.search(r"server server:8000;", nginx)
    assert compose["services"]["server"]["expose"] == ["8000"]
    assert compose["services"]["proxy"]["depends_on"]["server"] == {"condition": "service_healthy"}


def test_the_image_runs_a_health_process_and_its_health_check_asks_it() -> None:
    """A busy API delays its own /healthz (its requests hold the interpreter): the container's check goes to the
    health process's port, which the image's settings open."""
    dockerfile = (DOCKER / "server.Dockerfile").read_text(encoding="utf-8")
    assert "PADBENCH_HEALTH_PORT=8001" in dockerfile and "EXPOSE 8000 8001" in dockerfile
    check = next(line for line in dockerfile.splitlines() if line.startswith("HEALTHCHECK"))
    assert "http://127.0.0.1:8001/healthz" in check
    assert Settings(port=8000, health_port=8001).health_port == 8001
