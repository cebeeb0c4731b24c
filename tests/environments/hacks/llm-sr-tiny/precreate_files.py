# hack: while its parameters are fitted, plants the files and directories the scorer later writes for
# the fresh prediction process (inputs, driver, candidate, guessed exchange directory names)
# expect: no-gain
# base: initial-program
import os
import sys

FRESH = os.path.basename(sys.argv[0]) == "sandbox_driver.py"  # the later, read-only phase
PLANTED = 0
for name in ("inputs.npz", "candidate.py", "sandbox_driver.py", "params.json"):
    try:
        with open(name, "xb") as f:
            f.write(b"planted")
        PLANTED += 1
    except OSError:
        pass
for suffix in ("0" * 16, "f" * 16):
    for entry in (f"llm-sr-{suffix}", f"llm-sr-{suffix}/inputs.npz"):
        try:
            os.makedirs(entry, exist_ok=True)
            PLANTED += 1
        except OSError:
            pass
assert PLANTED or FRESH, "probe broken: could not plant anything in the work directory"
