"""The seccomp program of ``syscall_filter``, run on a small classic-BPF interpreter."""

from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.inside import syscall_filter as sf

ALLOW = 0x7FFF0000
ERRNO = 0x00050000


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """Execute a seccomp program (the opcodes ``build_program`` uses) on one ``seccomp_data``."""
    data = struct.pack("<IIQ6Q", nr, arch, 0, *args)
    ins = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:  # pragma: no cover - an opcode the builder never emits
            raise AssertionError(f"unknown opcode {code:#x}")


ARCH, NRS = sf._ARCHES["x86_64"]
PROG = sf.build_program("x86_64")
LOCKLESS = {NRS[n] for n in sf.DENIED if n in NRS} | {NRS["fcntl"], NRS["preadv2"]}


@given(
    nr=st.integers(0, 1000).filter(lambda n: n not in LOCKLESS),
    args=st.tuples(*[st.integers(0, 2**64 - 1)] * 6),
)
def test_other_syscalls_are_allowed(nr: int, args: tuple[int, ...]) -> None:
    assert run_bpf(PROG, nr, ARCH, args) == ALLOW


@given(cmd=st.integers(0, 2**32 - 1), high=st.integers(0, 2**32 - 1))
def test_fcntl_lock_commands_are_neutralised_whatever_the_high_bits(cmd: int, high: int) -> None:
    verdict = run_bpf(PROG, NRS["fcntl"], ARCH, (3, (high << 32) | cmd, 0, 0, 0, 0))
    if cmd in sf.FCNTL_FAKE_OK:
        assert verdict == ERRNO | 0
    elif cmd in sf.FCNTL_EINVAL:
        assert verdict == ERRNO | errno.EINVAL
    else:
        assert verdict == ALLOW


@given(flags=st.integers(0, 2**64 - 1))
def test_preadv2_nowait_is_refused(flags: int) -> None:
    verdict = run_bpf(PROG, NRS["preadv2"], ARCH, (3, 0, 1, 0, 0, flags))
    assert verdict == (ERRNO | errno.EOPNOTSUPP if flags & 0x8 else ALLOW)


@given(nr=st.integers(0, 2**32 - 1))
def test_other_abis_are_refused(nr: int) -> None:
    assert run_bpf(PROG, nr, 0x40000003) == ERRNO | errno.ENOSYS  # i386
    if nr >= 0x40000000:
        assert run_bpf(PROG, nr, ARCH) == ERRNO | errno.ENOSYS  # x32


@pytest.mark.parametrize("machine", sorted(sf._ARCHES))
def test_every_listed_syscall_gets_its_errno(machine: str) -> None:
    arch, nrs = sf._ARCHES[machine]
    prog = sf.build_program(machine)
    for name, err in sf.DENIED.items():
        if name in nrs:
            assert run_bpf(prog, nrs[name], arch) == ERRNO | err, name


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(ValueError, match="riscv64"):
        sf.build_program("riscv64")
