"""Equation skeleton for symbolic regression: predict the target column from the input columns.

The evaluator calls ``equation(col_1, ..., col_k, params)`` with the problem's input columns (1-D
float64 numpy arrays of equal length, in the order the task description lists them) followed by
``params``, a float64 array of 10 constants that the evaluator fits to the training data. The
function must return one prediction per row.

This starting point is the plain linear skeleton: a weighted sum of the inputs plus an intercept.
"""

import numpy as np

# EVOLVE-BLOCK-START


def equation(*args: np.ndarray) -> np.ndarray:
    """Linear model: params[0] * col_1 + ... + params[k - 1] * col_k + params[k].

    Args:
        *args: The k input columns, then the parameter vector.

    Returns:
        Predictions, one per row.
    """
    *columns, params = args
    prediction = np.full_like(columns[0], params[len(columns)])
    for weight, column in zip(params[: len(columns)], columns, strict=True):
        prediction = prediction + weight * column
    return prediction


# EVOLVE-BLOCK-END
