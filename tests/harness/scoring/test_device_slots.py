"""Exact GPU model and form factor (issue 32 item 8), MIG refused, the scorer's GPU = its slot's GPU."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.evaluation.errors import InfraError
from harness.hardware.gpus import assign
from harness.scoring.device import OVERRIDE_ENV, choose_device, gpu_matches, slot_cuda_index

# What real cards report (torch.cuda.get_device_name / nvidia-smi --query-gpu=name, SMs, total
# memory in GiB) -> the model that name is (None: no model a variant may name).
REAL = {
    "NVIDIA H100 80GB HBM3": (132, 79.2, "H100 SXM"),
    "NVIDIA H100 PCIe": (114, 79.2, "H100 PCIe"),
    "NVIDIA H100 NVL": (132, 93.6, "H100 NVL"),
    "NVIDIA H200": (132, 139.8, "H200 SXM"),
    "NVIDIA H200 NVL": (132, 139.8, "H200 NVL"),
    "NVIDIA GH200 480GB": (132, 94.5, "GH200 480GB"),
    "NVIDIA A100-SXM4-80GB": (108, 79.3, "A100 SXM4 80GB"),
    "NVIDIA A100-SXM4-40GB": (108, 39.4, "A100 SXM4 40GB"),
    "NVIDIA A100 80GB PCIe": (108, 79.2, "A100 PCIe 80GB"),
    "NVIDIA A100-PCIE-40GB": (108, 39.4, "A100 PCIe 40GB"),
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb": (16, 9.8, None),
    "NVIDIA H100 80GB HBM3 MIG 3g.40gb": (60, 39.2, None),
    "NVIDIA A100-SXM4-40GB MIG 2g.10gb": (28, 9.5, None),
    "NVIDIA RTX A1000": (20, 8.0, None),
    "NVIDIA A10": (72, 22.0, None),
    "NVIDIA B200": (148, 178.4, None),
    "Tesla T4": (40, 14.6, None),
}
REQUIRED = ["H100 SXM", "H100 PCIe", "H200 SXM", "A100 SXM4 80GB", "A100 SXM4 40GB", "A100 PCIe 40GB"]


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("required", REQUIRED)
def test_gpu_names_match_exact_model_and_form_factor(name: str, required: str) -> None:
    assert gpu_matches(required, name) == (REAL[name][2] == required)
    assert gpu_matches(required, name.upper()) == (REAL[name][2] == required)


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("required", REQUIRED)
def test_choose_device_takes_only_the_named_model(name: str, required: str) -> None:
    torch = _torch([name])
    if REAL[name][2] == required:
        d = choose_device(required, torch, env={}, pool=[0], slot=0)
        assert (d.device, d.override, d.name) == ("cuda", False, name)
        assert d.label == f"{name} ({REAL[name][0]} SMs)"
        return
    with pytest.raises(InfraError, match=f"needs (an|a whole) NVIDIA {required} GPU") as e:
        choose_device(required, torch, env={}, pool=[0], slot=0)
    assert OVERRIDE_ENV in e.value.reason
    if "MIG" in name:
        assert "MIG slice" in e.value.reason


def test_substring_lookalikes_are_refused() -> None:
    torch = _torch(["NVIDIA GH200 480GB"])
    with pytest.raises(InfraError, match="needs an NVIDIA H200 SXM"):
        choose_device("H200 SXM", torch, env={}, pool=[0], slot=0)


def test_mig_uuid_in_cuda_visible_devices_is_refused() -> None:
    # A MIG instance picked by CUDA_VISIBLE_DEVICES=MIG-<uuid>, whatever name it reports.
    env = {"CUDA_VISIBLE_DEVICES": "MIG-8f2b1c4e-3a0d-5b7e-9c1f-2d4e6a8b0c1d"}
    with pytest.raises(InfraError, match="MIG slice") as e:
        choose_device("H100 SXM", _torch(["NVIDIA H100 80GB HBM3"]), env=env, pool=[0], slot=0)
    assert "MIG-8f2b" in e.value.reason


def test_override_runs_anyway_and_the_label_says_where() -> None:
    env = {OVERRIDE_ENV: "1"}
    d = choose_device("H100 SXM", _torch(["NVIDIA H100 PCIe"]), env=env, pool=[0], slot=0)
    assert d.override and d.label == "NVIDIA H100 PCIe (114 SMs)"
    d = choose_device("H100 SXM", _torch(["NVIDIA H100 80GB HBM3 MIG 1g.10gb"]), env=env, pool=[0], slot=0)
    assert d.override and "MIG" in d.label


def test_a_name_whose_properties_do_not_fit_is_refused() -> None:
    # An H100 SXM name with a MIG-sized SM count (a slice that hides its name) is not an H100 SXM.
    torch = _torch(["NVIDIA H100 80GB HBM3"], props=[(66, 39.5)])
    with pytest.raises(InfraError, match=r"66 SMs.*do not fit its name \(an H100 SXM has 132 SMs\)"):
        choose_device("H100 SXM", torch, env={}, pool=[0], slot=0)


@pytest.mark.parametrize(
    ("sms", "gib", "model"), [(132, 79.2, "H100 SXM"), (114, 79.2, "H100 PCIe"), (132, 93.6, "H100 NVL")]
)
def test_an_ambiguous_name_is_settled_by_the_properties(sms: int, gib: float, model: str) -> None:
    torch = _torch(["NVIDIA H100"], props=[(sms, gib)])
    assert not gpu_matches(model, "NVIDIA H100")  # the name alone cannot tell
    for required in ("H100 SXM", "H100 PCIe", "H100 NVL"):
        if required == model:
            assert (
                choose_device(required, torch, env={}, pool=[0], slot=0).label == f"NVIDIA H100 ({sms} SMs)"
            )
        else:
            with pytest.raises(InfraError, match=f"which is an {model}"):
                choose_device(required, torch, env={}, pool=[0], slot=0)


def test_unknown_required_model_is_infra() -> None:
    with pytest.raises(InfraError, match="unknown GPU model 'H100'"):
        choose_device("H100", _torch(["NVIDIA H100 80GB HBM3"]), env={}, pool=[0], slot=0)


def _torch(names: list[str], props: list[tuple[int, float]] | None = None) -> Any:
    """A fake torch whose GPUs are ``names`` with (SMs, GiB) from ``props`` or the table."""
    current: list[int] = [0]

    def properties(i: int) -> Any:
        sms, gib = props[i] if props else REAL.get(names[i].split(" #")[0], (0, 0.0))[:2]
        return SimpleNamespace(name=names[i], multi_processor_count=sms, total_memory=int(gib * 1024**3))

    cuda = SimpleNamespace(
        is_available=lambda: bool(names),
        device_count=lambda: len(names),
        get_device_name=lambda i=None: names[current[0] if i is None else i],
        get_device_properties=properties,
        current_device=lambda: current[0],
        set_device=lambda i: current.__setitem__(0, i),
    )
    return SimpleNamespace(cuda=cuda, current=current)


@pytest.mark.parametrize("slot", range(6))
def test_scorer_uses_its_slots_gpu_not_gpu0(slot: int) -> None:
    names = [f"NVIDIA H100 80GB HBM3 #{i}" for i in range(4)]
    torch = _torch(names)
    d = choose_device("H100 SXM", torch, env={}, slot=slot, pool=[0, 1, 2, 3])
    assert d.index == slot % 4 == torch.current[0]  # torch's "cuda" is now the candidate's GPU
    assert d.name == names[slot % 4]


def test_visible_subset_and_container_views() -> None:
    # The harness sees host GPUs 2 and 3 only (CUDA_VISIBLE_DEVICES=2,3): slot 1 has host GPU 3,
    # which torch calls cuda:1 here; a container holding only host GPU 3 calls it cuda:0.
    assert assign(1, 1, [2, 3]) == (3,) and slot_cuda_index(1, 1, [2, 3]) == 1
    assert slot_cuda_index(1, 5, [3]) == 0
    assert slot_cuda_index(2, 1, [0, 1, 2, 3]) == 2


@given(
    st.integers(1, 4), st.integers(0, 64), st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True)
)
def test_slot_index_points_at_the_sandboxes_gpu(gpu_count: int, slot: int, pool: list[int]) -> None:
    if gpu_count > len(pool):
        with pytest.raises(InfraError):
            slot_cuda_index(gpu_count, slot, pool)
        return
    assert pool[slot_cuda_index(gpu_count, slot, pool)] == assign(gpu_count, slot, pool)[0]


def test_slot_beyond_visible_gpus_is_infra() -> None:
    with pytest.raises(InfraError, match="CUDA sees 1"):
        choose_device("H100 SXM", _torch(["NVIDIA H100 80GB HBM3"]), env={}, slot=1, pool=[0, 1])
