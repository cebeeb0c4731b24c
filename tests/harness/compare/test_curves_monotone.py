"""Best-so-far curves are monotone on every axis, per run and as a mean across runs (issue 23 case 5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.compare.anytime import AXES, best_so_far, progress_of
from harness.report.plot import band, curves_figure, run_values

T0 = datetime(2026, 1, 1, tzinfo=UTC)

_eval = st.tuples(
    st.one_of(st.none(), st.floats(-5.0, 5.0, allow_nan=False)),  # score (None: failed)
    st.floats(0.0, 0.5),  # cost
    st.floats(0.0, 3.0),  # start offset after the previous start
    st.floats(0.01, 5.0),  # duration (parallel workers: finishes out of order)
)


def _table(runs: list[list[tuple[float | None, float, float, float]]]) -> pa.Table:
    rid, seq, status, score, cost, t0, t1 = [], [], [], [], [], [], []
    for r, evals in enumerate(runs):
        start = 0.0
        for i, (s, c, gap, dur) in enumerate(evals):
            start += gap
            rid.append(f"r{r}")
            seq.append(i)
            status.append("ok" if s is not None else "error")
            score.append(s)
            cost.append(c)
            t0.append(T0 + timedelta(seconds=start))
            t1.append(T0 + timedelta(seconds=start + dur))
    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "run_id": pa.array(rid).dictionary_encode(),
            "seq": seq,
            "status": status,
            "score": pa.array(score, pa.float64()),
            "cost_usd": cost,
            "started_at": pa.array(t0, ts),
            "finished_at": pa.array(t1, ts),
        }
    )


def _monotone(y: np.ndarray, up: bool) -> bool:
    y = y[np.isfinite(y)]
    d = np.diff(y)
    return bool(np.all(d >= -1e-12) if up else np.all(d <= 1e-12))


@settings(max_examples=40, deadline=None)
@given(
    runs=st.lists(st.lists(_eval, min_size=1, max_size=12), min_size=1, max_size=4), maximize=st.booleans()
)
def test_best_so_far_and_its_mean_are_monotone_on_every_axis(
    runs: list[list[tuple[float | None, float, float, float]]], maximize: bool
) -> None:
    curves = best_so_far(_table(runs), maximize=maximize)
    for _, g in curves.groupby("run_id", observed=True):
        assert _monotone(g["best"].to_numpy(), up=maximize)
        for axis in AXES:
            assert _monotone(g[axis].to_numpy(), up=True)
    curves["value"] = curves["best"]
    curves["u"] = progress_of(curves["best"], -5.0 if maximize else 5.0, 5.0 if maximize else -5.0)
    for axis in AXES:
        grid = np.linspace(0.0, max(float(curves[axis].max()), 1e-9) * 1.2, 60)
        _, vals, _ = run_values(curves, axis, grid)
        mean, lo, hi, _ = band(vals, n_resamples=50)
        assert _monotone(mean, up=maximize)
        _, uvals, _ = run_values(curves, axis, grid, value="u", fill=0.0)
        umean, *_ = band(uvals, n_resamples=50)
        assert np.isfinite(umean).all() and _monotone(umean, up=True)  # u exists from each run's start


def test_wall_time_mean_does_not_drop_when_a_weak_run_scores_late() -> None:
    # run 0 scores 9 after 1 s; run 1 scores 1 only after 10 s (the case: the old mean
    # was 9 with "n = 2" until 10 s, then fell to 5)
    t = _table([[(9.0, 0.0, 0.0, 1.0)], [(None, 0.0, 0.0, 5.0), (1.0, 0.0, 5.0, 5.0)]])
    curves = best_so_far(t, maximize=True)
    curves["value"] = curves["best"]
    grid = np.linspace(0.0, 12.0, 25)
    _, vals, ends = run_values(curves, "wall_s", grid)
    mean, _, _, count = band(vals, n_resamples=50)
    assert np.isnan(mean[grid < 10]).all() and count[(grid >= 1) & (grid < 10)].tolist() == [1] * 18
    assert mean[grid >= 10].tolist() == [5.0] * int((grid >= 10).sum())
    assert ends.tolist() == [1.0, 10.0]
    fig = curves_figure({"A": curves.drop(columns="value")}, axis="wall_s")
    ys = np.concatenate([np.asarray(line.get_ydata(), dtype=float) for line in fig.axes[0].lines])
    assert _monotone(ys[np.isfinite(ys)], up=True) and [t.get_text() for t in fig.axes[0].texts] == [
        "A (n=2)"
    ]
    assert "tick on a line" in fig.get_suptitle()  # run 0 ended at 1 s: its final best is carried, marked


def test_u_curve_starts_at_zero_from_each_runs_start() -> None:
    t = _table([[(None, 0.0, 0.0, 2.0), (5.0, 0.0, 0.0, 4.0)]])
    curves = best_so_far(t, maximize=True)
    curves["u"] = progress_of(curves["best"], 0.0, 10.0)
    _, vals, _ = run_values(curves, "wall_s", np.array([0.0, 1.0, 3.0, 4.0]), value="u", fill=0.0)
    assert vals.tolist() == [[0.0, 0.0, 0.0, 0.5]]
    assert isinstance(curves, pd.DataFrame)
