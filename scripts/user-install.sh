#!/usr/bin/env bash
# Check the install users really have: a second venv made with plain `pip install -e .`, so pip
# takes whatever torch the index serves (on PyPI a CUDA build, several GB), not the CPU wheel that
# scripts/setup.sh pins. In it: `bench doctor`, the README quick start, `bench eval` of every
# family's initial program (one variant each), and the sandbox memory conformance tests.
#   EVOBENCH_USER_VENV   where the venv goes (default .venv-user)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${EVOBENCH_USER_VENV:-.venv-user}"
log() { echo "user-install: $*"; }

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
VENV="$(cd "$VENV" && pwd)"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch first, as the project requires it (what `pip install -e .` resolves it to: the index's
# newest allowed build; nothing else here bounds it): the multi-GB download needs no lock, and
# runs beside scripts/setup.sh in CI. The project install then finds it and takes the rest.
req="$(python3 -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"] if r.startswith("torch")))')"
log "pip install '$req' (the index's default build), then pip install -e ."
"$VENV/bin/python" -m pip install -q --no-compile "$req"
# One editable install of this tree at a time (both write its evobench.egg-info).
lock=()
if command -v flock >/dev/null 2>&1; then lock=(flock .install.lock); fi
${lock[@]+"${lock[@]}"} "$VENV/bin/python" -m pip install -q --no-compile -e .
# The test runner only; installing it changes no torch build.
"$VENV/bin/python" -m pip install -q --no-compile pytest hypothesis
# The byte code pip's compile step would have written, compiled on every CPU at once (see setup.sh).
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
log "$("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda build:", torch.version.cuda)')"

"$VENV/bin/bench" doctor
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "README quick start"
(cd "$work" && "$VENV/bin/bench" run --agent pacevolve --env eplb-tiny --model offline/pacevolve \
  --max-evaluations "${EVOBENCH_USER_QUICKSTART_EVALS:-30}")
log "bench eval of each family's initial program"
"$VENV/bin/python" scripts/eval_initial_programs.py
log "sandbox memory conformance tests"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/harness/sandbox/test_local_conformance.py -k memory
log "ok"
