"""TriMul scorer: 18 tests and 7 benchmarks (upstream seeds), ranked mode, geomean of means in µs.

The protocol (trust split, timing, integrity, per-call inputs) is ``harness.kernels``; this module
supplies the cases, the input generator and the check (rtol = atol = 2e-2 against the reference
computed here; the candidate only ever receives the inputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from harness.evaluation.errors import InfraError
from harness.kernels.checks import compare
from harness.kernels.evaluate import Case, KernelTask
from harness.kernels.scorer import KernelScorer
from harness.kernels.session import OutSpec
from harness.kernels.wall import CaseSize

from .reference import TriMulCase, generate, trimul


class TriMulTask:
    """Inputs and check of one TriMul call on ``device``."""

    def __init__(self, device: str, rtol: float, atol: float) -> None:
        """Bind the device and tolerances."""
        self.device, self.rtol, self.atol = device, rtol, atol

    def inputs(self, case: Case, seed: int) -> Any:
        """``[input, mask, weights, config]`` generated from ``seed``."""
        return generate(TriMulCase(**case.spec), seed, self.device)

    def expected(self, case: Case, args: Any) -> list[OutSpec]:
        """One float32 tensor shaped like the input ``(bs, n, n, dim)``."""
        return [("float32", tuple(args[0].shape))]

    def check(self, case: Case, args: Any, out: Any) -> None:
        """Compare with the reference for ``args`` (raises ``CandidateInvalid``)."""
        x, mask, w, _ = args
        # Compared on the device the reference was computed on (the scorer's GPU for GPU variants).
        compare("output", out, trimul(x, mask, w), self.rtol, self.atol)


def _cases(raw: Any, kind: str) -> list[Case]:
    if not isinstance(raw, list) or not raw:
        raise InfraError(f"[scorer] {kind} must be a non-empty list of cases")
    out = []
    for i, spec in enumerate(raw):
        try:
            c = TriMulCase(**spec)
        except (TypeError, ValidationError) as e:
            raise InfraError(f"[scorer] {kind}[{i}] is not a valid TriMul case: {e}") from e
        mask = "nomask" if c.nomask else "masked"
        name = f"{kind[:-1]}{i}_n{c.seqlen}_b{c.bs}_c{c.dim}_{mask}_{c.distribution}"
        out.append(Case(name, c.seed, c.model_dump()))
    return out


def call_bytes(c: TriMulCase) -> tuple[int, int]:
    """Bytes one call of case ``c`` moves in (input, mask, weights) and out (the output)."""
    rows = c.bs * c.seqlen * c.seqlen
    weights = (2 * c.dim + 5 * c.hiddendim * c.dim + 2 * c.hiddendim + c.dim * c.hiddendim) * 4
    mask = rows * (4 if c.nomask else 8)  # float ones, or int64 0/1 (``reference.generate``)
    return rows * c.dim * 4 + mask + weights, rows * c.dim * 4


def wall_sizes(params: dict[str, Any]) -> tuple[list[CaseSize], list[CaseSize]]:
    """The tests' and benchmarks' call sizes under ``params`` (``harness.kernels.wall``).

    Raises:
        InfraError: The manifest's cases are malformed.
    """

    def sizes(cases: list[Case]) -> list[CaseSize]:
        return [CaseSize(c.name, *call_bytes(TriMulCase(**c.spec))) for c in cases]

    return sizes(_cases(params.get("tests"), "tests")), sizes(_cases(params.get("benchmarks"), "benchmarks"))


class TriMulScorer(KernelScorer):
    """See the module docstring; parameters in ``env.toml``."""

    def cases(self) -> tuple[Sequence[Case], Sequence[Case]]:
        """Tests and benchmarks from the manifest (booleans parsed as booleans)."""
        return _cases(self.params.get("tests"), "tests"), _cases(self.params.get("benchmarks"), "benchmarks")

    def task(self) -> KernelTask:
        """TriMul on the chosen device."""
        return TriMulTask(self.device.device, float(self.params["rtol"]), float(self.params["atol"]))
