"""Kernel families' own speed probes: the trusted reference on fixed inputs, scaled to its
reference-machine time, where the manifest gives one (CPU variants)."""

from __future__ import annotations

import pytest
import torch

from environments.kernelbench.scorer import KernelBenchScorer
from environments.mla_decode.scorer import MLAScorer
from environments.trimul.scorer import TriMulScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import InfraError
from harness.kernels.timing import fastest_probe, speed_probe

SCORERS = {"mla-decode-tiny": MLAScorer}


@pytest.mark.parametrize("vid", sorted(SCORERS))
def test_the_probe_is_the_reference_on_fixed_inputs(vid: str) -> None:
    v = default_registry().get(vid)
    s = SCORERS[vid](v, v.family_dir)
    s.prepare()
    probe = s.probe_work()
    assert probe is not None and probe.ref_s == pytest.approx(float(v.scorer_params["probe_ref_us"]) * 1e-6)
    first, again = probe.work(), probe.work()  # the same inputs each time, left as they were
    pairs = zip(first, again, strict=True) if isinstance(first, tuple) else [(first, again)]
    for a, b in pairs:
        assert torch.equal(a, b)
    p = speed_probe(work=probe)
    assert 0 < fastest_probe(probe) <= p and probe.key.startswith(f"{vid}/")  # kept per workload


def test_a_bad_reference_time_is_an_infra_error() -> None:
    v = default_registry().get("mla-decode-tiny")
    s = MLAScorer(v, v.family_dir)
    s.prepare()
    s.params = {**s.params, "probe_ref_us": "fast"}
    with pytest.raises(InfraError, match="probe_ref_us"):
        s.probe_work()


def test_trimul_keeps_the_matmul_probe() -> None:
    """Its reference as the probe did not steady it (CV 4.9-10.4 % against 3.6-7.4 %, docs/trust-model.md)."""
    v = default_registry().get("trimul-tiny")
    s = TriMulScorer(v, v.family_dir)
    s.prepare()
    assert "probe_ref_us" not in v.scorer_params and s.probe_work() is None


def test_kernelbench_keeps_the_matmul_probe() -> None:
    """Its speedup is a ratio of two sessions timed alike: no reference time to scale to."""
    v = default_registry().get("kernelbench-tiny")
    s = KernelBenchScorer(v, v.family_dir)
    s.prepare()
    assert "probe_ref_us" not in v.scorer_params
    assert not hasattr(s, "probe_work")  # DriverParams.probe stays None: the matmul probe
