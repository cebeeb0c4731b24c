"""Code that runs INSIDE the candidate's sandbox (harness-wide; per family: ``environments/<f>/inside``).

Every module here runs in a process where candidate code runs (or will run), so everything in it is
the candidate's to read and change: nothing secret, nothing that decides a score. Standard library,
numpy and torch only; modules import each other relatively and nothing of the trusted side
(``tests/harness/test_inside_boundary.py``). The trusted side may import the codecs (``wire``,
``kernel_wire``) and the kernel driver's request loop (``harness/kernels/echo.py``).

``shim``: entry point (``serve`` / ``zygote``); ``serve``: the candidate server; ``zygote``, ``scrub``:
the warm zygote and its clean-up; ``syscall_filter``: the seccomp filter every sandboxed command
runs under; ``wire``: the scorer <-> candidate message format; ``kernel_driver``, ``kernel_wire``:
the kernel timing driver and its codec. Started with ``harness/sandbox/launch.py``.
"""
