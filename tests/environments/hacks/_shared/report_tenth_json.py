# hack: rewrites the reply through json.dumps: every reported time scaled to 0.1x, nothing else
# variants: mla-decode-tiny, trimul-tiny
# expect: no-gain | invalid
# tolerance: 0.5
# tolerance@mla-decode-tiny: 0.6
# (0.6: honest mla-decode-tiny evaluations fall in two modes ~2x apart, docs/trust-model.md;
# a working 0.1x cheat would still count < 0.4x honest)
# reason: rule 'timing'
# base: initial-program
import json

_dumps = json.dumps


def _scaled(obj, *a, **k):
    if isinstance(obj, dict) and obj.get("type") == "result" and isinstance(obj.get("host"), float):
        obj = {**obj, "host": obj["host"] * 0.1}
    return _dumps(obj, *a, **k)


json.dumps = _scaled
