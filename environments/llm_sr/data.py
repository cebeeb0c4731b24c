"""Data recipe of the LLM-SR family: the three splits (train, test_id, test_ood) of one problem.

Sources, all yielding a :class:`Problem` of float64 input matrices and target vectors (the
LLM-SRBench HDF5 file is read by ``lsrbench.py``):

* :func:`load_csv_problem` reads a released problem of the LLM-SR repository from the data cache
  (``bench data fetch llm_sr`` puts ``<problem>/{train,test_id,test_ood}.csv`` under
  ``<cache>/llm_sr/<filename>/``). Every CSV has a header row; the last column is the target and
  the others are the inputs, in the order the task prompt lists them. The sha256 of every file is
  checked against the manifest before use.
* :func:`oscillator_problem` regenerates an oscillator problem from its equation of motion (for the
  tiny CPU variants and for tests, no download): the state (x, v) follows x' = v, v' = a(t, x, v)
  from x = v = 0.5 at t = 0, integrated with ``scipy.integrate.solve_ivp`` (DOP853, tight
  tolerances). As in the released sets, the out-of-domain split samples the early window
  t in [0, 20] (large amplitude) and train / test_id interleave samples of the later window
  t in [30, 50]. Sample times are seeded uniform draws; the target is the exact acceleration at
  the sampled state, optionally with seeded Gaussian noise of relative size ``noise``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.envs.data import ChecksumError, DataMissingError, sha256_file

SPLITS = ("train", "test_id", "test_ood")
FETCH_HINT = "Run `bench data fetch llm_sr` (needs network access) first."


@dataclass(frozen=True)
class Split:
    """One split of a problem."""

    inputs: np.ndarray
    """[n, k] float64 input columns (never sent with the target)."""
    target: np.ndarray
    """[n] float64 target values (trusted side only)."""

    @property
    def rows(self) -> int:
        """Number of samples."""
        return int(self.target.shape[0])

    def columns(self) -> list[np.ndarray]:
        """The input columns as separate contiguous float64 vectors (fresh copies)."""
        return [
            np.ascontiguousarray(self.inputs[:, j], dtype=np.float64) for j in range(self.inputs.shape[1])
        ]


@dataclass(frozen=True)
class Problem:
    """A symbolic-regression problem: named inputs, a named target and three splits."""

    name: str
    """Problem name, e.g. ``oscillator1``."""
    columns: tuple[str, ...]
    """Input column names, in the order they are passed to ``equation``."""
    target_name: str
    """Name of the target column."""
    splits: dict[str, Split]
    """``train``, ``test_id`` and ``test_ood``."""


def _check_split(where: str, inputs: np.ndarray, target: np.ndarray, columns: int) -> Split:
    if inputs.ndim != 2 or inputs.shape[1] != columns or target.shape != (inputs.shape[0],):
        raise ValueError(f"{where}: expected {columns} input columns and one target per row")
    if inputs.shape[0] < 2:
        raise ValueError(f"{where}: needs at least 2 rows, has {inputs.shape[0]}")
    if not (np.isfinite(inputs).all() and np.isfinite(target).all()):
        raise ValueError(f"{where}: contains NaN or infinite values")
    if not float(np.var(target)) > 0.0:
        raise ValueError(f"{where}: the target is constant, NMSE is undefined")
    inputs.setflags(write=False)
    target.setflags(write=False)
    return Split(inputs=inputs, target=target)


def read_csv_split(path: Path, columns: tuple[str, ...], target_name: str) -> Split:
    """Read one CSV split whose header must be exactly ``columns`` followed by ``target_name``.

    Raises:
        ValueError: If the header differs, a value is not a number, or the split is degenerate.
    """
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        want = [*columns, target_name]
        if header != want:
            raise ValueError(f"{path}: header {header} does not match the expected columns {want}")
        try:
            rows = [[float(cell) for cell in row] for row in reader if row]
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e
    if any(len(r) != len(want) for r in rows):
        raise ValueError(f"{path}: a row does not have {len(want)} values")
    table = np.asarray(rows, dtype=np.float64).reshape(-1, len(want))
    return _check_split(str(path), np.ascontiguousarray(table[:, :-1]), table[:, -1].copy(), len(columns))


def load_csv_problem(
    data_dir: Path,
    *,
    source_dir: str,
    problem: str,
    columns: tuple[str, ...],
    target_name: str,
    checksums: Mapping[str, str] | None = None,
) -> Problem:
    """Load a released problem from the family's data cache.

    Args:
        data_dir: The family's cache directory (``<cache>/llm_sr``).
        source_dir: The data source's directory inside it (the manifest's ``filename``).
        problem: Problem directory, e.g. ``oscillator1``.
        columns: Expected input column names, in order.
        target_name: Expected target column name.
        checksums: Pinned sha256 by path relative to ``source_dir`` (``<problem>/<split>.csv``);
            every split is checked when given.

    Returns:
        The problem with its three splits.

    Raises:
        DataMissingError: A split file is absent; the message names ``bench data fetch llm_sr``.
        ChecksumError: A split file does not match its pinned sha256.
        ValueError: A file is malformed.
    """
    base = Path(data_dir) / source_dir
    paths = {s: base / problem / f"{s}.csv" for s in SPLITS}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise DataMissingError(f"LLM-SR data for {problem!r} not found: {', '.join(missing)}. {FETCH_HINT}")
    splits = {}
    for s, p in paths.items():
        if checksums is not None:
            rel = f"{problem}/{s}.csv"
            want = checksums.get(rel, "")
            if not want:
                raise ChecksumError(f"{rel}: no sha256 is pinned in the manifest")
            got = sha256_file(p)
            if got != want:
                raise ChecksumError(
                    f"{p}: sha256 {got} does not match the pinned {want}; delete it and run "
                    "`bench data fetch llm_sr` again"
                )
        splits[s] = read_csv_split(p, columns, target_name)
    return Problem(name=problem, columns=tuple(columns), target_name=target_name, splits=splits)


# -- regenerated oscillators ------------------------------------------------------------------


def _oscillator1(t: Any, x: Any, v: Any) -> Any:
    """Nonlinear damped oscillator (no forcing), as released in LLM-SR's ``oscillator1``."""
    return 0.8 * np.sin(x) - 0.5 * v**3 - 0.2 * x**3 - 0.5 * x * v - x * np.cos(x)


def _oscillator2(t: Any, x: Any, v: Any) -> Any:
    """Driven nonlinear oscillator, as released in LLM-SR's ``oscillator2``."""
    return 0.3 * np.sin(t) - 0.5 * v**3 - x * v - 5.0 * x * np.exp(0.5 * x)


def _phys_osc1(t: Any, x: Any, v: Any) -> Any:
    """LLM-SRBench LSR-Synth ``phys_osc`` problem 0 (PACEvolve's task), as its metadata states it."""
    return -1.0267 * x**3 - 1.0267 * x * np.exp(-np.abs(x)) + 0.9480 * np.sin(t) - 0.7123 * np.sin(v)


@dataclass(frozen=True)
class OscillatorSystem:
    """Equation of motion of one oscillator and the inputs its problem exposes."""

    acceleration: Callable[[Any, Any, Any], Any]
    """a(t, x, v)."""
    columns: tuple[str, ...]
    """Input columns of the problem (``t`` only for a time-dependent system)."""
    target: str = "a"
    """Name of the target column."""


OSCILLATORS = {
    "oscillator1": OscillatorSystem(_oscillator1, ("x", "v")),
    "oscillator2": OscillatorSystem(_oscillator2, ("t", "x", "v")),
    "phys_osc1": OscillatorSystem(_phys_osc1, ("x", "t", "v"), "dv_dt"),
}


def true_acceleration(system: str, t: Any, x: Any, v: Any) -> Any:
    """The ground-truth acceleration of a regenerable oscillator (for tests and checks)."""
    return OSCILLATORS[system].acceleration(t, x, v)


def oscillator_problem(params: Mapping[str, Any]) -> Problem:
    """Regenerate an oscillator problem by integrating its equation of motion.

    Args:
        params: ``system`` (a key of :data:`OSCILLATORS`), ``seed`` (int), ``n_train``,
            ``n_test_id``, ``n_test_ood`` (rows per split), ``noise`` (relative std of Gaussian
            target noise, default 0), ``id_window`` ([30, 50]) and ``ood_window`` ([0, 20]) in
            time units, ``x0`` / ``v0`` (0.5).

    Returns:
        The problem (the system's columns and target).

    Raises:
        ValueError: If the parameters are inconsistent.
    """
    from scipy.integrate import solve_ivp

    name = str(params.get("system", "oscillator1"))
    if name not in OSCILLATORS:
        raise ValueError(f"unknown oscillator system {name!r}; known: {sorted(OSCILLATORS)}")
    system = OSCILLATORS[name]
    n_train, n_id, n_ood = (int(params.get(k, 200)) for k in ("n_train", "n_test_id", "n_test_ood"))
    id_lo, id_hi = (float(t) for t in params.get("id_window", (30.0, 50.0)))
    ood_lo, ood_hi = (float(t) for t in params.get("ood_window", (0.0, 20.0)))
    noise = float(params.get("noise", 0.0))
    if min(n_train, n_id, n_ood) < 2 or not (0.0 <= ood_lo < ood_hi and 0.0 <= id_lo < id_hi):
        raise ValueError("need >= 2 rows per split and non-empty, non-negative time windows")
    rng = np.random.default_rng(int(params.get("seed", 0)))
    t_id = np.sort(rng.uniform(id_lo, id_hi, n_train + n_id))
    t_ood = np.sort(rng.uniform(ood_lo, ood_hi, n_ood))
    # Interleave train and test_id over the in-domain window, as the released sets do.
    in_train = np.zeros(n_train + n_id, dtype=bool)
    in_train[np.round(np.linspace(0, n_train + n_id - 1, n_train)).astype(int)] = True

    def rhs(t: float, state: np.ndarray) -> list[float]:
        return [state[1], float(system.acceleration(t, state[0], state[1]))]

    t_end = max(id_hi, ood_hi)
    y0 = [float(params.get("x0", 0.5)), float(params.get("v0", 0.5))]
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-11, atol=1e-12, dense_output=True)
    if not sol.success:  # pragma: no cover - a smooth, bounded system
        raise ValueError(f"integrating {name} failed: {sol.message}")

    def split(times: np.ndarray) -> Split:
        x, v = sol.sol(times)
        a = np.asarray(system.acceleration(times, x, v), dtype=np.float64)
        if noise > 0:
            a = a + noise * float(np.std(a)) * rng.standard_normal(a.shape)
        cols = {"t": times, "x": x, "v": v}
        inputs = np.ascontiguousarray(np.stack([cols[c] for c in system.columns], axis=1), dtype=np.float64)
        return _check_split(f"{name} (regenerated)", inputs, a, len(system.columns))

    splits = {
        "train": split(t_id[in_train]),
        "test_id": split(t_id[~in_train]),
        "test_ood": split(t_ood),
    }
    return Problem(name=name, columns=system.columns, target_name=system.target, splits=splits)
