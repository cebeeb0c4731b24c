"""Tie a worker process's life to its parent's: when the parent dies, the worker cleans up and exits.

``prctl(PR_SET_PDEATHSIG)`` fires when the *thread* that forked the child exits, and the process
pool may start a worker from any thread (a retry timer, an agent's thread), so a short-lived
thread would kill a healthy worker. A daemon thread that polls ``getppid()`` follows the parent
*process* instead: once the parent is gone the child is re-parented and the pid changes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 0.2
"""How often the watchdog looks at its parent (an orphan lives at most this long plus cleanup)."""


def start_parent_watchdog(
    cleanup: Callable[[], None], *, parent: int | None = None, poll_s: float = POLL_S
) -> threading.Thread:
    """Start a daemon thread that runs ``cleanup`` and ends the process once ``parent`` is gone.

    Args:
        cleanup: Called once, best effort, before ``os._exit`` (e.g. stop the sandboxes).
        parent: The pid to follow (default: the current parent).
        poll_s: Seconds between checks.

    Returns:
        The started thread.
    """
    expected = os.getppid() if parent is None else parent

    def watch() -> None:
        ev = threading.Event()
        while os.getppid() == expected:
            ev.wait(poll_s)
        try:
            cleanup()
        except BaseException as e:  # noqa: BLE001 - we exit either way
            log.warning("cleanup after the parent's death failed: %r", e)
        finally:
            os._exit(1)

    t = threading.Thread(target=watch, name="evobench-parent-watchdog", daemon=True)
    t.start()
    return t
