# hack: replaces the sandbox's wire encoder in its own process, so its result replies carry a JSON
# header nested 200,000 deep (a trusted json.loads without a depth limit overflows its recursion)
# variants: eplb-tiny, llm-sr-tiny, multi-evolve-tiny
# expect: error
# base: initial-program
import struct
import sys

_wire = sys.modules.get("harness.inside.wire")
assert _wire is not None, "probe broken: the sandbox wire module is not loaded"
_honest_encode = _wire.encode


def _deep_encode(obj):
    if isinstance(obj, dict) and obj.get("type") == "result":
        header = b'{"tree": ' + b"[" * 200_000 + b"]" * 200_000 + b', "sizes": []}'
        return struct.pack("!I", len(header)) + header
    return _honest_encode(obj)


_wire.encode = _deep_encode
