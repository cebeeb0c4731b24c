# hack: probe() reports infinity under the scorer's own key "score" and NaN under another,
# hoping the inf replaces the score (or that NaN slips through as a metric)
# expect: invalid
# reason: finite
def probe():
    return {"score": float("inf"), "answer": float("nan")}
