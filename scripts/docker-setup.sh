#!/usr/bin/env bash
# Make Docker tests runnable on this machine: Debian's docker.io, a running dockerd, a base image
# bootstrapped without any registry (debootstrap + docker import, cached in $EVOBENCH_IMAGE_CACHE),
# and the images of the variants the tests use. pip's CA bundle and find-links wheelhouse (from
# `pip config list`) are passed to the builds (--extra-ca, --wheelhouse).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${EVOBENCH_IMAGE_CACHE:-/var/cache/evobench}"
log() { echo "docker-setup: $*"; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  log "installing docker.io and debootstrap"
  (apt-get install -y -qq docker.io debootstrap >/dev/null 2>&1) || {
    apt-get update -qq && apt-get install -y -qq docker.io debootstrap >/dev/null; }
fi
# The HTML report's headless-browser test (tests/harness/report/test_report_browser.py; under CI it
# waits for this setup) needs chromium: ~20 s of download and unpacking, here beside the suite
# rather than in setup.sh before it.
if ! command -v chromium >/dev/null 2>&1; then
  log "installing chromium (headless-browser test of the HTML report)"
  (apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1) || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
fi
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  nohup dockerd >/tmp/evobench-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start:"; tail -20 /tmp/evobench-dockerd.log; exit 1; }
fi

pipconf() { .venv/bin/python -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.$1='\(.*\)'$/\1/p" | head -1; }
CA="$(pipconf cert)"
WHEELS="$(pipconf find-links)"
args=(--base-image evobench/debian-bootstrap:bookworm)
[ -n "$CA" ] && [ -f "$CA" ] && args+=(--extra-ca "$CA")
[ -n "$WHEELS" ] && [ -d "$WHEELS" ] && args+=(--wheelhouse "$WHEELS")

.venv/bin/bench images bootstrap-base --cache-dir "$CACHE"
for env in ${EVOBENCH_DOCKER_TEST_ENVS:-selftest-tiny eplb-tiny kuairec-tiny trimul-tiny mla-decode-tiny kernelbench-tiny}; do
  .venv/bin/bench images build --env "$env" "${args[@]}"
done
log "ok"
