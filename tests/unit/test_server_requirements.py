"""Job requirements and worker offers: the capability strings the claim matches in SQL."""

from __future__ import annotations

from padbench.contract.api import Capabilities
from padbench.contract.spec import parse_job_spec
from padbench.server.api.errors import clean_location
from padbench.server.requirements import job_requirements, kernel_family, offered_capabilities


def test_kernel_names_map_to_their_family() -> None:
    assert kernel_family("flash-attn-cute-varlen") == "flash-attn-cute"
    assert kernel_family("flash-attn-varlen") == "flash-attn"
    assert kernel_family("flex-padding-mask") == "flex"
    assert kernel_family("sdpa") == "sdpa"
    assert kernel_family("mystery") is None


def test_padding_job_requires_each_attention_family_and_pinned_device() -> None:
    spec = parse_job_spec({"device": "cuda", "attention": "flash",
                           "strategies": ["static", {"name": "packed", "attention": "flex"}]})
    assert job_requirements(spec) == {"kind:padding", "device:cuda", "attention:flash", "attention:flex"}


def test_sweep_requires_kind_only() -> None:
    assert job_requirements(parse_job_spec({"kind": "attention", "kernels": ["varlen"]})) == {"kind:attention"}


def test_any_specific_flash_offers_generic_flash() -> None:
    offered = offered_capabilities(Capabilities(device="cuda", kernels=["torch-flash-varlen"], job_kinds=["padding"]))
    assert offered == {"kind:padding", "device:cuda", "attention:torch-flash", "attention:flash"}
    assert "attention:flash" not in offered_capabilities(Capabilities(device="cpu", kernels=["sdpa"]))


def test_error_locations_drop_body_union_tags_and_validator_labels() -> None:
    assert clean_location(("body", "spec", "padding", "batch_size", "constrained-int")) == ["spec", "batch_size"]
    assert clean_location(("body", "spec", "padding", "attention")) == ["spec", "attention"]
    assert clean_location(("query", "limit")) == ["query", "limit"]
    assert clean_location(("body", "result", "attention", "cells", 0, "kernel")) == ["result", "cells", 0, "kernel"]
