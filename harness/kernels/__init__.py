"""One trusted protocol for timing and checking GPU kernels (TriMul, MLA-Decode, KernelBench).

``checks``: output comparison (on the reference's device), stop rules (wall cap included) and the
aggregate (trusted side).
``device``: the variant's GPU, checked at run time.
``session``: the trusted side of a kernel evaluation (inputs out, outputs and times back).
``echo``: the trusted calibration echo, on its slot's GPU (the in-sandbox driver is
``harness.inside.kernel_driver``).
``evaluate``: the shared loop of tests and benchmarks, and the ``~quick`` reduced mode's rules.
``wall``: the per-call model and an evaluation's expected wall time (docs/kernel-wall.md).
"""
