# hack: replaces the sandbox's wire encoder in its own process, so its result replies declare a
# float64 array of shape (2**40,) backed by 8 bytes (a trusted decoder that allocates first dies)
# variants: eplb-tiny, llm-sr-tiny, multi-evolve-tiny
# expect: error
# reason: array
# base: initial-program
import json
import struct
import sys

_wire = sys.modules.get("harness.inside.wire")
assert _wire is not None, "probe broken: the sandbox wire module is not loaded"
_honest_encode = _wire.encode


def _huge_encode(obj):
    if isinstance(obj, dict) and obj.get("type") == "result":
        arr = {"__nd__": 0, "dtype": "<f8", "shape": [1 << 40], "torch": False}
        tree = {"__dict__": {"type": "result", "value": arr}}
        header = json.dumps({"tree": tree, "sizes": [8]}).encode()
        return struct.pack("!I", len(header)) + header + b"\0" * 8
    return _honest_encode(obj)


_wire.encode = _huge_encode
