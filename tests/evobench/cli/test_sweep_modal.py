"""``bench sweep --backend modal``: every evaluation in (fake) Modal sandboxes, ``--concurrency`` at most.

Modal's servers cannot be reached here: the Modal evaluation backend's own fake client
(``tests/harness/sandbox/modal_fake.py``) runs the same image in Docker behind the client
interface, as the backend's conformance tests do. Only the credentials check of the planning step
is replaced (by the fake's), since there are no Modal credentials on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evobench.cli import run_plan
from evobench.cli.sweep_start import SweepOptions, start
from harness.envs.registry import default_registry
from tests.harness.sandbox.docker_support import docker_client_or_skip, require_image
from tests.harness.sandbox.modal_fake import FakeModalClient

pytestmark = [pytest.mark.docker, pytest.mark.run]  # it drives runs (through sweep_start.start)


def test_modal_sweep_evaluates_every_run_in_modal_sandboxes_within_the_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_image(docker_client_or_skip(), default_registry().get("selftest-tiny"))
    fake = FakeModalClient()
    monkeypatch.setattr(run_plan, "check_backend", lambda name: fake.check_credentials())
    monkeypatch.chdir(tmp_path)
    live: list[int] = []
    create = fake.create_sandbox

    def counting(spec, image):  # type: ignore[no-untyped-def]
        proc = create(spec, image)
        live.append(len([sb for sb in fake.sandboxes if sb.poll() is None]))
        return proc

    monkeypatch.setattr(fake, "create_sandbox", counting)
    grid = {
        "agents": "random-search",
        "envs": "selftest-tiny",
        "seeds": "1-2",
        "max_evaluations": 2,
        "backend": "modal",
    }
    opts = SweepOptions(
        grid=tuple(grid.items()), out=tmp_path / "sw", concurrency=2, no_progress=True, no_report=True
    )
    assert start(opts, modal_client=fake) == 0
    cells = json.loads((tmp_path / "sw" / "sweep.json").read_text())["cells"]
    assert [c["state"] for c in cells] == ["finished"] * 2
    for c in cells:
        rows = pd.read_parquet(tmp_path / "sw" / "runs" / c["run_id"] / "candidates.parquet")
        assert len(rows) == 2 and set(rows["backend"]) == {"modal"} and set(rows["status"]) == {"ok"}
        assert (
            json.loads((tmp_path / "sw" / "runs" / c["run_id"] / "run.json").read_text())["backend"]
            == "modal"
        )
    assert fake.specs and max(live) <= 2  # warm sandboxes: one per slot, whatever the runs
    assert {dict(s.tags).get("evobench.run") for s in fake.specs} == {
        "sw"
    }  # `bench modal cleanup --run-id sw`
    assert fake.list_sandboxes({}) == []  # all ended with the sweep
