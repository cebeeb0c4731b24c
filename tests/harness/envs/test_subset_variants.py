"""Derived subset ids: resolution, errors, hashes, image identity and prepared-scorer reuse."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.envs.registry import (
    Registry,
    SubsetIdError,
    UnknownIdError,
    default_registry,
    derive_subset,
    environments_root,
)
from harness.envs.subset import SubsetRequest
from harness.images.naming import env_image_tag
from harness.sandbox.modal_backend.spec import image_tag as modal_image_tag
from harness.sandbox.worker import WorkerState

SUBSET_FAMILIES = {
    "eplb-tiny": "eplb",
    "multi-evolve-tiny": "multi_evolve",
    "ahc039-tiny": "ahc039",
    "ahc058-tiny": "ahc058",
    "llm-sr-tiny": "llm_sr",
}


def _selftest_root(tmp_path: Path, subset_unit: str | None) -> Path:
    root = tmp_path / "envs"
    shutil.copytree(
        environments_root() / "selftest", root / "selftest", ignore=shutil.ignore_patterns("__pycache__")
    )
    if subset_unit is not None:
        manifest = root / "selftest" / "env.toml"
        text = manifest.read_text()
        manifest.write_text(text.replace("preload = []\n", f'preload = []\nsubset_unit = "{subset_unit}"\n'))
    return root


@pytest.mark.parametrize("base_id", sorted(SUBSET_FAMILIES))
def test_derived_id_resolves_to_the_base_with_a_subset_parameter(base_id: str) -> None:
    reg = default_registry()
    base = reg.get(base_id)
    derived = reg.get(f"{base_id}~subset-123-4")
    assert base.subset_unit and base.family == SUBSET_FAMILIES[base_id]
    assert base.base_id == base.id and base.base_hash == base.hash and base.subset is None
    assert derived.id == f"{base_id}~subset-123-4"
    assert derived.base_id == base_id and derived.base_hash == base.hash
    assert derived.scorer_params == {**base.scorer_params, "subset": {"seed": 123, "size": 4}}
    assert derived.subset == SubsetRequest(123, 4)
    assert derived.hash != base.hash and len(derived.hash) == 16
    for field in ("family", "version", "hardware", "timeout_s", "data", "image", "language", "metrics"):
        assert getattr(derived, field) == getattr(base, field), field
    assert derived.base() == base
    assert base.base() is base


def test_hash_depends_on_seed_and_size_and_is_stable() -> None:
    reg = default_registry()
    hashes = {reg.get(f"eplb-tiny~subset-{s}-{k}").hash for s in (1, 2) for k in (1, 2)}
    assert len(hashes) == 4
    assert reg.get("eplb-tiny~subset-1-2").hash == Registry().get("eplb-tiny~subset-1-2").hash


def test_image_tag_and_recipe_are_the_base_variants() -> None:
    reg = default_registry()
    base, derived = reg.get("eplb-tiny"), reg.get("eplb-tiny~subset-7-3")
    assert env_image_tag(derived) == env_image_tag(base)
    assert "~" not in env_image_tag(derived)
    assert modal_image_tag(derived) == modal_image_tag(base)


def test_base_identity_follows_the_variants_own_fields() -> None:
    base = default_registry().get("eplb-tiny")
    ghost = dataclasses.replace(base, hash="0" * 16)  # not derived: its own hash names its image
    assert ghost.base_hash == "0" * 16 and env_image_tag(ghost) != env_image_tag(base)
    assert base.derived_from is None
    assert default_registry().get("eplb-tiny~subset-1-1").derived_from == (base.id, base.hash)


def test_derived_ids_are_not_listed() -> None:
    reg = default_registry()
    reg.get("eplb-tiny~subset-1-2")
    assert not [i for i in reg.ids() if "~" in i]
    assert all("~" not in v.id for v in reg.variants())


def test_unknown_base_id_suggests_close_matches() -> None:
    with pytest.raises(UnknownIdError, match="did you mean: eplb-tiny") as e:
        default_registry().get("eplb-tinyy~subset-1-2")
    assert not isinstance(e.value, SubsetIdError)


def test_malformed_suffix_is_an_unknown_id_and_a_value_error() -> None:
    with pytest.raises(SubsetIdError, match="malformed subset suffix") as e:
        default_registry().get("eplb-tiny~subset-1-0")
    assert isinstance(e.value, UnknownIdError) and isinstance(e.value, ValueError)


def test_family_without_subset_unit_cannot_score_subsets(tmp_path: Path) -> None:
    reg = Registry(_selftest_root(tmp_path, None))
    assert reg.get("selftest-tiny").subset_unit == ""
    with pytest.raises(SubsetIdError, match="family 'selftest' cannot score subsets"):
        reg.get("selftest-tiny~subset-1-2")


def test_subset_unit_in_any_root_enables_subsets(tmp_path: Path) -> None:
    reg = Registry(_selftest_root(tmp_path, "probes"))
    v = reg.get("selftest-tiny~subset-5-1")
    assert v.subset_unit == "probes" and v.base_id == "selftest-tiny"


def test_a_subset_of_a_subset_is_refused() -> None:
    derived = default_registry().get("eplb-tiny~subset-1-2")
    with pytest.raises(SubsetIdError, match="already a subset variant"):
        derive_subset(derived, SubsetRequest(3, 1))


def test_worker_prepares_once_per_base_and_rebinds_subsets() -> None:
    reg = default_registry()
    state = WorkerState(slot=0)
    try:
        base = state.scorer(reg.get("eplb-tiny"))
        a = state.scorer(reg.get("eplb-tiny~subset-1-2"))
        b = state.scorer(reg.get("eplb-tiny~subset-2-3"))
        assert state.scorer(reg.get("eplb-tiny")) is base
        assert a is not base and b is not a
        assert a.windows is base.windows  # type: ignore[attr-defined]  # prepared data is shared
        assert a.params["subset"] == {"seed": 1, "size": 2} and "subset" not in base.params
        assert a.variant.id == "eplb-tiny~subset-1-2" and base.variant.id == "eplb-tiny"
        with pytest.raises(ValueError, match="does not derive from"):
            base.rebind(reg.get("ahc039-tiny~subset-1-2"))
    finally:
        state.close()


@pytest.mark.parametrize("base_id", ["trimul-h100", "trimul-tiny", "mla-decode-h200", "kernelbench-tiny"])
def test_quick_id_derives_the_kernel_reduced_mode(base_id: str) -> None:
    """``<id>~quick``: the base with ``quick`` set, its own hash, the base's image; never ranked."""
    from harness.envs.subset import is_reduced_id, is_subset_id

    reg = default_registry()
    base = reg.get(base_id)
    v = reg.get(base_id + "~quick")
    assert v.id == base_id + "~quick" and v.scorer_params["quick"] is True
    assert v.hash != base.hash and (v.base_id, v.base_hash) == (base.id, base.hash)
    assert v.base() == base and v.subset is None
    assert is_reduced_id(v.id) and not is_subset_id(v.id) and not is_reduced_id(base.id)


@pytest.mark.parametrize(
    "bad", ["eplb-tiny~quick", "trimul-tiny~subset-0-1~quick", "~quick", "trimul-tiny~quick~quick"]
)
def test_quick_is_refused_where_there_is_no_reduced_mode(bad: str) -> None:
    with pytest.raises(SubsetIdError):
        default_registry().get(bad)


def test_doctor_reduces_kernel_variants_to_their_quick_mode() -> None:
    from harness.doctor.gpu import _reduced

    reg = default_registry()
    assert _reduced(reg, reg.get("trimul-h100")).id == "trimul-h100~quick"
    assert _reduced(reg, reg.get("eplb-tiny")).id == "eplb-tiny~subset-0-1"
