"""The 16 PACEvolve KernelBench variants: manifest, listing without data, initial programs, errors."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from environments.kernelbench.problems import model_as_model_new, problem_path
from harness.envs.data import ChecksumError, DataMissingError, family_data_dir, sha256_file
from harness.envs.manifest import DataSource
from harness.envs.registry import Registry, environments_root
from harness.scoring.device import OVERRIDE_ENV

from .conftest import FixtureKB

COMMIT = "6500bbc8cf102520d7a8f09be34ee6d5db1c29b0"
# id -> (KernelBench file at COMMIT, PACEvolve target speedup); seed notes §5.2, App. D order.
PACEVOLVE = {
    "kernelbench-batchnorm": ("level1/33_BatchNorm.py", 3.0),
    "kernelbench-conv3d-div-max-avgpool-bias-sum": (
        "level2/8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum.py",
        3.0,
    ),
    "kernelbench-conv3d-max-logsumexp-relu": ("level2/43_Conv3d_Max_LogSumExp_ReLU.py", 5.0),
    "kernelbench-convtranspose2d-bias-clamp-scale-div": (
        "level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py",
        4.0,
    ),
    "kernelbench-gelu": ("level1/26_GELU_.py", 6.0),
    "kernelbench-matmul-large-k": ("level1/6_Matmul_with_large_K_dimension_.py", 8.0),
    "kernelbench-maxpool2d": ("level1/42_Max_Pooling_2D.py", 2.0),
    "kernelbench-mlp": ("level3/1_MLP.py", 8.0),
    "kernelbench-rmsnorm": ("level1/36_RMSNorm_.py", 12.0),
    "kernelbench-softmax": ("level1/23_Softmax.py", 3.0),
    "kernelbench-vgg16": ("level3/11_VGG16.py", 6.0),
    "kernelbench-mean-reduction": ("level1/48_Mean_reduction_over_a_dimension.py", 3.5),
    "kernelbench-rnn": ("level3/33_VanillaRNN.py", 4.0),
    "kernelbench-bmm-instancenorm-sum-residual-mul": (
        "level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py",
        2.5,
    ),
    "kernelbench-alexnet": ("level3/5_AlexNet.py", 8.0),
    "kernelbench-layernorm": ("level1/40_LayerNorm.py", 25.0),
}
BENCH = [sys.executable, "-m", "evobench.cli.main"]
IDENTITY = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def bench(*args: str, data_root: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != OVERRIDE_ENV}
    full = {**base, "EVOBENCH_DATA": str(data_root), **env}
    return subprocess.run([*BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=full)


def test_manifest_pins_the_sixteen_pacevolve_problems_of_the_pre_rescale_commit() -> None:
    reg = Registry(environments_root())
    variants = {v.id: v for v in reg.family_of("kernelbench")}
    assert sorted(variants) == sorted([*PACEVOLVE, "kernelbench-tiny"])
    ((key, source),) = variants["kernelbench-gelu"].data
    assert key == "problems" and source.archive == "tar.gz"
    assert source.url == f"https://codeload.github.com/ScalingIntelligence/KernelBench/tar.gz/{COMMIT}"
    assert sorted(source.files) == sorted(f"KernelBench/{f}" for f, _ in PACEVOLVE.values())
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in source.files.values())
    assert len(set(source.files.values())) == 16
    for vid, (rel, target) in PACEVOLVE.items():
        v = variants[vid]
        assert v.data == ((key, source),) and not v.tiny
        assert v.scorer_params["problem_data"] == f"KernelBench/{rel}"
        assert v.hardware.gpu == "A100 SXM4 80GB" and v.hardware.gpu_count == 1 and v.image == "cuda"
        assert (v.progress.y_init, v.progress.y_target) == (1.0, target)
        assert v.timeout_s == 1800.0  # PACEvolve's eval_timeout
        p = v.scorer_params
        assert (p["rtol"], p["atol"], p["correct_trials"]) == (1e-2, 1e-2, 5)  # KernelBench v0
        assert p["backend"] == ""  # v0 had no backend check; the initial program is PyTorch
    tiny = variants["kernelbench-tiny"]
    assert tiny.tiny and tiny.data == () and tiny.hardware.gpu == ""
    assert "EVOLVE-BLOCK-START" in tiny.initial_program  # the family file, no data needed


def test_bench_envs_lists_all_variants_with_their_gpu_without_data(tmp_path: Path) -> None:
    r = bench("envs", "--family", "kernelbench", "--json", data_root=tmp_path / "empty", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert sorted(rows) == sorted([*PACEVOLVE, "kernelbench-tiny"])
    for vid in PACEVOLVE:
        assert rows[vid]["gpu"] == "A100 SXM4 80GB" and rows[vid]["needs_data"] == ["problems"]
    assert rows["kernelbench-tiny"]["gpu"] == "" and rows["kernelbench-tiny"]["needs_data"] == []
    table = bench("envs", "--family", "kernelbench", data_root=tmp_path / "empty", cwd=tmp_path)
    assert table.returncode == 0 and "1x A100" in table.stdout and "kernelbench-rnn" in table.stdout
    assert not (tmp_path / "empty").exists()


def test_initial_program_is_the_problem_with_model_renamed(
    fixture_kb: FixtureKB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    v = fixture_kb.registry().get("kernelbench-rnn")
    with pytest.raises(DataMissingError, match="bench data fetch kernelbench"):
        _ = v.initial_program
    path, want = problem_path(v)
    assert path == family_data_dir("kernelbench") / "KernelBench-6500bbc8" / "KernelBench" / "level3" / (
        "33_VanillaRNN.py"
    )
    path.parent.mkdir(parents=True)
    text = fixture_kb.texts["KernelBench/level3/33_VanillaRNN.py"]
    path.write_text(text)
    assert sha256_file(path) == want
    prog = v.initial_program
    assert "# EVOLVE-BLOCK-START\n" in prog and prog.endswith("# EVOLVE-BLOCK-END\n")
    body = prog.split("# EVOLVE-BLOCK-START\n", 1)[1].removesuffix("# EVOLVE-BLOCK-END\n")
    assert body.replace("ModelNew", "Model") == text.rstrip() + "\n"
    assert "class ModelNew(nn.Module)" in body and "super(ModelNew, self)" in body
    assert '"""Fixture problem' in body and "Model scales" in body  # strings untouched
    ns: dict[str, object] = {}
    exec(compile(prog, "initial", "exec"), ns)
    assert "ModelNew" in ns and "Model" not in ns
    model = ns["ModelNew"](*ns["get_init_inputs"]())  # type: ignore[operator]
    assert model(torch.ones(2, 8)).shape == (2, 8)
    # An altered cached file is refused, not silently used.
    path.write_text(text + "# edited\n")
    with pytest.raises(ChecksumError, match="bench data fetch kernelbench"):
        _ = v.initial_program


def test_rename_touches_only_the_model_identifier() -> None:
    src = (
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super(Model, self).__init__()  # Model comment\n"
        "ModelConfig = 'Model'\n"
        "m = Model()\n"
        "x = nn.Model if False else MyModel\n"
    )
    out = model_as_model_new(src)
    assert out == (
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super(ModelNew, self).__init__()  # Model comment\n"
        "ModelConfig = 'Model'\n"
        "m = ModelNew()\n"
        "x = nn.ModelNew if False else MyModel\n"
    )
    with pytest.raises(ValueError, match="no Model"):
        model_as_model_new("x = 1\n")
    with pytest.raises(ValueError, match="ModelNew"):
        model_as_model_new("class Model: pass\nclass ModelNew: pass\n")


_NAME = st.sampled_from(("Model", "MyModel", "Model_", "model", "Modelx", "x"))


@given(st.lists(st.tuples(_NAME, _NAME, _NAME), min_size=1))
def test_rename_changes_exactly_the_model_name_tokens(rows: list[tuple[str, str, str]]) -> None:
    src = "".join(f"{a} = {b}.{c}  # {a} {c}\nt = '{b} Model'\n" for a, b, c in rows)
    has_model = any(t.string == "Model" for t in _tokens(src) if t.type == tokenize.NAME)
    if not has_model:
        with pytest.raises(ValueError, match="no Model"):
            model_as_model_new(src)
        return
    out = model_as_model_new(src)
    before, after = _tokens(src), _tokens(out)
    assert len(before) == len(after)
    for b, a in zip(before, after, strict=True):
        want = "ModelNew" if b.type == tokenize.NAME and b.string == "Model" else b.string
        assert (a.type, a.string) == (b.type, want)


def _tokens(src: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(src).readline))


def test_content_hash_follows_the_pinned_checksum(fixture_kb: FixtureKB) -> None:
    before = fixture_kb.registry().get("kernelbench-gelu").hash
    assert fixture_kb.registry().get("kernelbench-gelu").hash == before
    fixture_kb.pin("KernelBench/level1/26_GELU_.py", "f" * 64)
    assert fixture_kb.registry().get("kernelbench-gelu").hash != before
    # The hook's module is hashed like the scorer.
    before = fixture_kb.registry().get("kernelbench-mlp").hash
    problems = fixture_kb.root / "kernelbench" / "problems.py"
    problems.write_text(problems.read_text() + "\n# changed\n")
    assert fixture_kb.registry().get("kernelbench-mlp").hash != before


def test_archive_source_must_list_its_files() -> None:
    with pytest.raises(ValueError, match="must list the files"):
        DataSource(url="file:///x.tar.gz", filename="x", archive="tar.gz")


def test_eval_without_data_names_the_fetch_command(tmp_path: Path) -> None:
    prog = tmp_path / "p.py"
    prog.write_text(IDENTITY)
    r = bench("eval", "--env", "kernelbench-gelu", str(prog), data_root=tmp_path / "empty", cwd=tmp_path)
    assert r.returncode == 2
    assert "bench data fetch kernelbench" in r.stderr and "26_GELU_.py" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_eval_on_cpu_fails_fast_naming_the_a100(tmp_path: Path) -> None:
    # Data present (fixture texts at the real cache paths; presence is what `bench eval` checks
    # first), no GPU: the scorer refuses before any candidate code runs.
    gelu = Registry(environments_root()).get("kernelbench-gelu")
    ((_, source),) = gelu.data
    for rel in source.files:
        path = tmp_path / "data" / "kernelbench" / source.filename / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# fixture\n")
    prog = tmp_path / "p.py"
    prog.write_text(IDENTITY)
    r = bench(
        "eval", "--env", "kernelbench-gelu", str(prog), "--json", data_root=tmp_path / "data", cwd=tmp_path
    )
    assert r.returncode == 3, r.stdout + r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "infra_error"
    assert "needs an NVIDIA A100 SXM4 80GB GPU" in res["reason"] and OVERRIDE_ENV in res["reason"]
    assert res["durations"]["candidate"] == 0.0


def test_run_report_uses_the_first_evaluated_program_when_data_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    from harness.report.run_report import _initial_program

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "empty"))
    info = SimpleNamespace(env_id="kernelbench-gelu", env_hash="0" * 16)
    store = SimpleNamespace(info=info, get_program={"a1": "FIRST", "b2": "LATER"}.__getitem__)
    cands = pd.DataFrame({"seq": [2, 1], "program_sha256": ["b2", "a1"]})
    assert _initial_program(store, cands) == ("FIRST", "first evaluated program")  # type: ignore[arg-type]
