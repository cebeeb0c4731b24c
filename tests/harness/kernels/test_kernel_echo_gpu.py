"""The trusted echo computes on its worker slot's GPU, not on GPU 0 (issue 32, finding 9)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.kernels import session as session_mod
from harness.kernels.echo import bind_gpu
from harness.kernels.session import DriverParams, KernelSession
from harness.scoring.device import choose_device


def _torch(count: int, calls: list[int]) -> Any:
    cuda = SimpleNamespace(
        is_available=lambda: True,
        get_device_name=lambda i=0: "NVIDIA H100 80GB HBM3",
        get_device_properties=lambda i=0: SimpleNamespace(
            multi_processor_count=132, total_memory=80 * 1024**3
        ),
        current_device=lambda: calls[-1] if calls else 0,
        device_count=lambda: count,
        set_device=calls.append,
    )
    return SimpleNamespace(cuda=cuda)


@pytest.mark.parametrize("slot", [0, 1, 2, 3, 5])
def test_slot_k_echo_is_given_and_binds_the_slots_gpu(slot: int) -> None:
    """Scorer's device choice -> the echo's parameters -> the CUDA device the echo makes current."""
    scorer_calls: list[int] = []
    d = choose_device("H100 SXM", _torch(4, scorer_calls), env={}, slot=slot, pool=[0, 1, 2, 3])
    assert d.index == slot % 4 and scorer_calls == [slot % 4]
    params = DriverParams(entry="custom_kernel", device=d.device, cuda_index=d.index)
    assert "cuda_index" not in params.driver_json()  # the sandbox sees only its own GPU, as cuda:0
    echo_calls: list[int] = []
    assert bind_gpu(_torch(4, echo_calls), params.echo_json()) == slot % 4
    assert echo_calls == [slot % 4]


def test_a_container_pool_maps_host_numbers_to_cuda_indices() -> None:
    """Host GPUs 4-7 seen by a container: slot 1's GPU is host 5, CUDA index 1 there and in the echo."""
    d = choose_device("H100 SXM", _torch(4, []), env={}, slot=1, pool=[4, 5, 6, 7])
    calls: list[int] = []
    bind_gpu(_torch(4, calls), DriverParams(entry="f", device="cuda", cuda_index=d.index).echo_json())
    assert calls == [1]


def test_bind_gpu_refuses_an_unseen_index_and_leaves_cpu_alone() -> None:
    with pytest.raises(ValueError, match="cuda:3"):
        bind_gpu(_torch(2, []), {"device": "cuda", "cuda_index": 3})
    calls: list[int] = []
    assert bind_gpu(_torch(2, calls), {"device": "cpu", "cuda_index": 1}) is None and calls == []


def test_the_session_starts_its_echo_with_the_slot_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []

    class Stop(Exception):
        pass

    def fake_echo(params: dict[str, Any], *a: Any, **kw: Any) -> Any:
        seen.append(params)
        raise Stop

    monkeypatch.setattr(session_mod, "EchoCalibrator", fake_echo)
    cand = SimpleNamespace(workdir=tmp_path, source="", remaining=lambda: 10.0)
    s = KernelSession(cand, DriverParams(entry="custom_kernel", device="cuda", cuda_index=3))
    with pytest.raises(Stop):
        s.__enter__()
    assert seen and seen[0]["cuda_index"] == 3 and seen[0]["device"] == "cuda"


@pytest.mark.gpu
def test_the_echo_process_runs_on_the_last_gpu() -> None:
    """GPU twin: a real echo process started for the last GPU reports that GPU as its device."""
    import torch

    from harness.kernels.batch import pack
    from harness.kernels.calibrate import EchoCalibrator

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    index = torch.cuda.device_count() - 1
    params = DriverParams(entry="custom_kernel", device="cuda", cuda_index=index).echo_json()
    request, arrays = pack([[torch.ones(8)]], torch)
    request["expect"] = [["float32", [8]]]
    with EchoCalibrator(params, reps=1) as echo:
        assert echo.overhead(request, arrays).samples == 1
        assert echo.cuda_index == index
