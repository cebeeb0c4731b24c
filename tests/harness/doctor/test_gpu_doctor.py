"""``bench doctor --gpu``: a go / no-go table; without a GPU it says what it could not check."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.doctor.gpu import GPU_ROWS, GpuFacts, row_driver, row_gpus, run_gpu_doctor
from harness.envs.registry import default_registry

NO_GPU = GpuFacts(driver=None, torch_cuda=None, gpus=[])


def test_without_a_gpu_every_row_says_what_it_could_not_check() -> None:
    rows = run_gpu_doctor(NO_GPU)
    assert [r.name for r in rows] == list(GPU_ROWS)
    assert {r.verdict for r in rows} == {"not checked"}
    assert all("no NVIDIA driver" in r.summary for r in rows)


@pytest.mark.parametrize(
    ("driver", "cuda", "verdict"),
    [("580.65.06", "13.0", "go"), ("570.124.06", "13.0", "no-go"), ("550.54.15", "12.4", "go"),
     ("470.256.02", "12.1", "no-go"), ("580.65.06", None, "no-go")],
)  # fmt: skip
def test_driver_against_torchs_cuda_build(driver: str, cuda: str | None, verdict: str) -> None:
    row = row_driver(GpuFacts(driver, cuda, ["NVIDIA H100 80GB HBM3"]))
    assert row.verdict == verdict
    if verdict == "no-go" and cuda:
        assert "needs driver >=" in row.details[0]


def test_gpu_row_names_which_variants_can_run_here() -> None:
    variants = [v for v in default_registry().variants() if v.hardware.gpu_count > 0]
    row = row_gpus(GpuFacts("580.1", "13.0", ["NVIDIA H100 80GB HBM3"]), variants)
    lines = {d.split(":")[0]: d for d in row.details}
    assert "-> here" in lines["trimul-h100"] and "not here" in lines["mla-decode-h200"]
    assert "not here" in lines["trimul-a100"]


@pytest.mark.slow
def test_cli_on_this_machine_reports_the_table_as_json() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the full doctor takes minutes")
    out = subprocess.run(
        [sys.executable, "-m", "evobench.cli.main", "doctor", "--gpu", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["go"] is False and [r["name"] for r in report["rows"]] == list(GPU_ROWS)
    assert all(r["verdict"] == "not checked" and r["summary"] for r in report["rows"])
