"""A fresh, empty working directory for one sandboxed command (``CandidateRuntime.run(fresh_cwd=...)``).

The named files of the work directory are first copied (no symbolic link followed, regular files
only) into a new owner-tagged directory of the trusted side, root-owned and read-only: the
command sees that copy, never a path the candidate could have swapped. Under bubblewrap
``/sandbox`` is then a new tmpfs of the disk quota holding the copies as read-only binds, gone
when the command ends (see ``isolation.bwrap_prefix``). Elsewhere (a container, ``unshare``) the
copy directory itself is the working directory: sticky (the candidate's uid can add files but not
replace the copies), sized like the work directory where the harness may mount, deleted after the
command. There ``/tmp`` and ``/dev/shm`` stay the container's own, shared by the commands of one
evaluation (a known gap of container backends).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from .isolation import detect_isolation
from .lifetime import tagged_tempdir
from .limits.disk import WorkdirQuota


class FreshDir:
    """The fresh working directory of one command, and what ``sandbox_command`` needs of it."""

    def __init__(self, workdir: Path, names: tuple[str, ...], disk_mb: int) -> None:
        """Prepare the directory (nothing on the host under bubblewrap).

        Args:
            workdir: The candidate's work directory (trusted-side path).
            names: Files of ``workdir`` the command sees read-only in its fresh directory.
            disk_mb: The candidate's disk quota, MiB.

        Raises:
            ValueError: If a name is not a plain file name, or not a regular file of ``workdir``.
        """
        for name in names:
            if not name or "/" in name or name in (".", ".."):
                raise ValueError(f"fresh working directory: {name!r} is not a plain file name")
        self.fresh: tuple[str, ...] | None = names if detect_isolation().level == "bwrap" else None
        self._quota: WorkdirQuota | None = None
        own = tagged_tempdir("cand")
        self._own: Path | None = own
        self.workdir: Path = own
        try:
            if self.fresh is None:
                self._quota = WorkdirQuota(self._own, disk_mb, mode=0o1777)
            os.chmod(self._own, 0o1777 if self.fresh is None else 0o755)
            for name in names:
                _copy(workdir, name, self._own / name)
        except BaseException:
            self.close()
            raise

    def full(self) -> bool:
        """Whether the trusted-side directory's quota is used up (False under bubblewrap)."""
        return self._quota is not None and self._quota.full()

    def close(self) -> None:
        """Delete the trusted-side directory, if any; idempotent."""
        if self._quota is not None:
            self._quota.close()
            self._quota = None
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = None


def _copy(workdir: Path, name: str, dest: Path) -> None:
    """Copy the regular file ``workdir/name`` to ``dest`` (mode 0555), never following a link.

    Raises:
        ValueError: If it is missing, a symbolic link or not a regular file.
    """
    try:
        fd = os.open(workdir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise ValueError(f"fresh working directory: cannot open {name} ({e.strerror})") from None
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise ValueError(f"fresh working directory: {name} is not a regular file")
        with open(dest, "xb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    os.chmod(dest, 0o555)
