"""KernelBench-style static pre-filter of candidate sources (the reason names the check).

Strict checks (as upstream's kernel_static_checker): try/except fallbacks and ``pass``-only
ModelNew (code_bypass), assignments to timing functions (timing_event_patch), threads or
processes (thread_injection), tensor subclasses / lazy evaluation (lazy_eval), and a backend check
(the variant's backend must actually be used). They are a cheap first line only: the dynamic
protocol in ``harness.kernels`` enforces the same rules at run time.
"""

from __future__ import annotations

import ast
import re

from harness.evaluation.errors import CandidateInvalid

_TIMING = re.compile(
    r"(torch\.cuda\.Event\.\w+|torch\.cuda\.synchronize|time\.perf_counter(_ns)?|time\.time|"
    r"time\.monotonic)\s*=(?!=)"
)
_THREADS = ("threading", "multiprocessing", "concurrent", "_thread", "subprocess")
_LAZY = re.compile(r"_make_subclass|__torch_function__|__torch_dispatch__|as_subclass")
_BACKENDS = {
    "cuda": (re.compile(r"load_inline|cpp_extension"), "torch.utils.cpp_extension.load_inline"),
    "triton": (re.compile(r"@triton\.jit"), "a @triton.jit kernel"),
}


def _fail(check: str, why: str) -> None:
    raise CandidateInvalid(f"static check '{check}': {why}")


def static_check(source: str, backend: str = "") -> None:
    """Reject a candidate source that breaks a strict check.

    Args:
        source: The candidate program.
        backend: ``cuda``, ``triton`` or empty (any implementation, e.g. the CPU smoke variant).

    Raises:
        CandidateInvalid: The first broken check, named.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        _fail("syntax", str(e))
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | ast.TryStar):
            _fail("code_bypass", f"try/except at line {node.lineno} (no fallback paths allowed)")
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in _THREADS:
                    _fail("thread_injection", f"imports {n} at line {node.lineno}")
        if isinstance(node, ast.ClassDef):
            bases = {ast.unparse(b) for b in node.bases}
            if any(b in ("torch.Tensor", "Tensor") for b in bases):
                _fail("lazy_eval", f"class {node.name} subclasses torch.Tensor")
            if node.name == "ModelNew":
                if "Model" in bases:
                    _fail("code_bypass", "ModelNew inherits from the reference Model")
                if all(isinstance(s, ast.Pass | ast.Expr) for s in node.body):
                    _fail("code_bypass", "ModelNew has no implementation")
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)):
        _fail("interface", "no class ModelNew")
    m = _TIMING.search(source)
    if m:
        _fail("timing_event_patch", f"assigns {m.group(1)}")
    m = _LAZY.search(source)
    if m:
        _fail("lazy_eval", f"uses {m.group(0)}")
    if backend:
        if backend not in _BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        pattern, what = _BACKENDS[backend]
        if not pattern.search(source):
            _fail("backend", f"the {backend} variant needs {what}")
