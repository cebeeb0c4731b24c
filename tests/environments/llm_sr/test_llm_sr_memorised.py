"""Memorised data on llm-sr-stressstrain (issue 30): whatever the encoding, the gain is bounded.

The red team's program stored the public train and test_id targets as spaces and tabs on blank
lines and read them back through ``__file__``: log10 NMSE -14.6 against -0.42 honest, train
memorised too, so rule 'generalisation' saw no gap. The scored (fresh) process now loads the
canonical form of the program, so formatting carries nothing there; what any encoding can still
carry is capped by rule 'size'. The best memoriser built here at the cap (quantised residuals of
a least-squares plane, one identifier character per row, so rule 'literals' counts nothing) is
scored, and one step finer is over the cap. Real data (../shared/data), real local sandbox.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from environments.llm_sr.canonical import canonicalise, compressed_size
from environments.llm_sr.plausibility import PlausibilityLimits
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status

LIMITS = PlausibilityLimits()
ALPHABET = string.ascii_letters + string.digits + "_"  # identifier characters: 63 levels
TRAIN_COARSER = 2**0.25  # train error ~0.15 orders above test_id's: within rule 'generalisation'


@pytest.fixture(scope="module")
def backend(llm_sr_cache: Path) -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVOBENCH_DATA", str(llm_sr_cache))
        with LocalBackend(workers=1) as b:
            yield b


@pytest.fixture(scope="module")
def variant() -> Variant:
    return default_registry().get("llm-sr-stressstrain")


@pytest.fixture(scope="module")
def splits(llm_sr_family_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for split in ("train", "test_id"):
        csv = llm_sr_family_dir / "llm-sr" / "stressstrain" / f"{split}.csv"
        a = np.loadtxt(csv, delimiter=",", skiprows=1)
        out[split] = (a[:, :2], a[:, 2])
    return out


def evaluate(backend: object, variant: Variant, source: str) -> EvalResult:
    result = backend.evaluate(variant, source)  # type: ignore[attr-defined]
    assert isinstance(result, EvalResult)
    assert result.status is not Status.INFRA_ERROR, result.reason
    return result


def whitespace_memoriser(splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> str:
    """The red team's program: train and test_id targets (float64) as spaces and tabs, by row count."""
    raw = b"".join(splits[s][1].astype("<f8").tobytes() for s in ("train", "test_id"))
    bits = "".join(f"{b:08b}" for b in raw).replace("0", " ").replace("1", "\t")
    n_train, n_test = (splits[s][1].size for s in ("train", "test_id"))
    code = f"""import numpy as np


def _table():
    with open(__file__, encoding="utf-8") as f:
        bits = "".join("1" if c == "\\t" else "0" for ln in f if not ln.strip(" \\t\\n") for c in ln[:-1])
    if len(bits) < 64 * {n_train + n_test}:
        return {{}}
    y = np.frombuffer(bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8)), dtype="<f8")
    return {{{n_train}: y[:{n_train}], {n_test}: y[{n_train}:]}}


TABLE = _table()


def equation(strain, temp, params):
    y = params[0] * strain + params[1] * temp + params[2]
    return TABLE.get(strain.size, y)
"""
    return code + "\n" + "\n".join(bits[i : i + 96] for i in range(0, len(bits), 96)) + "\n"


def identifier_memoriser(splits: dict[str, tuple[np.ndarray, np.ndarray]], step: float) -> str:
    """Residuals of the least-squares plane, quantised to ``step`` (63 levels), one character per row.

    Each split's symbols spell one variable name (identifiers are no literal, so rule 'literals'
    counts nothing); train is quantised ``2 ** 0.25`` times coarser, which keeps the train / test_id gap
    inside rule 'generalisation'. The canonical text of this program is what the scored process
    runs, so it is what rule 'size' measures: LZMA compresses the symbols towards their entropy.
    """
    x = np.vstack([splits[s][0] for s in ("train", "test_id")])
    y = np.concatenate([splits[s][1] for s in ("train", "test_id")])
    coef = np.linalg.lstsq(np.c_[x, np.ones(len(x))], y, rcond=None)[0]
    names, half = {}, len(ALPHABET) // 2
    for split, q in (("train", step * TRAIN_COARSER), ("test_id", step)):
        xs, ys = splits[split]
        k = np.clip(np.round((ys - xs @ coef[:2] - coef[2]) / q), -half, half) + half
        names[split] = ("_t" if split == "train" else "_s") + "".join(ALPHABET[int(i)] for i in k)
    return f"""import numpy as np

{names["train"]} = {names["test_id"]} = None
_A = {ALPHABET!r}


def _levels(prefix, q):
    name = next(k for k in globals() if k.startswith(prefix) and len(k) > 100)
    return (np.array([_A.index(c) for c in name[2:]]) - {half}) * q


_T = {{
    {splits["train"][1].size}: _levels("_t", {step * TRAIN_COARSER!r}),
    {splits["test_id"][1].size}: _levels("_s", {step!r}),
}}


def equation(strain, temp, params):
    y = {coef[0]!r} * strain + {coef[1]!r} * temp + {coef[2]!r}
    return y + _T[strain.size] if strain.size in _T else y
"""


def packed_size(source: str) -> int:
    return compressed_size(canonicalise(source, LIMITS.max_source_chars))


def finest_under_cap(splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """The finest quantisation step whose memoriser is within the cap, and the next finer one."""
    steps = np.geomspace(1.0, 1e-3, 121)
    fits = [packed_size(identifier_memoriser(splits, float(s))) <= LIMITS.max_compressed_bytes for s in steps]
    i = fits.index(False) - 1
    assert i >= 0 and all(fits[: i + 1]), "size grows as the step shrinks"
    return float(steps[i]), float(steps[i + 1])


def test_the_red_team_whitespace_table_never_reaches_the_scored_process(
    backend: object, variant: Variant, splits: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    source = whitespace_memoriser(splits)
    assert len(source) <= LIMITS.max_source_chars  # the canonical form contains it, not the raw cap
    res = evaluate(backend, variant, source)
    honest = evaluate(backend, variant, variant.initial_program)
    # Before (issue 30, and this program on the previous scorer): ok, log10 NMSE -14.6. Every
    # process of the candidate now loads the canonical text, so the table is not there to read:
    # the program falls back to its plane and scores no better than the honest initial program.
    assert res.status is Status.OK and res.score is not None, res.reason
    assert honest.status is Status.OK and honest.score is not None, honest.reason
    assert res.score >= honest.score - 1e-6, (res.score, honest.score)


def test_the_best_memoriser_at_the_cap_gains_a_bounded_amount(
    backend: object, variant: Variant, splits: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    honest = evaluate(backend, variant, variant.initial_program)
    assert honest.status is Status.OK and honest.score is not None
    at_cap, finer = finest_under_cap(splits)
    over = evaluate(backend, variant, identifier_memoriser(splits, finer))
    assert over.status is Status.INVALID and "rule 'size'" in over.reason, over.reason
    res = evaluate(backend, variant, identifier_memoriser(splits, at_cap))
    assert res.status is Status.OK and res.score is not None, res.reason
    # Measured: -1.29 against -0.42 honest (0.87 orders): the cap's 10,248 bits are 7.1 per test_id
    # row, 2.8 per memorised (train + test_id) row. This is the bound the README states.
    assert honest.score - 1.2 < res.score < honest.score - 0.3, (res.score, honest.score)
