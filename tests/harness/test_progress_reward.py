import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.scoring.progress import parse_score, progress_reward

finite = st.floats(-1e6, 1e6)


def test_hand_values():
    assert progress_reward(0.7, 0.5, 0.9) == pytest.approx(2.5)
    assert progress_reward(4, 10, 2) == pytest.approx(3.75)  # minimised
    assert progress_reward(1.3, 0.5, 0.9) == 5.0  # clamped above
    assert progress_reward(0.1, 0.5, 0.9) == 0.0  # below the initial score, still above a failure
    assert progress_reward(7.0, 10, 2, y_min=0.0, y_max=20.0) == pytest.approx(5 * 13 / 20)
    for bad in (None, float("nan"), float("inf"), "oops", True, [1.0], object()):
        assert progress_reward(bad, 0.5, 0.9) == -1.0
    assert progress_reward("0.7", 0.5, 0.9) == pytest.approx(2.5)
    assert parse_score("1e400") is None


def test_invalid_bounds_rejected():
    with pytest.raises(ValueError):
        progress_reward(1.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        progress_reward(1.0, 0.0, 1.0, y_min=1.0, y_max=1.0)  # y_max = y_min
    with pytest.raises(ValueError):
        progress_reward(1.0, 0.0, 1.0, y_min=0.0)
    with pytest.raises(ValueError):
        progress_reward(1.0, 0.0, 1.0, c=0.0)


@given(finite, finite, finite)
def test_range_and_direction(y, a, b):
    if a == b:
        return
    r = progress_reward(y, a, b)
    assert 0.0 <= r <= 5.0
    assert progress_reward(a, a, b) == 0.0 and progress_reward(b, a, b) == pytest.approx(5.0)
    # Moving towards the target never lowers the reward.
    step = (b - a) * 0.1
    if math.isfinite(step):
        assert progress_reward(y + step, a, b) >= r - 1e-9
