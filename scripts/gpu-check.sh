#!/usr/bin/env bash
# gpu-check.sh: ONE bounded run on a lent GPU machine that proves as much of evobench's GPU path as
# it can and logs everything, so that what fails can be fixed later without a GPU.
#
# Usage
#   bash scripts/gpu-check.sh --fetch            # HERE (network): wheels + .debs into .gpucheck/
#   bash scripts/gpu-check.sh --out "$OUT"       # on the GPU machine (no network), carry .gpucheck
#   bash scripts/gpu-check.sh --out DIR --dry-run  # anywhere: every step in no-GPU mode, nothing
#                                                  # installed outside a temp dir
#   Options: --budget S (whole run, default 480), --steps a,b,... (run only these; names below),
#            --python PY (default: .venv/bin/python if present, else python3).
#
# The GPU machine (one H100, root, no network, python3 = /opt/torch/.venv with torch/triton but no
# pydantic/tyro/bwrap) gets, from .gpucheck/: pydantic, tyro and their dependencies installed with
# `pip install --no-index --target` into a temp dir on PYTHONPATH, and Debian's bwrap copied to
# /usr/local/bin (the sandbox starts bwrap with PATH=/usr/local/bin:/usr/bin:/bin, so a bwrap
# elsewhere on PATH is found by the probe but not by the launch). The lead runs:
#   run(command='bash scripts/gpu-check.sh --out "$OUT"', carry=[".gpucheck"], timeout_s=540)
#
# Steps (each capped with `timeout`, logged to its own file; a failing or timed-out step is recorded
# and the run goes on): setup, facts, imports, sandbox-cold, sandbox-warm, trimul, triton,
# torch-compile, load-inline (the last three in parallel), doctor, doctor-gpu (in parallel),
# pytest-gpu. A step whose cap would pass the run's budget gets what is left (or is skipped).
# Results: $OUT/summary.md (step, status, seconds, key figure; rewritten after every step),
# $OUT/logs.tar.gz (every log) and $OUT/gpu-check.log. Status: ok, FAIL, TIMEOUT, no-gpu (the step
# needs a GPU and saw none), skipped. Exit 0 whatever the steps did; 2 if $OUT cannot be written.
set -u

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/.." && pwd)"
HELPERS="$REPO/scripts/gpu_check"
BUNDLE="$REPO/.gpucheck"

# -- one step, run in a child of the script under `timeout` -----------------------------------
if [[ "${1:-}" == __step ]]; then
  name=$2
  cd "$REPO" || exit 1
  py() { "$GC_PY" -u "$@"; }
  case "$name" in
    facts)
      echo "== date: $(date -u +%FT%TZ); uname: $(uname -a)"
      echo "== os-release:"; cat /etc/os-release 2>&1 | head -5
      echo "== nvidia-smi:"
      timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current,compute_mode \
        --format=csv 2>&1
      timeout 20 nvidia-smi 2>&1 | head -20
      echo "== nvcc: $(command -v nvcc || echo none)"; timeout 20 nvcc --version 2>&1 | tail -2
      echo "== ninja: $(command -v ninja || echo none) $(timeout 10 ninja --version 2>&1)"
      echo "== ldconfig libcuda:"; timeout 10 ldconfig -p 2>&1 | grep -E 'libcuda\.|libnvidia-ml' | head -5
      echo "== /dev/nvidia*:"; ls -l /dev/nvidia* 2>&1 | head -12
      for t in bwrap setpriv prlimit unshare gcc c++ cmake; do echo "which $t: $(command -v $t || echo MISSING)"; done
      echo "== bwrap probes (harness's detect_isolation uses the second):"
      timeout 10 bwrap --ro-bind / / true 2>&1; echo "bwrap --ro-bind / / true -> rc=$?"
      timeout 10 bwrap --ro-bind / / --unshare-net --unshare-pid --die-with-parent true 2>&1
      echo "bwrap (net+pid namespaces) -> rc=$?"
      timeout 10 unshare --net --pid --fork --kill-child true 2>&1; echo "unshare (root) -> rc=$?"
      echo "user namespaces: max_user_namespaces=$(cat /proc/sys/user/max_user_namespaces 2>&1)" \
        "unprivileged_userns_clone=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>&1)"
      echo "== cgroups: $(stat -fc %T /sys/fs/cgroup 2>&1); self: $(head -3 /proc/self/cgroup | tr '\n' ' ')"
      echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>&1)"
      echo "subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control 2>&1)"
      ls /sys/fs/cgroup 2>&1 | head -40 | tr '\n' ' '; echo
      echo "== cpus: $(nproc); memory:"; free -g 2>&1 | head -2
      echo "== disk:"; df -h / /tmp "$REPO" 2>&1
      echo "== ulimit -a:"; ulimit -a 2>&1 | head -20
      py "$HELPERS/facts.py"
      ;;
    imports)
      py - <<'EOF'
import importlib, sys, time, traceback
bad = []
for mod in ("harness", "environments", "evobench.cli.main", "harness.sandbox.local",
            "harness.kernels.session", "harness.doctor.gpu", "agents"):
    t = time.perf_counter()
    try:
        importlib.import_module(mod)
        print(f"import {mod}: ok ({time.perf_counter() - t:.1f} s)", flush=True)
    except BaseException:
        bad.append(mod)
        print(f"import {mod}: FAILED\n{traceback.format_exc()}", flush=True)
try:
    from harness.envs.registry import Registry
    reg = Registry(strict=False)
    gpu = [v.id for v in reg.variants() if v.hardware.gpu_count > 0]
    print(f"variants: {len(reg.ids())}; manifest errors: {dict(reg.errors)}")
    print(f"GPU variants: {gpu}")
    key = f"{len(reg.ids())} variants, {len(gpu)} GPU; manifest errors {len(reg.errors)}"
except BaseException:
    traceback.print_exc()
    bad.append("registry")
    key = "registry failed"
print(f"KEY: {'imports ok' if not bad else 'FAILED: ' + ', '.join(bad)}; {key}")
sys.exit(1 if bad else 0)
EOF
      rc=$?
      echo "== bench --help (python -m evobench.cli.main):"
      timeout 60 "$GC_PY" -m evobench.cli.main --help 2>&1 | tail -25 || rc=1
      echo "== bench envs:"
      timeout 60 "$GC_PY" -m evobench.cli.main envs 2>&1 | tail -60
      exit $rc
      ;;
    sandbox-cold) py "$HELPERS/sandbox_probe.py" --probe matmul --mode cold --slot 0 --timeout "$GC_CAP" ;;
    sandbox-warm) py "$HELPERS/sandbox_probe.py" --probe matmul --mode warm --slot 1 --timeout "$GC_CAP" ;;
    trimul) py "$HELPERS/trimul_probe.py" --variant trimul-h100 --timeout "$GC_CAP" ;;
    triton) py "$HELPERS/sandbox_probe.py" --probe triton --slot 2 --timeout "$GC_CAP" ;;
    torch-compile) py "$HELPERS/sandbox_probe.py" --probe compile --slot 3 --timeout "$GC_CAP" ;;
    load-inline) py "$HELPERS/sandbox_probe.py" --probe load_inline --slot 4 --timeout "$GC_CAP" ;;
    doctor)
      "$GC_PY" -m evobench.cli.main doctor; rc=$?
      echo "KEY: bench doctor exit $rc (1 = a fail finding); see the table above"
      exit $rc
      ;;
    doctor-gpu)
      # The fast rows only: images need Docker, evals / tests / red team / vLLM take minutes.
      "$GC_PY" -m evobench.cli.main doctor --gpu --skip images evals gpu-tests red-team vllm; rc=$?
      if [[ -n "${GPUCHECK_NO_GPU:-}" ]] || ! timeout 20 nvidia-smi -L >/dev/null 2>&1; then
        echo "KEY: no GPU: rows not checked (exit $rc)"; exit 77
      fi
      echo "KEY: bench doctor --gpu (driver, gpus) exit $rc"
      exit $rc
      ;;
    pytest-gpu)
      extra=()
      "$GC_PY" -c "import pytest_timeout" 2>/dev/null && extra+=(--timeout "${GC_TEST_TIMEOUT:-60}")
      # Folders, not single files, so new gpu-marked tests are picked up; collection errors (a
      # module needing a package absent here, e.g. litellm) are logged, not fatal.
      "$GC_PY" -m pytest -q -ra -p no:cacheprovider -m gpu --continue-on-collection-errors "${extra[@]}" \
        tests/harness tests/environments tests/agents/learning 2>&1 | tee "$GC_WORK/pytest.out"
      rc=${PIPESTATUS[0]}
      line=$(grep -E '(passed|failed|skipped|deselected|error)' "$GC_WORK/pytest.out" | tail -1)
      echo "KEY: exit $rc; ${line:-no summary line}"
      if [[ -n "${GPUCHECK_NO_GPU:-}" ]] || ! "$GC_PY" -c "import torch,sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
        exit 77
      fi
      exit $rc
      ;;
    *) echo "unknown step $name"; exit 2 ;;
  esac
  exit $?
fi

# -- --fetch: prepare .gpucheck/ here (network) --------------------------------------------------
WHEELS=(pydantic pydantic-core annotated-types typing-inspection tyro docstring-parser typeguard typing-extensions)
DEBS=(bubblewrap libcap2 libselinux1 libpcre2-8-0)

fetch() {
  local vpy="$REPO/.venv/bin/python" specs=() v
  rm -rf "$BUNDLE"; mkdir -p "$BUNDLE/whl" "$BUNDLE/deb"
  for p in "${WHEELS[@]}"; do  # the versions this checkout is tested with
    v=$("$vpy" -m pip show "$p" 2>/dev/null | awk '/^Version:/{print $2}')
    specs+=("$p${v:+==$v}")
  done
  echo "pip download (cp312, manylinux x86_64): ${specs[*]}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$BUNDLE/whl" "${specs[@]}" || return 1
  (cd "$BUNDLE/deb" && apt-get download "${DEBS[@]}") || return 1
  for f in "$BUNDLE"/deb/*; do  # '%3a' (an epoch's colon) is not a safe file name everywhere
    local safe; safe=$(basename "$f" | sed 's/%3a/_/g; s/[^A-Za-z0-9._-]/_/g')
    [[ "$safe" != "$(basename "$f")" ]] && mv "$f" "$BUNDLE/deb/$safe"
  done
  (cd "$BUNDLE" && sha256sum whl/* deb/* >SHA256SUMS)
  du -sh "$BUNDLE"; ls -l "$BUNDLE"/whl "$BUNDLE"/deb
}

# -- setup: offline installs (runs in this shell; writes $WORK/env.sh for the steps) -------------
setup() {
  local site="$WORK/site" te="$WORK/site-te" pp="$REPO" rc=0
  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
  export PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}"
  echo "python: $GC_PY ($(timeout 20 "$GC_PY" --version 2>&1))"
  if timeout 60 "$GC_PY" -c "import pydantic, tyro" 2>/dev/null; then
    echo "pydantic and tyro import already: no wheel installed"; wheels="preinstalled"
  elif compgen -G "$BUNDLE/whl/*.whl" >/dev/null; then
    local main=() tx=()
    for w in "$BUNDLE"/whl/*.whl; do [[ $(basename "$w") == typing_extensions-* ]] && tx+=("$w") || main+=("$w"); done
    timeout 60 "$GC_PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${main[@]}" 2>&1 || rc=1
    [[ ${#tx[@]} -gt 0 ]] && { timeout 30 "$GC_PY" -m pip install -q --no-index --no-deps --no-compile --target "$te" "${tx[@]}" 2>&1 || rc=1; }
    pp="$site:$pp"; wheels="carried (${#main[@]}+${#tx[@]} wheels)"
    if ! PYTHONPATH="$pp" timeout 60 "$GC_PY" -c "import pydantic, tyro" 2>&1; then
      echo "with the image's typing_extensions the import fails: adding the carried one"
      pp="$site:$te:$REPO"
    fi
    PYTHONPATH="$pp" timeout 60 "$GC_PY" -c "import pydantic, tyro; print('pydantic', pydantic.VERSION, 'from', pydantic.__file__)" 2>&1 || rc=1
  else
    echo "pydantic/tyro missing and no wheels in $BUNDLE/whl (run --fetch here first)"; rc=1
  fi
  echo "export PYTHONPATH='$pp'" >"$WORK/env.sh"

  local root="$WORK/debroot" bin="$WORK/debroot/usr/bin/bwrap" missing=""
  if compgen -G "$BUNDLE/deb/*.deb" >/dev/null; then  # extracted (and checked) even where unused
    for d in "$BUNDLE"/deb/*.deb; do dpkg -x "$d" "$root" 2>&1 || rc=1; done
    echo "carried bwrap: $(timeout 10 "$bin" --version 2>&1)"
    missing=$(ldd "$bin" 2>&1 | grep 'not found')
    [[ -n "$missing" ]] && echo "its libraries missing here (a wrapper would set LD_LIBRARY_PATH): $missing"
  fi
  if timeout 10 bwrap --ro-bind / / true 2>/dev/null; then
    echo "bwrap works already: $(command -v bwrap) ($(bwrap --version 2>&1))"
  elif [[ -x "$bin" ]]; then
    if [[ -n "$GC_DRY" ]] || [[ $(id -u) != 0 ]] || ! timeout 20 nvidia-smi -L >/dev/null 2>&1; then
      echo "not installing bwrap into /usr/local/bin (dry run, not root, or no GPU machine)"
    else
      if [[ -n "$missing" ]]; then
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' \
          "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu" "$bin" >/usr/local/bin/bwrap
        chmod 755 /usr/local/bin/bwrap
      else
        install -m 755 "$bin" /usr/local/bin/bwrap || rc=1
      fi
      hash -r
      timeout 10 bwrap --ro-bind / / true 2>&1 && echo "bwrap installed: works" || { echo "bwrap installed but fails"; rc=1; }
    fi
  else
    echo "no bwrap and no .deb in $BUNDLE/deb: the sandbox falls back to unshare/none"; rc=1
  fi
  echo "PYTHONPATH=$pp"
  echo "KEY: pydantic/tyro ${wheels:-MISSING}; bwrap $(command -v bwrap || echo none)" \
    "($(timeout 10 bwrap --ro-bind / / true 2>&1 && echo works || echo 'does not work'))"
  return $rc
}

# -- bookkeeping -----------------------------------------------------------------------------
OUT="" DRY="" BUDGET=480 STEPS="" PYSEL="" FETCH=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --budget) BUDGET=$2; shift 2 ;;
    --steps) STEPS=",$2,"; shift 2 ;;
    --python) PYSEL=$2; shift 2 ;;
    --fetch) FETCH=1; shift ;;
    -h|--help) sed -n '2,30p' "$SELF"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -n "$FETCH" ]]; then fetch; exit $?; fi
[[ -n "$OUT" ]] || { echo "gpu-check.sh: --out DIR is required (or --fetch)" >&2; exit 2; }
mkdir -p "$OUT" && touch "$OUT/summary.md" || { echo "gpu-check.sh: cannot write $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)

T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))
RESERVE=8  # seconds kept for the last summary and tarball
WORK=$(mktemp -d /tmp/gpucheck.XXXXXX) || exit 2
LOGS="$WORK/logs"; mkdir -p "$LOGS"
MAIN_LOG="$OUT/gpu-check.log"; : >"$MAIN_LOG"
TSV="$LOGS/summary.tsv"; : >"$TSV"
if [[ -n "$PYSEL" ]]; then GC_PY=$PYSEL
elif [[ -x "$REPO/.venv/bin/python" ]]; then GC_PY="$REPO/.venv/bin/python"
else GC_PY=$(command -v python3); fi
export GC_PY GC_WORK="$WORK" GC_DRY="$DRY"
[[ -n "$DRY" ]] && export GPUCHECK_NO_GPU=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
STEP_NO=0

say() { echo "$*" | tee -a "$MAIN_LOG"; }
want() { [[ -z "$STEPS" || "$STEPS" == *",$1,"* ]]; }
left() { echo $((DEADLINE - $(date +%s) - RESERVE)); }

# record NAME STATUS SECONDS KEY
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(echo "$4" | tr '\t\n' '  ' | cut -c1-300)" >>"$TSV"
  say "   -> [$1] $2 in ${3}s: $4"
  write_summary
}

write_summary() {
  {
    echo "# gpu-check summary"
    echo
    echo "host $(hostname) | $(date -u +%FT%TZ) | budget ${BUDGET}s, used $(( $(date +%s) - T0 ))s" \
      "| python $GC_PY${DRY:+ | DRY RUN (no GPU steps)}"
    echo
    echo "| # | step | status | s | key figure |"
    echo "|---|------|--------|---|------------|"
    local i=0
    while IFS=$'\t' read -r n st s k; do
      i=$((i + 1))
      echo "| $i | $n | $st | $s | ${k//|/\\|} |"
    done <"$TSV"
    echo
    echo "Logs: logs.tar.gz (one NN-step.log per step); status: ok, FAIL, TIMEOUT, no-gpu, skipped."
  } >"$OUT/summary.md.tmp" && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
  tar -czf "$OUT/logs.tar.gz.tmp" -C "$WORK" logs 2>/dev/null && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
}

status_of() {  # rc -> status
  case "$1" in 0) echo ok ;; 77) echo no-gpu ;; 124|137) echo TIMEOUT ;; *) echo "FAIL" ;; esac
}

key_of() {  # the step's last KEY: line, else its last line
  local k; k=$(grep -a '^KEY: ' "$1" 2>/dev/null | tail -1 | cut -c6-)
  [[ -n "$k" ]] || k=$(grep -av '^\s*$' "$1" 2>/dev/null | tail -1)
  echo "$k"
}

# launch NAME CAP: start one step in the background (its pid in PIDS[NAME]); returns 1 when skipped
declare -A PIDS STARTS LOGF
launch() {
  local name=$1 cap=$2 l
  STEP_NO=$((STEP_NO + 1))
  LOGF[$name]="$LOGS/$(printf %02d "$STEP_NO")-$name.log"
  if ! want "$name"; then record "$name" skipped 0 "not selected (--steps)"; return 1; fi
  l=$(left)
  if (( l < 5 )); then record "$name" skipped 0 "out of budget (${BUDGET}s)"; return 1; fi
  (( cap > l )) && cap=$l
  say "== [$name] start, cap ${cap}s"
  STARTS[$name]=$(date +%s%N)
  # The subshell notes the step's own exit status and end time (parallel steps end apart).
  (
    GC_CAP=$cap timeout -k 5 "$cap" bash "$SELF" __step "$name" >"${LOGF[$name]}" 2>&1 </dev/null
    echo "$? $(date +%s%N)" >"$WORK/$name.end"
  ) &
  PIDS[$name]=$!
}

finish() {  # finish NAME...: wait for launched steps and record them
  local name rc secs
  for name in "$@"; do
    [[ -n "${PIDS[$name]:-}" ]] || continue
    wait "${PIDS[$name]}"
    local end; read -r rc end <"$WORK/$name.end" 2>/dev/null || { rc=125; end=$(date +%s%N); }
    local ds=$(( (end - STARTS[$name]) / 100000000 ))  # tenths of a second
    secs="$((ds / 10)).$((ds % 10))"
    local key; key=$(key_of "${LOGF[$name]}")
    (( rc == 124 || rc == 137 )) && key="killed at its cap; last: $key"
    record "$name" "$(status_of $rc)" "$secs" "$key"
    unset "PIDS[$name]"
  done
}

run_steps() {  # run_steps CAP NAME...: in parallel, same cap
  local cap=$1 n started=(); shift
  for n in "$@"; do launch "$n" "$cap" && started+=("$n"); done
  finish "${started[@]}"
}

say "gpu-check: repo $REPO, out $OUT, work $WORK, budget ${BUDGET}s${DRY:+, dry run}"

# setup runs in this shell (its PYTHONPATH must reach the later steps), each command under timeout.
STEP_NO=1
if want setup; then
  say "== [setup] start"
  s0=$(date +%s)
  setup >"$LOGS/01-setup.log" 2>&1; rc=$?
  # shellcheck disable=SC1091
  [[ -f "$WORK/env.sh" ]] && source "$WORK/env.sh"
  record setup "$( ((rc == 0)) && echo ok || echo FAIL)" $(( $(date +%s) - s0 )) "$(key_of "$LOGS/01-setup.log")"
else
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  record setup skipped 0 "not selected (--steps)"
fi

run_steps 40 facts
run_steps 50 imports
run_steps 60 sandbox-cold
run_steps 45 sandbox-warm
run_steps 130 trimul
run_steps 150 triton torch-compile load-inline
run_steps 70 doctor doctor-gpu
run_steps 100 pytest-gpu

# Failing steps' log tails first, the table last (a caller that keeps only the output's tail sees it).
while IFS=$'\t' read -r n st s k; do
  [[ "$st" == FAIL || "$st" == TIMEOUT ]] || continue
  f=$(ls "$LOGS"/*-"$n".log 2>/dev/null | head -1)
  [[ -n "$f" ]] && { echo "---- tail of $(basename "$f") ----"; tail -c 1200 "$f"; echo; }
done <"$TSV" | tee -a "$MAIN_LOG"
write_summary
cat "$OUT/summary.md"
rm -rf "$WORK"
exit 0
