"""Data recipe of the Multi-Evolve family: parse DMS assay tables, split them, or make a synthetic one.

Raw format (one CSV per assay, ProteinGym style, as published in the MULTI-evolve Zenodo record):
a header row; a ``mutant`` column whose cells list substitutions such as ``A23G:K45R`` (tokens
separated by ``:`` or ``/``; ``WT`` or an empty token list means the wild type); a numeric
``DMS_score`` column (the measured fitness, larger is better); optionally ``DMS_score_bin``
(0/1) and ``mutated_sequence`` (the full variant sequence). Other columns are ignored.

Split (the PACEvolve reference protocol, restated):

1. The number of mutations of a row is its token count (``WT`` tokens do not count).
2. A row is kept only if every one of its tokens also occurs as a single mutant (a row with
   exactly one token) somewhere in the same table, whatever that single's score ("singles"
   stringency), and only if its ``DMS_score`` is a finite number.
3. Training rows: 0, 1 or 2 mutations (wild type, singles, doubles), in file order.
   Test rows: 3 to 10 mutations.

Deviations from the reference, none of which changes which scored rows exist: rows whose
``mutant`` cell is empty are dropped (the reference would read them as extra wild-type rows);
``wt`` / ``_wt`` spellings count as wild type too; separators are normalised to ``:`` in the
strings the candidate receives; and the test rows are put in a canonical order (by mutation count,
then mutant string), a function of what the candidate already sees, so that the file's row order
(which may be sorted by score) cannot leak into predictions.

Nothing in this module ever runs in the sandbox; only the columns named in :class:`Assay` are sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.envs.data import DataMissingError

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
WILD_TYPE_TOKENS = frozenset({"WT", "wt", "_wt", "_WT"})
_TOKEN = re.compile(r"^([A-Z*])(\d+)([A-Z*])$")


@dataclass(frozen=True)
class Assay:
    """One assay, split and ready to score.

    Only :attr:`train`, :attr:`test` and :attr:`context` are ever sent to the candidate; the
    assay's name and :attr:`truth` stay on the trusted side.
    """

    name: str
    """Assay id (trusted side only; never sent)."""
    train: dict[str, Any]
    """Training columns: ``mutant`` (list of str), ``num_mutations`` (int64), ``fitness``
    (float64), and ``DMS_score_bin`` (float64, may hold NaN) when the source has it."""
    test: dict[str, Any]
    """Test columns: ``mutant`` (list of str) and ``num_mutations`` (int64) only."""
    truth: np.ndarray
    """Measured fitness of the test rows, in the order of :attr:`test` (never sent)."""
    context: dict[str, Any] = field(default_factory=dict)
    """What the candidate may know about the protein: ``target_seq`` (may be empty), ``seq_len``
    and the split bounds. No assay id, file name, organism or molecule name."""


def mutation_tokens(mutant: str) -> list[str]:
    """Split a mutant cell into substitution tokens (empty for the wild type)."""
    text = str(mutant).strip().replace("/", ":")
    tokens = [t.strip() for t in text.split(":")]
    return [t for t in tokens if t and t not in WILD_TYPE_TOKENS]


def _wild_type_sequence(table: pd.DataFrame, tokens: list[list[str]]) -> str:
    """Rebuild the wild-type sequence from a single mutant's ``mutated_sequence``, or return ""."""
    if "mutated_sequence" not in table.columns:
        return ""
    for toks, seq in zip(tokens, table["mutated_sequence"], strict=True):
        if len(toks) != 1 or not isinstance(seq, str):
            continue
        m = _TOKEN.match(toks[0])
        if not m:
            continue
        wt, pos, mt = m.group(1), int(m.group(2)), m.group(3)
        if not 1 <= pos <= len(seq) or seq[pos - 1] != mt:
            return ""  # positions do not index the sequence 1-based: do not guess an offset
        return seq[: pos - 1] + wt + seq[pos:]
    return ""


def read_assay_table(path: Path) -> pd.DataFrame:
    """Read one raw assay CSV.

    Returns:
        The table with at least ``mutant`` and ``DMS_score`` (coerced to float; unparseable
        cells become NaN).

    Raises:
        ValueError: If a required column is missing.
    """
    table = pd.read_csv(path, dtype={"mutant": str})
    missing = {"mutant", "DMS_score"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: missing required column(s) {sorted(missing)}")
    table["DMS_score"] = pd.to_numeric(table["DMS_score"], errors="coerce").astype(np.float64)
    if "DMS_score_bin" in table.columns:
        table["DMS_score_bin"] = pd.to_numeric(table["DMS_score_bin"], errors="coerce").astype(np.float64)
    return table


def split_assay(
    name: str,
    table: pd.DataFrame,
    *,
    max_train_mutations: int = 2,
    min_test_mutations: int = 3,
    max_test_mutations: int = 10,
    target_seq: str | None = None,
) -> Assay:
    """Apply the singles stringency and the train/test split to one raw table.

    Args:
        name: Assay id (kept on the trusted side).
        table: Raw table with ``mutant`` and ``DMS_score`` (and optional columns).
        max_train_mutations: Largest mutation count of a training row.
        min_test_mutations: Smallest mutation count of a test row.
        max_test_mutations: Largest mutation count of a test row.
        target_seq: Wild-type sequence when known; else rebuilt from ``mutated_sequence``.

    Returns:
        The split assay.

    Raises:
        ValueError: If the train or the test split is empty.
    """
    cells = table["mutant"].tolist()
    present = [isinstance(c, str) and c.strip() != "" for c in cells]
    table = table.loc[present].reset_index(drop=True)
    tokens = [mutation_tokens(c) for c in table["mutant"].tolist()]
    counts = np.array([len(t) for t in tokens], dtype=np.int64)
    singles = {t[0] for t in tokens if len(t) == 1}
    scores = table["DMS_score"].to_numpy(dtype=np.float64)
    keep = np.array([all(x in singles for x in t) for t in tokens], dtype=bool) & np.isfinite(scores)
    train_idx = np.flatnonzero(keep & (counts <= max_train_mutations))
    test_idx = np.flatnonzero(keep & (counts >= min_test_mutations) & (counts <= max_test_mutations))
    if train_idx.size == 0 or test_idx.size == 0:
        raise ValueError(f"assay {name}: empty split (train={train_idx.size}, test={test_idx.size})")
    canon = [":".join(t) if t else "WT" for t in tokens]
    test_idx = np.array(
        sorted(test_idx.tolist(), key=lambda i: (int(counts[i]), canon[i], i)), dtype=np.int64
    )

    train: dict[str, Any] = {
        "mutant": [canon[i] for i in train_idx],
        "num_mutations": counts[train_idx].copy(),
        "fitness": scores[train_idx].copy(),
    }
    if "DMS_score_bin" in table.columns:
        train["DMS_score_bin"] = table["DMS_score_bin"].to_numpy(dtype=np.float64)[train_idx].copy()
    test = {"mutant": [canon[i] for i in test_idx], "num_mutations": counts[test_idx].copy()}

    seq = target_seq if target_seq is not None else _wild_type_sequence(table, tokens)
    positions = [int(m.group(2)) for t in tokens for x in t if (m := _TOKEN.match(x))]
    context = {
        "target_seq": seq,
        "seq_len": len(seq) if seq else max(positions, default=0),
        "max_train_mutations": int(max_train_mutations),
        "min_test_mutations": int(min_test_mutations),
        "max_test_mutations": int(max_test_mutations),
    }
    return Assay(name=name, train=train, test=test, truth=scores[test_idx].copy(), context=context)


def _split_params(params: dict[str, Any]) -> dict[str, int]:
    return {
        "max_train_mutations": int(params.get("max_train_mutations", 2)),
        "min_test_mutations": int(params.get("min_test_mutations", 3)),
        "max_test_mutations": int(params.get("max_test_mutations", 10)),
    }


def load_assays(data_dir: Path, files: list[tuple[str, str]], params: dict[str, Any]) -> list[Assay]:
    """Read and split the fetched assays.

    Args:
        data_dir: The family's data cache directory.
        files: ``(assay id, file name in the cache)`` pairs, in scoring order.
        params: Scorer parameters (split bounds).

    Returns:
        One split assay per file.

    Raises:
        DataMissingError: If a file has not been fetched; names ``bench data fetch multi_evolve``.
        ValueError: If a table is malformed or gives an empty split.
    """
    missing = [fn for _, fn in files if not (Path(data_dir) / fn).is_file()]
    if missing:
        raise DataMissingError(
            f"Multi-Evolve assay table(s) not found in {data_dir}: {', '.join(missing)}. "
            "Run `bench data fetch multi_evolve` (needs network access) first."
        )
    split = _split_params(params)
    return [split_assay(name, read_assay_table(Path(data_dir) / fn), **split) for name, fn in files]


# -- synthetic landscape ---------------------------------------------------------------------


def _nonlinearity(kind: str, z: np.ndarray, width: float) -> np.ndarray:
    if kind == "tanh":
        return np.tanh(z / width)
    if kind == "logistic":
        return 1.0 / (1.0 + np.exp(-z / width))
    if kind == "none":
        return z
    raise ValueError(f"unknown nonlinearity {kind!r} (tanh, logistic or none)")


def synthetic_table(params: dict[str, Any], index: int = 0) -> tuple[pd.DataFrame, str]:
    """One seeded synthetic assay in the raw format.

    The landscape: ``sites`` mutated positions of a random wild type of ``length`` residues, each
    with ``alternatives`` substitutions. Every substitution has an additive effect drawn from
    N(``effect_mean``, ``effect_sd``); a fraction ``pair_fraction`` of the pairs of substitutions
    at different sites interact, with a pair term drawn from N(0, ``epistasis_sd``). A variant's
    latent value is the sum of its effects and pair terms; its fitness is a saturating function of
    the latent value (``nonlinearity`` tanh / logistic / none, scale ``width``) plus Gaussian noise
    (``noise``). The table holds the wild type, every single, a fraction ``double_fraction`` of
    the possible doubles, and ``test_size`` distinct variants with 3 to 10 mutations (count
    uniform over that range, capped by ``sites``).

    Args:
        params: Scorer parameters (defaults in the code); ``seed`` and ``index`` seed the draw.
        index: Which assay of the variant (each gets its own landscape).

    Returns:
        (table with ``mutant``, ``DMS_score`` and ``mutated_sequence``, wild-type sequence).
    """
    rng = np.random.default_rng([int(params.get("seed", 0)), int(index)])
    length = int(params.get("length", 80))
    n_sites = int(params.get("sites", 15))
    alternatives = int(params.get("alternatives", 1))
    if not 1 <= alternatives <= 19 or not 2 <= n_sites <= length:
        raise ValueError("need 1 <= alternatives <= 19 and 2 <= sites <= length")
    effect_mean = float(params.get("effect_mean", -0.3))
    effect_sd = float(params.get("effect_sd", 1.0))
    pair_fraction = float(params.get("pair_fraction", 0.1))
    epistasis_sd = float(params.get("epistasis_sd", 0.7))
    kind = str(params.get("nonlinearity", "tanh"))
    width = float(params.get("width", 3.0))
    noise = float(params.get("noise", 0.1))
    double_fraction = float(params.get("double_fraction", 0.4))
    test_size = int(params.get("test_size", 200))
    lo = int(params.get("min_test_mutations", 3))
    hi = min(int(params.get("max_test_mutations", 10)), n_sites)

    wt = "".join(rng.choice(list(AMINO_ACIDS), size=length))
    sites = np.sort(rng.choice(np.arange(1, length + 1), size=n_sites, replace=False))
    muts: list[tuple[int, str]] = []  # (site index, token)
    for s_i, pos in enumerate(sites):
        pool = [a for a in AMINO_ACIDS if a != wt[pos - 1]]
        for aa in rng.choice(pool, size=alternatives, replace=False):
            muts.append((s_i, f"{wt[pos - 1]}{pos}{aa}"))
    m = len(muts)
    effect = rng.normal(effect_mean, effect_sd, size=m)
    pair = np.zeros((m, m))
    for i, j in combinations(range(m), 2):
        if muts[i][0] != muts[j][0] and rng.random() < pair_fraction:
            pair[i, j] = pair[j, i] = rng.normal(0.0, epistasis_sd)

    def variant_rows(subsets: list[tuple[int, ...]]) -> tuple[list[str], np.ndarray, list[str]]:
        latent = np.array([effect[list(s)].sum() + pair[np.ix_(s, s)].sum() / 2.0 for s in subsets])
        fit = _nonlinearity(kind, latent, width) + noise * rng.standard_normal(len(subsets))
        names, seqs = [], []
        for s in subsets:
            seq = list(wt)
            for k in s:
                tok = muts[k][1]
                seq[int(tok[1:-1]) - 1] = tok[-1]
            names.append(":".join(muts[k][1] for k in s) if s else "WT")
            seqs.append("".join(seq))
        return names, fit, seqs

    doubles = [(i, j) for i, j in combinations(range(m), 2) if muts[i][0] != muts[j][0]]
    n_doubles = int(round(double_fraction * len(doubles)))
    chosen = sorted(rng.choice(len(doubles), size=n_doubles, replace=False).tolist()) if n_doubles else []
    subsets: list[tuple[int, ...]] = [(), *[(i,) for i in range(m)], *[doubles[c] for c in chosen]]

    by_site: list[list[int]] = [[] for _ in range(n_sites)]
    for k, (s_i, _) in enumerate(muts):
        by_site[s_i].append(k)
    seen: set[tuple[int, ...]] = set()
    higher: list[tuple[int, ...]] = []
    tries = 0
    while len(higher) < test_size and tries < 50 * test_size and lo <= hi:
        tries += 1
        k = int(rng.integers(lo, hi + 1))
        picked = rng.choice(n_sites, size=k, replace=False)
        combo = tuple(sorted(int(rng.choice(by_site[s])) for s in picked))
        if combo not in seen:
            seen.add(combo)
            higher.append(combo)
    names, fit, seqs = variant_rows(subsets + higher)
    table = pd.DataFrame({"mutant": names, "DMS_score": fit, "mutated_sequence": seqs})
    return table, wt


def synthetic_assays(params: dict[str, Any]) -> list[Assay]:
    """The tiny variant's assays: ``assays`` seeded synthetic landscapes, split like real data."""
    split = _split_params(params)
    out = []
    for index in range(int(params.get("assays", 2))):
        table, wt = synthetic_table(params, index)
        out.append(split_assay(f"synthetic-{index}", table, target_seq=wt, **split))
    return out


def write_synthetic_csv(path: Path, params: dict[str, Any], index: int = 0) -> None:
    """Write one synthetic assay as a raw CSV (tests and benchmarks of the real loading path)."""
    table, _ = synthetic_table(params, index)
    table.to_csv(path, index=False)
