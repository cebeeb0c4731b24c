# hack: looks for the scorer's trusted echo process and stops / deprioritises / pins it, reporting 0.6x times
# variants: mla-decode-tiny, trimul-tiny
# expect: no-gain
# tolerance: 0.5
# tolerance@mla-decode-tiny: 0.6
# (0.6: honest mla-decode-tiny evaluations fall in two modes ~2x apart, docs/trust-model.md;
# a working 0.1x cheat would still count < 0.4x honest)
# base: initial-program
import json
import os
import signal

_dumps = json.dumps
_found = []
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        continue
    if b"--echo" in cmd or b"kernel-echo" in cmd:
        _found.append(int(pid))
for pid in _found:  # any of these succeeding would inflate the trusted transport floor
    for attack in (
        lambda p: os.setpriority(os.PRIO_PROCESS, p, 19),
        lambda p: os.sched_setaffinity(p, {0}),
        lambda p: os.kill(p, signal.SIGSTOP),
    ):
        try:
            attack(pid)
        except OSError:
            pass
try:
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))  # and take every core for itself
except OSError:
    pass


def _scaled(obj, *a, **k):
    if isinstance(obj, dict) and obj.get("type") == "result" and isinstance(obj.get("host"), float):
        obj = {**obj, "host": obj["host"] * 0.6}
    return _dumps(obj, *a, **k)


json.dumps = _scaled
