from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.compare.anytime import best_so_far
from harness.report.plot import band, curves_figure, save, svg_text, train_figure


def _train_frame(n: int = 40, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    step = np.arange(n)
    df = pd.DataFrame(
        {
            "step": step,
            "adapter_version": step // 5,
            "loss": 1.0 / (1 + step) + rng.normal(0, 0.01, n),
            "entropy": np.linspace(2.0, 1.2, n),
            "grad_norm": rng.gamma(2.0, 0.5, n),
            "clip_frac": rng.uniform(0, 0.2, n),
            "kl": np.linspace(0, 0.05, n),
            "alpha": np.full(n, 0.1),
            "reward_mean": np.linspace(-1, 3, n),
            "reward_std": np.full(n, 0.5),
            "skipped": (step % 7 == 3).astype(int),
            "skip_reason": np.where(step % 7 == 3, "all rewards equal", ""),
        }
    )
    return df.drop(columns=list(drop))


def test_train_figure_draws_one_panel_per_present_column(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    _train_frame().to_parquet(path)
    fig = train_figure(pd.read_parquet(path))
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_visible()]
    assert titles == [
        "reward (mean ± std)",
        "loss",
        "entropy",
        "gradient norm",
        "KL",
        "α_t",
        "clip fraction",
        "skipped steps (cumulative)",
    ]
    skipped = next(ax for ax in fig.axes if ax.get_title(loc="left").startswith("skipped"))
    assert skipped.lines[0].get_ydata()[-1] == 6  # steps 3, 10, 17, 24, 31, 38
    assert any("6× all rewards equal" in t.get_text() for t in skipped.texts)
    out = save(fig, tmp_path / "train.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_train_figure_with_a_subset_of_columns() -> None:
    fig = train_figure(
        _train_frame(drop=("kl", "alpha", "clip_frac", "skipped", "skip_reason", "reward_std"))
    )
    assert [ax.get_title(loc="left") for ax in fig.axes if ax.get_visible()] == [
        "reward (mean ± std)",
        "loss",
        "entropy",
        "gradient norm",
    ]


def test_train_figure_rejects_frames_without_step_or_diagnostics() -> None:
    with pytest.raises(ValueError, match="step"):
        train_figure(pd.DataFrame({"loss": [1.0]}))
    with pytest.raises(ValueError, match="none of the diagnostic"):
        train_figure(pd.DataFrame({"step": [0, 1], "adapter_version": [0, 0]}))


def test_band_mean_and_interval() -> None:
    vals = np.array([[0.0, 1.0, np.nan], [2.0, 3.0, 4.0]])
    mean, lo, hi, n = band(vals, n_resamples=200)
    # the last point lacks a run: no mean there (the mean of the one run that has a value would
    # pretend n = 2), and the count says so
    assert mean[:2].tolist() == [1.0, 2.0] and np.isnan(mean[2]) and n.tolist() == [2, 2, 1]
    assert lo[0] == 0.0 and hi[0] == 2.0  # resamples of two runs: means 0, 1 or 2
    single_mean, single_lo, _, _ = band(vals[:1])
    assert np.array_equal(single_mean, single_lo, equal_nan=True)


def test_curves_figure_labels_lines_directly_and_writes_valid_svg(tmp_path: Path) -> None:
    import pyarrow as pa

    def curves(run: str, scores: list[float | None]) -> pd.DataFrame:
        t = pa.table(
            {
                "run_id": pa.array([run] * len(scores)).dictionary_encode(),
                "seq": list(range(len(scores))),
                "status": ["ok" if s is not None else "error" for s in scores],
                "score": pa.array(scores, pa.float64()),
                "cost_usd": [0.1] * len(scores),
            }
        )
        return best_so_far(t, maximize=True)

    a = pd.concat([curves("a0", [1.0, 2.0, 3.0]), curves("a1", [None, 2.0, 2.5])], ignore_index=True)
    a["run_id"] = a["run_id"].astype("category")
    fig = curves_figure({"alpha": a, "beta": curves("b0", [0.5, 0.5, 1.0])}, axis="cost_usd")
    ax = fig.axes[0]
    assert ax.get_legend() is None
    assert sorted(t.get_text() for t in ax.texts) == ["alpha (n=2)", "beta (n=1)"]
    root = ET.fromstring(svg_text(fig))
    assert root.tag.endswith("svg")
    path = save(fig, tmp_path / "c.svg")
    ET.parse(path)
    with pytest.raises(ValueError, match=".png or .svg"):
        save(fig, tmp_path / "c.pdf")
    ref = curves_figure({"alpha": a}, axis="cost_usd", references={"ttt": 2.75})
    ax = ref.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["[ref] ttt", "alpha (n=2)"]  # labelled, not a run
    assert any(list(line.get_ydata()) == [2.75, 2.75] and line.get_linestyle() == "--" for line in ax.lines)
    u = curves_figure(
        {"alpha": a}, axis="cost_usd", metric="u", y_floor=1.0, y_target=3.0, references={"t": 2.0}
    )
    assert any(list(line.get_ydata()) == [0.5, 0.5] for line in u.axes[0].lines)  # on the u scale
