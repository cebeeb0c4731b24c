# hack: honest predictions as a list, every fifth replaced by the Python int 10**400 (beyond
# float64, so it would become inf and top the ranking): an int too large for a float must be the
# candidate's invalid answer, not an inf that scores and not a crash of the scorer
# expect: invalid
# reason: finite
# base: initial-program
import numpy as np

_honest = fit_and_predict  # noqa: F821 - defined by the initial program above


def fit_and_predict(train_df, test_df, context):
    pred = np.asarray(_honest(train_df, test_df, context), dtype=np.float64)
    out = [10**400 if i % 5 == 0 else float(p) for i, p in enumerate(pred)]
    return out
