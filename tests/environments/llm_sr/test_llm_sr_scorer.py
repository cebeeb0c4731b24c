"""LlmSrScorer with an in-process fake runtime on the real LLM-SR data: fit, scores, rules."""

from __future__ import annotations

import dataclasses
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from environments.llm_sr.canonical import canonicalise
from environments.llm_sr.scorer import LlmSrScorer, _seal_workdir, check_prediction, parse_frame
from harness.envs.registry import Variant, default_registry
from harness.evaluation.errors import CandidateError, CandidateInvalid
from harness.scoring.api import ScoreOutcome

OSC1_TRUE = """
import numpy as np


def equation(x, v, params):
    return (
        params[0] * np.sin(x)
        + params[1] * v**3
        + params[2] * x**3
        + params[3] * x * v
        + params[4] * x * np.cos(x)
    )
"""

OSC2_TRUE = """
import numpy as np


def equation(t, x, v, params):
    return (
        params[0] * np.sin(t) + params[1] * v**3 + params[2] * x * v + params[3] * x * np.exp(params[4] * x)
    )
"""

LINEAR_OSC1 = """
import numpy as np


def equation(x, v, params):
    return params[0] * x + params[1] * v + params[2]
"""

Factory = Callable[[str], Any]


def _variant(vid: str) -> Variant:
    return default_registry().get(vid)


@pytest.fixture(scope="module")
def scorers(llm_sr_family_dir: Path) -> dict[str, LlmSrScorer]:
    out = {}
    for vid in ("llm-sr-osc1", "llm-sr-osc2", "llm-sr-tiny"):
        v = _variant(vid)
        s = v.load_attr(v.scorer_ref)(v, llm_sr_family_dir)
        assert isinstance(s, LlmSrScorer)
        s.prepare()
        out[vid] = s
    return out


def _score(scorer: LlmSrScorer, rt: Any) -> ScoreOutcome:
    return scorer.score(rt)


# -- true skeletons vs the seed -----------------------------------------------------------------


@pytest.mark.parametrize(("vid", "source"), [("llm-sr-osc1", OSC1_TRUE), ("llm-sr-osc2", OSC2_TRUE)])
def test_true_skeleton_reaches_the_progress_target(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory, vid: str, source: str
) -> None:
    # y_target of these variants is the true law's score under the published fit (env.toml).
    out = _score(scorers[vid], fake_runtime(source))
    m = out.metrics
    print(f"{vid} true skeleton: NMSE id {m['nmse_id']:.3g}, ood {m['nmse_ood']:.3g}")
    assert out.score == m["log10_nmse_id"] == pytest.approx(_variant(vid).progress.y_target, abs=0.01)
    assert m["nmse_ood"] < 0.05
    assert m["fit_calls"] <= scorers[vid].published_settings.max_calls


def test_linear_seed_is_orders_of_magnitude_worse(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory
) -> None:
    s = scorers["llm-sr-osc1"]
    seed = _score(s, fake_runtime(LINEAR_OSC1)).metrics
    true = _score(s, fake_runtime(OSC1_TRUE)).metrics
    assert seed["nmse_id"] > 1e-2
    assert seed["log10_nmse_id"] - true["log10_nmse_id"] > 4  # at least 4 orders of magnitude
    # The generic initial program is the same linear model and scores the same.
    init = _score(s, fake_runtime(_variant("llm-sr-osc1").initial_program)).metrics
    assert init["log10_nmse_id"] == pytest.approx(seed["log10_nmse_id"], abs=1e-6)
    assert init["log10_nmse_id"] == pytest.approx(_variant("llm-sr-osc1").progress.y_init, abs=0.01)


def test_metrics_are_consistent(scorers: dict[str, LlmSrScorer], fake_runtime: Factory) -> None:
    s = scorers["llm-sr-osc1"]
    out = _score(s, fake_runtime(LINEAR_OSC1))
    m = out.metrics
    optional = {"log10_nmse_strong_fit", "log10_nmse_ood_strong_fit", "fit_calls_strong"}
    assert set(m) == {m.name for m in _variant("llm-sr-osc1").metrics} - optional
    train = s.problem.splits["train"].target
    assert m["train_nmse"] == pytest.approx(m["train_mse"] / np.var(train))
    assert m["log10_nmse_id"] == pytest.approx(np.log10(m["nmse_id"]))
    assert m["log10_nmse_ood"] == pytest.approx(np.log10(m["nmse_ood"]))
    assert out.candidate_seconds > 0


def test_scoring_is_deterministic(scorers: dict[str, LlmSrScorer], fake_runtime: Factory) -> None:
    s = scorers["llm-sr-tiny"]
    a = _score(s, fake_runtime(OSC1_TRUE)).metrics
    b = _score(s, fake_runtime(OSC1_TRUE)).metrics
    assert a == b


def test_fit_starts_at_one_with_ten_params_and_respects_the_call_cap(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory
) -> None:
    s = scorers["llm-sr-tiny"]
    rt = fake_runtime(OSC1_TRUE)
    _score(s, rt)
    first = rt.calls[0][-1]
    assert first.dtype == np.float64 and first.shape == (10,) and (first == 1.0).all()
    capped = dataclasses.replace(s.published_settings, max_calls=40)
    s2 = LlmSrScorer(s.variant, s.data_dir)
    s2.prepare()
    s2.published_settings = capped
    rt2 = fake_runtime(OSC1_TRUE)
    out = _score(s2, rt2)
    assert out.metrics["fit_calls"] == len(rt2.calls) == 40


# -- the candidate never sees a target --------------------------------------------------------


def test_candidate_never_receives_the_target(scorers: dict[str, LlmSrScorer], fake_runtime: Factory) -> None:
    s = scorers["llm-sr-osc1"]
    rt = fake_runtime(LINEAR_OSC1)
    _score(s, rt)
    targets = [sp.target for sp in s.problem.splits.values()]
    train = s.problem.splits["train"]

    def is_target(a: np.ndarray) -> bool:
        return any(a.shape == t.shape and np.allclose(a, t) for t in targets)

    assert len(rt.calls) > 10
    for args in rt.calls:
        assert len(args) == 3  # x, v, params: exactly the input columns and the parameters
        x, v, params = args
        assert np.array_equal(x, train.inputs[:, 0]) and np.array_equal(v, train.inputs[:, 1])
        assert params.shape == (10,)
        assert not any(is_target(a) for a in args)
    # What the fresh prediction process receives: inputs of every split and the fitted params only.
    (argv,) = rt.runs
    sub = rt.workdir / Path(argv[-1]).parent
    assert sorted(p.name for p in sub.iterdir()) == ["candidate.py", "inputs.npz", "sandbox_driver.py"]
    # The canonical form (canonical.py), never the submitted text: formatting carries nothing there.
    canonical = canonicalise(LINEAR_OSC1, s.plausibility.max_source_chars)
    assert (sub / "candidate.py").read_text() == canonical != LINEAR_OSC1
    with np.load(sub / "inputs.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["params", "splits", "x_test_id", "x_test_ood", "x_train"]
        for split, sp in s.problem.splits.items():
            x = z[f"x_{split}"]
            assert np.array_equal(x, sp.inputs)
            assert not any(is_target(x[:, j]) for j in range(x.shape[1]))
        assert z["params"].shape == (1, 10)  # one fitted vector: the published fit only
    with zipfile.ZipFile(io.BytesIO((sub / "inputs.npz").read_bytes())) as zf:
        for name in zf.namelist():
            raw = zf.read(name)
            for t in targets:
                assert t.tobytes()[:800] not in raw


# -- validity rules -----------------------------------------------------------------------------

NAN_ON_HARD_POINTS = """
import numpy as np


def equation(x, v, params):
    y = params[0] * x + params[1] * v + params[2]
    return np.where(np.abs(x) > 0.4, np.nan, y)
"""

NAN_OUT_OF_DOMAIN = """
import numpy as np


def equation(x, v, params):
    y = params[0] * x + params[1] * v + params[2]
    return np.where(np.abs(x) > 0.6, np.nan, y)  # the train / test_id range is |x| < 0.58
"""

INF_OUT_OF_DOMAIN = NAN_OUT_OF_DOMAIN.replace("np.nan", "np.inf")

ELEVEN_PARAMS = """
import numpy as np


def equation(x, v, params):
    return sum(params[i] * x**i for i in range(11)) + params[0] * v
"""

NON_DETERMINISTIC = """
import numpy as np


def equation(x, v, params):
    return params[0] * x + params[1] * v + params[2] + 1e-3 * np.random.standard_normal(x.shape)
"""

HISTORY_DEPENDENT = """
import numpy as np

_CALLS = [0]


def equation(x, v, params):
    _CALLS[0] += 1
    return params[0] * x + params[1] * v + params[2] + 1e-4 * min(_CALLS[0], 50)
"""


def _shape_hack(expr: str) -> str:
    return f"""
import numpy as np


def equation(x, v, params):
    y = params[0] * x + params[1] * v + params[2]
    return {expr}
"""


RULE_CASES = [
    ("nan-on-hard-points", NAN_ON_HARD_POINTS, "finite"),
    ("nan-only-out-of-domain", NAN_OUT_OF_DOMAIN, "finite"),
    ("inf-only-out-of-domain", INF_OUT_OF_DOMAIN, "finite"),
    ("eleven-params", ELEVEN_PARAMS, "max-params"),
    ("column", _shape_hack("y[:, None]"), "shape"),
    ("scalar-array", _shape_hack("np.float64(y.mean())"), "type"),
    ("0-d-array", _shape_hack("np.array(y.mean())"), "shape"),
    ("short", _shape_hack("y[:-1]"), "shape"),
    ("list", _shape_hack("y.tolist()"), "type"),
    ("complex", _shape_hack("y + 0j"), "dtype"),
    ("bool", _shape_hack("y > 0"), "dtype"),
    ("nondeterministic", NON_DETERMINISTIC, "deterministic"),
    ("history-dependent", HISTORY_DEPENDENT, "deterministic"),
]


@pytest.mark.parametrize(("name", "source", "rule"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_breakers_are_invalid(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory, name: str, source: str, rule: str
) -> None:
    with pytest.raises(CandidateInvalid, match=f"rule '{rule}'"):
        _score(scorers["llm-sr-osc1"], fake_runtime(source))


def test_candidate_errors_propagate(scorers: dict[str, LlmSrScorer], fake_runtime: Factory) -> None:
    src = "def equation(x, v, params):\n    raise ValueError('nope')\n"
    with pytest.raises(CandidateError, match="ValueError"):
        _score(scorers["llm-sr-tiny"], fake_runtime(src))


def test_fresh_process_failure_is_a_candidate_error(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory
) -> None:
    # Loads in the (fake) fitting process, whose module is not named 'candidate', but raises when
    # the fresh interpreter imports it as 'candidate': the failure surfaces from the fresh run.
    src = LINEAR_OSC1 + "\nif __name__ == 'candidate':\n    raise RuntimeError('fresh process')\n"
    with pytest.raises(CandidateError, match="fresh process"):
        _score(scorers["llm-sr-tiny"], fake_runtime(src))


def test_printing_does_not_break_the_prediction_frame(
    scorers: dict[str, LlmSrScorer], fake_runtime: Factory
) -> None:
    src = LINEAR_OSC1.replace("    return", "    print('\\x00EVOBENCH junk', x[:3])\n    return")
    a = _score(scorers["llm-sr-tiny"], fake_runtime(src)).metrics
    b = _score(scorers["llm-sr-tiny"], fake_runtime(LINEAR_OSC1)).metrics
    assert a == b


def test_check_prediction_and_frame_helpers() -> None:
    assert check_prediction(np.arange(3), 3, "train").dtype == np.float64
    with pytest.raises(CandidateInvalid, match="rule 'shape'"):
        check_prediction(np.zeros((3, 1)), 3, "train")
    with pytest.raises(CandidateError, match="prediction frame"):
        parse_frame(b"garbage", [2, 2, 2])


def test_sealing_the_workdir_removes_entries_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    (work / "link-to-dir").symlink_to(outside)
    (work / "link-to-file").symlink_to(outside / "keep.txt")
    nested = work / "nested"
    nested.mkdir()
    (nested / "inner-link").symlink_to(outside)
    (nested / "note.txt").write_text("state")
    _seal_workdir(work)
    assert list(work.iterdir()) == []
    assert (work.stat().st_mode & 0o777) == 0o755
    assert (outside / "keep.txt").read_text() == "keep"
    # The scorer's own files go through ExchangeDir (tests/harness/scoring/test_exchange.py).
