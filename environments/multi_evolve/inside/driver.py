"""Sandbox driver of Multi-Evolve: runs INSIDE the sandbox, next to the candidate module.

The trusted scorer calls :func:`predict` through ``CandidateRuntime.call_driver`` once per assay
with plain columns (DataFrames cannot cross the sandbox wire). This file builds the DataFrames of
the declared contract and calls the candidate's ``fit_and_predict(train_df, test_df, context)``, so
a candidate defines only that function. Nothing here is secret: the columns are exactly what the
candidate is allowed to see, and the candidate could patch this module, which gains it nothing
(the scorer validates whatever comes back).
"""

import numpy as np
import pandas as pd

ENTRY_POINT = "fit_and_predict"


def _plain(value):
    """Make the candidate's return value sendable without judging it (the scorer does that).

    pandas objects become numpy arrays; a flat list or tuple of real numbers becomes a float64
    array (a long Python list would exceed the wire's node limit). Anything else goes back as is,
    so the scorer can name the rule it breaks.
    """
    if isinstance(value, pd.Series | pd.Index | pd.DataFrame):
        return value.to_numpy()
    if isinstance(value, list | tuple) and all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
        for v in value
    ):
        try:
            return np.asarray(value, dtype=np.float64)
        except OverflowError:  # a Python int beyond float range: the scorer reports it
            return list(value)
    return value


def predict(candidate, train_cols, test_cols, context):
    """Build the DataFrames and call the candidate's declared entry point.

    Args:
        candidate: The loaded candidate module.
        train_cols: Training columns (``mutant``, ``num_mutations``, ``fitness``, optional
            ``DMS_score_bin``) as lists or arrays.
        test_cols: Test columns (``mutant``, ``num_mutations``).
        context: ``target_seq``, ``seq_len`` and the split bounds.

    Returns:
        The candidate's predictions, made sendable by :func:`_plain`.

    Raises:
        AttributeError: If the candidate does not define ``fit_and_predict``.
    """
    fn = getattr(candidate, ENTRY_POINT, None)
    if not callable(fn):
        raise AttributeError(f"the candidate has no function {ENTRY_POINT!r} (the declared entry point)")
    train_df = pd.DataFrame(train_cols)
    test_df = pd.DataFrame(test_cols)
    return _plain(fn(train_df, test_df, dict(context)))
