"""``bench key``: show, export or import the held-out key that secret-keyed tiny variants draw from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import tyro

from .console import console, err_console

EXIT_USAGE = 2


def key(
    action: tyro.conf.Positional[Literal["show", "export", "import"]],
    file: tyro.conf.Positional[Path | None] = None,
    force: bool = False,
) -> int:
    """Show, export or import the held-out key (share it to compare secret-keyed tiny scores).

    Scores of secret-keyed variants (eplb-tiny, kuairec-tiny, multi-evolve-tiny) compare only
    between installations that share the key. ``show`` prints the key's public fingerprint and
    where it comes from (never the key; it creates none).
    ``export`` prints the key (64 hex digits; keep it secret: store it as a CI secret and set
    ``EVOBENCH_HELDOUT_KEY`` from it, or give it to a teammate). ``import FILE`` (``-``: standard
    input) installs a shared key as this installation's key file; another key already there is
    replaced only with ``--force`` and kept beside it. ``EVOBENCH_HELDOUT_KEY=public`` selects the
    public draws instead (labelled ``public``).

    Args:
        action: ``show``, ``export`` or ``import``.
        file: For ``import``: the file holding the key (``-``: standard input).
        force: For ``import``: replace a different key already installed.
    """
    from harness.envs.secret import KEY_ENV, HeldoutKeyError, export_key, fingerprint, import_key, key_source

    try:
        if action == "show":
            source = key_source()
            if source == "public":
                console.print("public draws (no key)")
            elif source != f"${KEY_ENV}" and not Path(source).exists():  # showing creates nothing
                console.print(f"no held-out key yet: {source} is made at first use (or by bench key import)")
            else:
                console.print(f"held-out key {fingerprint()} (from {source})")
        elif action == "export":
            text = export_key()
            err_console.print(
                f"held-out key {fingerprint()}: keep it secret (a CI secret, never a file in git)"
            )
            sys.stdout.write(text + "\n")
        else:
            if file is None:
                err_console.print("bench: error: bench key import FILE (or - for standard input)")
                return EXIT_USAGE
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="ascii")
            path = import_key(text, force=force)
            console.print(f"held-out key {fingerprint()} installed in {path}")
    except (HeldoutKeyError, OSError, UnicodeDecodeError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    return 0
