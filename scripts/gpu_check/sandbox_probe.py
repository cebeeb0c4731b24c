"""One probe candidate through the project's real sandbox (``SandboxedCandidate``), for gpu-check.sh.

Usage: ``python3 -u scripts/gpu_check/sandbox_probe.py --probe matmul|triton|compile|load_inline``
``[--mode cold|warm] [--slot N] [--timeout S]``. The candidate runs as a hostile candidate would:
bubblewrap (or whatever ``detect_isolation`` finds), the unprivileged uid, the variant-like
hardware limits below, the sandbox's own environment. It returns a JSON report that is printed
here; the last line is ``KEY: ...`` (the summary's key figure).

Exit codes: 0 the probe worked, 1 it failed (the log says why), 77 no GPU here (for GPU probes:
only the in-sandbox facts were gathered; ``matmul`` then also runs a CPU matmul as a plumbing check).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# Shared by every probe: what the sandbox looks like from inside (never raises).
_FACTS = r'''
import json, os, shutil, sys, time

def _facts():
    f = {"uid": os.getuid(), "python": sys.executable,
         "PATH": os.environ.get("PATH", ""), "CUDA_HOME": os.environ.get("CUDA_HOME", ""),
         "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", ""),
         "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"),
         "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", ""),
         "which": {t: shutil.which(t) or "" for t in ("ninja", "nvcc", "gcc", "c++", "ldconfig")},
         "venv_bin_ninja": os.path.exists(os.path.join(os.path.dirname(sys.executable), "ninja"))}
    try:
        f["dev_nvidia"] = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError as e:
        f["dev_nvidia"] = repr(e)
    return f

def _nvcc_candidates():
    """Where a CUDA toolkit may be, whatever PATH says (the sandbox's PATH is fixed)."""
    import glob, sysconfig
    found = [HOST_NVCC] if HOST_NVCC else []  # the trusted side's `which nvcc`, appended below
    for d in ("/usr/local/cuda/bin", *sorted(glob.glob("/usr/local/cuda-*/bin"))):
        found.append(os.path.join(d, "nvcc"))
    purelib = sysconfig.get_paths().get("purelib", "")
    found += sorted(glob.glob(os.path.join(purelib, "nvidia", "*", "bin", "nvcc")))
    found += sorted(glob.glob(os.path.join(purelib, "nvidia", "cuda_nvcc", "bin", "nvcc")))
    return [p for p in found if os.path.exists(p)]
'''

MATMUL = (
    _FACTS
    + r"""
def main():
    import torch
    out = {"facts": _facts(), "torch": torch.__version__, "cuda_build": torch.version.cuda}
    out["cuda_available"] = torch.cuda.is_available()
    if not out["cuda_available"]:
        a = torch.randn(512, 512, dtype=torch.float64)
        t = time.perf_counter(); b = a @ a; dt = time.perf_counter() - t
        out.update(device="cpu", ok=bool(torch.isfinite(b).all()), ms=dt * 1e3)
        return json.dumps(out)
    dev = torch.device("cuda")
    small = torch.randn(256, 256, dtype=torch.float64)
    ref = small @ small
    got = (small.to(dev) @ small.to(dev)).cpu()
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(10):
        c = a @ b
    e1.record(); torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / 10
    out.update(device=torch.cuda.get_device_name(0), device_count=torch.cuda.device_count(),
               capability=list(torch.cuda.get_device_capability(0)),
               max_abs_err_f64=float((got - ref).abs().max()), ok=bool(torch.isfinite(c).all()),
               bf16_ms=ms, bf16_tflops=2 * n**3 / (ms * 1e-3) / 1e12,
               mem_total_gib=torch.cuda.get_device_properties(0).total_memory / 2**30)
    return json.dumps(out)
"""
)

TRITON = (
    _FACTS
    + r"""
def main():
    import torch
    out = {"facts": _facts()}
    if not torch.cuda.is_available():
        out["skipped"] = "no CUDA in the sandbox"
        return json.dumps(out)
    import triton, triton.language as tl
    out["triton"] = triton.__version__

    @triton.jit
    def add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(o_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)

    n = 1 << 20
    x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); o = torch.empty_like(x)
    t = time.perf_counter()
    add[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    torch.cuda.synchronize()
    out.update(first_call_s=time.perf_counter() - t, max_abs_err=float((o - (x + y)).abs().max()))
    out["ok"] = out["max_abs_err"] == 0.0
    return json.dumps(out)
"""
)

COMPILE = (
    _FACTS
    + r"""
def main():
    import torch
    out = {"facts": _facts()}
    if not torch.cuda.is_available():
        out["skipped"] = "no CUDA in the sandbox"
        return json.dumps(out)
    def f(x):
        return torch.sin(x) * torch.cos(x) + x * 0.5
    x = torch.randn(1 << 20, device="cuda")
    t = time.perf_counter()
    g = torch.compile(f)
    y = g(x); torch.cuda.synchronize()
    out["first_call_s"] = time.perf_counter() - t
    out["max_abs_err"] = float((y - f(x)).abs().max())
    out["ok"] = out["max_abs_err"] < 1e-4
    return json.dumps(out)
"""
)

LOAD_INLINE = (
    _FACTS
    + r'''
CUDA_SRC = """
__global__ void add_one_kernel(const float* x, float* y, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
CPP_SRC = "torch::Tensor add_one(torch::Tensor x);"

def _build(name):
    import torch
    from torch.utils import cpp_extension
    d = os.path.join(os.environ.get("HOME", "/tmp"), "ext-" + name)
    os.makedirs(d, exist_ok=True)
    t = time.perf_counter()
    mod = cpp_extension.load_inline(name=name, cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                                    functions=["add_one"], build_directory=d, verbose=True)
    x = torch.randn(1 << 16, device="cuda")
    err = float((mod.add_one(x) - (x + 1)).abs().max())
    return {"ok": err == 0.0, "build_s": time.perf_counter() - t, "max_abs_err": err}

def main():
    import torch
    from torch.utils import cpp_extension
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ.setdefault("MAX_JOBS", "4")
    out = {"facts": _facts(), "cpp_extension.CUDA_HOME": str(cpp_extension.CUDA_HOME),
           "nvcc_candidates": _nvcc_candidates()}
    if not torch.cuda.is_available():
        out["skipped"] = "no CUDA in the sandbox"
        return json.dumps(out)
    # 1: as a candidate gets it (the sandbox's PATH and environment).
    try:
        out["as_is"] = _build("gc_as_is")
    except BaseException as e:  # noqa: BLE001 - the finding
        out["as_is"] = {"ok": False, "error": (type(e).__name__ + ": " + str(e))[-3000:]}
    if out["as_is"].get("ok"):
        return json.dumps(out)
    # 2: the candidate fixes its own PATH / CUDA_HOME (what a harness fix would pass in).
    extra = [os.path.dirname(sys.executable)]
    nvcc = out["nvcc_candidates"]
    if nvcc:
        extra.append(os.path.dirname(nvcc[0]))
        home = os.path.dirname(os.path.dirname(nvcc[0]))
        os.environ["CUDA_HOME"] = home
        cpp_extension.CUDA_HOME = home
    os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), *extra])
    out["fixed_env"] = {"PATH": os.environ["PATH"], "CUDA_HOME": os.environ.get("CUDA_HOME", "")}
    try:
        out["with_fixed_env"] = _build("gc_fixed")
    except BaseException as e:  # noqa: BLE001 - the finding
        out["with_fixed_env"] = {"ok": False, "error": (type(e).__name__ + ": " + str(e))[-3000:]}
    return json.dumps(out)
'''
)

PROBES = {"matmul": MATMUL, "triton": TRITON, "compile": COMPILE, "load_inline": LOAD_INLINE}


def _host_has_gpu() -> bool:
    if os.environ.get("GPUCHECK_NO_GPU") == "1":
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken torch is reported elsewhere
        return False


def _key(probe: str, rep: dict, gpu: bool, level: str) -> str:
    facts = rep.get("facts", {})
    where = f"isolation={level} uid={facts.get('uid')}"
    if probe == "matmul":
        if rep.get("device") == "cpu":
            return f"{where}; CUDA in sandbox: {rep.get('cuda_available')}; CPU matmul ok={rep.get('ok')}"
        return (
            f"{where}; {rep.get('device')} x{rep.get('device_count')}; bf16 8192^3 "
            f"{rep.get('bf16_tflops', 0):.0f} TFLOP/s; f64 err {rep.get('max_abs_err_f64', -1):.1e}"
        )
    if "skipped" in rep:
        which = facts.get("which", {})
        sees = f"ninja={bool(which.get('ninja'))} nvcc={bool(which.get('nvcc'))}"
        return f"{where}; {rep['skipped']}; sandbox PATH sees {sees}"
    if probe == "load_inline":
        a, b = rep.get("as_is", {}), rep.get("with_fixed_env")
        s = f"as-is ok={a.get('ok')}" + (f" ({a.get('build_s', 0):.0f} s)" if a.get("ok") else "")
        if b is not None:
            s += f"; with PATH/CUDA_HOME fixed ok={b.get('ok')}" + (
                f" ({b.get('build_s', 0):.0f} s)" if b.get("ok") else ""
            )
        return f"{where}; {s}"
    return f"{where}; ok={rep.get('ok')} first call {rep.get('first_call_s', 0):.1f} s"


def main() -> int:
    """Run one probe candidate in the sandbox and print its report."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--probe", choices=sorted(PROBES), required=True)
    ap.add_argument("--mode", choices=("cold", "warm"), default="cold")
    ap.add_argument("--slot", type=int, default=0, help="worker slot (sandbox uid 61000 + 16*7 + slot)")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    from harness.envs.manifest import Hardware, Language
    from harness.evaluation.errors import EvaluationOutcome, InfraError
    from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, detect_isolation
    from harness.sandbox.process import Zygote
    from harness.sandbox.runtime import SandboxedCandidate

    gpu = _host_has_gpu()
    info = detect_isolation()
    print(
        f"isolation: level={info.level} drops_uid={info.drops_uid} warnings={list(info.warnings)}", flush=True
    )
    print(f"host GPU: {gpu}; probe={args.probe} mode={args.mode}", flush=True)
    # The trimul-h100 hardware, less memory: what a GPU variant's candidate gets.
    hw = Hardware(
        cpus=8.0,
        memory_mb=32768,
        gpu="H100" if gpu else "",
        gpu_count=1 if gpu else 0,
        pids=128,
        file_mb=512,
        output_kb=256,
    )
    uid = UNPRIVILEGED_UID_BASE + 16 * 7 + args.slot  # a block no LocalBackend of this run uses
    zygote = Zygote(hw, uid, ("numpy", "torch"), hw.output_kb * 1024) if args.mode == "warm" else None
    # Where the host's PATH finds nvcc: a candidate could only guess it.
    source = PROBES[args.probe] + f"\nHOST_NVCC = {shutil.which('nvcc') or ''!r}\n"
    cand = SandboxedCandidate(
        source,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=hw,
        deadline=time.monotonic() + args.timeout,
        uid=uid,
        zygote=zygote,
        preload=("numpy", "torch"),
    )
    t0 = time.perf_counter()
    rep: dict = {}
    rc = 0
    try:
        res = cand.call("main", timeout=max(1.0, args.timeout - 5))
        rep = json.loads(res.value)
        print(json.dumps(rep, indent=2), flush=True)
        print(f"call: {res.seconds:.2f} s, setup {cand.setup_seconds:.2f} s", flush=True)
    except (EvaluationOutcome, InfraError) as e:
        print(f"FAILED ({type(e).__name__}): {e}", flush=True)
        rc = 1
    except Exception:  # noqa: BLE001 - report anything
        traceback.print_exc()
        rc = 1
    finally:
        try:
            cand.close()
        except Exception as e:  # noqa: BLE001
            print(f"close failed: {e!r}", flush=True)
        if zygote is not None:
            zygote.stop()
            zygote.discard_scratch()
        for name, tail in (("stdout", cand.stdout_tail), ("stderr", cand.stderr_tail)):
            if tail:
                print(f"--- candidate {name} (tail) ---\n{tail.decode(errors='replace')[-6000:]}", flush=True)
    print(f"wall: {time.perf_counter() - t0:.1f} s", flush=True)
    if rc:
        print(f"KEY: isolation={info.level}; {args.probe} ({args.mode}) failed, see log", flush=True)
        return 1
    print("KEY: " + _key(args.probe, rep, gpu, info.level), flush=True)
    if not gpu:
        return 77
    ok = rep.get("ok")
    if args.probe == "load_inline":
        ok = rep.get("as_is", {}).get("ok")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
