"""`bench data fetch kernelbench` against a fixture archive over file:// (the real code path), and
the data variants scored on that data (CPU, GPU override)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evobench.cli import commands_info
from evobench.cli.main import main
from harness.envs.data import ChecksumError, family_data_dir, fetch_source, sha256_file
from harness.envs.data_import import import_data
from harness.envs.manifest import DataSource
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend
from harness.scoring.device import OVERRIDE_ENV

from .conftest import FixtureKB, build_archive, sha

GELU = "KernelBench/level1/26_GELU_.py"


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "data"
    monkeypatch.setenv("EVOBENCH_DATA", str(root))
    return root


def _source(kb: FixtureKB) -> DataSource:
    ((_, source),) = kb.registry().get("kernelbench-gelu").data
    return source


def test_fetch_extracts_only_the_listed_files_and_checks_each(fixture_kb: FixtureKB, data_root: Path) -> None:
    source = _source(fixture_kb)
    out = fetch_source("kernelbench", source)  # default downloader: urllib on the file:// URL
    assert out == data_root / "kernelbench" / "KernelBench-6500bbc8"
    got = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert got == sorted(source.files)  # README.md of the archive is not extracted
    for rel, text in fixture_kb.texts.items():
        assert (out / rel).read_text() == text and sha256_file(out / rel) == source.files[rel]
    assert not list((data_root / "kernelbench").rglob(".part-*"))

    # A verified cache is left alone: nothing is downloaded.
    def refuse(url: str, dest: Path) -> None:
        raise AssertionError("downloaded although the cache is verified")

    fetch_source("kernelbench", source, download=refuse)


def test_checksum_mismatch_installs_nothing(fixture_kb: FixtureKB, data_root: Path) -> None:
    fixture_kb.pin(GELU, sha("something else"))
    with pytest.raises(ChecksumError, match=r"26_GELU_\.py: sha256 .* does not match expected"):
        fetch_source("kernelbench", _source(fixture_kb))
    d = family_data_dir("kernelbench")
    assert not [p for p in d.rglob("*") if p.is_file()]  # all or nothing, no partial files


def test_archive_lacking_a_file_or_holding_a_link_or_not_a_tarball_is_refused(
    fixture_kb: FixtureKB, data_root: Path, tmp_path: Path
) -> None:
    source = _source(fixture_kb)
    texts = dict(fixture_kb.texts)
    build_archive(fixture_kb.archive, {k: v for k, v in texts.items() if k != GELU})
    with pytest.raises(ChecksumError, match=f"lacks {GELU}"):
        fetch_source("kernelbench", source)
    # A symlink under a listed name is never followed or installed.
    build_archive(fixture_kb.archive, texts, links=(GELU,))
    with pytest.raises(ChecksumError, match=f"lacks {GELU}"):
        fetch_source("kernelbench", source)
    fixture_kb.archive.write_bytes(b"<html>rate limited</html>")
    with pytest.raises(ChecksumError, match="not a readable tar.gz"):
        fetch_source("kernelbench", source)
    assert not [p for p in family_data_dir("kernelbench").rglob("*") if p.is_file()]


def test_bench_data_fetch_and_status(
    fixture_kb: FixtureKB,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(commands_info, "default_registry", fixture_kb.registry)
    assert main(["data", "status", "kernelbench"]) == 0
    assert "0/16 files present" in " ".join(capsys.readouterr().out.split())
    assert main(["data", "fetch", "kernelbench"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "16 files verified" in out and fixture_kb.archive.as_uri() in out
    assert main(["data", "status", "kernelbench"]) == 0
    assert "16/16 files present" in " ".join(capsys.readouterr().out.split())
    # A corrupted cache file is re-fetched; a mismatching archive makes the command fail.
    (data_root / "kernelbench" / "KernelBench-6500bbc8" / GELU).write_text("tampered\n")
    assert main(["data", "fetch", "kernelbench"]) == 0
    assert (data_root / "kernelbench" / "KernelBench-6500bbc8" / GELU).read_text() == fixture_kb.texts[GELU]
    fixture_kb.pin(GELU, sha("other"))
    (data_root / "kernelbench" / "KernelBench-6500bbc8" / GELU).unlink()
    assert main(["data", "fetch", "kernelbench"]) == 1
    assert "checksum mismatch" in " ".join(capsys.readouterr().err.split())


def test_import_from_a_local_copy(fixture_kb: FixtureKB, data_root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "KernelBench-6500bbc8"
    for rel, text in fixture_kb.texts.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text(text)
    report = import_data("kernelbench", tmp_path / "copy", registry=fixture_kb.registry())
    assert len(report.installed) == 16
    (copy / GELU).write_text("altered\n")
    with pytest.raises(ChecksumError):
        import_data("kernelbench", tmp_path / "copy", registry=fixture_kb.registry())


def test_data_variant_scores_its_initial_program_and_rejects_a_wrong_one(
    fixture_kb: FixtureKB, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CPU with the GPU override: exercises problem loading from the cache in the sandbox.
    monkeypatch.setenv(OVERRIDE_ENV, "1")
    reg = fixture_kb.registry()
    fetch_source("kernelbench", _source(fixture_kb))
    v = reg.get("kernelbench-gelu")
    wrong = v.initial_program.replace("* self.scale", "* self.scale * 2.0", 1)
    assert wrong != v.initial_program
    with LocalBackend(workers=1, mode="warm", env_root=str(fixture_kb.root)) as b:
        ok, bad = b.evaluate_many(v, [v.initial_program, wrong])
    assert ok.status is Status.OK, ok.reason
    m = ok.metrics
    assert m["gpu_override"] == 1.0 and m["timing_cpu"] == 1.0
    assert ok.score == pytest.approx(m["ref_us"] / m["kernel_us"])
    assert bad.status is Status.INVALID and "correctness trial 0" in (bad.reason or "")
