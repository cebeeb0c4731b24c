"""Running one function over items on daemon threads (islands drafting, absorbing, lockstep rounds)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def run_on_threads(
    fn: Callable[[T], Any],
    items: Sequence[T],
    *,
    name: str,
    workers: int | None = None,
    after: Callable[[T], None] | None = None,
) -> list[Any]:
    """``[fn(x) for x in items]``, each item on its own daemon thread.

    Daemon threads let Ctrl-C end a run at once instead of waiting for slow model calls.

    Args:
        fn: The function.
        items: Its arguments, one thread each.
        name: Thread name prefix (``<name>-<index>``).
        workers: At most this many run at once (None: all).
        after: Called with the item in each thread's ``finally`` (e.g. leaving a lockstep session).

    Returns:
        The results in item order.

    Raises:
        BaseException: The first exception by item order, after all threads finished.
    """
    results: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)
    slots = threading.Semaphore(workers or max(1, len(items)))

    def work(i: int, x: T) -> None:
        with slots:
            try:
                results[i] = fn(x)
            except BaseException as e:  # re-raised in the calling thread below
                errors[i] = e
            finally:
                if after is not None:
                    after(x)

    def thread(i: int, x: T) -> threading.Thread:
        return threading.Thread(target=work, args=(i, x), name=f"{name}-{i}", daemon=True)

    threads = [thread(i, x) for i, x in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
