"""Data recipe of the EPLB family: the workload windows a placement is computed on and tested on.

Two sources, both yielding a list of K integer-valued [L, E] load matrices ("windows"):

* :func:`load_windows` reads the public vLLM expert-load trace (``expert-load.json``, schema
  ``{"load_history": [{"logical_expert_load": [[E ints] x L]}, ...]}``) and sums consecutive,
  non-overlapping chunks of ``window`` history entries. A trailing chunk shorter than ``window``
  is dropped.
* :func:`synthetic_windows` draws a seeded, drifting workload (for the tiny CPU variant and for
  tests): every layer has a Zipf-like popularity profile over a random expert order, perturbed by
  log-normal noise; the log-popularity takes a slow Gaussian random walk from window to window;
  loads are multinomial token counts, and a few (layer, expert) cells go idle (zero load) in
  each window.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.envs.data import DataMissingError

LOAD_KEY = '"logical_expert_load"'


def _iter_entry_loads(text: str) -> Iterator[np.ndarray]:
    """Yield every ``logical_expert_load`` value in document order, one entry at a time.

    Decoding entries one by one (``raw_decode`` at each key) keeps memory near one entry's size
    instead of materialising the whole ~200 MB document as Python objects.

    Raises:
        ValueError: If an entry is not a 2-D list of integers.
    """
    decoder = json.JSONDecoder()
    pos = text.find(LOAD_KEY)
    while pos >= 0:
        colon = text.find(":", pos + len(LOAD_KEY))
        if colon < 0 or text[pos + len(LOAD_KEY) : colon].strip():
            raise ValueError(f"malformed trace near offset {pos}: expected ':' after the key")
        value, end = decoder.raw_decode(text, colon + 1 + _leading_space(text, colon + 1))
        arr = np.asarray(value, dtype=np.int64)
        if arr.ndim != 2:
            raise ValueError(f"malformed trace near offset {pos}: logical_expert_load is not a 2-D list")
        yield arr
        pos = text.find(LOAD_KEY, end)


def _leading_space(text: str, start: int) -> int:
    i = start
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i - start


def load_windows(data_dir: Path, params: dict[str, Any]) -> list[torch.Tensor]:
    """Read the real trace and sum it into windows.

    Args:
        data_dir: The family's data cache directory.
        params: Scorer parameters; uses ``data_file`` (default ``expert-load.json``) and
            ``window`` (history entries per window, default 100).

    Returns:
        K int64 tensors of shape [L, E], K >= 2.

    Raises:
        DataMissingError: If the trace has not been fetched.
        ValueError: If the trace is malformed, has inconsistent shapes or fewer than two windows.
    """
    path = Path(data_dir) / str(params.get("data_file", "expert-load.json"))
    if not path.is_file():
        raise DataMissingError(
            f"EPLB workload trace not found at {path}. "
            "Run `bench data fetch eplb` (needs network access) first."
        )
    window = int(params.get("window", 100))
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    windows: list[torch.Tensor] = []
    shape: tuple[int, ...] | None = None
    acc: np.ndarray | None = None
    count = 0
    for k, entry in enumerate(_iter_entry_loads(path.read_text(encoding="utf-8"))):
        if shape is None:
            shape = entry.shape
        elif entry.shape != shape:
            raise ValueError(f"{path}: entry {k} has shape {entry.shape}, expected {shape}")
        acc = entry.copy() if acc is None else acc + entry
        count = k + 1
        if count % window == 0:
            windows.append(torch.from_numpy(acc))
            acc = None  # a trailing partial window is dropped
    if count == 0:
        raise ValueError(f"{path}: no logical_expert_load entries found")
    if len(windows) < 2:
        raise ValueError(f"{path}: {count} entries give {len(windows)} windows of {window}; need >= 2")
    return windows


def synthetic_windows(params: dict[str, Any]) -> list[torch.Tensor]:
    """Generate a seeded drifting workload.

    Args:
        params: Scorer parameters. Used keys (defaults in brackets): ``layers`` [4], ``experts``
            [32], ``windows`` [6], ``seed`` [0], ``tokens`` [20000] tokens routed per layer and
            window, ``zipf`` [0.6] Zipf exponent of the popularity profile, ``sigma`` [0.3]
            log-normal spread, ``drift`` [0.25] random-walk step of the log-popularity per window,
            ``idle`` [0.03] probability that a (layer, expert) cell has zero load in a window.

    Returns:
        ``windows`` int64 tensors of shape [layers, experts].
    """
    layers = int(params.get("layers", 4))
    experts = int(params.get("experts", 32))
    count = int(params.get("windows", 6))
    tokens = int(params.get("tokens", 20_000))
    zipf = float(params.get("zipf", 0.6))
    sigma = float(params.get("sigma", 0.3))
    drift = float(params.get("drift", 0.25))
    idle = float(params.get("idle", 0.03))
    rng = np.random.default_rng(int(params.get("seed", 0)))

    ranks = np.stack([rng.permutation(experts) + 1 for _ in range(layers)])
    log_pop = -zipf * np.log(ranks) + sigma * rng.standard_normal((layers, experts))
    out = []
    for _ in range(count):
        log_pop = log_pop + drift * rng.standard_normal((layers, experts))
        prob = np.exp(log_pop - log_pop.max(axis=1, keepdims=True))
        active = rng.random((layers, experts)) >= idle
        active[~active.any(axis=1)] = True  # never idle a whole layer
        prob = prob * active
        prob = prob / prob.sum(axis=1, keepdims=True)
        loads = np.stack([rng.multinomial(tokens, prob[layer]) for layer in range(layers)])
        out.append(torch.from_numpy(loads.astype(np.int64)))
    return out
