"""Which transports NCCL chose for a job's links, read from NCCL's own log.

NCCL says how it connects each pair of ranks only in its log: with `NCCL_DEBUG=INFO` and the INIT subsystem, it
writes a line per channel and peer as it sets them up (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`,
`... [send] via NET/IB/0`, `... via SHM/direct/direct`) and the network plugin it loaded (`Using network IB`).
A rank asks NCCL to write that log to a file of its own before its communicator starts (`ask_for_log`), and reads
it back after the first collectives (`transports_seen`). Where the user set NCCL_DEBUG themselves, padbench
leaves NCCL's log where they sent it and claims nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Set by `ask_for_log` for this process: where NCCL writes, so the reader finds the same file.
LOG_FILE_VARIABLE = "PADBENCH_NCCL_LOG_FILE"
_CHANNEL = re.compile(r"Channel \d+(?:/\d+)? : \d+\[[^\]]*\] -> \d+\[[^\]]*\](?: \[(?:send|receive)\])? via "
                      r"(?P<transport>[A-Za-z0-9]+)(?:/(?P<detail>[A-Za-z0-9_]+))?")
_NETWORK = re.compile(r"Using network (?P<network>[A-Za-z0-9_]+)")
# At most this many distinct transports are kept (a group uses two or three: NVLink or PCIe, memory, network).
MAX_TRANSPORTS = 8


@dataclass(frozen=True)
class TransportsSeen:
    transports: list[str]  # `P2P/CUMEM`, `SHM`, `NET/IB`, as NCCL names them, sorted
    network: str | None  # the network plugin NCCL loaded (`IB`, `Socket`), None where it said none


def ask_for_log(rank: int) -> Path | None:
    """Have NCCL log its setup (INIT) for this process into a file of its own; None where NCCL_DEBUG is the
    user's (nothing is changed then). Call before the process group starts: NCCL reads these at its start."""
    if "NCCL_DEBUG" in os.environ:
        return None
    path = Path(tempfile.gettempdir()) / f"padbench-nccl-{os.getpid()}-rank{rank}.log"
    os.environ.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT", "NCCL_DEBUG_FILE": str(path),
                       LOG_FILE_VARIABLE: str(path)})
    return path


def parse_log(text: str) -> TransportsSeen:
    """The transports of every channel NCCL set up, and its network plugin, from its INIT log lines."""
    transports = set()
    for match in _CHANNEL.finditer(text):
        kind, detail = match.group("transport"), match.group("detail")
        transports.add(f"{kind}/{detail}" if kind in ("P2P", "NET") and detail else kind)
    network = _NETWORK.search(text)
    return TransportsSeen(sorted(transports)[:MAX_TRANSPORTS], network.group("network") if network else None)


def transports_seen() -> TransportsSeen | None:
    """What this process's NCCL log says so far; None where padbench asked for no log or NCCL wrote none."""
    path = os.environ.get(LOG_FILE_VARIABLE)
    if not path or not Path(path).is_file():
        return None
    return parse_log(Path(path).read_text(errors="replace"))


def merged(seen: list[TransportsSeen | None]) -> TransportsSeen | None:
    """Every rank's transports together; None unless some rank saw its log."""
    known = [each for each in seen if each is not None]
    if not known:
        return None
    transports = sorted({transport for each in known for transport in each.transports})[:MAX_TRANSPORTS]
    networks = sorted({each.network for each in known if each.network})
    return TransportsSeen(transports, "+".join(networks) if networks else None)
