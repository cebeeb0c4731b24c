"""One trusted protocol for timing and checking GPU kernels (TriMul, MLA-Decode, KernelBench).

``checks``: output comparison, stop rules and the aggregate (pure, trusted side).
``device``: the variant's GPU, checked at run time.
``session``: the trusted side of a kernel evaluation (inputs out, outputs and times back).
``echo``: the trusted calibration echo (the in-sandbox driver is ``harness.inside.kernel_driver``).
"""
