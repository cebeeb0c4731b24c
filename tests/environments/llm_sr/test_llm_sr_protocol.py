"""Family version 2's scored fit is the published LLM-SR protocol: its numbers on the real data.

Reference values (user's measurements with scipy's BFGS on the released oscillator1 CSVs, and
this environment's own with the same fit): true skeleton log10 NMSE -5.57 (test_id) / -1.53
(test_ood); the skeleton with a plain x term in place of x*cos(x) -4.88 / -1.47; with the strong
fit -22.19 / -17.97 and -11.78 / -5.44.

Tolerance 0.05 decades (12 % in NMSE). The published fit is deterministic and insensitive to the
order of the train rows (six shuffles give identical values to 3 decimals), so what is left to
absorb is a change of scipy's BFGS between versions; 0.05 is still far below the 0.69 decades
between the two skeletons and the 16.6 decades between the two fits, so the test cannot pass with
the wrong protocol or the wrong skeleton.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from environments.llm_sr.scorer import LlmSrScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateInvalid

TOL = 0.05

OSC1_TRUE = """
import numpy as np


def equation(x, v, params):
    return (
        params[0] * np.sin(x) + params[1] * v**3 + params[2] * x**3 + params[3] * x * v
        + params[4] * x * np.cos(x)
    )
"""

OSC1_WRONG_TERM = """
import numpy as np


def equation(x, v, params):
    return params[0] * np.sin(x) + params[1] * v**3 + params[2] * x**3 + params[3] * x * v + params[4] * x
"""


def _scorer(family_dir: Path, vid: str, **overrides: Any) -> LlmSrScorer:
    v = default_registry().get(vid)
    v = dataclasses.replace(v, scorer_params={**v.scorer_params, **overrides})
    s = v.load_attr(v.scorer_ref)(v, family_dir)
    assert isinstance(s, LlmSrScorer)
    s.prepare()
    return s


@pytest.fixture(scope="module")
def published(llm_sr_family_dir: Path) -> LlmSrScorer:
    s = _scorer(llm_sr_family_dir, "llm-sr-osc1")
    assert s.fit == "published" and not s.report_strong  # the family default
    return s


def test_true_skeleton_scores_as_published(published: LlmSrScorer, fake_runtime: Any) -> None:
    out = published.score(fake_runtime(OSC1_TRUE))
    assert out.score == out.metrics["log10_nmse_id"] == pytest.approx(-5.57, abs=TOL)
    assert out.metrics["log10_nmse_ood"] == pytest.approx(-1.53, abs=TOL)
    assert 100 < out.metrics["fit_calls"] < 1000
    assert "log10_nmse_strong_fit" not in out.metrics  # not computed unless asked for


def test_wrong_term_skeleton_scores_as_published(published: LlmSrScorer, fake_runtime: Any) -> None:
    out = published.score(fake_runtime(OSC1_WRONG_TERM))
    assert out.score == pytest.approx(-4.88, abs=TOL)
    assert out.metrics["log10_nmse_ood"] == pytest.approx(-1.47, abs=TOL)


@pytest.mark.slow
def test_strong_fit_is_reachable_by_parameter(llm_sr_family_dir: Path, fake_runtime: Any) -> None:
    # Scored with the strong fit ...
    strong = _scorer(llm_sr_family_dir, "llm-sr-osc1", fit="strong")
    out = strong.score(fake_runtime(OSC1_WRONG_TERM))
    assert out.score == pytest.approx(-11.78, abs=TOL)
    assert out.metrics["log10_nmse_ood"] == pytest.approx(-5.44, abs=TOL)
    # ... or reported next to the published score, from one fitting process and one fresh
    # prediction process (both parameter vectors go to the same fresh interpreter).
    both = _scorer(llm_sr_family_dir, "llm-sr-osc1", report_strong_fit=True)
    rt = fake_runtime(OSC1_TRUE)
    out = both.score(rt)
    assert out.score == pytest.approx(-5.57, abs=TOL)
    assert out.metrics["log10_nmse_strong_fit"] == pytest.approx(-22.19, abs=0.2)
    assert out.metrics["log10_nmse_ood_strong_fit"] == pytest.approx(-17.97, abs=0.2)
    assert out.metrics["fit_calls_strong"] > out.metrics["fit_calls"]
    assert len(rt.runs) == 1
    assert len(rt.calls) == out.metrics["fit_calls"] + out.metrics["fit_calls_strong"]


def test_unknown_fit_is_rejected(llm_sr_family_dir: Path) -> None:
    with pytest.raises(ValueError, match="fit must be one of"):
        _scorer(llm_sr_family_dir, "llm-sr-tiny", fit="lbfgs")


def test_nan_at_the_published_result_fails_the_candidate(fake_runtime: Any) -> None:
    # NaN predictions beyond a parameter bound: the published BFGS walks into them and ends there
    # (LLM-SR's score would be None); never dropped, never scored on the finite rows.
    src = """
import numpy as np


def equation(x, v, params):
    y = params[0] * x + params[1] * v + params[2]
    return np.full_like(x, np.nan) if params[0] < 0.5 else y
"""
    s = _scorer(Path("/nonexistent"), "llm-sr-tiny")
    with pytest.raises(CandidateInvalid, match="rule 'finite'"):
        s.score(fake_runtime(src))


def test_reported_strong_fit_is_left_out_when_not_finite(fake_runtime: Any) -> None:
    # In the fresh process the published parameters are predicted first, then the strong ones; this
    # candidate returns NaN on its second out-of-domain call (|x| > 0.6 only there), i.e. on
    # test_ood at the strong fit. The published score stands, the strong scores are left out.
    src = """
import numpy as np

_OOD_CALLS = [0]


def equation(x, v, params):
    if np.abs(x).max() > 0.6:
        _OOD_CALLS[0] += 1
        if _OOD_CALLS[0] == 2:
            return np.full_like(x, np.nan)
    return params[0] * x + params[1] * v + params[2]
"""
    s = _scorer(Path("/nonexistent"), "llm-sr-tiny", report_strong_fit=True)
    assert max(abs(s.problem.splits[k].inputs[:, 0]).max() for k in ("train", "test_id")) < 0.6
    assert abs(s.problem.splits["test_ood"].inputs[:, 0]).max() > 0.6
    out = s.score(fake_runtime(src))
    assert out.score == pytest.approx(default_registry().get("llm-sr-tiny").progress.y_init, abs=0.01)
    assert "log10_nmse_strong_fit" not in out.metrics and out.metrics["fit_calls_strong"] > 0
