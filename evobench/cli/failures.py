"""How the CLI meets failures: stop signals as interrupts, and one ``bench: error:`` line per failure."""

from __future__ import annotations

import errno
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from harness.results.atomic import LockHeldError
from harness.results.store import RunLockedError
from harness.runner.completion import describe_error

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""What ``timeout``, SLURM, Kubernetes and a closed terminal send; handled like Ctrl-C."""


class SignalInterrupt(KeyboardInterrupt):
    """A stop signal, raised where Ctrl-C's ``KeyboardInterrupt`` would be (same clean path)."""

    def __init__(self, signum: int) -> None:
        """Remember which signal stopped the run."""
        super().__init__(signal.Signals(signum).name)
        self.signal_name = signal.Signals(signum).name


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`SignalInterrupt` in the main thread.

    A second signal while the first is being handled is ignored (the run is already stopping);
    the previous handlers are restored afterwards. Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = [False]

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired[0]:
            return
        fired[0] = True
        raise SignalInterrupt(signum)

    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


_FIX = {
    errno.ENOSPC: "free space there, or use a --results-dir / --leaderboard-dir on another disk",
    errno.EDQUOT: "free space there (disk quota), or use a --results-dir / --leaderboard-dir elsewhere",
    errno.EROFS: "that file system is read-only; use a writable --results-dir / --leaderboard-dir",
    errno.EACCES: "this user may not write there; fix its permissions or choose another directory",
    errno.EPERM: "this user may not write there; fix its permissions or choose another directory",
}


def user_error(e: BaseException) -> str:
    """The text after ``bench: error:`` for a failure the user can fix: the path or holder, and the fix."""
    if isinstance(e, RunLockedError):
        return str(e)
    if isinstance(e, LockHeldError):
        return f"{e.path} is locked by {e.holder}; wait for it, or stop that process and retry"
    if isinstance(e, OSError) and e.errno in _FIX:
        where = f" ({e.filename})" if e.filename else ""
        return f"{e.strerror or describe_error(e)}{where}: {_FIX[e.errno]}"
    return describe_error(e)


def unwritable(directory: Path, flag: str) -> str | None:
    """Why ``bench`` cannot write in ``directory`` (None: it can), found by writing there.

    The directory is created if missing and a temporary file is written and removed in it: a
    read-only leaderboard directory was otherwise found only after the whole run was evaluated.
    Permission bits alone would not do (root ignores them; a read-only mount does not).
    """
    if directory.exists() and not directory.is_dir():
        return f"{flag} {directory} is a file, not a directory"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".bench-write-check-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"{flag} {directory} is not writable: {user_error(e)}"
    return None
