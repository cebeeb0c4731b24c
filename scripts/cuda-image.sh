#!/usr/bin/env bash
# Build the CUDA base image (images/base-cuda) and trimul-h100's image on this machine, with the
# CUDA torch wheels downloaded once into $EVOBENCH_IMAGE_CACHE/cuda-wheels (about 3 GB) and reused.
# Needs no GPU. On the bootstrap base (scripts/docker-setup.sh) a build takes ~7 min on 2 cores.
# tests/harness/images/test_cuda_image.py then checks the image (it skips until this has run).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${EVOBENCH_IMAGE_CACHE:-/var/cache/evobench}"
WHEELS="$CACHE/cuda-wheels"
mkdir -p "$WHEELS"
pipconf() { .venv/bin/python -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.$1='\(.*\)'$/\1/p" | head -1; }
CA="$(pipconf cert)"
# The pins of images/base-cuda/Dockerfile (torch's own cuda-toolkit pin gives the matching nvcc).
# --isolated: PyPI itself, not a local index or find-links dir that may hold a CPU torch.
.venv/bin/python -m pip --isolated download ${CA:+--cert "$CA"} --only-binary :all: -d "$WHEELS" \
  --index-url https://pypi.org/simple \
  torch==2.13.0 "cuda-toolkit[nvcc,cccl]==13.0.3" ninja==1.13.2
args=(--base-image evobench/debian-bootstrap:bookworm --wheelhouse "$WHEELS")
[ -n "$CA" ] && [ -f "$CA" ] && args+=(--extra-ca "$CA")
.venv/bin/bench images build --env trimul-h100 "${args[@]}"
