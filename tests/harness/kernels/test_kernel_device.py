"""The variant's GPU is checked at run time; a mismatch is refused unless overridden."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.evaluation.errors import InfraError
from harness.scoring.device import OVERRIDE_ENV, choose_device


def _torch(name: str | None) -> Any:
    cuda = SimpleNamespace(
        is_available=lambda: name is not None,
        get_device_name=lambda i=0: name,
        get_device_properties=lambda i=0: SimpleNamespace(
            multi_processor_count=132, total_memory=85_045_231_616
        ),
        current_device=lambda: 0,
        device_count=lambda: int(name is not None),
        set_device=lambda i: None,
    )
    return SimpleNamespace(cuda=cuda)


def test_cpu_variant_times_on_cpu() -> None:
    d = choose_device("", _torch(None), env={}, pool=[])
    assert d.device == "cpu" and d.cpu_timing and d.metrics() == {"timing_cpu": 1.0, "gpu_override": 0.0}


def test_matching_gpu_is_used() -> None:
    d = choose_device("H100 SXM", _torch("NVIDIA H100 80GB HBM3"), env={}, pool=[0])
    assert (d.device, d.override, d.cpu_timing) == ("cuda", False, False)


@pytest.mark.parametrize("found", [None, "NVIDIA A100-SXM4-40GB"])
def test_wrong_or_missing_gpu_is_refused_naming_the_gpu(found: str | None) -> None:
    with pytest.raises(InfraError, match="needs an NVIDIA H200 SXM") as e:
        choose_device("H200 SXM", _torch(found), env={}, pool=[0])
    assert OVERRIDE_ENV in e.value.reason


def test_override_is_recorded() -> None:
    d = choose_device("H200 SXM", _torch("NVIDIA A100-SXM4-40GB"), env={OVERRIDE_ENV: "1"}, pool=[0])
    assert d.device == "cuda" and d.override and d.metrics()["gpu_override"] == 1.0
    d = choose_device("H200 SXM", _torch(None), env={OVERRIDE_ENV: "1"}, pool=[0])
    assert d.device == "cpu" and d.metrics() == {"timing_cpu": 1.0, "gpu_override": 1.0}
