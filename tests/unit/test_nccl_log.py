"""NCCL's own log names the transports of a job's links: the channel lines it writes as it sets them up are
read back into the result (never guessed), and a user's NCCL_DEBUG is left alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from padbench.contract.parallel import Interconnect, ParallelRun
from padbench.kinds.padding.ranks import parallel_lines
from padbench.worker.engine.parallel.nccl_log import (
    LOG_FILE_VARIABLE,
    TransportsSeen,
    ask_for_log,
    merged,
    parse_log,
    transports_seen,
)

# Lines in the form NCCL 2.2x writes them with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT (host and pid prefixes kept).
ONE_HOST = """\
gpu-a:1201:1290 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.5<0>
gpu-a:1201:1290 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
gpu-a:1201:1290 [0] NCCL INFO NET/IB : No device found.
gpu-a:1201:1290 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>
gpu-a:1201:1290 [0] NCCL INFO Using network Socket
gpu-a:1201:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu-a:1201:1290 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
gpu-a:1201:1290 [0] NCCL INFO Connected all rings
"""
TWO_HOSTS = """\
gpu-b:88:120 [3] NCCL INFO Using network IB
gpu-b:88:120 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0
gpu-b:88:120 [3] NCCL INFO Channel 00/0 : 11[3] -> 3[3] [receive] via NET/IB/0
gpu-b:88:120 [3] NCCL INFO Channel 01/0 : 3[3] -> 2[2] via SHM/direct/direct
"""


def test_the_channel_lines_name_each_transport_and_the_network() -> None:
    assert parse_log(ONE_HOST) == TransportsSeen(["P2P/CUMEM"], "Socket")
    assert parse_log(TWO_HOSTS) == TransportsSeen(["NET/IB", "SHM"], "IB")
    assert parse_log("gpu-a:1:2 [0] NCCL INFO cudaDriverVersion 13000\n") == TransportsSeen([], None)


def test_the_ranks_transports_are_merged_and_a_group_without_logs_claims_nothing() -> None:
    both = merged([parse_log(ONE_HOST), None, parse_log(TWO_HOSTS)])
    assert both == TransportsSeen(["NET/IB", "P2P/CUMEM", "SHM"], "IB+Socket")
    assert merged([None, None]) is None


def test_a_rank_asks_nccl_for_its_log_unless_the_user_set_nccl_debug(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", LOG_FILE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    path = ask_for_log(rank=1)
    assert path is not None and path.parent == tmp_path
    assert (os.environ["NCCL_DEBUG"], os.environ["NCCL_DEBUG_SUBSYS"], os.environ["NCCL_DEBUG_FILE"]) == \
        ("INFO", "INIT", str(path))
    assert transports_seen() is None  # NCCL has written nothing yet
    path.write_text(TWO_HOSTS)
    assert transports_seen() == TransportsSeen(["NET/IB", "SHM"], "IB")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv(LOG_FILE_VARIABLE)
    assert ask_for_log(rank=1) is None and transports_seen() is None  # the user's log stays theirs


def test_the_links_line_names_the_transports_nccl_chose() -> None:
    link = Interconnect(backend="nccl", nccl_version="2.28.9", hosts=2, across_hosts=True,
                        all_reduce_bytes=64 * 2**20, all_reduce_seconds=0.004, all_reduce_bus_gbps=31.5,
                        nccl_transports=["NET/IB", "P2P/CUMEM"], nccl_network="IB")

    class Result:  # parallel_lines reads only the result's `parallel`
        parallel = ParallelRun(gpus=16, parallelism="sharded", precision="amp", backend="nccl", interconnect=link)

    assert "  links: NCCL 2.28.9 across 2 hosts, channels via NET/IB, P2P/CUMEM (network IB), all-reduce of 64 MiB" \
        in "\n".join(parallel_lines(Result()))  # type: ignore[arg-type]
