"""Base scorer of kernel families: device check, driver session, ranked loop, metrics."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from harness.envs.subset import QUICK_KEY, QUICK_SUPPORT_KEY
from harness.evaluation.errors import InfraError
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer
from harness.scoring.device import DeviceChoice, choose_device

from .batch import BatchPlan
from .checks import StopRule
from .evaluate import Case, KernelTask, quick_rules, run_cases
from .session import DriverParams, KernelSession
from .timing import ProbeWork

PROBE_SEED = 20_261_127
"""Seed of the family probe's inputs (public: the probe is the scorer's own work)."""


class KernelScorer(Scorer):
    """Scores ``entry(data)`` kernels by the geometric mean of benchmark means (microseconds).

    Scorer parameters read here: ``stop`` (``StopRule`` fields, ``max_wall_s`` GPU MODE's wall cap
    per benchmark), ``quick_timed_calls`` and ``quick`` (the ``<id>~quick`` reduced mode:
    :func:`~harness.kernels.evaluate.quick_rules`), ``warmup``, ``floor_us``,
    ``l2_flush_bytes``, ``threads``, ``timing_floor_us``,
    ``transport_margin_us`` (``DriverParams``). The
    variant's ``hardware.gpu`` names the GPU required; a CPU variant (empty) times with
    ``perf_counter`` and says so in ``timing_cpu``.
    """

    entry = "custom_kernel"
    mutable: tuple[int, ...] = ()

    def prepare(self) -> None:
        """Check the machine's GPU (fail fast) and build the cases.

        Raises:
            InfraError: The variant's GPU is not here (and no override was given), or the
                manifest's parameters are malformed.
        """
        self.device: DeviceChoice = choose_device(
            self.variant.hardware.gpu, gpu_count=self.variant.hardware.gpu_count
        )
        try:
            self.stop = StopRule(**dict(self.params.get("stop", {})))
        except TypeError as e:
            raise InfraError(f"bad [scorer] stop parameters: {e}") from e
        try:
            self.plan = BatchPlan.from_params(self.params)
        except (TypeError, ValueError) as e:
            raise InfraError(f"bad [scorer] batching parameters: {e}") from e
        self.tests, self.benchmarks = self.cases()

    @abstractmethod
    def cases(self) -> tuple[Sequence[Case], Sequence[Case]]:
        """The test and benchmark cases of the variant (validated).

        Raises:
            InfraError: The manifest's cases are malformed.
        """

    @abstractmethod
    def task(self) -> KernelTask:
        """Input generation and output check on ``self.device.device``."""

    def probe_work(self) -> ProbeWork | None:
        """The family's own speed probe: its reference on the first benchmark's inputs.

        Used where the manifest gives ``probe_ref_us`` (the reference's CPU microseconds per call
        on the reference machine, quiet) and the task has a ``reference(case, args)``; else None
        (the float32 matmul probe). The inputs come from a fixed public seed: the probe is the
        trusted side's own work, in its own process.

        Raises:
            InfraError: ``probe_ref_us`` is not a positive number.
        """
        ref_us = self.params.get("probe_ref_us")
        task = self.task()
        reference = getattr(task, "reference", None)
        if ref_us is None or reference is None or not self.benchmarks:
            return None
        try:
            ref_s = float(ref_us) * 1e-6
        except (TypeError, ValueError):
            ref_s = math.nan
        if not ref_s > 0 or math.isinf(ref_s):
            raise InfraError(f"[scorer] probe_ref_us must be a positive number, not {ref_us!r}")
        case = self.benchmarks[0]
        args = task.inputs(case, PROBE_SEED)
        return ProbeWork(f"{self.variant.id}/{case.name}", lambda: reference(case, args), ref_s)

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Run the ranked loop in a driver session (see ``harness.kernels.evaluate``)."""
        params = DriverParams(
            entry=self.entry,
            device=self.device.device,
            l2_flush_bytes=int(self.params.get("l2_flush_bytes", 0)),
            mutable=self.mutable,
            threads=int(self.params.get("threads", 1)),
            timing_floor_s=float(self.params.get("timing_floor_us", 200.0)) * 1e-6,
            transport_margin_s=float(self.params.get("transport_margin_us", 100.0)) * 1e-6,
            transport_slack=float(self.params.get("transport_slack", 0.1)),
            suspect_ratio=float(self.params.get("timing_suspect_ratio", 0.5)),
            probe=self.probe_work() if self.device.device == "cpu" else None,
            cuda_index=self.device.index,
        )
        stop, plan = self.stop, self.plan
        quick = bool(self.params.get(QUICK_KEY))  # read here: a prepared scorer is rebound to ~quick
        if quick:
            stop, plan = quick_rules(stop, plan, int(self.params[QUICK_SUPPORT_KEY]))
        with KernelSession(candidate, params, prefix=self.variant.family) as session:
            report = run_cases(
                session,
                self.task(),
                self.tests,
                self.benchmarks,
                stop,
                warmup=int(self.params.get("warmup", 1)),
                floor_us=float(self.params.get("floor_us", 1.0)),
                plan=plan,
            )
        metrics: dict[str, Any] = report.metrics()
        metrics.update(self.device.metrics())
        metrics["quick"] = float(quick)
        if quick:
            for c in report.cases:
                if c.score is not None:
                    c.reason = f"reduced mode ({self.variant.id}; not a full evaluation): {c.reason}"
        return ScoreOutcome(score=report.score_us, metrics=metrics, cases=report.cases)
