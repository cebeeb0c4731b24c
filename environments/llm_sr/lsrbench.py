"""LLM-SRBench problems read from the benchmark's HDF5 sample file (``lsr_bench_data.hdf5``).

LLM-SRBench (Shojaee et al. 2025) publishes its samples as one HDF5 file in the gated Hugging Face
dataset ``nnheui/llm-srbench``; the problem metadata (name, symbols, ground-truth expression) is a
separate table of the same dataset. Layout, as read by the benchmark's own loader and by
PACEvolve's LLM-SR evaluator:

* group ``/lsr_synth/<domain>/<name>`` (e.g. domain ``phys_osc``) holds one 2-D dataset per split,
  ``train``, ``test`` (in-domain) and ``ood_test``; some tools name them ``train_data``,
  ``id_test_data`` and ``ood_test_data``, which are accepted too;
* each dataset is ``[n, 1 + k]``: column 0 is the target, columns ``1:`` are the inputs in the
  order of the problem's symbols (for ``phys_osc``: ``x``, ``t``, ``v``).

Which problem: "problem index i" means the i-th problem of the metadata split. The names in a
domain carry their index as a number suffix (e.g. ``PO0``, ``PO1``, ...), so this loader orders the
group's names numerically and takes the i-th; because that mapping is inferred and the file is
unpinned upstream, the loaded problem is then checked against its published ground-truth law
(``truth``): the law must reproduce the train targets, else loading fails with a clear message
instead of silently scoring a different problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .data import OSCILLATORS, Problem, Split, _check_split

SPLIT_KEYS = {
    "train": ("train", "train_data"),
    "test_id": ("test", "id_test_data"),
    "test_ood": ("ood_test", "ood_test_data"),
}
"""Our split name -> the dataset names it may have in the HDF5 group, in order of preference."""

TRUTH_NMSE_MAX = 1e-6
"""Largest train NMSE of the ground-truth law that still identifies the problem (float32 storage
rounding alone gives ~1e-14; any other problem of the domain is off by orders of magnitude more)."""


def _natural_key(name: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def truth_law(system: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """The ground-truth law of a regenerable system as a function of named input columns.

    Raises:
        ValueError: If the system is unknown.
    """
    if system not in OSCILLATORS:
        raise ValueError(f"unknown ground-truth system {system!r}; known: {sorted(OSCILLATORS)}")
    law = OSCILLATORS[system].acceleration

    def evaluate(cols: dict[str, np.ndarray]) -> np.ndarray:
        t = cols.get("t", np.zeros_like(next(iter(cols.values()))))
        return np.asarray(law(t, cols["x"], cols["v"]), dtype=np.float64)

    return evaluate


def load_lsrbench_problem(
    path: Path,
    *,
    group: str,
    problem_index: int,
    columns: tuple[str, ...],
    target_name: str,
    truth: str | None = None,
) -> Problem:
    """Load one LLM-SRBench problem from the benchmark's HDF5 file.

    Args:
        path: The HDF5 file.
        group: Domain group inside the file, e.g. ``lsr_synth/phys_osc``.
        problem_index: Index of the problem in the domain (see the module docstring).
        columns: Names of the input columns, in the file's order.
        target_name: Name of the target (column 0).
        truth: Key of :data:`data.OSCILLATORS` whose law must reproduce the train targets
            (NMSE below :data:`TRUTH_NMSE_MAX`); ``None`` skips the check.

    Returns:
        The problem with splits ``train``, ``test_id`` (the file's ``test``), ``test_ood``.

    Raises:
        ValueError: The file lacks the group, the problem or a split, a split has the wrong
            number of columns, or the ground-truth check fails.
    """
    import h5py  # imported here: only the variants that use the HDF5 file need it

    with h5py.File(path, "r") as f:
        if group not in f:
            raise ValueError(f"{path}: no group {group!r} (top level: {sorted(f.keys())})")
        names = sorted(f[group].keys(), key=_natural_key)
        if not 0 <= problem_index < len(names):
            raise ValueError(f"{path}: {group} has {len(names)} problems, no index {problem_index}")
        name = names[problem_index]
        node = f[group][name]
        raw: dict[str, np.ndarray] = {}
        for split, keys in SPLIT_KEYS.items():
            key = next((k for k in keys if k in node), None)
            if key is None:
                raise ValueError(
                    f"{path}: {group}/{name} has no {' or '.join(keys)} dataset ({sorted(node)})"
                )
            raw[split] = np.asarray(node[key][...], dtype=np.float64)
    splits: dict[str, Split] = {}
    for split, table in raw.items():
        where = f"{path}:{group}/{name}/{split}"
        if table.ndim != 2 or table.shape[1] != 1 + len(columns):
            raise ValueError(
                f"{where}: shape {table.shape}, expected [n, {1 + len(columns)}] (target, {columns})"
            )
        splits[split] = _check_split(
            where, np.ascontiguousarray(table[:, 1:]), table[:, 0].copy(), len(columns)
        )
    if truth is not None:
        train = splits["train"]
        cols = dict(zip(columns, train.columns(), strict=True))
        with np.errstate(all="ignore"):
            err = float(np.mean((truth_law(truth)(cols) - train.target) ** 2) / np.var(train.target))
        if not err <= TRUTH_NMSE_MAX:
            raise ValueError(
                f"{path}: problem {problem_index} of {group} ({name!r}) does not follow the published "
                f"ground truth of {truth} (train NMSE {err:.3g} > {TRUTH_NMSE_MAX:g}); the file's layout "
                "or problem order differs from what this environment expects"
            )
    return Problem(name=name, columns=tuple(columns), target_name=target_name, splits=splits)
