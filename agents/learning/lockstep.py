"""Lockstep batching of the islands' concurrent policy calls (membership independent of timing).

During a step's draft phase every island runs on its own thread and blocks on the policy for
each advisor (and, end to end, implementer) call. A :class:`Lockstep` session is opened with
the participating islands; a batch fires when every live participant is waiting, so round
``k`` holds exactly each live island's ``k``-th call, in island order, whatever the threads'
timing. A participant leaves when its draft ends (in ``finally``, so an exception cannot
deadlock the others); its departure may complete a round. Rows keep their own seeds, so a
row's sample does not depend on its batch mates' draws.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from agents.pacevolve.threads import run_on_threads
from agents.rl.backends.base import Completion, SampleRequest

T = TypeVar("T")
R = TypeVar("R")


class Lockstep:
    """Serves the calls of a session's participants as one batch per round.

    Args:
        run_batch: Samples a list of requests (in order) and returns one completion each.
    """

    def __init__(self, run_batch: Callable[[list[SampleRequest]], list[Completion]]) -> None:
        """Bind the batch function; no session is open."""
        self._run_batch = run_batch
        self._cond = threading.Condition()
        self._live: set[int] = set()
        self._pending: dict[int, SampleRequest] = {}
        self._results: dict[int, Completion | BaseException] = {}
        self.batch_sizes: list[int] = []
        """Size of every batch fired (diagnostics)."""

    @contextmanager
    def session(self, participants: Sequence[int]) -> Iterator[None]:
        """Open a session for these participant keys (islands) for the duration of the block.

        Raises:
            RuntimeError: If a session is already open.
        """
        with self._cond:
            if self._live:
                raise RuntimeError("a lockstep session is already open")
            self._live = set(participants)
        try:
            yield
        finally:
            with self._cond:
                self._live.clear()
                self._pending.clear()
                self._results.clear()

    def is_participant(self, key: int) -> bool:
        """Whether ``key`` is a live participant of the open session."""
        with self._cond:
            return key in self._live

    def leave(self, key: int) -> None:
        """Remove a participant (its draft ended); may complete the current round."""
        with self._cond:
            self._live.discard(key)
            self._maybe_fire()

    def submit(self, key: int, request: SampleRequest) -> Completion:
        """Wait for this round's batch and return this participant's completion.

        Raises:
            RuntimeError: If ``key`` is not a live participant or already has a call waiting.
            Exception: Whatever the batch raised.
        """
        with self._cond:
            if key not in self._live or key in self._pending:
                raise RuntimeError(f"participant {key} cannot submit now")
            self._pending[key] = request
            self._maybe_fire()
            while key not in self._results:
                self._cond.wait()
            out = self._results.pop(key)
        if isinstance(out, BaseException):
            raise out
        return out

    def _maybe_fire(self) -> None:
        """Run the round's batch when every live participant is waiting (caller holds the lock).

        The batch runs under the lock: every participant is blocked in :meth:`submit` then, so
        nothing else can change the session meanwhile.
        """
        if not self._pending or set(self._pending) != self._live:
            return
        keys = sorted(self._pending)
        requests = [self._pending.pop(k) for k in keys]
        self.batch_sizes.append(len(keys))
        try:
            completions = self._run_batch(requests)
            for k, c in zip(keys, completions, strict=True):
                self._results[k] = c
        except BaseException as e:  # every member of the batch sees the failure
            for k in keys:
                self._results[k] = e
        self._cond.notify_all()


def run_all(fn: Callable[[T], R], items: Sequence[T], key: Callable[[T], int], lockstep: Lockstep) -> list[R]:
    """``[fn(x) for x in items]``, every item on its own thread, inside one lockstep session.

    All items run at once: a participant waiting for a thread slot would stall every round.

    Raises:
        BaseException: The first exception by item order, after all threads finished.
    """
    with lockstep.session([key(x) for x in items]):
        return run_on_threads(fn, items, name="lockstep", after=lambda x: lockstep.leave(key(x)))
