"""A Triton submission on ``trimul-tiny``: Triton's interpreter runs it on CPU tensors in the sandbox.

The sandbox of a variant without a GPU gets ``TRITON_INTERPRET=1`` (harness/sandbox/isolation.py);
the kernel below computes the output gate with ``tl.sigmoid`` and must match the reference.
"""

from __future__ import annotations

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.sandbox.isolation import sandbox_env

pytest.importorskip("triton", reason="triton is not installed (pip install 'evobench[triton]')")

TRITON_SUBMISSION = """
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _gate(a_ptr, g_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    g = tl.load(g_ptr + offs, mask=m)
    tl.store(o_ptr + offs, a * tl.sigmoid(g), mask=m)


def gate(a, g):
    a, g = a.contiguous(), g.contiguous()
    out = torch.empty_like(a)
    n = a.numel()
    _gate[(triton.cdiv(n, 1024),)](a, g, out, n, BLOCK=1024)
    return out


def custom_kernel(data):
    x, mask, w, config = data
    c, h = config["dim"], config["hidden_dim"]
    xn = F.layer_norm(x, (c,), w["norm.weight"], w["norm.bias"], 1e-5)
    m = mask.to(x.dtype).unsqueeze(-1)
    left = gate(F.linear(xn, w["left_proj.weight"]) * m, F.linear(xn, w["left_gate.weight"]))
    right = gate(F.linear(xn, w["right_proj.weight"]) * m, F.linear(xn, w["right_gate.weight"]))
    o = torch.matmul(left.permute(0, 3, 1, 2), right.permute(0, 3, 2, 1)).permute(0, 2, 3, 1)
    o = F.layer_norm(o, (h,), w["to_out_norm.weight"], w["to_out_norm.bias"], 1e-5)
    return F.linear(gate(o, F.linear(xn, w["out_gate.weight"])), w["to_out.weight"])
"""


def test_cpu_sandboxes_run_triton_in_its_interpreter() -> None:
    v = default_registry().get("trimul-tiny")
    assert sandbox_env(v.hardware, 0)["TRITON_INTERPRET"] == "1"


def test_triton_submission_scores_on_trimul_tiny(local_backend: object) -> None:
    v = default_registry().get("trimul-tiny")
    res = local_backend.evaluate(v, TRITON_SUBMISSION)  # type: ignore[attr-defined]
    assert res.status is Status.OK, res.reason
    assert res.score is not None and res.score > 0
    assert res.metrics["timing_cpu"] == 1.0  # interpreter times are CPU times, labelled as such
    assert [c.status for c in res.cases] == ["ok"] * 6  # 4 tests, 2 benchmarks
    bench = res.cases[-1]
    assert bench.score == pytest.approx(res.metrics[f"{bench.name}_us"])
    if res.metrics["timing_os_cpu"] == 1.0:  # the sandbox's cgroup CPU counted (labelled so)
        assert bench.cpu_seconds == pytest.approx(bench.score * 1e-6) and bench.wall_seconds is None
        assert "measured by the OS" in bench.reason
    else:  # no cgroup counter here: the report, bounded by the round trip
        assert bench.wall_seconds is not None and "host perf_counter (CPU run" in bench.reason
    broken = TRITON_SUBMISSION.replace("a * tl.sigmoid(g)", "a * tl.sigmoid(g) + 1.0")
    bad = local_backend.evaluate(v, broken)  # type: ignore[attr-defined]
    assert bad.status is Status.INVALID, bad.reason  # the kernel really ran: its bug is caught
    assert [c.status for c in bad.cases] == ["invalid"] and bad.cases[0].name in bad.reason
