"""The trusted session end to end with the real driver as a plain subprocess (no sandbox needed).

Covers the wire with hostile replies, the trusted timing bound, the trusted process's peak memory
under an oversized reply, and full-size outputs (a TriMul case, the MLA KV cache of the GPU
variant's shapes) streamed through the real wire on CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harness.evaluation.errors import CandidateError, CandidateInvalid, InfraError
from harness.kernels.session import CaseBound, DriverParams, KernelSession
from harness.sandbox.launch import fill, project_root
from harness.scoring.api import ExecResult

HONEST = """
import torch
def custom_kernel(data):
    x = data[0]
    return x * 2.0
"""

# Patches the driver module's send (as a hostile candidate can): MODE picks the forged reply.
FORGE = """
import json, struct, sys, torch
_main = sys.modules["__main__"]
_send = _main.send
def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    if MODE == "shape":
        head = json.dumps({**header, "arrays": [{"dtype": "float32", "shape": [2**40]}]}).encode()
        return sock.sendall(struct.pack(">Q", len(head)) + head)
    if MODE == "big":  # 8x the expected bytes, really sent
        n = arrays[0][1].size * 8
        head = json.dumps({**header, "arrays": [{"dtype": "float32", "shape": [n]}]}).encode()
        sock.sendall(struct.pack(">Q", len(head)) + head)
        return sock.sendall(bytes(4 * n))
    if MODE == "deep":
        head = b'{"type": "result", "host": 0.001, "out": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        return sock.sendall(struct.pack(">Q", len(head)) + head)
    if MODE == "dtype":
        return _send(sock, header, [("float64", a.astype("float64")) for _, a in arrays])
    if MODE == "index":
        return _send(sock, {**header, "out": {"__tensor__": 7}}, arrays)
    if MODE == "slow-report":
        return _send(sock, {**header, "host": 1e-6}, arrays)
    if MODE == "slow-the-echo":  # under-report, then load the machine while the scorer echoes
        _send(sock, {**header, "host": 1e-6}, arrays)
        import os, time
        for _ in range(2):
            if os.fork() == 0:
                end = time.perf_counter() + 0.02
                while time.perf_counter() < end:
                    pass
                os._exit(0)
        return None
_main.send = _forged
def custom_kernel(data):
    t = torch.zeros(1)
    for _ in range(WORK):
        t = t + data[0].sum() * 0
    return data[0] * 2.0
"""


class PlainRuntime:
    """Runs the driver as a plain subprocess of the test (the sandbox is not what is tested)."""

    def __init__(self, workdir: Path, source: str, budget: float = 120.0) -> None:
        self.workdir, self.source = workdir, source
        self.deadline = time.monotonic() + budget

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, argv: list[str], stdin: bytes = b"", timeout: float | None = None, **kw: Any) -> ExecResult:
        argv = fill(argv, sys.executable, str(project_root()))
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=self.workdir, input=stdin, capture_output=True, timeout=timeout)
        return ExecResult(p.returncode, p.stdout, p.stderr, time.monotonic() - t0, 0.0)


def _session(tmp_path: Path, source: str, **kw: Any) -> KernelSession:
    params = DriverParams(entry="custom_kernel", device="cpu", **kw)
    return KernelSession(PlainRuntime(tmp_path, source), params)  # type: ignore[arg-type]


def _forge(mode: str, work: int = 0) -> str:
    return f"MODE = {mode!r}\nWORK = {work}\n" + FORGE


def test_honest_call_round_trips_and_reports_the_bound(tmp_path: Path) -> None:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with _session(tmp_path, HONEST) as s:
        for _ in range(2):  # warm-up, as the scorers do: first calls are slow in a fresh process
            s.call([x], "call", [("float32", (3, 4))], timed=False)

        def more() -> float:
            return s.call([x], "call", [("float32", (3, 4))])[1].seconds

        times = [more() for _ in range(3)]
        out, t = s.call([x], "call", [("float32", (3, 4))])
        mean, bound = s.close_case([*times, t.seconds], more, "case")
    np.testing.assert_array_equal(out.array, (x * 2).numpy())
    assert 0 < t.seconds <= t.round_trip and t.overhead_lo > 0 and t.overhead_hi >= t.overhead_lo
    assert isinstance(bound, CaseBound) and bound.calls >= 4 and mean >= bound.lower >= 0.0


@pytest.mark.parametrize(
    ("mode", "error", "match"),
    [
        ("shape", CandidateInvalid, "rule 'shape'"),
        ("big", CandidateInvalid, "rule 'shape'"),
        ("deep", CandidateError, "malformed"),
        ("dtype", CandidateInvalid, "rule 'dtype'"),
        ("index", CandidateError, "malformed"),
    ],
)
def test_hostile_replies_are_the_candidates_fault(tmp_path: Path, mode: str, error: type, match: str) -> None:
    with _session(tmp_path, _forge(mode)) as s, pytest.raises(error, match=match):
        s.call([torch.ones(8)], "call", [("float32", (8,))])


def test_under_reported_time_is_invalid_once_the_bound_stands_above_the_floor(tmp_path: Path) -> None:
    # ~ms of real work per call, reported as 1 us: the trusted minima show the work.
    with _session(tmp_path, _forge("slow-report", work=3000)) as s:
        times = [s.call([torch.ones(8)], "call", [("float32", (8,))])[1].seconds for _ in range(3)]

        def more() -> float:
            return s.call([torch.ones(8)], "call", [("float32", (8,))])[1].seconds

        assert max(times) == pytest.approx(1e-6)
        with pytest.raises(CandidateInvalid, match="rule 'timing'"):
            s.close_case(times, more, "case")


def test_slowing_the_echo_turns_a_timing_verdict_into_no_score_at_most(tmp_path: Path) -> None:
    """A contestant who under-reports real work (ms per call, reported as 1 us) and, after every
    reply, forks two children that spin 20 ms while the scorer echoes the same request: the echo
    beside its fastest request may read as load, which can make the case undecided (an infra
    error: no score, retried), never a pass."""
    with _session(tmp_path, _forge("slow-the-echo", work=3000)) as s:

        def more() -> float:
            return s.call([torch.ones(8)], "call", [("float32", (8,))])[1].seconds

        times = [more() for _ in range(3)]
        with pytest.raises((CandidateInvalid, InfraError)) as verdict:
            s.close_case(times, more, "case")
    assert "rule 'timing'" in str(verdict.value) or "undecided under load" in str(verdict.value)


# An honest kernel whose replies are held back 1.5 ms (outside its timed call) while a stretch of
# load lasts: 250 ms from its third reply, as a busy CI machine slowed one honest driver's 14 round
# trips in a row past 1.2 ms.
LOADED_STRETCH = """
import sys, time, torch
_main = sys.modules["__main__"]
_send = _main.send
_n, _t0 = 0, None
def _slowed(sock, header, arrays=None):
    global _n, _t0
    if header.get("type") == "result":
        _n += 1
        if _n == 3:
            _t0 = time.perf_counter()
        if _t0 is not None and time.perf_counter() - _t0 < 0.25:
            time.sleep(0.0015)
    return _send(sock, header, arrays)
_main.send = _slowed
def custom_kernel(data):
    return data[0] * 2.0
"""


def test_an_honest_case_slowed_by_a_stretch_of_load_is_not_a_timing_verdict(tmp_path: Path) -> None:
    x = torch.ones(8)
    with _session(tmp_path, LOADED_STRETCH) as s:
        for _ in range(2):
            s.call([x], "warm-up", [("float32", (8,))], timed=False)

        def more() -> float:
            return s.call([x], "call", [("float32", (8,))])[1].seconds

        times = [more() for _ in range(3)]
        assert s.suspect()  # the stretch alone would read as under-reporting
        try:
            mean, bound = s.close_case(times, more, "case")
        except InfraError as e:
            # Real load on this machine outlasted the confirming rounds (CI: 3 test workers, a
            # Docker build and a pip install on 2 cores): undecided, never a verdict on the candidate.
            assert "undecided under load" in e.reason
            return
    assert bound.lower < 200e-6 and mean < 1e-3, bound


def test_a_batch_returns_one_checked_output_per_input_set(tmp_path: Path) -> None:
    xs = [torch.full((4,), float(i)) for i in range(6)]
    with _session(tmp_path, HONEST) as s:
        outs, t = s.call_many([[x] for x in xs], "batch", [[("float32", (4,))]] * 6)
        with pytest.raises(ValueError, match="one expected"):
            s.call_many([[xs[0]]], "batch", [])
    assert [float(o.array[0]) for o in outs] == [2.0 * i for i in range(6)]
    assert t.reps == 6 and t.seconds == pytest.approx(t.host_seconds / 6)


def test_batching_flags_under_reporting_of_kernels_shorter_than_the_transport(tmp_path: Path) -> None:
    # A few hundred us of real work per call (about the transport's size), reported as 1 us per
    # request: alone the bound would stay under the 200 us floor; 16 calls per request lift it.
    with _session(tmp_path, _forge("slow-report", work=400)) as s:
        one = [[torch.ones(8)]] * 16
        spec = [[("float32", (8,))]] * 16
        s.call_many(one, "warm-up", spec, timed=False)

        def more() -> float:
            return s.call_many(one, "call", spec)[1].seconds

        times = [more() for _ in range(3)]
        assert max(times) == pytest.approx(1e-6 / 16)
        bound = s.case_bound()
        assert bound.reps == 16 and bound.lower > 200e-6, bound
        with pytest.raises(CandidateInvalid, match="requests of 16 calls"):
            s.close_case(times, more, "case")


def test_case_mean_is_raised_to_the_trusted_bound() -> None:
    b = CaseBound(lower=2e-3, fastest_round_trip=3e-3, overhead_lo=1e-3, reported_median=1e-6, calls=3)
    assert b.mean([1e-6, 1e-6]) == (2e-3, "round-trip")
    assert b.mean([3e-3, 5e-3]) == (4e-3, "reported")


_PEAK = """
import json, resource, sys
from pathlib import Path
import torch
sys.path.insert(0, {tests!r})
from test_kernel_session import _forge, _session, HONEST
src = HONEST if sys.argv[1] == "honest" else _forge("big")
x = torch.ones(1 << 23)  # 32 MiB in, 32 MiB out
try:
    with _session(Path(sys.argv[2]), src) as s:
        s.call([x], "call", [("float32", tuple(x.shape))], timed=False)
    verdict = "ok"
except Exception as e:
    verdict = type(e).__name__
print(json.dumps([verdict, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""


@pytest.mark.slow
def test_trusted_peak_memory_under_an_oversized_reply(tmp_path: Path) -> None:
    code = _PEAK.format(tests=str(Path(__file__).parent))
    peaks = {}
    for kind in ("honest", "big"):
        d = tmp_path / kind
        d.mkdir()
        p = subprocess.run(
            [sys.executable, "-c", code, kind, str(d)], capture_output=True, text=True, timeout=300
        )
        assert p.returncode == 0, p.stderr[-2000:]
        verdict, peak = json.loads(p.stdout.strip().splitlines()[-1])
        peaks[kind] = (verdict, peak)
    assert peaks["honest"][0] == "ok" and peaks["big"][0] == "CandidateInvalid"
    assert peaks["big"][1] <= 1.5 * peaks["honest"][1], peaks


@pytest.mark.slow
def test_full_size_trimul_output_streams_through_the_wire(tmp_path: Path) -> None:
    from environments.trimul.reference import TriMulCase, generate, trimul

    src = (Path(__file__).parents[3] / "environments/trimul/initial_program.py").read_text()
    # trimul-h100's C = 384 and hidden 128 at N = 256 (N = 1024 takes minutes on one CPU core):
    # the 100 MB output is far over any fixed message cap and streams into its preallocated array.
    case = TriMulCase(seqlen=256, bs=1, dim=384, hiddendim=128, seed=5, nomask=False, distribution="normal")
    args = generate(case, 7, "cpu")
    with _session(tmp_path, src) as s:
        out, t = s.call(args, "full-size", [("float32", tuple(args[0].shape))], timed=False)
    want = trimul(*args[:3])
    assert out.array.shape == (1, 256, 256, 384) and t.round_trip > t.seconds > 0
    np.testing.assert_allclose(out.array, want.numpy(), rtol=2e-2, atol=2e-2)


def test_mla_kv_cache_of_the_gpu_variant_round_trips_through_the_wire(tmp_path: Path) -> None:
    from environments.mla_decode.reference import MLAConfig, generate
    from environments.mla_decode.scorer import CACHE_INDEX, MLATask
    from harness.kernels.evaluate import Case

    # The GPU variant's model shapes (DeepSeek-V3) with a batch of 2 and a 1024-row cache; the
    # kernel writes one cache row and returns the cache it was given (the mutable input).
    cfg = MLAConfig(batch_size=2, max_seq_len=1024)
    src = """
import torch
def custom_kernel(data):
    config, x, kv = data
    kv["data"][:, kv["seq_len"]] = 1.0
    return torch.zeros((x.shape[0], 1, config["dim"]), dtype=torch.bfloat16), kv["data"]
"""
    task = MLATask(cfg, "cpu", 2e-2, 8e-3)
    args = generate(cfg, 100, 3, "cpu")
    expect = task.expected(Case("c", 3, {"prefill": 100}), args)
    with _session(tmp_path, src, mutable=(CACHE_INDEX,)) as s:
        (out, cache), _ = s.call(args, "mla", expect, timed=False)
    want = args[2]["data"].float().numpy().copy()
    want[:, 100] = 1.0
    assert out.dtype == cache.dtype == "bfloat16" and out.array.shape == (2, 1, cfg.dim)
    np.testing.assert_array_equal(cache.array, want)


def test_a_session_holds_its_cpu_while_open_and_gives_it_back_after_a_failed_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.hardware import cpus
    from harness.sandbox.limits.cpu import group_cpu_possible

    if not group_cpu_possible():
        pytest.skip("no cgroup CPU counter here: the OS clock (and its pinning) is off")
    monkeypatch.setattr(cpus, "LOCK_DIR", tmp_path / "leases")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with _session(tmp_path / "a", HONEST):
        assert cpus._lease.get("users") == 1 and "fd" in cpus._lease
    assert not cpus._lease
    failing = _session(tmp_path / "b", "1 / 0\n")
    with pytest.raises(CandidateError, match="loading the program failed"), failing:
        pass
    assert not cpus._lease  # a failed start closes what it started, the lease with it
