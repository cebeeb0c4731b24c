"""End Modal sandboxes that a crashed or killed run left behind."""

from __future__ import annotations

from .client import ModalClient
from .spec import TAG


def cleanup(client: ModalClient, run_id: str | None = None) -> int:
    """Terminate every running evobench sandbox (of one run, if ``run_id`` is given).

    Returns:
        How many sandboxes were terminated.

    Raises:
        ModalInfraError: If credentials are missing or Modal cannot be reached.
    """
    client.check_credentials()
    tags = {TAG: "1"}
    if run_id:
        tags[f"{TAG}.run"] = run_id
    found = client.list_sandboxes(tags)
    for sb in found:
        sb.terminate()
    return len(found)
