"""Docker-specific guarantees: hardened containers, cleanup, infra errors, parity with local."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.sandbox.docker_backend import LABEL, DockerBackend
from harness.sandbox.local import LocalBackend

from .conformance import RESERVE_ADDRESS_SPACE, WRITE_PAST_LIMIT
from .docker_support import docker_client_or_skip, require_image

pytestmark = pytest.mark.docker

PROBE_CONTAINER = """
import os, socket

def probe():
    out = {"uid": float(os.getuid())}
    try:
        open("/usr/evobench-write-test", "w").write("x")
        out["root_writable"] = 1.0
    except OSError:
        out["root_writable"] = 0.0
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        out["net"] = 1.0
    except OSError:
        out["net"] = 0.0
    import glob
    pattern = "/opt/evobench/venv/lib/python3*/site-packages/environments/*/scorer.py"
    out["scorer_visible"] = float(len(glob.glob(pattern)))
    try:
        os.listdir("/opt/evobench/venv/lib/python3.11/site-packages/environments")
        out["envs_listable"] = 1.0
    except OSError:
        out["envs_listable"] = 0.0
    # Of the harness only harness/inside (the sandbox's own code) is readable by the candidate.
    import importlib.util
    inside = importlib.util.find_spec("harness.inside.wire")
    out["inside_readable"] = float(inside is not None and os.access(inside.origin, os.R_OK))
    site = "/opt/evobench/venv/lib/python3.11/site-packages/harness"
    out["trusted_readable"] = float(any(os.access(f"{site}/{m}", os.R_OK) for m in
                                        ("sandbox/worker.py", "kernels/session.py", "envs/registry.py")))
    with open("cwd-write-test", "w") as f:
        f.write("ok")
    out["cwd_writable"] = 1.0
    return out
"""


@pytest.fixture(scope="module")
def client():  # type: ignore[no-untyped-def]
    return docker_client_or_skip()


@pytest.fixture(scope="module")
def selftest(client) -> Variant:  # type: ignore[no-untyped-def]
    v = default_registry().get("selftest-tiny")
    require_image(client, v)
    return v


@pytest.fixture(scope="module")
def eplb_tiny(client) -> Variant:  # type: ignore[no-untyped-def]
    v = default_registry().get("eplb-tiny")
    require_image(client, v)
    return v


@pytest.fixture(scope="module")
def cold(client) -> Iterator[DockerBackend]:  # type: ignore[no-untyped-def]
    b = DockerBackend(workers=1, mode="cold")
    yield b
    b.close()
    assert b.containers() == []


def _evobench_containers(client) -> list:  # type: ignore[no-untyped-def]
    return client.containers.list(all=True, filters={"label": f"{LABEL}=1"})


def test_container_is_locked_down(cold: DockerBackend, selftest: Variant) -> None:
    r = cold.evaluate(selftest, PROBE_CONTAINER)
    assert r.status is Status.OK, r.reason
    m = r.metrics
    assert m["cwd_writable"] == 1.0  # positive control: the probe ran and could write its cwd
    assert m["uid"] != 0.0
    assert m["root_writable"] == 0.0
    assert m["net"] == 0.0
    assert m["scorer_visible"] == 0.0 and m["envs_listable"] == 0.0
    assert m["inside_readable"] == 1.0 and m["trusted_readable"] == 0.0
    assert r.backend == "docker"


def test_cold_timeout_kills_and_removes_the_container(client, cold: DockerBackend, selftest: Variant) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    r = cold.evaluate(selftest, "def probe():\n    while True:\n        pass\n")
    assert r.status is Status.TIMEOUT
    assert time.monotonic() - t0 < selftest.timeout_s + 30
    assert cold.containers() == []


def test_memory_and_pids_limits_hit_cleanly(cold: DockerBackend, selftest: Variant) -> None:
    hog = "def probe():\n    x = bytearray(6 << 30)\n    return {'n': float(len(x))}\n"
    r = cold.evaluate(selftest, hog)
    assert r.status is Status.ERROR, r.reason
    bomb = (
        "import os, time\n"
        "def probe():\n"
        "    n = 0\n"
        "    for _ in range(400):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60); os._exit(0)\n"
        "            n += 1\n"
        "        except OSError:\n"
        "            break\n"
        "    return {'forked': float(n)}\n"
    )
    r = cold.evaluate(selftest, bomb)
    assert r.status is Status.OK, r.reason
    assert 0 < r.metrics["forked"] < 400  # the pids limit stopped it
    assert cold.evaluate(selftest, selftest.initial_program).status is Status.OK


def test_cold_memory_limit_counts_use_not_reservations(cold: DockerBackend, selftest: Variant) -> None:
    # The conformance suite runs these on warm containers; cold containers must agree.
    r = cold.evaluate(selftest, RESERVE_ADDRESS_SPACE)
    assert r.status is Status.OK, r.reason
    assert r.metrics["reserved_gib"] == 16.0
    r = cold.evaluate(selftest, WRITE_PAST_LIMIT)
    assert r.status is Status.ERROR, r.reason
    assert f"memory limit {selftest.hardware.memory_mb} MiB" in r.reason, r.reason


def test_missing_image_is_an_infra_error_with_the_build_hint(client, selftest: Variant) -> None:  # type: ignore[no-untyped-def]
    ghost = dataclasses.replace(selftest, hash="0" * 16)
    with DockerBackend(workers=1, mode="cold", infra_retries=1) as b:
        r = b.evaluate(ghost, selftest.initial_program)
    assert r.status is Status.INFRA_ERROR
    assert "bench images build --env selftest-tiny" in r.reason
    assert r.attempts == 2


def test_warm_mode_reuses_one_container_and_removes_it_on_close(client, selftest: Variant) -> None:  # type: ignore[no-untyped-def]
    b = DockerBackend(workers=1, mode="warm")
    try:
        for _ in range(3):
            assert b.evaluate(selftest, selftest.initial_program).status is Status.OK
        assert len(b.containers()) == 1
        r = b.evaluate(selftest, "def probe():\n    import time\n    time.sleep(1000)\n")
        assert r.status is Status.TIMEOUT
        assert b.evaluate(selftest, selftest.initial_program).status is Status.OK
    finally:
        b.close()
    assert b.containers() == []


def test_local_and_docker_agree_on_eplb_tiny(eplb_tiny: Variant) -> None:
    with LocalBackend(workers=1, mode="cold") as lb, DockerBackend(workers=1, mode="warm") as db:
        local = lb.evaluate(eplb_tiny, eplb_tiny.initial_program)
        docker = db.evaluate(eplb_tiny, eplb_tiny.initial_program)
    assert local.status is Status.OK and docker.status is Status.OK, (local.reason, docker.reason)
    for key in ("balancedness_expert", "balancedness_gpu", "combined"):
        assert local.metrics[key] == docker.metrics[key], key
    # timing terms: same order of magnitude (noise, container overhead)
    lt, dt = local.metrics["rebalance_seconds"], docker.metrics["rebalance_seconds"]
    assert dt < max(10 * lt, 0.05) and lt < max(10 * dt, 0.05)
    assert local.env_hash == docker.env_hash


def test_ctrl_c_leaves_no_container(client, eplb_tiny: Variant, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cmd = [
        sys.executable,
        "-m",
        "evobench.cli.main",
        "run",
        "--agent",
        "random-search",
        "--env",
        "eplb-tiny",
        "--backend",
        "docker",
        "--workers",
        "2",
        "--max-evaluations",
        "200",
        "--no-progress",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    journal = None
    while time.monotonic() < deadline and proc.poll() is None:
        runs = (
            list((tmp_path / "results").glob("*/candidates.jsonl")) if (tmp_path / "results").exists() else []
        )
        if runs and len(runs[0].read_text().splitlines()) >= 3:
            journal = runs[0]
            break
        time.sleep(0.2)
    assert journal is not None, "run made no progress"
    # Only the run's own containers (by its pid): parallel test processes share the daemon.
    mine = {"label": f"{LABEL}.pid={proc.pid}"}
    assert client.containers.list(all=True, filters=mine), "expected live containers mid-run"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    leftover = {c.id for c in client.containers.list(all=True, filters=mine)}
    assert not leftover, f"containers left behind: {leftover}"
