"""The contract between a family's trusted scorer and the sandboxed candidate.

A scorer never imports or executes candidate code itself. It receives a
:class:`CandidateRuntime`, whose methods run the candidate in an isolated child process
(no network, no data, scrubbed environment, hard limits) and return plain values decoded
from a safe wire format. The scorer owns the inputs and the clock.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.evaluation.errors import CandidateInvalid
from harness.evaluation.result import CaseRecord
from harness.scoring.device import DeviceChoice

if TYPE_CHECKING:
    from harness.envs.registry import Variant


@dataclass(frozen=True)
class CallResult:
    """Value returned by one candidate call and its trusted-side wall time."""

    value: Any
    """Decoded return value (numbers, strings, lists, dicts, numpy arrays, torch tensors)."""
    seconds: float
    """Round-trip wall time of the call, measured by the trusted process."""


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one sandboxed process run (e.g. a compiled C++ candidate on one test case)."""

    returncode: int | None
    """Exit code; None when the process was killed for a limit."""
    stdout: bytes
    """Captured stdout (capped)."""
    stderr: bytes
    """Captured stderr (capped)."""
    seconds: float
    """Wall time measured by the trusted side."""
    cpu_seconds: float
    """CPU time (user + system) of the process and its children."""
    timed_out: bool = False
    """Whether a wall or CPU limit killed it."""
    limit: str = ""
    """Which limit ended it (``wall``, ``cpu``, ``memory``, ``output``, ``disk``), if any. ``disk``: a
    write failed on the candidate's disk quota (``Hardware.disk_mb``); the command may still have
    exited normally if it ignored the failure."""
    wait_seconds: float = float("nan")
    """Seconds the tree waited for a CPU (host load), when measured; NaN otherwise."""
    cpu_measured: bool = False
    """Whether ``cpu_seconds`` is the whole tree's exact figure (a cgroup's counter)."""


class CandidateRuntime(Protocol):
    """Trusted-side handle on the sandboxed candidate, given to ``Scorer.score``."""

    @property
    def source(self) -> str:
        """The candidate program's text (for static checks)."""
        ...

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        """Call a function of a Python candidate in its sandboxed process.

        Args:
            function: Name of a top-level function of the candidate module.
            *args: Positional arguments (numbers, strings, lists, dicts, arrays, tensors).
            timeout: Seconds for this call; defaults to what is left of the evaluation's budget.

        Returns:
            The decoded value and the trusted-side wall time.

        Raises:
            CandidateError: The candidate raised, crashed or returned something the wire
                format rejects.
            CandidateTimeout: The call ran past its limit; the process tree was killed.
        """
        ...

    def call_driver(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        """Call a function of the family's sandbox driver, in the candidate's sandboxed process.

        The driver (manifest ``family.sandbox_driver``) is trusted harness code loaded next to the
        candidate; ``driver.<function>(candidate_module, *args)`` runs there, so it can adapt wire
        values (e.g. build DataFrames) before calling the candidate's declared entry point.

        Raises:
            CandidateError: The call raised, crashed or returned something the wire rejects.
            CandidateTimeout: The call ran past its limit; the process tree was killed.
            InfraError: The family declares no sandbox driver.
        """
        ...

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        """Trusted estimate of the IPC round trip for these arguments (before any candidate code runs).

        Raises:
            RuntimeError: If called after the first ``call``.
            InfraError: If the sandbox cannot be started.
        """
        ...

    def end_calls(self) -> None:
        """End the process that ``call`` / ``call_driver`` use and every process it started.

        Returns once all of them have exited (no lock, file or socket of theirs survives), so a
        later phase (``run``, or a ``call`` in a fresh process) cannot meet the earlier one.

        Raises:
            InfraError: If the processes do not exit.
        """
        ...

    def run(
        self,
        argv: list[str],
        stdin: bytes = b"",
        *,
        timeout: float,
        cpu_seconds: float | None = None,
        memory_mb: int | None = None,
        cpus: tuple[int, ...] | None = None,
        active_seconds: float | None = None,
        fresh_cwd: tuple[str, ...] | None = None,
    ) -> ExecResult:
        """Run a command in a fresh sandboxed process whose cwd holds the candidate's files.

        ``cpu_seconds`` kills the tree once its CPU time exceeds it (precisely where a cgroup
        measures it, else by ``RLIMIT_CPU`` in whole seconds); ``cpus`` pins it to those CPUs;
        ``active_seconds`` kills it once elapsed time minus its run-queue wait exceeds it
        (``timeout`` stays the absolute wall cap). ``fresh_cwd``: instead of :attr:`workdir`, the
        cwd is a fresh, empty directory (disk quota ``Hardware.disk_mb``) holding read-only copies
        of these files of :attr:`workdir` (e.g. a compiled binary, run as ``./main``); nothing the
        command writes there is seen by any other command. Under bubblewrap (the local backend) its
        ``/tmp`` and ``/dev/shm`` are fresh too and the workdir is out of its reach; in a container
        those stay shared by the evaluation's commands (see ``harness.sandbox.freshdir``).

        Raises:
            InfraError: The sandbox could not be started.
            ValueError: A ``fresh_cwd`` name is not a regular file of :attr:`workdir`.
        """
        ...

    @property
    def workdir(self) -> Path:
        """Directory (trusted-side path) that the sandboxed process sees as its cwd."""
        ...

    def remaining(self) -> float:
        """Seconds left of this evaluation's wall-clock budget."""
        ...


@dataclass
class ScoreOutcome:
    """What a scorer returns for a valid candidate."""

    score: float
    """Combined score (must be finite)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """All reported metrics (finite)."""
    candidate_seconds: float = 0.0
    """Time spent inside candidate calls, for the phase breakdown."""
    cases: list[CaseRecord] = field(default_factory=list)
    """Per-unit verdicts (test cases, benchmarks, splits), where the family has units."""


class Scorer(ABC):
    """Base class of a family's fixed, trusted scorer.

    One instance is created per worker process and variant; ``prepare`` loads data once and
    ``score`` is called once per candidate.

    Subsets (families whose manifest sets ``subset_unit``): ``score`` reads
    ``harness.envs.subset.subset_of(self.params)`` and scores only those units. ``prepare``
    must not depend on it: workers prepare the base variant once and :meth:`rebind` the prepared
    scorer to each subset variant.
    """

    def __init__(self, variant: Variant, data_dir: Path) -> None:
        """Bind the scorer to a variant.

        Args:
            variant: The resolved variant (parameters in ``variant.scorer_params``).
            data_dir: Cache directory holding this family's downloaded data.
        """
        self.variant = variant
        self.params = dict(variant.scorer_params)
        self.data_dir = data_dir

    def rebind(self, variant: Variant) -> Scorer:
        """A shallow copy of this prepared scorer bound to ``variant`` (a subset of the same base).

        Prepared state (data, limits) is shared, so ``score`` must treat it as read-only.

        Raises:
            ValueError: If ``variant`` does not derive from this scorer's variant.
        """
        if (variant.base_id, variant.base_hash) != (self.variant.id, self.variant.hash):
            raise ValueError(f"{variant.id} does not derive from {self.variant.id}; prepare a scorer for it")
        clone = copy.copy(self)
        clone.variant = variant
        clone.params = dict(variant.scorer_params)
        return clone

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Load or generate the variant's inputs (trusted side). Called once per worker.

        Raises:
            DataMissingError: If required data has not been fetched.
        """

    def sandbox_source(self, source: str) -> str:
        """The program text the sandbox loads for ``source`` (default: the submitted text).

        A family whose submitted text may carry data outside the program's meaning (formatting,
        comments) returns a canonical form here: the harness then never sends the submitted text
        into the sandbox, and ``CandidateRuntime.source`` is this text.

        Raises:
            CandidateError: The text cannot be a program of this family (e.g. it does not parse).
            CandidateInvalid: The text breaks a rule of the family (e.g. its size).
        """
        return source

    def device_label(self) -> str:
        """The device this scorer times on, recorded with each of its results ("" if none).

        Scorers that time on a chosen device keep its :class:`~harness.scoring.device.DeviceChoice`
        in ``self.device`` (set by ``prepare``); results of different devices are never pooled.
        """
        device = getattr(self, "device", None)
        return device.label if isinstance(device, DeviceChoice) else ""

    @abstractmethod
    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Run and score one candidate.

        Raises:
            CandidateInvalid: The output breaks a task rule (the message names it).
            CandidateError: Propagated from the runtime.
            CandidateTimeout: Propagated from the runtime.
        """


def disk_quota_reason(disk_mb: int) -> str:
    """The phrase every error of a candidate that hit its disk quota (``Hardware.disk_mb``) carries."""
    return f"disk quota {disk_mb} MiB reached (No space left on device)"


def require_finite(name: str, value: float) -> float:
    """Return ``value`` as float, or raise :class:`CandidateInvalid` if it is NaN or infinite.

    Raises:
        CandidateInvalid: If ``value`` is not a finite real number.
    """
    try:
        x = float(value)
    except (TypeError, ValueError) as e:
        raise CandidateInvalid(f"{name} is not a number: {value!r}") from e
    if not math.isfinite(x):
        raise CandidateInvalid(f"{name} is not finite ({x})")
    return x
