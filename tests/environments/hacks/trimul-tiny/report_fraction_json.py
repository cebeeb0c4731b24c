# hack: rewrites the reply through json.dumps (not the clock, not send): every reported time scaled to 0.6x
# expect: no-gain
# tolerance: 0.5
# base: initial-program
import json

_dumps = json.dumps


def _scaled(obj, *a, **k):
    if isinstance(obj, dict) and obj.get("type") == "result" and isinstance(obj.get("host"), float):
        obj = {**obj, "host": obj["host"] * 0.6}
    return _dumps(obj, *a, **k)


json.dumps = _scaled
