"""Manifests load into typed variants; malformed ones fail with file, key and reason; hashes track content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.envs.manifest import ManifestError
from harness.envs.registry import Registry, UnknownIdError, default_registry, environments_root

SELFTEST = environments_root() / "selftest"


def _copy_family(tmp_path: Path) -> Path:
    root = tmp_path / "envs"
    shutil.copytree(SELFTEST, root / "selftest", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_eplb_variants_resolve_with_overrides() -> None:
    reg = default_registry()
    full, tiny = reg.get("eplb"), reg.get("eplb-tiny")
    assert full.family == tiny.family == "eplb"
    assert full.version == tiny.version
    assert tiny.tiny and not full.tiny
    assert full.hash != tiny.hash
    assert full.scorer_params["num_replicas"] == 288
    assert full.data and not tiny.data
    assert "EVOLVE-BLOCK-START" in tiny.initial_program
    assert reg.family_of("eplb-tiny") == reg.family_of("eplb")


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(UnknownIdError) as e:
        default_registry().get("eplb-tinyy")
    assert "eplb-tiny" in str(e.value)
    with pytest.raises(UnknownIdError) as e:
        default_registry().family_of("elpb")
    assert "eplb" in str(e.value)


@pytest.mark.parametrize(
    ("edit", "key", "reason"),
    [
        (('version = "1.0.0"', 'version = "one"'), "family.version", "pattern"),
        (
            ('direction = "maximize"\ncombined', 'direction = "upward"\ncombined'),
            "family.direction",
            "maximize",
        ),
        (("timeout_s = 10", "timeout_s = 10\ntimeout = 5"), "family.timeout", "Extra inputs"),
        (("y_target = 1.0", "y_target = 0.0"), "progress", "differ"),
        (('combined = "score"', 'combined = "nope"'), "<root>", "not among metrics"),
        (("[variants.selftest-tiny]", "[variants.other-tiny]"), "<root>", "must start with the family name"),
        (("tiny = true", "tiny = false"), "<root>", "tiny"),
    ],
)
def test_malformed_manifest_names_file_key_and_reason(
    tmp_path: Path, edit: tuple[str, str], key: str, reason: str
) -> None:
    root = _copy_family(tmp_path)
    path = root / "selftest" / "env.toml"
    text = path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ManifestError) as e:
        Registry(root, strict=True)
    msg = str(e.value)
    assert str(path) in msg and key in msg and reason in msg


def test_not_toml_and_missing_files_are_reported(tmp_path: Path) -> None:
    root = _copy_family(tmp_path)
    path = root / "selftest" / "env.toml"
    original = path.read_text()
    path.write_text("[family\nname=")
    with pytest.raises(ManifestError, match="not valid TOML"):
        Registry(root, strict=True)
    path.write_text(original.replace('prompt = "prompt.md"', 'prompt = "missing.md"'))
    with pytest.raises(ManifestError, match="family.prompt.*missing.md"):
        Registry(root, strict=True)


def test_content_hash_tracks_scorer_prompt_and_program_but_not_unrelated_files(tmp_path: Path) -> None:
    root = _copy_family(tmp_path)
    fam = root / "selftest"
    h0 = Registry(root).get("selftest-tiny").hash
    assert Registry(root).get("selftest-tiny").hash == h0  # deterministic
    (fam / "NOTES.txt").write_text("unrelated")
    assert Registry(root).get("selftest-tiny").hash == h0
    for name in ("scorer.py", "prompt.md", "initial_program.py", "env.toml"):
        p = fam / name
        old = p.read_text()
        p.write_text(old + "\n# changed\n")
        assert Registry(root).get("selftest-tiny").hash != h0, name
        p.write_text(old)
    assert Registry(root).get("selftest-tiny").hash == h0


def test_non_strict_registry_keeps_good_families_and_reports_the_broken_one(tmp_path: Path) -> None:
    root = _copy_family(tmp_path)
    shutil.copytree(root / "selftest", root / "broken", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "broken" / "env.toml").write_text("[family\n")
    reg = Registry(root, strict=False)
    assert reg.get("selftest-tiny").family == "selftest"
    assert "broken" in reg.errors and "not valid TOML" in str(reg.errors["broken"])
    with pytest.raises(UnknownIdError, match="manifest is broken"):
        reg.get("broken-tiny")
