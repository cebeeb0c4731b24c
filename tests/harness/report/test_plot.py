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


def _best(run: str, scores: list[float | None], wall: list[float] | None = None) -> pd.DataFrame:
    import pyarrow as pa

    cols: dict[str, object] = {
        "run_id": pa.array([run] * len(scores)).dictionary_encode(),
        "seq": list(range(len(scores))),
        "status": ["ok" if s is not None else "error" for s in scores],
        "score": pa.array(scores, pa.float64()),
        "cost_usd": [0.0] * len(scores),
    }
    if wall is not None:  # evaluation i runs from the end of i - 1 to wall[i] seconds after the start
        from datetime import UTC, datetime, timedelta

        t0, ts = datetime(2026, 1, 1, tzinfo=UTC), pa.timestamp("us", tz="UTC")
        cols["started_at"] = pa.array([t0 + timedelta(seconds=w) for w in [0.0, *wall[:-1]]], ts)
        cols["finished_at"] = pa.array([t0 + timedelta(seconds=w) for w in wall], ts)
    return best_so_far(pa.table(cols), maximize=True)


def _two_units(wall: bool = False) -> dict[str, pd.DataFrame]:
    a = pd.concat(
        [
            _best("a0", [0.5, 0.6, 0.7], [1.0, 2.0, 3.0] if wall else None),
            _best("a1", [0.55, 0.58, 0.62], [4.0, 6.0, 9.0] if wall else None),
        ],
        ignore_index=True,
    )
    a["run_id"] = a["run_id"].astype("category")
    return {"alpha": a, "beta": _best("b0", [0.5, 0.52, 0.66], [2.0, 3.0, 5.0] if wall else None)}


def test_score_axis_from_the_manifest_names_metric_unit_and_direction() -> None:
    from harness.envs.registry import default_registry
    from harness.report.axes import ScoreAxis, score_axis, unit_of

    assert score_axis(default_registry().get("eplb-tiny")) == ScoreAxis("combined", "dimensionless", True)
    assert unit_of("Geometric mean of the cases' mean times in microseconds (each floored).") == "µs"
    assert unit_of("(NDCG@10 + HR@10 + MRR) / 3 on each user's last item, full ranking (0 to 1).") == "0 to 1"
    assert unit_of("Reference (eager Model) mean time / ModelNew mean time, both timed here.") == ""
    assert ScoreAxis("score_us", "µs", False).label() == "best-so-far score_us (µs)\n↓ lower is better"


def test_curves_figure_is_fit_for_a_paper(tmp_path: Path) -> None:
    from matplotlib.ticker import MaxNLocator

    from harness.report.axes import ScoreAxis

    title = "eplb-tiny@4a29ac5b64894c8c: best so far, " + "a caption long enough to run off both sides " * 3
    fig = curves_figure(
        _two_units(),
        title=title,
        score=ScoreAxis("combined", "dimensionless", True),
        y_init=0.5,
        y_target=0.9,
    )
    ax = fig.axes[0]
    svg = svg_text(fig)  # draws the figure
    ticks = ax.get_xticks()
    assert isinstance(ax.xaxis.get_major_locator(), MaxNLocator)
    assert len(ticks) >= 2 and np.all(ticks == np.round(ticks))  # 3 evaluations: 1, 2, 3, no 1.5
    assert ax.get_ylabel() == "best-so-far combined (dimensionless)\n↑ higher is better"
    refs = {line.get_linestyle(): list(line.get_ydata()) for line in ax.lines if len(line.get_ydata()) == 2}
    assert refs[":"] == [0.5, 0.5] and refs["-."] == [0.9, 0.9]  # initial program, target
    assert {"initial program", "target", "alpha (n=2)", "beta (n=1)"} <= {t.get_text() for t in ax.texts}
    # the whole caption inside the figure's own width (wrapped), every label inside the saved image
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    cap = fig._suptitle.get_window_extent(renderer)  # type: ignore[union-attr]
    assert fig.bbox.x0 <= cap.x0 and cap.x1 <= fig.bbox.x1
    assert fig.get_suptitle().replace("\n", " ").startswith(title.strip())
    root = ET.fromstring(svg)
    width = float(root.attrib["width"].removesuffix("pt"))
    tight = fig.get_tightbbox(renderer)
    assert width >= tight.width * 72 - 1  # the saved SVG spans the end labels right of the axes
    assert "initial program" in svg and "target" in svg
    png = save(fig, tmp_path / "c.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    # on the u scale the reference lines move with the bounds: initial at u(0.5) = 0.2, target at 1
    u = curves_figure(_two_units(), metric="u", y_floor=0.4, y_target=0.9, y_init=0.5)
    ys = sorted(line.get_ydata()[0] for line in u.axes[0].lines if len(line.get_ydata()) == 2)
    assert ys == pytest.approx([0.2, 1.0])


def test_wall_time_curves_are_solid_with_a_tick_where_a_run_ended() -> None:
    fig = curves_figure(_two_units(wall=True), axis="wall_s")
    ax = fig.axes[0]
    curves = [line for line in ax.lines if line.get_marker() in ("None", "", None)]
    assert curves and all(line.get_linestyle() == "-" for line in curves)  # no dashed tails
    ticks = [line for line in ax.lines if line.get_marker() == "|"]
    # alpha's run a0 ended at 3 s, before a1 (9 s): one tick; beta has one run: none
    # alpha's mean starts at the grid's first point from 4 s on
    assert len(ticks) == 1 and list(ticks[0].get_xdata()) == [pytest.approx(4.0, abs=0.05)]
    assert "tick on a line" in fig.get_suptitle()
