"""A command under a hard wall-clock cap: at the cap its whole process group is SIGKILLed.

``subprocess.run(timeout=...)`` kills only the direct child and then waits for its pipes, which a
grandchild (a pytest worker, a sandbox) can hold open for ever; the doctor's caps must hold.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.sandbox.process import kill_group

OUTPUT_TAIL = 20_000
"""Characters of combined stdout / stderr kept (the tail: pytest's summary is its last line)."""


@dataclass(frozen=True)
class CappedResult:
    """How a capped command ended."""

    returncode: int | None
    """Exit status; None when it was killed at its cap."""
    output: str
    """The tail of its stdout and stderr, interleaved."""
    seconds: float
    """Wall time it ran."""

    @property
    def timed_out(self) -> bool:
        """Whether it was killed at its cap."""
        return self.returncode is None


Runner = Callable[[Sequence[str], float, Path | None, dict[str, str] | None], CappedResult]
"""``(argv, cap_s, cwd, env) -> CappedResult``: :func:`run_capped` or a test's fake."""


def run_capped(
    argv: Sequence[str], cap_s: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> CappedResult:
    """Run ``argv`` in a new session; at ``cap_s`` seconds SIGKILL its whole process group.

    Args:
        argv: The command.
        cap_s: Wall-clock cap in seconds.
        cwd: Working directory (default: this process's).
        env: Environment (default: this process's).

    Returns:
        Its exit status (None when killed), output tail and wall time. A command that cannot
        start is exit status 127 with the error as output.
    """
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except OSError as e:
        return CappedResult(127, f"cannot start {argv[0]}: {e}", 0.0)
    try:
        out, _ = proc.communicate(timeout=max(cap_s, 0.0))
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc)
        code, out = None, _drain(proc)
    text = out.decode(errors="replace")[-OUTPUT_TAIL:]
    return CappedResult(code, text, round(time.monotonic() - t0, 1))


def _drain(proc: subprocess.Popen[bytes]) -> bytes:
    """What the killed group wrote; a descendant in another session may hold the pipe: 2 s at most."""
    try:
        out, _ = proc.communicate(timeout=2)
    except subprocess.TimeoutExpired as e:  # output read so far is kept across communicate calls
        out = e.output or b""
        assert proc.stdout is not None
        proc.stdout.close()
    return out
