"""The shared AHC scorer plumbing (environments/ahc_common) with an in-process fake runtime.

No compiler and no sandbox: the fake runtime answers the compile command and every case run with
canned ``ExecResult``s, so per-case classification, aggregation, strict parsing and the budget
logic are checked quickly and exactly.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from environments.ahc039.scorer import Ahc039Scorer
from environments.ahc_common.batch import METRIC_NAMES
from environments.ahc_common.native import (
    COMPILE_ARGV,
    INVALID_OUTPUT,
    OK,
    RUNTIME_ERROR,
    TLE,
    Limits,
    classify,
)
from environments.ahc_common.parsing import OutputRejected, int_tokens
from harness.envs.data import DataMissingError
from harness.envs.registry import Variant, default_registry
from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.scoring.api import ExecResult

LIMITS = Limits(cpu_seconds=2.0, wall_seconds=6.0, output_cap=1024)


def ok_run(stdout: bytes = b"", seconds: float = 0.01) -> ExecResult:
    return ExecResult(0, stdout, b"", seconds, 0.005)


class FakeRuntime:
    """Compiles instantly; every case run is answered by ``respond(stdin)``."""

    def __init__(
        self,
        workdir: Path,
        respond: Callable[[bytes], ExecResult],
        compile_result: ExecResult | None = None,
        budget: float = 1000.0,
    ) -> None:
        self._workdir = workdir
        self.respond = respond
        self.compile_result = compile_result or ok_run()
        self.budget = budget
        self.commands: list[list[str]] = []
        self.lock = threading.Lock()

    @property
    def source(self) -> str:
        return "int main() {}\n"

    @property
    def workdir(self) -> Path:
        return self._workdir

    def remaining(self) -> float:
        return self.budget

    def run(self, argv, stdin=b"", *, timeout, cpu_seconds=None, memory_mb=None, **_kw):  # noqa: ANN001, ANN003, ANN201
        with self.lock:
            self.commands.append(list(argv))
        if argv[0] == "g++":
            if self.compile_result.returncode == 0:
                (self._workdir / "main").write_bytes(b"\x7fELF")
            return self.compile_result
        assert argv == ["./main"] and cpu_seconds == 3.1 and memory_mb == 1024
        return self.respond(stdin)


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("ahc039-tiny")


@pytest.fixture(scope="module")
def scorer(tiny: Variant, tmp_path_factory: pytest.TempPathFactory) -> Ahc039Scorer:
    s = Ahc039Scorer(tiny, tmp_path_factory.mktemp("no-data"))
    s.prepare()
    return s


RECT = b"4\n0 0\n100000 0\n100000 100000\n0 100000\n"  # the whole square: a - b + 1 = 1


def by_case(scorer: Ahc039Scorer, answers: list[ExecResult]) -> Callable[[bytes], ExecResult]:
    table = {c.input: a for c, a in zip(scorer.cases, answers, strict=True)}
    return lambda stdin: table[stdin]


# -- classification ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("result", "status"),
    [
        (ExecResult(0, b"4\n", b"", 0.1, 0.1), OK),
        (ExecResult(None, b"", b"", 6.0, float("nan"), True, "wall"), TLE),
        (ExecResult(128 + signal.SIGKILL, b"", b"", 2.0, 0.005), TLE),  # RLIMIT_CPU under bwrap
        (ExecResult(128 + signal.SIGXCPU, b"", b"", 2.0, 0.005), TLE),
        (ExecResult(-signal.SIGKILL, b"", b"", 2.0, 2.0), TLE),  # without bwrap
        (ExecResult(0, b"4\n", b"", 1.0, 2.5), TLE),  # reported CPU over the limit
        (ExecResult(139, b"", b"", 0.1, 0.005), RUNTIME_ERROR),  # SIGSEGV
        (ExecResult(134, b"", b"bad_alloc", 0.1, 0.005), RUNTIME_ERROR),  # abort at the memory limit
        (ExecResult(128 + signal.SIGKILL, b"", b"", 0.3, 0.2, False, "memory"), RUNTIME_ERROR),  # cgroup OOM
        (ExecResult(3, b"4\n", b"", 0.1, 0.005), RUNTIME_ERROR),  # main returned 3
        (ExecResult(0, b"x" * 1024, b"", 0.1, 0.005, False, "output"), INVALID_OUTPUT),
        (ExecResult(0, b"4\n", b"y" * 1024, 0.1, 0.005, False, "output"), OK),  # only stderr overflowed
        # A flood whose writes were held up on a loaded host: the overflow decides, not the elapsed time
        (ExecResult(0, b"x" * 1024, b"", 6.5, 0.13, False, "output", 0.0), INVALID_OUTPUT),
        (ExecResult(0, b"4\n", b"", 6.5, 0.13, False, "", 0.0), TLE),  # elapsed over the limit
    ],
)
def test_classify(result: ExecResult, status: str) -> None:
    got, detail = classify(result, LIMITS)
    assert got == status, detail
    if status == INVALID_OUTPUT:
        assert "rule 'output-size'" in detail


MEASURED = Limits()  # ALE-Bench's rules: 2.0 s CPU / 2.5 s elapsed; kills at 3.1 s / 4.5 s


def measured(rc: int | None, wall: float, cpu: float, wait: float = 0.0, **kw: object) -> ExecResult:
    """A run whose CPU time a cgroup counted (``cpu_measured``) and whose CPU wait was sampled."""
    return ExecResult(rc, b"4\n", b"", wall, cpu, wait_seconds=wait, cpu_measured=True, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("result", "status", "needle"),
    [
        (measured(0, 2.1, 1.999), OK, ""),
        (measured(0, 30.0, 1.95, wait=28.0), OK, ""),  # waited behind other work: not the program's time
        (measured(0, 2.3, 2.2), TLE, "CPU time over the 2 s limit (2.200 s CPU"),
        (measured(0, 3.0, 0.1, wait=0.2), TLE, "elapsed time over the 2.5 s limit"),  # slept
        (measured(None, 3.2, 3.11, timed_out=True, limit="cpu"), TLE, "3.1 s CPU-time backstop"),
        (measured(None, 9.0, 0.01, wait=4.0, timed_out=True, limit="wall"), TLE, "4.5 s elapsed-time"),
        (measured(128 + signal.SIGKILL, 0.5, 0.4), RUNTIME_ERROR, "killed by SIGKILL"),  # not a CPU kill
        (measured(128 + signal.SIGFPE, 0.1, 0.01), RUNTIME_ERROR, "killed by SIGFPE"),
        (measured(-signal.SIGSEGV, 0.1, 0.01), RUNTIME_ERROR, "killed by SIGSEGV"),
    ],
)
def test_classify_with_measured_cpu_follows_ale_bench(result: ExecResult, status: str, needle: str) -> None:
    got, detail = classify(result, MEASURED)
    assert got == status, detail
    assert needle in detail and "6.12" not in detail
    if status == TLE:
        assert "s wall-clock)" in detail  # every time in a reason says which clock it is


def test_limits_reject_nonpositive_values(tiny: Variant) -> None:
    with pytest.raises(ValueError, match="cpu_seconds"):
        Limits.from_params({"cpu_seconds": 0}, tiny.hardware)
    with pytest.raises(ValueError, match="backstop"):
        Limits.from_params({"cpu_kill_seconds": 1.5}, tiny.hardware)
    limits = Limits.from_params(tiny.scorer_params, tiny.hardware)
    assert limits.workers == 2 and limits.output_cap == tiny.hardware.output_kb * 1024
    assert limits.cpu_seconds == 2.0 and limits.memory_mb == 1024 and limits.wall_seconds == 2.5
    assert limits.cpu_kill_seconds == 3.1 and limits.wall_kill_seconds == 4.5


# -- strict integer parsing ----------------------------------------------------------------------
def test_int_tokens_reads_integers_as_rust_does() -> None:
    assert int_tokens(b" 12 -3\n0\t007 \r\n999999999999").tolist() == [12, -3, 0, 7, 999999999999]
    assert int_tokens(b"+3 -0 +0 0000000000000000000000000042").tolist() == [3, 0, 0, 42]
    assert int_tokens(b"9223372036854775807 -9223372036854775808").tolist() == [2**63 - 1, -(2**63)]
    assert int_tokens("1\u30002\xa03\u20284".encode()).tolist() == [1, 2, 3, 4]  # Unicode whitespace
    assert int_tokens(b"").size == 0 and int_tokens(b" \n\t").size == 0
    for bad in (
        b"1 - 2",
        b"1-2",
        b"+",
        b"+-1",
        b"1+",
        b"5_0",
        b"1.5",
        b"0x10",
        b"1e3",
        b"\x00",
        b"1\x1c",
        b"--1",
        b"9223372036854775808",
        b"-9223372036854775809",
        "\ufeff1".encode(),
    ):
        with pytest.raises(OutputRejected) as e:
            int_tokens(bad)
        assert e.value.rule == "format", bad
    with pytest.raises(OutputRejected) as e:
        int_tokens(b"1 2 \xff")
    assert e.value.rule == "utf-8"


# -- aggregation ---------------------------------------------------------------------------------
def test_every_case_ok_gives_mean_and_metrics(scorer: Ahc039Scorer, tmp_path: Path) -> None:
    rt = FakeRuntime(tmp_path, lambda stdin: ok_run(RECT))
    out = scorer.score(rt)
    assert rt.commands[0] == list(COMPILE_ARGV)
    assert sum(c == ["./main"] for c in rt.commands) == 4
    assert (tmp_path / "main.cpp").read_text() == rt.source
    assert out.score == 1.0 and out.metrics["mean_score"] == 1.0 and out.metrics["total_score"] == 4.0
    assert out.metrics["cases_ok"] == 4 and out.metrics["cases_tle"] == 0
    assert out.metrics["cases_runtime_error"] == 0 and out.metrics["cases_invalid_output"] == 0


def test_failures_stay_in_their_case(scorer: Ahc039Scorer, tmp_path: Path) -> None:
    answers = [
        ok_run(RECT),
        ExecResult(137, b"", b"", 2.0, 0.005),
        ExecResult(139, b"", b"", 0.1, 0.005),
        ok_run(b"hello world\n"),
    ]
    out = scorer.score(FakeRuntime(tmp_path, by_case(scorer, answers)))
    assert out.metrics["cases_ok"] == 1 and out.metrics["cases_tle"] == 1
    assert out.metrics["cases_runtime_error"] == 1 and out.metrics["cases_invalid_output"] == 1
    assert out.metrics["total_score"] == 1.0 and out.score == 0.25


@pytest.mark.parametrize(
    ("stdout", "rule"),
    [
        (b"\xff\xfe garbage", "utf-8"),
        (b"garbage", "format"),
        (b"4\n0 0\n1 0\n1 1\n", "format"),  # truncated: three of four vertices
        (b"4\n0 0\n1 0\n1 1\n0 1.0\n", "format"),
        (b"4\n0 0\n1 0\n1 1\n0 99999999999999999999\n", "format"),
        (RECT + b"3\n0 0\n1 0\n1 1\n", "vertex-count"),
    ],
)
def test_unreadable_output_is_an_invalid_case_not_a_crash(
    scorer: Ahc039Scorer, tmp_path: Path, stdout: bytes, rule: str
) -> None:
    answers = [ok_run(RECT), ok_run(stdout), ok_run(RECT), ok_run(RECT)]
    out = scorer.score(FakeRuntime(tmp_path, by_case(scorer, answers)))
    assert out.metrics["cases_invalid_output"] == 1 and out.metrics["cases_ok"] == 3
    verdict = scorer.judge([scorer.cases[1].instance], [stdout])[0]
    assert isinstance(verdict, OutputRejected) and verdict.rule == rule


def test_random_bytes_never_crash_the_judge(scorer: Ahc039Scorer) -> None:
    rng = np.random.default_rng(7)
    blobs = [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 400, 200)]
    alphabet = np.frombuffer(b"0123456789 -\n", dtype=np.uint8)
    blobs += [rng.choice(alphabet, size=int(n)).tobytes() for n in rng.integers(0, 400, 400)]
    inst = scorer.cases[0].instance
    for verdict in scorer.judge([inst] * len(blobs), blobs):
        assert isinstance(verdict, (int, OutputRejected))


@pytest.mark.parametrize(
    ("status_of", "exc", "needle"),
    [
        (lambda i: ok_run(b"nonsense"), CandidateInvalid, "rule 'format'"),
        (
            lambda i: ExecResult(139, b"", b"Segmentation fault", 0.1, 0.0),
            CandidateError,
            "killed by SIGSEGV",
        ),
        (
            lambda i: ExecResult(None, b"", b"", 6.0, float("nan"), True, "wall"),
            CandidateTimeout,
            "wall-clock",
        ),
    ],
)
def test_no_case_scored_fails_the_evaluation_with_reasons(
    scorer: Ahc039Scorer, tmp_path: Path, status_of: Callable[[int], ExecResult], exc: type, needle: str
) -> None:
    with pytest.raises(exc) as e:
        scorer.score(FakeRuntime(tmp_path, lambda stdin: status_of(0)))
    assert "no test case was scored" in e.value.reason and needle in e.value.reason


def test_compile_error_is_an_error_with_the_compiler_message(scorer: Ahc039Scorer, tmp_path: Path) -> None:
    message = b"main.cpp:3:5: error: 'foo' was not declared in this scope\n"
    rt = FakeRuntime(
        tmp_path, lambda stdin: ok_run(RECT), compile_result=ExecResult(1, b"", message, 0.3, 0.0)
    )
    with pytest.raises(CandidateError) as e:
        scorer.score(rt)
    assert "compile error" in e.value.reason and "'foo' was not declared" in e.value.reason
    assert rt.commands == [list(COMPILE_ARGV)]  # nothing was run


def test_exhausted_budget_is_a_timeout(scorer: Ahc039Scorer, tmp_path: Path) -> None:
    with pytest.raises(CandidateTimeout, match="time budget ran out"):
        scorer.score(FakeRuntime(tmp_path, lambda stdin: ok_run(RECT), budget=4.0))  # < 4.5 s backstop


def test_full_variant_without_data_names_the_fetch_command(tmp_path: Path) -> None:
    full = default_registry().get("ahc039")
    with pytest.raises(DataMissingError, match="bench data fetch ahc039"):
        Ahc039Scorer(full, tmp_path).prepare()


@pytest.mark.parametrize("env_id", ["ahc039", "ahc039-tiny", "ahc058", "ahc058-tiny"])
def test_manifests_declare_exactly_the_reported_metrics(env_id: str) -> None:
    variant = default_registry().get(env_id)
    assert tuple(m.name for m in variant.metrics) == METRIC_NAMES
    assert variant.combined == "mean_score" and variant.maximize
    assert variant.language.value == "cpp" and variant.initial_program_name == "initial_program.cpp"
    assert "EVOLVE-BLOCK-START" in variant.initial_program
    assert variant.progress.y_init < variant.progress.y_target
    params = variant.scorer_params
    assert params["cpu_seconds"] == 2.0 and params["memory_mb"] == 1024
    assert variant.hardware.cpus == 2 and params["workers"] == 2
    cases = params["public_cases"] + params["generated_cases"]
    worst = params["compile_timeout_s"] + cases * params["wall_seconds"] / params["workers"]
    assert variant.timeout_s >= worst  # the evaluation budget covers compile + every case's wall limit
    if variant.tiny:
        assert not variant.data and params["generated_cases"] == 4
    else:
        assert params["public_cases"] == 150 and [k for k, _ in variant.data] == ["public-inputs"]


def test_shared_modules_are_in_the_content_hash(tmp_path: Path) -> None:
    import shutil

    from harness.envs.registry import Registry, environments_root

    src = environments_root()
    for name in ("ahc039", "ahc058", "ahc_common"):
        shutil.copytree(src / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    before = {v.id: v.hash for v in Registry(tmp_path).variants()}
    assert set(before) == {"ahc039", "ahc039-tiny", "ahc058", "ahc058-tiny"}
    for module in ("__init__", "batch", "inputs", "native", "parsing"):
        path = tmp_path / "ahc_common" / f"{module}.py"
        original = path.read_text()
        path.write_text(original + "\n# changed\n")
        after = {v.id: v.hash for v in Registry(tmp_path).variants()}
        assert all(after[k] != before[k] for k in before), module
        path.write_text(original)
    assert {v.id: v.hash for v in Registry(tmp_path).variants()} == before
