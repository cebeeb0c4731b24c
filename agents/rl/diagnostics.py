"""``train.parquet``: one row per update, written atomically after every step."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.results.atomic import atomic_write_parquet

if TYPE_CHECKING:
    import pandas as pd

TRAIN_FILE = "train.parquet"

COLUMNS = (
    "step", "adapter_version", "loss", "entropy", "grad_norm", "clip_frac", "kl", "alpha",
    "adv_mean", "adv_std", "adv_min", "adv_max",
    "reward_mean", "reward_std", "reward_min", "reward_max",
    "skipped", "skip_reason", "logprob_gap", "tokens", "seconds",
)  # fmt: skip
"""Exact column names (``bench plot`` reads them)."""


@dataclass
class TrainRow:
    """One update's diagnostics (NaN where a value does not apply, e.g. loss of a skipped step)."""

    step: int
    adapter_version: int
    loss: float
    entropy: float
    grad_norm: float
    clip_frac: float
    kl: float
    alpha: float
    adv_mean: float
    adv_std: float
    adv_min: float
    adv_max: float
    reward_mean: float
    reward_std: float
    reward_min: float
    reward_max: float
    skipped: bool
    skip_reason: str
    logprob_gap: float
    tokens: int
    seconds: float


def summary(values: np.ndarray) -> tuple[float, float, float, float]:
    """Mean, population std, min and max (NaN for an empty array)."""
    if values.size == 0:
        return (math.nan,) * 4
    return float(values.mean()), float(values.std()), float(values.min()), float(values.max())


class TrainLog:
    """Rows of ``train.parquet`` kept in memory and rewritten atomically on every append."""

    def __init__(self, run_dir: Path) -> None:
        """Open (without reading) the log of ``run_dir``."""
        self.path = Path(run_dir) / TRAIN_FILE
        self.rows: list[dict[str, object]] = []

    def load(self, upto_step: int) -> None:
        """Read existing rows with ``step <= upto_step`` (rows after the last checkpoint are dropped).

        Raises:
            ValueError: If the file lacks a required column.
        """
        if not self.path.exists():
            self.rows = []
            return
        import pandas as pd  # only when a log is read or written: listing agents must not load pandas

        df = pd.read_parquet(self.path)
        missing = set(COLUMNS) - set(df.columns)
        if missing:
            raise ValueError(f"{self.path} lacks columns {sorted(missing)}")
        df = df[df["step"] <= upto_step]
        self.rows = [{c: r[c] for c in COLUMNS} for r in df.to_dict("records")]
        self._write()

    def append(self, row: TrainRow) -> None:
        """Add a row and rewrite the file atomically.

        Raises:
            OSError: If the file cannot be written (the old file is then intact).
        """
        self.rows.append(asdict(row))
        self._write()

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with the exact column order."""
        import pandas as pd

        df = pd.DataFrame(self.rows, columns=list(COLUMNS))
        return df.astype({"step": "int64", "adapter_version": "int64", "tokens": "int64", "skipped": "bool"})

    def _write(self) -> None:
        atomic_write_parquet(self.path, self.frame())
