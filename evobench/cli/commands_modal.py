"""``bench modal``: housekeeping of the Modal backend."""

from __future__ import annotations

from typing import Literal

import tyro

from evobench.cli.console import console, err_console

EXIT_USAGE = 2


def modal(action: tyro.conf.Positional[Literal["cleanup"]], run_id: str | None = None) -> int:
    """End Modal sandboxes left behind by evobench runs (all of them, or one run's).

      bench modal cleanup
      bench modal cleanup --run-id 20261122-101500-ab12

    Args:
        action: ``cleanup``.
        run_id: Only this run's sandboxes.
    """
    from harness.sandbox.modal_backend.cleanup import cleanup
    from harness.sandbox.modal_backend.client import ModalInfraError
    from harness.sandbox.modal_backend.sdk import SdkModalClient

    try:
        n = cleanup(SdkModalClient(), run_id)
    except ModalInfraError as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    console.print(f"terminated {n} sandbox(es)")
    return 0
