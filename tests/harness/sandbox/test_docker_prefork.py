"""The forked zygote of a Docker container (prefork): a candidate forked from it is as unprivileged
as one from an exec'd zygote, and sees nothing the trusted server loaded after the fork."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.envs.manifest import Hardware
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.sandbox.docker_backend import DockerBackend
from harness.sandbox.prefork import ZygoteSpec, zygote_limits

from .docker_support import docker_client_or_skip, require_image

PROBE = """
import os, sys

def _status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)

def probe():
    out = {}
    zygote = os.getppid()
    with open(f"/proc/{zygote}/cmdline", "rb") as f:
        cmd = f.read()
    # positive control: this candidate's zygote was forked from the boot process, not exec'd
    out["forked_zygote"] = float(b"container_boot" in cmd)
    out["exec_zygote"] = float(b"harness.inside.shim" in cmd)
    for who, pid in (("self", "self"), ("zygote", zygote)):
        st = _status(pid)
        out[who + "_uid0"] = float(any(x == "0" for x in st["Uid"].split() + st["Gid"].split()))
        out[who + "_groups"] = float(len(st["Groups"].split()))
        caps = ("CapInh", "CapPrm", "CapEff", "CapAmb")
        out[who + "_caps"] = float(sum(int(st[k].strip(), 16) for k in caps))
        out[who + "_nnp"] = float(st["NoNewPrivs"].strip())
        out[who + "_sid_is_pid1"] = float(os.getsid(0 if pid == "self" else int(pid)) == 1)
    out["uid"] = float(os.getuid())
    out["evobench_env"] = float(any(k.startswith("EVOBENCH") for k in os.environ))
    out["omp"] = float(os.environ.get("OMP_NUM_THREADS", "0"))
    out["env_modules"] = float(sum(m.split(".")[0] in ("environments", "scorer") for m in sys.modules))
    out["harness_worker_loaded"] = float("harness.sandbox.worker" in sys.modules)
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the listing's own descriptor
    out["sockets"] = float(sum(x.startswith("socket:") for x in links))
    out["host_paths"] = float(sum(x.startswith("/run/evobench") for x in links))
    try:
        open("/proc/1/environ", "rb").read()
        out["server_environ"] = 1.0
    except OSError:
        out["server_environ"] = 0.0
    try:
        os.listdir("/opt/evobench/data")
        out["data_listable"] = 1.0
    except OSError:
        out["data_listable"] = 0.0
    return out
"""


def test_spec_round_trips_and_the_zygote_keeps_no_memory_limit() -> None:
    hw = Hardware(cpus=2.0, memory_mb=512, pids=16)
    spec = ZygoteSpec(hw, ("numpy",), collapse=False)
    assert ZygoteSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError, match="bad zygote spec"):
        ZygoteSpec.from_json('{"hardware": {"cpus": "many"}, "preload": [], "collapse": true}')
    lim = zygote_limits(hw)
    assert "RLIMIT_FSIZE" in lim and not {"RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_RSS"} & set(lim)


@pytest.fixture(scope="module")
def selftest() -> Variant:
    v = default_registry().get("selftest-tiny")
    require_image(docker_client_or_skip(), v)
    return v


@pytest.fixture(scope="module")
def cold(selftest: Variant) -> Iterator[DockerBackend]:
    b = DockerBackend(workers=1, mode="cold")
    yield b
    b.close()
    assert b.containers() == []


@pytest.mark.docker
class TestForkedZygote:
    def test_candidate_is_unprivileged(self, cold: DockerBackend, selftest: Variant) -> None:
        r = cold.evaluate(selftest, PROBE)
        assert r.status is Status.OK, r.reason
        m = r.metrics
        assert m["forked_zygote"] == 1.0 and m["exec_zygote"] == 0.0  # the path under test was taken
        for who in ("self", "zygote"):
            assert m[f"{who}_uid0"] == 0.0 and m[f"{who}_groups"] == 0.0, who
            assert m[f"{who}_caps"] == 0.0 and m[f"{who}_nnp"] == 1.0, who
            assert m[f"{who}_sid_is_pid1"] == 0.0, who  # own session, not the server's
        assert m["uid"] >= 61000
        assert m["evobench_env"] == 0.0 and m["omp"] == 1.0  # the candidate environment, not the server's
        assert m["env_modules"] == 0.0 and m["harness_worker_loaded"] == 0.0  # forked before the scorer
        assert m["sockets"] == 1.0 and m["host_paths"] == 0.0  # its own socket only: no server descriptor
        assert m["server_environ"] == 0.0 and m["data_listable"] == 0.0

    def test_warm_container_restarts_a_killed_forked_zygote(self, selftest: Variant) -> None:
        with DockerBackend(workers=1, mode="warm", prewarm=(selftest.id,)) as b:
            first = b.evaluate(selftest, PROBE)
            assert first.status is Status.OK and first.metrics["forked_zygote"] == 1.0, first.reason
            killer = "import os, signal\ndef probe():\n    os.kill(os.getppid(), 9)\n    return {'ok': 1.0}\n"
            assert b.evaluate(selftest, killer).status is Status.OK
            again = b.evaluate(selftest, PROBE)
            assert again.status is Status.OK, again.reason
            # restarted the ordinary way: exec'd, and just as unprivileged
            assert again.metrics["exec_zygote"] == 1.0 and again.metrics["zygote_caps"] == 0.0
            assert len(b.containers()) == 1
