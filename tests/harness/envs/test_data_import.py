"""``bench data import``: sha256-checked, all-or-nothing installs from a local directory or mirror."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from evobench.cli.main import main as bench
from harness.envs.data import ChecksumError, family_data_dir, require_data, sha256_file
from harness.envs.data_import import DataImportError, import_data
from harness.envs.registry import Registry, UnknownIdError, environments_root
from harness.images.fetch_data import main as fetch_data

SET_FILES = {"a/one.txt": b"one\n", "a/two.txt": b"two\n", "three.txt": b"three\n"}
PINNED = b"pinned table\n"
UNPINNED = b"unpinned table, checksum recorded on first install\n"


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


MANIFEST_TAIL = f"""
[data.set]
url = "https://example.invalid/set"
filename = "set"

[data.set.files]
{chr(10).join(f'"{rel}" = "{_sha(body)}"' for rel, body in SET_FILES.items())}

[data.pinned]
url = "https://example.invalid/pinned.csv"
filename = "pinned.csv"
sha256 = "{_sha(PINNED)}"

[data.unpinned]
url = "https://example.invalid/unpinned.csv"
filename = "unpinned.csv"

[variants.minidata-a]
description = "needs the file set and the pinned table"
data = ["set", "pinned"]

[variants.minidata-b]
description = "needs the unpinned table"
data = ["unpinned"]
"""


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """An environments root with the selftest family plus ``minidata``, which has three sources."""
    root = tmp_path / "envs"
    selftest = environments_root() / "selftest"
    shutil.copytree(selftest, root / "selftest", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(selftest, root / "minidata", ignore=shutil.ignore_patterns("__pycache__"))
    manifest = (root / "minidata" / "env.toml").read_text()
    manifest = manifest.replace('name = "selftest"', 'name = "minidata"').replace(
        "[variants.selftest-tiny]", "[variants.minidata-tiny]"
    )
    (root / "minidata" / "env.toml").write_text(manifest + MANIFEST_TAIL)
    return Registry(root)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache" / "minidata"


def _write_source_dir(
    d: Path, *, skip: tuple[str, ...] = (), overrides: dict[str, bytes] | None = None
) -> Path:
    files = {f"set/{rel}": body for rel, body in SET_FILES.items()}
    files.update({"pinned.csv": PINNED, "unpinned.csv": UNPINNED})
    files.update(overrides or {})
    for rel, body in files.items():
        if rel not in skip:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_bytes(body)
    return d


def _installed(cache: Path) -> list[str]:
    return (
        sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.exists() else []
    )


def test_good_dir_installs_verifies_and_records(tmp_path: Path, registry: Registry, cache: Path) -> None:
    src = _write_source_dir(tmp_path / "mirror")
    report = import_data("minidata", src, registry=registry)
    assert sorted(report.installed) == sorted(
        [f"set/{r}" for r in SET_FILES] + ["pinned.csv", "unpinned.csv"]
    )
    assert report.unchanged == [] and report.recorded == {"unpinned.csv": _sha(UNPINNED)}
    for rel, body in SET_FILES.items():
        assert (cache / "set" / rel).read_bytes() == body
    assert (cache / "pinned.csv").read_bytes() == PINNED
    assert json.loads((cache / "recorded_sha256.json").read_text()) == {"unpinned.csv": _sha(UNPINNED)}
    for vid in ("minidata-a", "minidata-b"):
        assert require_data(registry.get(vid)) == family_data_dir("minidata")
    assert not [p for p in cache.rglob(".import-*")]


def test_bad_checksum_installs_nothing(tmp_path: Path, registry: Registry, cache: Path) -> None:
    src = _write_source_dir(tmp_path / "mirror", overrides={"set/three.txt": b"tampered\n"})
    with pytest.raises(ChecksumError, match=r"three\.txt.*pinned in the manifest.*Nothing was installed"):
        import_data("minidata", src, registry=registry)
    assert _installed(cache) == []  # the good files staged before the bad one are gone too


def test_missing_file_is_named_and_nothing_installed(tmp_path: Path, registry: Registry, cache: Path) -> None:
    src = _write_source_dir(tmp_path / "mirror", skip=("set/a/two.txt",))
    with pytest.raises(DataImportError, match=r"lacks 1 of the 5 files minidata needs: set/a/two\.txt"):
        import_data("minidata", src, registry=registry)
    assert _installed(cache) == []
    with pytest.raises(DataImportError, match="no such directory"):
        import_data("minidata", tmp_path / "nowhere", registry=registry)


def test_partial_dir_imports_by_variant(tmp_path: Path, registry: Registry, cache: Path) -> None:
    src = _write_source_dir(tmp_path / "mirror", skip=("unpinned.csv",))
    with pytest.raises(DataImportError, match="import one by its id: minidata-a") as e:
        import_data("minidata", src, registry=registry)
    assert "unpinned.csv" in str(e.value) and _installed(cache) == []
    report = import_data("minidata-a", src, registry=registry)
    assert len(report.installed) == 4 and not report.recorded
    assert "unpinned.csv" not in _installed(cache)
    require_data(registry.get("minidata-a"))


def test_reimport_is_idempotent_and_enforces_the_recorded_checksum(
    tmp_path: Path, registry: Registry, cache: Path
) -> None:
    src = _write_source_dir(tmp_path / "mirror")
    import_data("minidata", src, registry=registry)
    inodes = {rel: os.stat(cache / rel).st_ino for rel in _installed(cache)}
    again = import_data("minidata", src, registry=registry)
    assert again.installed == [] and len(again.unchanged) == 5 and again.recorded == {}
    assert {rel: os.stat(cache / rel).st_ino for rel in _installed(cache)} == inodes  # not rewritten
    # A different unpinned table no longer matches what the first import recorded.
    (src / "unpinned.csv").write_bytes(b"another table\n")
    with pytest.raises(ChecksumError, match="recorded on its first fetch or import"):
        import_data("minidata", src, registry=registry)
    assert (cache / "unpinned.csv").read_bytes() == UNPINNED
    # A corrupted cache file is repaired from a good copy.
    (src / "unpinned.csv").write_bytes(UNPINNED)
    (cache / "pinned.csv").write_bytes(b"bit rot\n")
    repaired = import_data("minidata", src, registry=registry)
    assert repaired.installed == ["pinned.csv"] and (cache / "pinned.csv").read_bytes() == PINNED
    # A good file in the cache does not excuse a bad one in the import directory.
    (src / "pinned.csv").write_bytes(b"tampered\n")
    with pytest.raises(ChecksumError):
        import_data("minidata", src, registry=registry)


def test_layouts_mirror_root_and_flat_file_set(tmp_path: Path, registry: Registry, cache: Path) -> None:
    _write_source_dir(tmp_path / "root-mirror" / "minidata")
    assert len(import_data("minidata", tmp_path / "root-mirror", registry=registry).installed) == 5
    shutil.rmtree(cache)
    flat = tmp_path / "flat"  # the set's own files directly in the directory
    for rel, body in SET_FILES.items():
        (flat / rel).parent.mkdir(parents=True, exist_ok=True)
        (flat / rel).write_bytes(body)
    (flat / "pinned.csv").write_bytes(PINNED)
    assert len(import_data("minidata-a", flat, registry=registry).installed) == 4


def test_unknown_family_suggests_and_generated_data_is_a_no_op(tmp_path: Path, registry: Registry) -> None:
    with pytest.raises(UnknownIdError, match="did you mean: minidata"):
        import_data("minidat", tmp_path, registry=registry)
    report = import_data("selftest", tmp_path / "nowhere", registry=registry)
    assert report.installed == report.unchanged == []


def test_cli_imports_real_llm_sr_data(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    # The family also has a gated source that is not in the shared data: named, nothing installed.
    assert bench(["data", "import", "llm-sr", str(shared_data)]) == 2
    assert not (tmp_path / "cache" / "llm_sr" / "llm-sr").exists()
    assert bench(["data", "import", "llm-sr-osc1", str(shared_data)]) == 0
    source = dict(Registry().get("llm-sr-osc1").data)["llm-sr"]
    for rel, want in source.files.items():
        assert sha256_file(tmp_path / "cache" / "llm_sr" / "llm-sr" / rel) == want
    assert bench(["data", "import", "llm-sr-osc2", str(shared_data)]) == 0  # same files: idempotent
    assert bench(["data", "import", "llm_srr", str(shared_data)]) == 2  # unknown family
    assert bench(["data", "import", "llm_sr", str(tmp_path / "nowhere")]) == 2
    assert bench(["data", "import", "llm_sr"]) == 2  # no directory
    assert bench(["data", "status", "llm_sr", str(shared_data)]) == 2  # status takes none
    assert fetch_data(["ahc039", "--from", str(shared_data / "ahc" / "ahc039" / "inputs")]) == 0
    assert len(list((tmp_path / "cache" / "ahc039" / "public_inputs_150").iterdir())) == 150


def test_cli_reports_a_checksum_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "cache"))
    src = tmp_path / "mirror" / "public_inputs_150"
    src.mkdir(parents=True)
    variant = Registry().get("ahc039")
    ((_, source),) = variant.data
    for rel in source.files:
        (src / rel).write_text("1\n0 0\n")
    assert bench(["data", "import", "ahc039", str(tmp_path / "mirror")]) == 1
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "ahc039" / "public_inputs_150").exists() or not any(
        (tmp_path / "cache" / "ahc039" / "public_inputs_150").iterdir()
    )
