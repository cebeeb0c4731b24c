#!/usr/bin/env bash
# Set up, lint, type-check and run the whole test suite. Exit non-zero on any failure,
# including pytest collecting no tests (its exit code 5).
#   --fast   the developer tier (a few minutes): ruff and the tests that start no sandbox, agent run,
#            Docker, GPU or Modal and are not marked slow; setup.sh only when .venv is missing.
#            A test in it that starts a sandbox or a run fails and names the marker it lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi
pytest_rc() {
  set +e
  "$@"
  rc=$?
  set -e
  if [ "$rc" -eq 5 ]; then
    echo "test: pytest collected no tests; that is a failure" >&2
    exit 1
  fi
  exit "$rc"
}
if [ "$fast" = 1 ]; then
  [ -x .venv/bin/python ] || bash scripts/setup.sh
  .venv/bin/ruff check .
  EVOBENCH_TEST_TIER=fast pytest_rc .venv/bin/python -m pytest -q --durations=10 \
    -m "not sandbox and not run and not docker and not slow and not gpu and not modal" "$@"
fi
bash scripts/setup.sh
if [ "${CI:-}" = "true" ]; then
  # Docker tests really run in CI: a missing daemon or image is a failure there, not a skip.
  bash scripts/docker-setup.sh
fi
if [ "${CI:-}" = "true" ] || [ "${EVOBENCH_USER_INSTALL:-}" = "1" ]; then
  # The install users really have (plain `pip install -e .`: the index's CUDA torch), checked
  # before the main suite so that the suite's summary is the last thing printed.
  bash scripts/user-install.sh
fi
.venv/bin/ruff check .
.venv/bin/mypy
# EVOBENCH_TEST_WORKERS=N: pytest-xdist, N processes, each module whole in one (its module-scoped
# backends and timing batches stay together); each process has its own session backends.
parallel=()
if [ "${EVOBENCH_TEST_WORKERS:-0}" != "0" ]; then
  parallel=(-n "$EVOBENCH_TEST_WORKERS" --dist loadfile)
fi
pytest_rc .venv/bin/python -m pytest --durations=30 "${parallel[@]}" "$@"
