"""Job requirements and worker offers: the capability strings the claim matches in SQL."""

from __future__ import annotations

from padbench.contract.api import Capabilities, GpuInfo
from padbench.contract.kernel_families import setting_names
from padbench.contract.kinds import JOB_KINDS, parse_job_spec
from padbench.contract.spec import JobSpecBase
from padbench.server import requirements
from padbench.server.api.errors import clean_location
from padbench.server.db.models import ALL_GPUS
from padbench.server.paths import path_errors
from padbench.server.requirements import CPU_WORK_PREFIX, gpu_capabilities, stored_gpus
from padbench.server.waiting import waiting_reason


def without_cpu_work(capabilities: set[str]) -> set[str]:
    return {capability for capability in capabilities if not capability.startswith(CPU_WORK_PREFIX)}


def job_requirements(spec: JobSpecBase) -> set[str]:
    """The job's requirements but `cpu-work:` (whose tests are their own, at the end)."""
    return without_cpu_work(requirements.job_requirements(spec))


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    """The worker's offers but `cpu-work:` (whose tests are their own, at the end)."""
    return without_cpu_work(requirements.offered_capabilities(capabilities))
def test_a_worker_offers_the_families_it_lists_never_one_read_from_a_kernel_name() -> None:
    """A worker from before the lists were per kind: its one list for every kind it runs, as before."""
    offered = offered_capabilities(Capabilities(device="cpu", kernels=["sdpa", "sdpa-block-mask", "flex-padding-mask"]))
    kinds = list(JOB_KINDS)
    assert offered == {"device:cpu", "attention:sdpa", *(f"kind:{kind}" for kind in kinds),
                       *(f"attention:{kind}:sdpa" for kind in kinds)}


def test_a_worker_offers_each_kind_only_the_families_it_runs_for_that_kind() -> None:
    """flash-attn computes padded rows and packs here but has no KV-cache path: no generate job is offered it, nor
    `flash` unless a flash family with a KV-cache kernel runs."""
    by_kind = {"padding": ["flash-attn", "flash-attn-varlen", "sdpa"], "generate": ["sdpa-kvcache", "sdpa"],
               "attention": ["naive", "flash-attn"]}
    offered = offered_capabilities(Capabilities(device="cuda", kernels=["flash-attn", "sdpa"], kernels_by_kind=by_kind))
    assert {"attention:padding:flash-attn", "attention:padding:flash", "attention:generate:sdpa"} <= offered
    assert not {"attention:generate:flash-attn", "attention:generate:flash", "attention:padding:flash-attn-varlen",
                "attention:generate:sdpa-kvcache"} & offered
    assert {"attention:flash-attn", "attention:flash", "attention:sdpa"} <= offered  # jobs queued before


def test_padding_job_requires_each_attention_family_and_pinned_device() -> None:
    spec = parse_job_spec({"device": "cuda", "attention": "flash",
                           "strategies": ["static", {"name": "packed", "attention": "flex"}]})
    assert job_requirements(spec) == {"kind:padding", "device:cuda", "attention:padding:flash",
                                      "attention:padding:flex"}


def test_a_mixture_requires_each_experts_implementation_it_names_and_a_worker_offers_those_it_lists() -> None:
    spec = parse_job_spec({"model": "tiny-olmoe", "attention": "sdpa", "experts": ["grouped_mm", "eager"],
                           "strategies": ["static", {"name": "packed", "experts": "batched_mm"}]})
    assert job_requirements(spec) == {"kind:padding", "attention:padding:sdpa", "experts:grouped_mm",
                                      "experts:eager", "experts:batched_mm"}
    assert job_requirements(parse_job_spec({"model": "tiny-olmoe"})) == {"kind:padding", "attention:padding:auto"}
    offered = offered_capabilities(Capabilities(device="cpu", kernels=["sdpa"], experts=["eager", "batched_mm"]))
    assert {"experts:eager", "experts:batched_mm"} <= offered and "experts:grouped_mm" not in offered


def test_attention_left_to_the_worker_goes_to_workers_that_pick_it_themselves() -> None:
    """A spec naming no attention (`auto`) needs a worker that settles `auto` for its kind, whatever it runs; a worker
    from before `auto` existed lists no `auto` and never claims one."""
    assert job_requirements(parse_job_spec({})) == {"kind:padding", "attention:padding:auto"}
    assert job_requirements(parse_job_spec({"kind": "generate"})) == {"kind:generate", "attention:generate:auto"}
    by_kind = {"padding": ["auto", "sdpa"], "generate": ["auto", "sdpa"], "attention": ["naive"]}
    offered = offered_capabilities(Capabilities(device="cpu", kernels=["sdpa"], kernels_by_kind=by_kind))
    assert {"attention:padding:auto", "attention:generate:auto"} <= offered
    assert "attention:padding:auto" not in offered_capabilities(Capabilities(device="cpu", kernels=["sdpa"]))


def test_generate_job_requires_its_attention_family_and_pinned_device() -> None:
    spec = parse_job_spec({"kind": "generate", "device": "cuda", "attention": "torch-flash"})
    assert job_requirements(spec) == {"kind:generate", "device:cuda", "attention:generate:torch-flash"}
    cpu = parse_job_spec({"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa"})
    assert job_requirements(cpu) == {"kind:generate", "attention:generate:sdpa"}


def test_generate_job_names_its_data_tokenizer_and_model_files() -> None:
    spec = parse_job_spec({"kind": "generate", "model": {"path": "./models/../../etc"},
                           "data": {"source": "prompts/*.jsonl", "tokenizer": "tokenizers/llama"}})
    assert [(error["loc"], error["type"]) for error in path_errors(spec)] == [
        (["spec", "data", "source"], "path_outside_roots"), (["spec", "model", "path"], "path_outside_roots")]


def test_sweep_requires_kind_only() -> None:
    assert job_requirements(parse_job_spec({"kind": "attention", "kernels": ["varlen"]})) == {"kind:attention"}


def test_any_specific_flash_offers_generic_flash() -> None:
    offered = offered_capabilities(Capabilities(device="cuda", kernels=["torch-flash-varlen", "torch-flash"],
                                                job_kinds=["padding"]))
    assert offered == {"kind:padding", "device:cuda", "attention:padding:torch-flash", "attention:padding:flash",
                       "attention:torch-flash", "attention:flash"}
    assert not {"attention:flash", "attention:padding:flash"} & offered_capabilities(Capabilities(device="cpu",
                                                                                                 kernels=["sdpa"]))


def test_error_locations_drop_body_union_tags_and_validator_labels() -> None:
    assert clean_location(("body", "spec", "padding", "batch_size", "constrained-int")) == ["spec", "batch_size"]
    assert clean_location(("body", "spec", "padding", "attention")) == ["spec", "attention"]
    assert clean_location(("query", "limit")) == ["query", "limit"]
    assert clean_location(("body", "result", "attention", "cells", 0, "kernel")) == ["result", "cells", 0, "kernel"]


def test_a_gpu_job_requires_its_gpu_text_and_a_worker_offers_what_its_gpu_name_contains() -> None:
    spec = parse_job_spec({"kind": "attention", "gpu": "H100"})
    assert job_requirements(spec) == {"kind:attention", "gpu:h100"}
    wanted = ["gpu:h100", "gpu:a100", "gpu:nvidia h100 80gb", "kind:padding"]
    h100 = Capabilities(device="cuda", gpu_name="NVIDIA H100 80GB HBM3")
    assert gpu_capabilities(h100, wanted) == {"gpu:h100", "gpu:nvidia h100 80gb"}
    assert gpu_capabilities(Capabilities(device="cpu"), wanted) == set()


def test_several_gpus_or_all_need_a_gpu_worker_unless_the_ranks_run_on_the_cpu() -> None:
    assert "device:cuda" in job_requirements(parse_job_spec({"gpus": 2, "attention": "sdpa"}))
    assert "device:cuda" in job_requirements(parse_job_spec({"gpus": "all", "attention": "sdpa"}))
    on_cpu = parse_job_spec({"gpus": 4, "device": "cpu", "dtype": "fp32", "attention": "sdpa"})
    assert job_requirements(on_cpu) == {"kind:padding", "attention:padding:sdpa"}
    assert stored_gpus(on_cpu) == 4 and stored_gpus(parse_job_spec({"gpus": "all"})) == ALL_GPUS


def test_a_worker_with_several_gpus_matches_a_gpu_text_only_when_every_gpu_does() -> None:
    def worker(*names: str) -> Capabilities:
        gpus = [GpuInfo(index=str(index), name=name, memory_bytes=0) for index, name in enumerate(names)]
        return Capabilities(device="cuda", gpu_name=names[0], gpus=gpus)

    assert gpu_capabilities(worker("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), ["gpu:h100"]) == {"gpu:h100"}
    assert gpu_capabilities(worker("NVIDIA H100 80GB HBM3", "NVIDIA A100"), ["gpu:h100"]) == set()
    assert worker("a", "b").owned_gpus == 2 and Capabilities(device="cuda").owned_gpus == 1  # listed none: one


def owning(*counts: int, labels: tuple[str, ...] = ()) -> list[Capabilities]:
    """Live workers owning these numbers of GPUs (0: a CPU worker), each carrying `labels`."""
    def worker(count: int) -> Capabilities:
        gpus = [GpuInfo(index=str(index), name="NVIDIA H100", memory_bytes=0) for index in range(count)]
        return Capabilities(device="cuda" if count else "cpu", gpus=gpus, labels=list(labels),
                            kernels=setting_names())
    return [worker(count) for count in counts]


def waits(spec: dict[str, object], workers: list[Capabilities]) -> str | None:
    return waiting_reason(parse_job_spec(spec), workers)


def test_a_queued_job_waits_with_a_reason_only_when_no_live_worker_owns_enough_gpus() -> None:
    assert waits({"gpus": 4}, owning(2, 0)) == "needs 4 GPUs; the most any live worker owns is 2"
    assert waits({"gpus": 4}, owning(4)) is None
    assert waits({"gpus": "all"}, owning(0)) == "needs a worker with GPUs (gpus: all); no live worker owns a GPU"
    assert waits({"gpus": 1, "device": "cuda"}, []) == "needs 1 GPU; no live worker owns a GPU"
    assert waits({"gpus": 1}, []) is None  # one GPU or a CPU process: any worker that comes
    assert waits({"gpus": 3, "device": "cpu"}, owning(0)) is None  # a CPU worker runs the three ranks
    assert waits({"gpus": 3, "device": "cpu"}, owning(2)) == ("needs 3 GPUs or a CPU worker; the most any live "
                                                              "worker owns is 2")


def test_a_job_across_nodes_waits_for_as_many_live_workers_that_can_run_its_share() -> None:
    across = {"gpus": 2, "nodes": 3}
    assert waits(across, owning(2, 8, 1)) == (
        "needs 3 workers at once (nodes: 3); 2 live worker(s) can run its share, or a worker handing jobs to a "
        "scheduler with 3 nodes (padbench worker --slurm) could take it whole")
    assert waits(across, owning(2, 2, 4)) is None
    assert waits(across | {"device": "cpu"}, owning(0, 0, 0)) is None  # CPU workers run the ranks as processes


def test_a_job_across_nodes_is_taken_whole_by_a_live_scheduler_worker_with_as_many_nodes() -> None:
    across = {"gpus": 2, "nodes": 3}
    slurm_of = [worker.model_copy(update={"max_nodes": nodes})
                for worker, nodes in zip(owning(2, 2), (3, 2), strict=True)]
    assert waits(across, slurm_of[:1]) is None
    # A scheduler worker with too few nodes joins no gang: it counts neither whole nor as a share.
    assert waits(across, [slurm_of[1], *owning(2, 2)]) == (
        "needs 3 workers at once (nodes: 3); 2 live worker(s) can run its share, or a worker handing jobs to a "
        "scheduler with 3 nodes (padbench worker --slurm) could take it whole")


def test_a_labelled_job_waits_for_a_live_worker_carrying_every_label_with_enough_gpus() -> None:
    wanted = {"gpus": 2, "worker_labels": ["nvlink"]}
    assert waits(wanted, []) == "needs a worker labelled 'nvlink'; no live worker carries it"
    assert waits(wanted | {"worker_labels": ["nvlink", "a", "b"]}, owning(8, labels=("nvlink",))) == (
        "needs a worker labelled 'nvlink', 'a' and 'b'; no live worker carries them all")
    # Only the workers carrying the labels count for the GPU count.
    assert waits(wanted, [*owning(8), *owning(1, labels=("nvlink",))]) == (
        "needs 2 GPUs; the most any live worker owns is 1")
    assert waits(wanted, owning(2, labels=("nvlink", "team-a"))) is None


def test_a_job_requires_its_labels_and_a_worker_offers_its_own() -> None:
    spec = parse_job_spec({"attention": "sdpa", "worker_labels": [" NVLink", "team-a", "nvlink"]})
    assert spec.worker_labels == ["nvlink", "team-a"]
    assert job_requirements(spec) == {"kind:padding", "attention:padding:sdpa", "label:nvlink", "label:team-a"}
    offered = offered_capabilities(Capabilities(device="cpu", labels=["team-a", "NVLINK"]))
    assert {"label:nvlink", "label:team-a"} <= offered


def test_a_job_no_live_worker_offers_everything_for_says_no_live_worker_can_run_it() -> None:
    cpu_sdpa = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding"])
    generate = {"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa"}
    assert waits(generate, [cpu_sdpa]) == ("no live worker can run it: the live worker lacks the generate job kind, "
                                           "attention 'sdpa' for generate jobs")
    # A GPU missing is said as the GPU count's reason, which names what the workers own.
    on_gpu = {"device": "cuda", "gpu": "H100", "attention": "sdpa"}
    assert waits(on_gpu, [cpu_sdpa]) == "needs 1 GPU; no live worker owns a GPU"
    # Named for the worker that lacks least; one that lacks nothing (though busy) takes it in its turn.
    h100 = Capabilities(device="cuda", gpu_name="NVIDIA H100 80GB HBM3", kernels=["sdpa"], job_kinds=["padding"])
    a100 = h100.model_copy(update={"gpu_name": "NVIDIA A100"})
    assert waits(on_gpu, [cpu_sdpa, a100]) == ("no live worker can run it: the nearest of them lacks "
                                               "a GPU named like 'h100'")
    assert waits(on_gpu, [cpu_sdpa, a100, h100]) is None
    assert waits(on_gpu, []) == "needs 1 GPU; no live worker owns a GPU"


def test_a_missing_attention_kernel_is_named_for_its_job_kind() -> None:
    flash = {"device": "cuda", "attention": "flash"}
    gpu_sdpa = Capabilities(device="cuda", gpu_name="NVIDIA H100", kernels=["sdpa"], job_kinds=["padding"])
    assert waits(flash, [gpu_sdpa]) == ("no live worker can run it: the live worker lacks attention 'flash' for "
                                        "padding jobs")


def test_a_gpu_sized_auto_job_is_left_to_gpus_and_cpu_workers_that_would_finish_it() -> None:
    """`device: auto` bf16 gpt2-seed over 2,000 sequences: ~4.8e15 FLOPs, ~1.6e17 of fp32 matrix work on a CPU."""
    gpu_sized = parse_job_spec({"model": "gpt2-seed", "attention": "sdpa", "data": {"num_samples": 2000}})
    assert CPU_WORK_PREFIX + "17" in requirements.job_requirements(gpu_sized)
    two_cores = Capabilities(device="cpu", kernels=["sdpa"], cpu_flops_per_job=1e11 * 7200)  # 7.2e14: power 14
    assert requirements.cpu_work_offers(two_cores) == {f"{CPU_WORK_PREFIX}{power}" for power in range(15)}
    assert waits(gpu_sized.model_dump(mode="json"), [two_cores]) == (
        "no live worker can run it: the live worker lacks a GPU: on a CPU the job's work is about 1e17 FLOPs of "
        "matrix multiplies, more than it does within its job timeout"
    )
    # A worker with GPUs, or one that measured nothing (from before), offers every power: it takes the job.
    gpu = Capabilities(device="cuda", gpu_name="NVIDIA H100", kernels=["sdpa"])
    assert waits(gpu_sized.model_dump(mode="json"), [two_cores, gpu]) is None
    assert waits(gpu_sized.model_dump(mode="json"), [Capabilities(device="cpu", kernels=["sdpa"])]) is None
    # Pinned to a device, the job asked for it: no cpu-work requirement; fp32 is cheaper on a CPU than bf16.
    pinned = parse_job_spec({"model": "gpt2-seed", "attention": "sdpa", "device": "cpu", "dtype": "fp32"})
    assert not any(need.startswith(CPU_WORK_PREFIX) for need in requirements.job_requirements(pinned))
    small = parse_job_spec({"dtype": "fp32", "attention": "sdpa", "data": {"num_samples": 100}})
    assert waits(small.model_dump(mode="json"), [two_cores]) is None
