"""Live Modal check: runs only where Modal credentials are configured (never in this project's CI).

It builds the selftest image on Modal from the project's Dockerfiles and evaluates the honest
probe and a timeout in a real sandbox, then checks nothing is left running.
"""

from __future__ import annotations

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import Status

from .conformance import ENV_ID, HONEST, SLEEP_FOREVER, describe

pytestmark = pytest.mark.modal


@pytest.fixture(scope="module")
def live_backend():  # type: ignore[no-untyped-def]
    pytest.importorskip("modal")
    from harness.sandbox.modal_backend import ModalBackend
    from harness.sandbox.modal_backend.sdk import credentials_present

    if not credentials_present():
        pytest.skip("no Modal credentials (modal token new)")
    backend = ModalBackend(workers=1, mode="warm", run_id="live-test")
    yield backend
    backend.close()
    assert backend.sandboxes() == []


def test_live_honest_and_timeout(live_backend) -> None:  # type: ignore[no-untyped-def]
    variant = default_registry().get(ENV_ID)
    ok = live_backend.evaluate(variant, HONEST)
    assert ok.status is Status.OK, describe(ok)
    slow = live_backend.evaluate(variant, SLEEP_FOREVER)
    assert slow.status is Status.TIMEOUT, describe(slow)
