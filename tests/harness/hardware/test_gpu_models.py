"""The GPU model catalog: exact model and form factor from a device's name and properties (issue 32, 8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.envs.manifest import Hardware
from harness.envs.registry import default_registry
from harness.hardware.gpu_models import GIB, MODELS, identify, is_mig, model


@pytest.mark.parametrize("key", sorted(MODELS))
def test_each_model_is_known_by_its_names_and_properties(key: str) -> None:
    m = MODELS[key]
    mid = int(sum(m.memory_gib) / 2 * GIB)
    for name in m.names:
        assert identify(name) is m and identify(name.lower()) is m
        assert identify(name, m.sms, mid) is m
        assert identify(f"{name} MIG 1g.10gb", m.sms, mid) is None


@given(st.sampled_from(sorted(MODELS)), st.integers(1, 400), st.floats(1.0, 300.0))
def test_a_name_is_its_model_only_with_fitting_properties(key: str, sms: int, gib: float) -> None:
    m = MODELS[key]
    found = identify(m.names[0], sms, int(gib * GIB))
    lo, hi = m.memory_gib
    assert (found is m) == (sms == m.sms and lo <= int(gib * GIB) / GIB <= hi)
    assert found is None or found is m


@given(st.sampled_from(["h100", "h200", "a100", "gh200"]), st.integers(1, 400), st.floats(1.0, 300.0))
def test_an_ambiguous_name_is_one_model_or_none(word: str, sms: int, gib: float) -> None:
    found = identify(f"NVIDIA {word.upper()}", sms, int(gib * GIB))
    fitting = [m for m in MODELS.values() if m.family == word and m.fits(sms, int(gib * GIB))]
    assert found is (fitting[0] if len(fitting) == 1 else None)


def test_no_device_name_belongs_to_two_models() -> None:
    names = [n.lower() for m in MODELS.values() for n in m.names]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("name", "visible", "mig"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None, True),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "", True),
        ("NVIDIA H100 80GB HBM3", "MIG-5c1d8e2f-0a3b-5c7d-9e1f-3a5b7c9d1e2f", True),
        ("NVIDIA H100 80GB HBM3", "0, MIG-GPU-abc/1/0", True),
        ("NVIDIA H100 80GB HBM3", "0,1", False),
        ("NVIDIA H100 80GB HBM3", None, False),
        ("NVIDIA H100 PCIe", "GPU-8f2b1c4e-3a0d-5b7e-9c1f-2d4e6a8b0c1d", False),
    ],
)
def test_mig_is_seen_in_the_name_or_cuda_visible_devices(name: str, visible: str | None, mig: bool) -> None:
    assert is_mig(name, visible) is mig


def test_manifests_must_name_an_exact_model() -> None:
    with pytest.raises(ValueError, match="unknown GPU model 'H100': name the exact model and form factor"):
        Hardware(gpu="H100", gpu_count=1)
    assert Hardware(gpu="H100 SXM", gpu_count=1).gpu == "H100 SXM"
    with pytest.raises(ValueError, match="H100 SXM, H100 PCIe"):
        model("A100")
    gpus = {v.id: v.hardware.gpu for v in default_registry().variants() if v.hardware.gpu}
    assert gpus["trimul-h100"] == "H100 SXM" and gpus["mla-decode-h200"] == "H200 SXM"
    assert all(g in MODELS for g in gpus.values())


@pytest.mark.gpu
def test_this_gpu_is_recognised_from_its_real_properties() -> None:
    # GPU twin: an H100 / H200 / A100 / GH200 here must be one listed model, by name and properties.
    import torch

    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    found = identify(name, props.multi_processor_count, props.total_memory)
    chips = {m.family for m in MODELS.values()}
    if is_mig(name) or not chips & set(name.lower().replace("-", " ").split()):
        pytest.skip(f"{name} is not a chip the catalog lists whole")
    assert found is not None, f"{name}: {props.multi_processor_count} SMs, {props.total_memory / GIB:.2f} GiB"
