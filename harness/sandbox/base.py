"""The ``Sandbox`` interface every evaluation backend implements (local, docker, modal)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, as_completed
from types import TracebackType

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult


class Sandbox(ABC):
    """Evaluates candidate programs for environment variants in isolation.

    Implementations must pass ``tests/harness/sandbox/conformance.py``: hostile candidates are
    contained (time, memory, processes, output, network, files, secrets) and harness failures
    come back as ``infra_error`` results, never as exceptions or candidate failures.
    """

    name: str = "abstract"
    """Backend id recorded in every result."""

    @abstractmethod
    def submit(self, variant: Variant, source: str) -> Future[EvalResult]:
        """Start evaluating one program; the future always resolves to an ``EvalResult``.

        Raises:
            RuntimeError: If the sandbox has been closed.
        """

    def evaluate(self, variant: Variant, source: str) -> EvalResult:
        """Evaluate one program and wait for the result."""
        return self.submit(variant, source).result()

    def evaluate_many(self, variant: Variant, sources: Sequence[str]) -> list[EvalResult]:
        """Evaluate programs in parallel; results are in input order."""
        futures = [self.submit(variant, s) for s in sources]
        return [f.result() for f in futures]

    def as_completed(self, variant: Variant, sources: Sequence[str]) -> Iterator[tuple[int, EvalResult]]:
        """Evaluate programs in parallel, yielding ``(index, result)`` as each finishes."""
        futures = {self.submit(variant, s): i for i, s in enumerate(sources)}
        for f in as_completed(futures):
            yield futures[f], f.result()

    def start(self, workers: int | None = None) -> None:
        """Begin starting workers now, in the background (default: they start on first use).

        ``workers``: how many to start now (None: all); the others start when work needs them.
        A caller that has other work to do before its first evaluation (a run preparing its agent
        and its store) calls this first, so that the workers' start overlaps that work.
        """
        return None  # the base's workers start with the first submission

    @abstractmethod
    def close(self) -> None:
        """Stop workers and kill every sandboxed process; idempotent."""

    def terminate(self) -> None:
        """Stop at once (on Ctrl-C or an error): abandon queued work, kill workers. Default: close."""
        self.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.close()
        else:
            self.terminate()
