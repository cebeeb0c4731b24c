"""KernelBench: static pre-filter, and the tiny variant scored live against its reference."""

from __future__ import annotations

import pytest
import torch

from environments.kernelbench.scorer import KernelBenchScorer
from environments.kernelbench.static_checks import static_check
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateInvalid, InfraError
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend
from harness.scoring.device import OVERRIDE_ENV

OK = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2
"""


@pytest.mark.parametrize(
    ("snippet", "check"),
    [
        ("try:\n    pass\nexcept Exception:\n    pass\n", "code_bypass"),
        ("import threading\n", "thread_injection"),
        ("from multiprocessing import Pool\n", "thread_injection"),
        ("import concurrent.futures\n", "thread_injection"),
        ("torch.cuda.Event.elapsed_time = lambda s, e: 0.0\n", "timing_event_patch"),
        ("torch.cuda.synchronize = lambda: None\n", "timing_event_patch"),
        ("import time\ntime.perf_counter_ns = lambda: 0\n", "timing_event_patch"),
        ("class T(torch.Tensor):\n    pass\n", "lazy_eval"),
        ("y = torch.Tensor._make_subclass(torch.Tensor, torch.ones(1))\n", "lazy_eval"),
    ],
)
def test_static_checks_name_the_broken_rule(snippet: str, check: str) -> None:
    static_check(OK)
    with pytest.raises(CandidateInvalid, match=check):
        static_check(OK + "\n" + snippet)


def test_comparisons_are_not_mistaken_for_patches_and_backends_are_required() -> None:
    static_check(OK + "\nimport time\nok = time.time == time.time\n")
    with pytest.raises(CandidateInvalid, match="backend"):
        static_check(OK, "cuda")
    static_check(OK + "\nfrom torch.utils.cpp_extension import load_inline\n", "cuda")
    with pytest.raises(CandidateInvalid, match="backend"):
        static_check(OK, "triton")
    with pytest.raises(CandidateInvalid, match="interface"):
        static_check("x = 1\n")
    with pytest.raises(CandidateInvalid, match="code_bypass"):
        static_check("class Model: pass\nclass ModelNew(Model):\n    pass\n")


def test_tiny_variant_scores_live_speedup_of_the_initial_program() -> None:
    v = default_registry().get("kernelbench-tiny")
    quick_v = default_registry().get("kernelbench-tiny~quick")
    with LocalBackend(workers=1, mode="warm") as b:
        res = b.evaluate(v, v.initial_program)
        quick = b.evaluate(quick_v, v.initial_program)  # the reduced mode, on the same warm worker
    assert quick.status is Status.OK, quick.reason
    assert quick.metrics["quick"] == 1.0 and res.metrics["quick"] == 0.0
    timed = [c for c in quick.cases if c.score is not None]
    assert [c.name for c in timed] == ["reference", "kernel"]
    assert all(c.reason.startswith("reduced mode (not a full evaluation)") for c in timed)
    assert res.status is Status.OK, res.reason
    m = res.metrics
    # The speedup is the ratio of the probe-scaled figures; with the OS clock the figures before
    # the scaling, and their ratio, are shown beside it.
    assert res.score == pytest.approx(m["ref_us"] / m["kernel_us"])
    if m["timing_os_cpu"] == 1.0:
        assert m["speedup_raw"] == pytest.approx(m["ref_raw_us"] / m["kernel_raw_us"])
    assert m["ref_us"] > 0 and m["kernel_us"] > 0 and m["timing_cpu"] == 1.0
    assert m["fast_1"] == float(res.score > 1.0)
    by_name = {c.name: c for c in res.cases}
    kernel = by_name["kernel"]
    # Labelled by the clock that counted: the OS (both sandboxes' cgroups), else perf_counter.
    clock = "timed by the OS" if m["timing_os_cpu"] == 1.0 else "perf_counter"
    assert kernel.score == pytest.approx(m["kernel_us"]) and clock in kernel.reason
    assert clock in by_name["reference"].reason
    assert by_name["reference"].score == pytest.approx(m["ref_us"]) and by_name["correctness0"].status == "ok"


def test_gpu_family_default_refuses_without_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    v = default_registry().get("kernelbench-tiny")
    # The tiny variant needs no GPU; the family default (A100) is refused on this machine.
    s = KernelBenchScorer(v, v.family_dir)
    s.prepare()
    assert s.device.device == "cpu"
    from dataclasses import replace

    gpu_variant = replace(v, hardware=v.hardware.model_copy(update={"gpu": "A100 SXM4 80GB"}))
    with pytest.raises(InfraError, match="needs an NVIDIA A100"):
        KernelBenchScorer(gpu_variant, v.family_dir).prepare()
