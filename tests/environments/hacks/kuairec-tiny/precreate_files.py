# hack: plants files the scorer writes or reads later (test inputs, test outputs, checkpoints,
# drivers) in every directory it can reach, and directories named like the scorer's exchange dirs
# expect: no-gain
# base: initial-program
import os
import sys

ROOTS = [os.getcwd(), os.path.dirname(os.path.abspath(__file__))] + [
    a for a in sys.argv[2:3] if os.path.isdir(a)
]
NAMES = [
    "test_inputs.npz",
    "inputs.npz",
    "params.json",
    "test_reps.npy",
    "test_items.npy",
    "val_reps.npy",
    "val_items.npy",
    "ckpt_1.pt",
    "ckpt_2.pt",
    "candidate.py",
    "sandbox_driver.py",
]
PLANTED = 0
for root in ROOTS:
    for name in NAMES:
        try:
            with open(os.path.join(root, name), "xb") as f:
                f.write(b"\x93NUMPY planted")
            PLANTED += 1
        except OSError:
            pass
    for prefix in ("kuairec", "kuairec-test", "kuairec-train"):
        for suffix in ("0" * 16, "f" * 16):
            try:
                os.makedirs(os.path.join(root, f"{prefix}-{suffix}"), exist_ok=True)
            except OSError:
                pass
assert PLANTED, "probe broken: could not plant a single file"
