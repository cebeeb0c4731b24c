"""``bench run --place modal``: a whole run on a Modal container, its directory synced back here.

The container runs the ordinary ``bench run`` (its candidates evaluated by the Modal backend, in
sandboxes of their own, as for a local run with ``--backend modal``). Every ``sync_interval_s``
and at the end the host copies the container's results directory and swaps it into the local
results directory atomically (:mod:`harness.results.snapshot`), with a ``placement.json`` saying
where the run lives. ``leaderboard``, ``compare`` and ``--resume`` then work on the local copy as
for a local run: a finished run's leaderboard row is added to the local leaderboards directory,
and ``--resume`` of a placed run uploads the local copy into a new container and finishes it
there. A lost container (preempted, timed out, Modal down) is an infra error of the placement,
recorded in ``placement.json`` and never in any candidate's row; the last synced copy stays
resumable.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.envs.secret import KEY_ENV, HeldoutKeyError, key_env_value
from harness.results import snapshot
from harness.results.atomic import LockHeldError, atomic_write_json, lock_file, unlock_file
from harness.results.records import utc_now_iso
from harness.sandbox.modal_backend.client import ImageRecipe, ModalInfraError
from harness.sandbox.modal_backend.run_container import (
    REMOTE_ROOT,
    RunContainer,
    RunContainerSpec,
    RunHost,
    run_tags,
)

from .run_plan import PlanError, RunArgs

PLACEMENT_FILE = "placement.json"
EXIT_INFRA = 3
EXIT_INTERRUPTED = 130
_NOT_FORWARDED = frozenset({"results_dir", "leaderboard_dir", "resume"})
_FORWARDED_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


class Placement(BaseModel):
    """``placement.json`` of a run placed on Modal (written by the host, beside ``run.json``)."""

    model_config = ConfigDict(extra="forbid")

    place: Literal["modal"] = "modal"
    """Where the run executes; ``--resume`` places it there again."""
    gpu: str | None = None
    """Modal GPU string of the run container (None: a CPU container)."""
    leaderboard_dir: str = ""
    """Local leaderboards directory the finished run's row is added to (absolute)."""
    container: str = ""
    """Modal id of the container that last ran it."""
    synced_at: str | None = None
    """When the local copy was last replaced by the container's (ISO-8601, UTC)."""
    lost: str = ""
    """Why the last container was lost before the run ended (empty when it was not)."""


@dataclass(frozen=True)
class PlaceRequest:
    """A run to place on Modal, or a placed run to resume there."""

    args: RunArgs
    """``bench run``'s options as given (``args.resume``: the local copy to finish)."""
    gpu: str | None = None
    """Modal GPU string; on resume None keeps the recorded one."""
    sync_interval_s: float = 60.0
    """Seconds between two copies of the run directory back to this host."""
    root: str = REMOTE_ROOT
    """The run's working directory in the container."""
    python: str = "python"
    """The container's interpreter."""
    backend: str = "modal"
    """Evaluation backend of a new run inside the container (Modal sandboxes, as today)."""


def placement_of(run_dir: Path) -> Placement | None:
    """The placement record of a run directory, or None for a local run."""
    try:
        return Placement.model_validate_json((run_dir / PLACEMENT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def inner_argv(req: PlaceRequest, run_id: str | None) -> tuple[str, ...]:
    """The ``bench run`` command the container executes (options that differ from the defaults).

    Raises:
        PlanError: If an option names a local file the container cannot see.
    """
    a, defaults = req.args, RunArgs()
    for name in ("advisor_model", "model", "implementer_model"):
        value = getattr(a, name)
        if value and Path(value).exists():
            raise PlanError(
                f"--{name.replace('_', '-')} {value} is a local path; a run on Modal sees none: use an HF id"
            )
    argv = [req.python, "-m", "evobench.cli.main", "run", "--no-progress"]
    for f in dataclasses.fields(RunArgs):
        value = getattr(a, f.name)
        if f.name in _NOT_FORWARDED or value is None or value == getattr(defaults, f.name):
            continue
        if f.name == "backend" and run_id is None:
            continue  # a new run's backend is set below
        argv += [f"--{f.name.replace('_', '-')}", str(value)]
    root = req.root.rstrip("/")
    if run_id is None:
        argv += ["--backend", req.backend, "--results-dir", f"{root}/results"]
        argv += ["--leaderboard-dir", f"{root}/leaderboards"]
    else:
        argv += ["--resume", f"{root}/results/{run_id}"]
    return tuple(argv)


def secret_env() -> tuple[tuple[str, str], ...]:
    """What the run container needs that the image lacks: Modal token, held-out key, LLM keys.

    Only the run container gets these; its evaluation sandboxes get the held-out key alone
    (:func:`harness.sandbox.modal_backend.spec.sandbox_spec`), and candidates get neither.
    """
    env = {KEY_ENV: key_env_value()}
    for name, value in os.environ.items():
        if value and (name.endswith("_API_KEY") or name in _FORWARDED_ENV):
            env[name] = value
    token = (os.environ.get("MODAL_TOKEN_ID"), os.environ.get("MODAL_TOKEN_SECRET"))
    if not all(token):
        try:
            from modal.config import config

            token = (config.get("token_id"), config.get("token_secret"))
        except ImportError:
            pass
    if token[0] and token[1]:
        env["MODAL_TOKEN_ID"], env["MODAL_TOKEN_SECRET"] = token[0], token[1]
    return tuple(sorted(env.items()))


def hold(results_dir: Path, run_id: str) -> int:
    """Lock a placed run's local copy for this host (one placement of a run at a time).

    Returns:
        The lock's descriptor (:func:`~harness.results.atomic.unlock_file` releases it).

    Raises:
        PlanError: If another ``bench run`` places or syncs this run now.
    """
    try:
        return lock_file(results_dir / f".placed-{run_id}.lock", stamp=f"pid {os.getpid()}\n")
    except LockHeldError as e:
        raise PlanError(
            f"run {run_id} is being run on Modal by {e.holder.strip() or 'another bench run'}: "
            "wait for it, or stop it (Ctrl-C) and resume"
        ) from None


def default_recipe(gpu: str | None) -> ImageRecipe:
    """Stage the run image's context (a base recipe plus ``images/run``)."""
    from harness.images.combined import stage_run

    ctx, dockerfile, args = stage_run(gpu is not None)
    return ImageRecipe(
        "run", f"evobench-run:{'cuda' if gpu else 'cpu'}", dockerfile, ctx, tuple(sorted(args.items()))
    )


class _Placed:
    """One container's run: start, periodic sync, the end or the loss."""

    def __init__(
        self, req: PlaceRequest, container: RunContainer, results_dir: Path, record: Placement
    ) -> None:
        self.req, self.container, self.results_dir = req, container, results_dir
        self.record = record.model_copy(update={"container": container.object_id, "lost": ""})
        self.run_id: str | None = None
        self.lock: int | None = None

    def sync(self) -> None:
        self.record = self.record.model_copy(update={"synced_at": utc_now_iso()})
        data = self.container.download(f"{self.req.root.rstrip('/')}/results")
        try:
            got = snapshot.install(
                data, self.results_dir, {PLACEMENT_FILE: self.record.model_dump(mode="json")}
            )
        except snapshot.SnapshotError as e:
            raise ModalInfraError(f"the run's copy from container {self.container.object_id}: {e}") from e
        self.run_id = got or self.run_id
        if self.lock is None and self.run_id is not None:
            self.lock = hold(self.results_dir, self.run_id)

    def run(self, argv: tuple[str, ...], out: Callable[[str], None]) -> int:
        proc = self.container.start(argv, self.req.root)
        pump = threading.Thread(target=_pump, args=(proc.lines, out), daemon=True)
        pump.start()
        last = time.monotonic()
        while (code := proc.poll()) is None:
            if not self.container.alive():
                raise ModalInfraError(f"container {self.container.object_id} ended while the run was running")
            time.sleep(min(0.2, self.req.sync_interval_s))
            if time.monotonic() - last >= self.req.sync_interval_s:
                self.sync()
                last = time.monotonic()
        if not self.container.alive():
            raise ModalInfraError(f"container {self.container.object_id} ended with the run (exit {code})")
        pump.join(timeout=5)
        self.sync()
        return code


def _pump(lines: Callable[[], object], out: Callable[[str], None]) -> None:
    try:
        for line in lines():  # type: ignore[attr-defined]
            out(str(line))
    except Exception:  # noqa: BLE001 - a broken stream shows up as a lost container in the poll
        return


def place_run(
    req: PlaceRequest,
    host: RunHost,
    recipe: Callable[[str | None], ImageRecipe] = default_recipe,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
) -> int:
    """Run (or resume) a run on a Modal container and keep its local copy in sync.

    Returns:
        The inner ``bench run``'s exit code; 3 when the container was lost (infra error),
        130 after Ctrl-C (both leave the last synced copy resumable).

    Raises:
        PlanError: If the options cannot be placed (a local model file, a run that was not
            placed, one placed by another ``bench run`` now, an unusable held-out key).
        ModalInfraError: If no Modal credentials are configured.
        ValueError: If ``--gpu`` is not a Modal GPU string.
    """
    a = req.args
    if a.resume is not None:
        run_dir = a.resume.resolve()
        results_dir, run_id = run_dir.parent, run_dir.name
        record = placement_of(run_dir)
        if record is None:
            raise PlanError(f"{run_dir} was not placed on Modal (no {PLACEMENT_FILE})")
        if req.gpu is not None:
            record = record.model_copy(update={"gpu": req.gpu})
        lock: int | None = hold(results_dir, run_id)
        snapshot.recover(results_dir)
        # Without its placement record: inside the container it is an ordinary run to resume.
        upload = snapshot.pack(run_dir, leave_out=(PLACEMENT_FILE,))
    else:
        results_dir, run_id, upload, lock = a.results_dir.resolve(), None, b"", None
        record = Placement(gpu=req.gpu, leaderboard_dir=str(a.leaderboard_dir.resolve()))
    try:
        return _place(req, host, recipe, (results_dir, run_id, upload, record), out, err, lock)
    finally:
        if lock is not None:
            unlock_file(lock, clear=True)


def _place(
    req: PlaceRequest,
    host: RunHost,
    recipe: Callable[[str | None], ImageRecipe],
    where: tuple[Path, str | None, bytes, Placement],
    out: Callable[[str], None],
    err: Callable[[str], None],
    lock: int | None,
) -> int:
    results_dir, run_id, upload, record = where
    argv = inner_argv(req, run_id)
    host.check_credentials()
    try:
        env = secret_env()
    except HeldoutKeyError as e:
        raise PlanError(f"the held-out key cannot go to the run container: {e}") from e
    spec = RunContainerSpec(gpu=record.gpu, root=req.root, tags=run_tags(run_id or ""), secret_env=env)
    image = recipe(record.gpu)
    placed: _Placed | None = None
    try:
        container = host.create_run_container(spec, image)
        placed = _Placed(req, container, results_dir, record)
        placed.run_id, placed.lock = run_id, lock
        err(f"run placed on Modal container {container.object_id} (gpu {record.gpu or 'none'})")
        if upload:
            container.upload(f"{req.root.rstrip('/')}/results", upload)
        code = placed.run(argv, out)
    except ModalInfraError as e:
        return _lost(placed, results_dir, str(e), err)
    except KeyboardInterrupt:
        if placed is not None:
            try:
                placed.sync()
            except ModalInfraError:
                pass
        err("interrupted; the run's last synced copy is resumable with bench run --resume")
        return EXIT_INTERRUPTED
    finally:
        if placed is not None:
            placed.container.terminate()
            if placed.lock is not None and placed.lock != lock:
                unlock_file(placed.lock, clear=True)
        from harness.images.combined import remove_context

        remove_context(image.context_dir)
    _add_row(results_dir / (placed.run_id or ""), record, err)
    return code


def _lost(placed: _Placed | None, results_dir: Path, reason: str, err: Callable[[str], None]) -> int:
    run_id = placed.run_id if placed else None
    if placed is None or run_id is None:
        err(f"bench: error: the Modal run container was lost before any copy of the run came back: {reason}")
        return EXIT_INFRA
    run_dir = results_dir / run_id
    record = placed.record.model_copy(update={"lost": reason})
    atomic_write_json(run_dir / PLACEMENT_FILE, record.model_dump(mode="json"))
    err(
        f"bench: error: the Modal run container was lost ({reason}); the copy synced at "
        f"{record.synced_at} is in {run_dir}: resume it on Modal with bench run --resume {run_dir}"
    )
    return EXIT_INFRA


def _add_row(run_dir: Path, record: Placement, err: Callable[[str], None]) -> None:
    """Put a finished run's row on the local leaderboard (the container's row stayed there)."""
    from harness.envs.registry import UnknownIdError, default_registry
    from harness.results.store import RunStore, RunStoreError
    from harness.runner.completion import LeaderboardPending, readd

    try:
        store = RunStore.open(run_dir)
    except (RunStoreError, OSError) as e:
        err(f"bench: warning: could not open the synced run {run_dir}: {e}")
        return
    try:
        if store.info.status != "finished" or not record.leaderboard_dir:
            return
        try:
            variant = default_registry().get(store.info.env_id)
        except UnknownIdError:
            variant = None
        readd(store, variant, Path(record.leaderboard_dir))
    except (ValueError, LeaderboardPending, OSError) as e:
        retry = f"bench leaderboard add {run_dir}"
        err(f"bench: warning: the leaderboard row was not added ({e}); retry with {retry}")
    finally:
        store.close()
