"""Fetch a variant's data into ``$EVOBENCH_DATA`` (run at image build time)."""

from __future__ import annotations

import sys

from harness.envs.data import fetch_source
from harness.envs.registry import default_registry


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.images.fetch_data ENV_ID``: download and checksum every source."""
    args = sys.argv[1:] if argv is None else argv
    variant = default_registry().get(args[0])
    for key, source in variant.data:
        path = fetch_source(variant.family, source)
        print(f"{variant.id}: {key} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
