"""Resource limits that measure use, not reservation: per-candidate cgroups, else ``RLIMIT_DATA``."""

from .cgroups import CgroupError
from .memory import (
    CandidateMemory,
    MemoryMechanism,
    data_rlimit,
    data_size_bytes,
    detect_memory_mechanism,
    sweep_orphaned_cgroups,
)

__all__ = [
    "CandidateMemory",
    "CgroupError",
    "MemoryMechanism",
    "data_rlimit",
    "data_size_bytes",
    "detect_memory_mechanism",
    "sweep_orphaned_cgroups",
]
