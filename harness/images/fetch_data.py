"""Fetch a variant's data into ``$EVOBENCH_DATA`` (run at image build time)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.envs.data import fetch_source
from harness.envs.data_import import import_data
from harness.envs.registry import default_registry


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.images.fetch_data ENV_ID [--from DIR]``: get and checksum every source.

    Without ``--from`` each source is downloaded; with it, the files are imported from a local
    directory or mirror (air-gapped builds), exactly as ``bench data import ENV_ID DIR`` does.
    """
    ap = argparse.ArgumentParser(prog="python -m harness.images.fetch_data")
    ap.add_argument("env_id", help="variant id, e.g. llm-sr-osc1")
    ap.add_argument("--from", dest="source_dir", type=Path, default=None, help="import from this directory")
    args = ap.parse_args(argv)
    variant = default_registry().get(args.env_id)
    if args.source_dir is not None:
        report = import_data(variant.id, args.source_dir)
        print(
            f"{variant.id}: {len(report.installed)} files imported, {len(report.unchanged)} already present"
        )
        return 0
    for key, source in variant.data:
        path = fetch_source(variant.family, source)
        print(f"{variant.id}: {key} -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
