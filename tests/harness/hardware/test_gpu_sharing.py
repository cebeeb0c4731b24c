"""A GPU memory plan's settings reach the harness: the agent's GPU is never an evaluation's, caps apply."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.evaluation.errors import InfraError
from harness.hardware.gpus import (
    AGENT_GPUS_ENV,
    EVAL_FRACTION_ENV,
    eval_memory_fraction,
    evaluation_pool,
    parse_memory_totals,
)
from harness.scoring.device import cap_memory, choose_device, slot_cuda_index


def test_the_agents_gpus_are_left_out_of_the_evaluation_pool() -> None:
    assert evaluation_pool([0, 1, 2, 3], {AGENT_GPUS_ENV: "0"}) == [1, 2, 3]
    assert evaluation_pool([0, 1, 2, 3], {AGENT_GPUS_ENV: "3, 1"}) == [0, 2]
    assert evaluation_pool([0, 1], {}) == [0, 1]
    # torch's index is the GPU's place among those this process sees, not among the evaluations'
    env = {AGENT_GPUS_ENV: "0"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(AGENT_GPUS_ENV, env[AGENT_GPUS_ENV])
        assert [slot_cuda_index(1, s, [0, 1, 2]) for s in range(4)] == [1, 2, 1, 2]
        with pytest.raises(InfraError, match="requests 2 GPUs but this machine offers 1"):
            slot_cuda_index(2, 0, [0, 1])


@pytest.mark.parametrize(("text", "value"), [("", None), ("0.25", 0.25), ("1", 1.0)])
def test_the_planned_share_is_read(text: str, value: float | None) -> None:
    assert eval_memory_fraction({EVAL_FRACTION_ENV: text}) == value


@pytest.mark.parametrize("text", ["0", "-0.1", "1.5", "nan", "half"])
def test_a_malformed_share_is_infra(text: str) -> None:
    with pytest.raises(InfraError, match=EVAL_FRACTION_ENV):
        eval_memory_fraction({EVAL_FRACTION_ENV: text})


def test_nvidia_smi_totals_are_parsed() -> None:
    text = "0, 81559\n1, 81559\nbad line\n2, [N/A]\n"
    assert parse_memory_totals(text) == {0: 81559 * 2**20, 1: 81559 * 2**20}


def _torch() -> Any:
    calls: list[tuple[float, int]] = []
    cuda = SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 2,
        get_device_name=lambda i=None: "NVIDIA H100 80GB HBM3",
        get_device_properties=lambda i: SimpleNamespace(
            multi_processor_count=132, total_memory=85_045_231_616
        ),
        set_device=lambda i: None,
        set_per_process_memory_fraction=lambda f, i: calls.append((f, i)),
    )
    return SimpleNamespace(cuda=cuda, calls=calls)


def test_the_trusted_scorer_caps_itself_on_a_shared_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = _torch()
    assert cap_memory(torch, 0, {}) is None and torch.calls == []
    assert cap_memory(torch, 1, {EVAL_FRACTION_ENV: "0.3"}) == 0.3 and torch.calls == [(0.3, 1)]
    # choose_device applies it on the slot's GPU: GPU 0 is the agent's, so slot 0 computes on cuda:1
    monkeypatch.setenv(EVAL_FRACTION_ENV, "0.2")
    monkeypatch.setenv(AGENT_GPUS_ENV, "0")
    d = choose_device("H100 SXM", torch, env={}, pool=[0, 1], slot=0)
    assert d.index == 1 and torch.calls[-1] == (0.2, 1)


_CAP_PROBE = """
import os, sys, torch
total = torch.cuda.get_device_properties(0).total_memory
if len(sys.argv) > 1:
    torch.cuda.set_per_process_memory_fraction(float(sys.argv[1]), 0)
try:
    x = torch.empty(int(total * 0.2), dtype=torch.uint8, device="cuda")
    print("allocated")
except torch.OutOfMemoryError:
    print("capped")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["call", "env", "none"])
def test_the_cap_binds_on_a_real_gpu(how: str) -> None:
    # GPU twin: 20 % of the GPU is refused under a 10 % cap, set by call (the trusted scorer) or by
    # PYTORCH_CUDA_ALLOC_CONF (the sandboxed candidate), and allowed without one.
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if how == "env":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "per_process_memory_fraction:0.1"
    argv = [sys.executable, "-c", _CAP_PROBE, *(["0.1"] if how == "call" else [])]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ("allocated" if how == "none" else "capped")
