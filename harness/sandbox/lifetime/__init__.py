"""What a run leaves on the host, and how it is tied to the run's life: owner tags, watchdog, sweep."""

from .owner import Owner, own_tag, owner_alive, tagged_tempdir
from .sweep import LEFTOVER_PREFIXES, Leftovers, count_leftovers, remove_own, sweep_leftovers
from .watchdog import start_parent_watchdog

__all__ = [
    "LEFTOVER_PREFIXES",
    "Leftovers",
    "Owner",
    "count_leftovers",
    "own_tag",
    "remove_own",
    "owner_alive",
    "start_parent_watchdog",
    "sweep_leftovers",
    "tagged_tempdir",
]
