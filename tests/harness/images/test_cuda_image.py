"""The CUDA base image, built here without a GPU (issue 21 items 1 and 7).

Checks inside the image: Python >= 3.11, torch (a CUDA build) and triton import, ``Python.h``,
gcc, ninja and nvcc are there, a ``load_inline`` CPU extension builds and runs, and nvcc compiles
a CUDA file that links against the pip CUDA runtime (``-lcudart``).

The image takes ~7 minutes and a 3 GB download to build, so this test uses the image
``scripts/cuda-image.sh`` built (same options) and skips until it exists; set
``EVOBENCH_BUILD_CUDA_IMAGE=1`` to let the test build it. Once built it runs in ~1-2 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.images.build import BuildOptions, base_build_args
from harness.images.naming import BOOTSTRAP_TAG, base_image_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECK = r"""
import json, os, shutil, subprocess, sys, sysconfig, tempfile
import torch, triton
from torch.utils.cpp_extension import load_inline
include = sysconfig.get_paths()["include"]
facts = {"python": list(sys.version_info[:2]), "torch_cuda": torch.version.cuda, "triton": triton.__version__,
         "python_h": os.path.isfile(os.path.join(include, "Python.h")),
         "tools": {t: shutil.which(t) for t in ("gcc", "g++", "ninja", "nvcc")}}
ext = load_inline("evobench_probe", cpp_sources="torch::Tensor add1(torch::Tensor x) { return x + 1; }",
                  functions=["add1"], build_directory=tempfile.mkdtemp())
facts["cpu_extension"] = ext.add1(torch.zeros(2)).tolist()
d = tempfile.mkdtemp()
open(os.path.join(d, "k.cu"), "w").write("__global__ void k(float* x) { x[threadIdx.x] += 1; }\n"
    "int main() { float* p; return cudaMalloc(&p, 4) == cudaSuccess ? 0 : 0; }\n")
cuda = os.environ["CUDA_HOME"]
r = subprocess.run(["nvcc", "-arch=sm_90", "-o", os.path.join(d, "k"), os.path.join(d, "k.cu"),
                    "-L" + os.path.join(cuda, "lib64"), "-lcudart"], capture_output=True, text=True)
facts["nvcc_link"] = r.returncode == 0 or r.stderr[-800:]
facts["versions"] = json.load(open("/opt/evobench/versions.json"))
print(json.dumps(facts))
"""


def _options() -> BuildOptions:
    """The options ``scripts/cuda-image.sh`` builds with (so the content-addressed tag matches)."""
    cache = Path(os.environ.get("EVOBENCH_IMAGE_CACHE", "/var/cache/evobench"))
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    ca = ""
    for line in out.stdout.splitlines():  # the script's `pipconf cert`: the first *.cert entry
        key, _, value = line.partition("=")
        if key.endswith(".cert"):
            ca = value.strip("'")
            break
    return BuildOptions(
        base_image=BOOTSTRAP_TAG,
        wheelhouse=cache / "cuda-wheels",
        extra_ca=Path(ca) if ca and Path(ca).is_file() else None,
    )


def test_cuda_image_has_python311_cuda_torch_and_a_toolchain() -> None:
    import docker

    from harness.images.build import build_base, image_exists

    opts = _options()
    tag = base_image_tag("base-cuda", base_build_args("base-cuda", opts))
    client = docker.from_env()
    if not image_exists(client, tag):
        if os.environ.get("EVOBENCH_BUILD_CUDA_IMAGE") != "1":
            pytest.skip(
                f"{tag} not built: run scripts/cuda-image.sh (~7 min) or set EVOBENCH_BUILD_CUDA_IMAGE=1"
            )
        build_base("base-cuda", opts)
    out = client.containers.run(
        tag, ["python", "-c", CHECK], remove=True, network_mode="none", working_dir="/tmp"
    )
    facts = json.loads(out.decode().strip().splitlines()[-1])
    assert facts["python"] >= [3, 11]
    assert facts["torch_cuda"] and facts["torch_cuda"].startswith("13.")  # the CUDA wheel, not CPU
    assert facts["python_h"], "Triton and torch.compile build against Python.h"
    assert all(facts["tools"].values()), facts["tools"]
    assert facts["cpu_extension"] == [1.0, 1.0]
    assert facts["nvcc_link"] is True, facts["nvcc_link"]
    assert facts["versions"]["torch"] == "2.13.0" and facts["versions"]["triton"] == facts["triton"]
    assert facts["versions"]["nvidia-cuda-nvcc"].startswith("13.0.")  # matches torch's CUDA 13.0 runtime
