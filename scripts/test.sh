#!/usr/bin/env bash
# Set up, lint, type-check and run the whole test suite. Exit non-zero on any failure,
# including pytest collecting no tests (its exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
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
set +e
.venv/bin/python -m pytest --durations=30 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"
