"""The LLM-SR manifest and data recipe: variants, pinned files, fetch, missing data, regeneration."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from environments.llm_sr.data import (
    SPLITS,
    load_csv_problem,
    oscillator_problem,
    read_csv_split,
    true_acceleration,
)
from environments.llm_sr.scorer import LlmSrScorer
from harness.envs.data import ChecksumError, DataMissingError, fetch_source, require_data, sha256_file
from harness.envs.registry import default_registry

IDS = ["llm-sr-bactgrow", "llm-sr-osc1", "llm-sr-osc2", "llm-sr-stressstrain", "llm-sr-tiny"]
SRBENCH = ["llm-sr-phys-osc1", "llm-sr-phys-osc1-tiny"]
HF_URL = "https://huggingface.co/datasets/nnheui/llm-srbench/resolve/main/lsr_bench_data.hdf5"
BASE_URL = "https://raw.githubusercontent.com/deep-symbolic-mathematics/LLM-SR/main/data"
COLUMNS = {
    "oscillator1": (("x", "v"), "a"),
    "oscillator2": (("t", "x", "v"), "a"),
    "bactgrow": (("b", "s", "temp", "pH"), "db"),
    "stressstrain": (("strain", "temp"), "stress"),
}


def test_variants_resolve() -> None:
    reg = default_registry()
    variants = reg.family_of("llm-sr")
    assert [v.id for v in variants] == sorted(IDS + SRBENCH)
    assert reg.family_of("llm_sr") == variants == reg.family_of("llm-sr-osc1")
    for v in variants:
        assert v.family == "llm_sr" and v.entry_point == "equation" and not v.maximize
        assert v.combined == "log10_nmse_id" and v.hardware.output_kb >= 512
        assert v.progress.y_target < v.progress.y_init
    tiny = reg.get("llm-sr-tiny")
    assert tiny.tiny and tiny.data == () and tiny.scorer_params["synthetic"] is True
    phys = reg.get("llm-sr-phys-osc1")
    ((key, source),) = phys.data
    assert key == "llm-srbench" and source.url == HF_URL and source.auth == "huggingface"
    assert source.sha256 == "" and not source.files  # unpinned upstream: recorded on first fetch
    assert "huggingface.co/datasets/nnheui/llm-srbench" in source.access
    p = phys.scorer_params
    assert (p["format"], p["group"], p["problem_index"], p["target"]) == (
        "lsrbench-hdf5",
        "lsr_synth/phys_osc",
        0,
        "dv_dt",
    )
    assert p["columns"] == ["x", "t", "v"] and p["truth"] == "phys_osc1"
    ptiny = reg.get("llm-sr-phys-osc1-tiny")
    assert ptiny.tiny and ptiny.data == () and ptiny.scorer_params["system"] == "phys_osc1"
    for v in variants:
        if v.id in ("llm-sr-tiny", *SRBENCH):
            continue
        ((key, source),) = v.data
        assert key == "llm-sr" and source.url == BASE_URL and source.filename == "llm-sr"
        assert "MIT" in source.license
        cols, target = COLUMNS[v.scorer_params["problem"]]
        assert tuple(v.scorer_params["columns"]) == cols and v.scorer_params["target"] == target
        assert sorted(source.files) == sorted(f"{p}/{s}.csv" for p in COLUMNS for s in SPLITS)


def test_pinned_checksums_match_the_released_files(llm_sr_cache: Path) -> None:
    source = dict(default_registry().get("llm-sr-osc1").data)["llm-sr"]
    for rel, sha in source.files.items():
        assert sha256_file(llm_sr_cache / "llm_sr" / "llm-sr" / rel) == sha


def test_fetch_downloads_every_file_and_checks_it(
    llm_sr_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "root"))
    v = default_registry().get("llm-sr-osc2")
    source = dict(v.data)["llm-sr"]
    urls: list[str] = []

    def download(url: str, dest: Path) -> None:  # serve the real files from the local copy
        urls.append(url)
        shutil.copyfile(llm_sr_cache / "llm_sr" / "llm-sr" / url.removeprefix(BASE_URL + "/"), dest)

    with pytest.raises(DataMissingError, match="bench data fetch llm_sr"):
        require_data(v)
    out = fetch_source("llm_sr", source, download=download)
    assert out == tmp_path / "root" / "llm_sr" / "llm-sr"
    assert sorted(urls) == sorted(f"{BASE_URL}/{rel}" for rel in source.files)
    assert require_data(v) == tmp_path / "root" / "llm_sr"

    def corrupt(url: str, dest: Path) -> None:
        dest.write_text("x,v,a\n0,0,0\n")

    (out / "oscillator1" / "train.csv").unlink()
    with pytest.raises(ChecksumError, match="does not match"):
        fetch_source("llm_sr", source, download=corrupt)


def test_missing_data_names_the_fetch_command(tmp_path: Path) -> None:
    for vid in IDS[:-1]:
        v = default_registry().get(vid)
        with pytest.raises(DataMissingError, match="bench data fetch llm_sr"):
            LlmSrScorer(v, tmp_path).prepare()


def test_corrupted_cache_file_is_rejected(llm_sr_cache: Path, tmp_path: Path) -> None:
    family = tmp_path / "llm_sr"
    shutil.copytree(llm_sr_cache / "llm_sr", family)
    csv = family / "llm-sr" / "oscillator1" / "test_id.csv"
    csv.write_text(csv.read_text().replace("0.0285", "0.0286", 1))
    v = default_registry().get("llm-sr-osc1")
    with pytest.raises(ChecksumError, match="bench data fetch llm_sr"):
        LlmSrScorer(v, family).prepare()


@pytest.mark.parametrize("problem", sorted(COLUMNS))
def test_released_problems_load(llm_sr_family_dir: Path, problem: str) -> None:
    cols, target = COLUMNS[problem]
    source = dict(default_registry().get("llm-sr-osc1").data)["llm-sr"]
    p = load_csv_problem(
        llm_sr_family_dir,
        source_dir="llm-sr",
        problem=problem,
        columns=cols,
        target_name=target,
        checksums=source.files,
    )
    rows = {s: p.splits[s].rows for s in SPLITS}
    expected = {
        "oscillator1": (10000, 10000, 10000),
        "oscillator2": (10000, 10000, 10000),
        "bactgrow": (7500, 2500, 15000),
        "stressstrain": (2161, 1442, 738),
    }[problem]
    assert tuple(rows.values()) == expected
    assert all(p.splits[s].inputs.shape == (rows[s], len(cols)) for s in SPLITS)
    with pytest.raises(ValueError, match="header"):
        read_csv_split(llm_sr_family_dir / "llm-sr" / problem / "train.csv", (*cols, "extra"), target)


def test_phys_osc1_regeneration() -> None:
    gen = oscillator_problem(
        {"system": "phys_osc1", "seed": 5, "n_train": 60, "n_test_id": 50, "n_test_ood": 40}
    )
    assert gen.columns == ("x", "t", "v") and gen.target_name == "dv_dt"
    assert [gen.splits[s].rows for s in SPLITS] == [60, 50, 40]
    for s in SPLITS:
        x, t, v = gen.splits[s].inputs.T
        want = -1.0267 * x**3 - 1.0267 * x * np.exp(-np.abs(x)) + 0.9480 * np.sin(t) - 0.7123 * np.sin(v)
        assert np.allclose(gen.splits[s].target, want, rtol=0, atol=1e-12)
    t_ood, t_id = gen.splits["test_ood"].inputs[:, 1], gen.splits["train"].inputs[:, 1]
    assert t_ood.max() <= 20.0 <= 30.0 <= t_id.min()  # out-of-domain = the early time window


@pytest.mark.parametrize("system", ["oscillator1", "oscillator2"])
def test_released_oscillators_follow_the_known_law(llm_sr_family_dir: Path, system: str) -> None:
    cols, target = COLUMNS[system]
    p = load_csv_problem(
        llm_sr_family_dir, source_dir="llm-sr", problem=system, columns=cols, target_name=target
    )
    for s in SPLITS:
        sp = p.splits[s]
        named = dict(zip(cols, sp.inputs.T, strict=True))
        a = true_acceleration(system, named.get("t", 0.0), named["x"], named["v"])
        assert np.max(np.abs(a - sp.target)) < 1e-12


@pytest.mark.parametrize("system", ["oscillator1", "oscillator2"])
def test_regenerated_oscillator_matches_the_released_windows(llm_sr_family_dir: Path, system: str) -> None:
    cols, target = COLUMNS[system]
    real = load_csv_problem(
        llm_sr_family_dir, source_dir="llm-sr", problem=system, columns=cols, target_name=target
    )
    gen = oscillator_problem(
        {"system": system, "seed": 3, "n_train": 300, "n_test_id": 300, "n_test_ood": 300}
    )
    assert gen.columns == cols and gen.target_name == "a"
    for s in SPLITS:
        g, r = gen.splits[s], real.splits[s]
        named = dict(zip(cols, g.inputs.T, strict=True))
        assert np.array_equal(
            g.target, true_acceleration(system, named.get("t", 0.0), named["x"], named["v"])
        )
        # Same trajectory windows: the regenerated states stay inside the released split's range.
        lo, hi = r.inputs.min(axis=0), r.inputs.max(axis=0)
        span = hi - lo
        assert (g.inputs >= lo - 1e-3 * span).all() and (g.inputs <= hi + 1e-3 * span).all()
    x = cols.index("x")
    assert np.ptp(gen.splits["test_ood"].inputs[:, x]) > 1.3 * np.ptp(gen.splits["test_id"].inputs[:, x])


def test_regeneration_is_seeded() -> None:
    base = {"system": "oscillator1", "n_train": 50, "n_test_id": 40, "n_test_ood": 30}
    a, b = oscillator_problem({**base, "seed": 1}), oscillator_problem({**base, "seed": 1})
    c = oscillator_problem({**base, "seed": 2})
    assert [a.splits[s].rows for s in SPLITS] == [50, 40, 30]
    for s in SPLITS:
        assert np.array_equal(a.splits[s].inputs, b.splits[s].inputs)
        assert np.array_equal(a.splits[s].target, b.splits[s].target)
        assert not np.array_equal(a.splits[s].inputs, c.splits[s].inputs)
    noisy = oscillator_problem({**base, "seed": 1, "noise": 0.01})
    assert not np.array_equal(noisy.splits["train"].target, a.splits["train"].target)
    assert np.array_equal(noisy.splits["train"].inputs, a.splits["train"].inputs)
    with pytest.raises(ValueError, match="unknown oscillator"):
        oscillator_problem({"system": "pendulum"})
