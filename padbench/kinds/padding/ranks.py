"""How a job on several GPUs is reported: one header line on how it spread, and each row's ranks."""

from __future__ import annotations

from typing import Any

from padbench.contract.parallel import ParallelRun, RankFigures, RankShares
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel


def _gib(count: int | None) -> str:
    return "—" if count is None else f"{count / 2**30:.1f} GiB"


def parallel_lines(result: PaddingResult) -> list[str]:
    """`on 2 GPUs: sharded (FSDP2), amp, nccl`, the tokens/s in the table being the whole group's."""
    run = result.parallel
    if run is None:
        return []
    how = f"sharded (FSDP2{_overlap(run)})" if run.parallelism == "sharded" else run.parallelism
    line = (f"on {run.gpus} {'GPUs' if run.backend == 'nccl' else 'processes'}: {how}, weights in {run.precision}, "
            f"{run.backend or 'no process group'}; tokens/s and MFU are the whole group's")
    return [line, *_node_lines(run), *_link_lines(run)]


def _node_lines(run: ParallelRun) -> list[str]:
    """`  node 0: worker gpu-box-1 on host-a, ranks 0-7`, one line per node of a job across several."""
    return [f"  node {node.node_rank}: {f'worker {node.worker} on ' if node.worker else ''}{node.host}, ranks "
            f"{', '.join(str(rank) for rank in node.ranks)}" for node in run.nodes]


def _link_lines(run: ParallelRun) -> list[str]:
    """The all-reduce the ranks timed as the job started, and whether their group spanned hosts."""
    link = run.interconnect
    if link is None:
        return []
    library = f"NCCL {link.nccl_version}" if link.nccl_version else link.backend
    spans = f"across {link.hosts} hosts" if link.across_hosts else "on one host"
    via = f", channels via {', '.join(link.nccl_transports)}" if link.nccl_transports else ""
    network = f" (network {link.nccl_network})" if link.nccl_network else ""
    return [f"  links: {library} {spans}{via}{network}, all-reduce of {link.all_reduce_bytes / 2**20:.0f} MiB per "
            f"rank in {link.all_reduce_seconds * 1e3:.1f} ms: {link.all_reduce_bus_gbps:.2f} GB/s bus bandwidth"]


def _overlap(run: ParallelRun) -> str:
    """`, reshards after forward, explicit prefetch`: the FSDP2 settings the sharded layers held."""
    parts = []
    if run.reshard_after_forward is not None:
        parts.append("reshards after forward" if run.reshard_after_forward else "keeps gathered weights for backward")
    if run.prefetch is not None:
        parts.append("explicit prefetch" if run.prefetch else "implicit prefetch")
    return "".join(f", {part}" for part in parts)


def _rank_line(row: StrategyResult) -> list[str]:
    shares = row.per_rank
    if shares is None:
        return []
    per_gpu = "—" if shares.tokens_per_s_per_gpu is None else f"{shares.tokens_per_s_per_gpu:,.0f}"
    left = f", {shares.batches_left_out} batches left out to step together" if shares.batches_left_out else ""
    lines = [f"{row.label} / {compare_kernel(row)}: {per_gpu} tokens/s per GPU{_balance(shares)}{_exposed(shares)}"
             f"{left}"]
    for rank in shares.ranks:
        collective = _collective_cell(rank)
        computed = "" if rank.computed_tokens is None else f" ({rank.computed_tokens:,} computed)"
        lines.append(f"  rank {rank.rank} ({rank.device}): {rank.real_tokens:,} tokens{computed} in {rank.batches} "
                     f"steps, peak {_gib(rank.peak_allocated_bytes)}, {collective}")
    return lines


def _collective_cell(rank: RankFigures) -> str:
    """`12.0 ms/step in collectives, 1.5 ms exposed (0.8% of a step)`: what no compute hid, beside the total."""
    total, exposed = rank.collective_seconds_per_step, rank.exposed_collective_seconds_per_step
    if total is None:
        return "—"
    if exposed is None:
        return f"{total * 1e3:.1f} ms/step in collectives"
    share = _exposed_share(rank)
    return f"{total * 1e3:.1f} ms/step in collectives, {exposed * 1e3:.1f} ms exposed" + (
        "" if share is None else f" ({share:.1%} of a step)")


def _exposed_share(rank: RankFigures) -> float | None:
    """The share of the rank's measured step its exposed communication took."""
    exposed = rank.exposed_collective_seconds_per_step
    step = rank.measured_seconds / rank.batches if rank.batches else 0.0
    return None if exposed is None or step <= 0 else exposed / step


def _exposed(shares: RankShares) -> str:
    """`, communication exposed at most 3.1% of a step`: the rank whose compute hid the least."""
    found = [share for rank in shares.ranks if (share := _exposed_share(rank)) is not None]
    return f", communication exposed at most {max(found):.1%} of a step" if found else ""


def _balance(shares: RankShares) -> str:
    """`, work imbalance 0.4%, at most 37 tokens apart in a step`, from what the result holds."""
    parts = []
    if shares.work_imbalance is not None:
        parts.append(f"work imbalance {shares.work_imbalance:.1%}")
    if shares.largest_step_gap_tokens is not None:
        parts.append(f"at most {shares.largest_step_gap_tokens:,} tokens apart in a step")
    return "".join(f", {part}" for part in parts)


def rank_lines(result: PaddingResult) -> list[str]:
    """Each measured row's ranks: tokens, steps, peak memory and time in collectives."""
    lines = [line for row in result.strategies for line in _rank_line(row)]
    return ["per rank:", *(f"  {line}" for line in lines)] if lines else []


def rank_fields(row: StrategyResult) -> dict[str, Any]:
    shares = row.per_rank
    return {
        "tokens_per_s_per_gpu": shares.tokens_per_s_per_gpu if shares else None,
        "ranks": len(shares.ranks) if shares else 1,
        "batches_left_out": shares.batches_left_out if shares else 0,
        "work_imbalance": shares.work_imbalance if shares else None,
        "largest_step_gap_tokens": shares.largest_step_gap_tokens if shares else None,
        "max_rank_peak_allocated_bytes": max((r.peak_allocated_bytes or 0 for r in shares.ranks), default=None)
        if shares and any(r.peak_allocated_bytes is not None for r in shares.ranks) else None,
        **_exposed_fields(shares),
    }


def _exposed_fields(shares: RankShares | None) -> dict[str, Any]:
    """The most any rank spent in collectives per step, and the most any rank's compute left exposed."""
    ranks = [] if shares is None else shares.ranks
    totals = [seconds for r in ranks if (seconds := r.collective_seconds_per_step) is not None]
    exposed = [seconds for r in ranks if (seconds := r.exposed_collective_seconds_per_step) is not None]
    return {"max_rank_collective_seconds_per_step": max(totals, default=None),
            "max_rank_exposed_collective_seconds_per_step": max(exposed, default=None)}
