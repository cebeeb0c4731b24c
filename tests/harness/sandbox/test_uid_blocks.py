"""Sandbox uid blocks are leased machine-wide: two backends never get the same one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.sandbox.isolation import UIDS_PER_BACKEND
from harness.sandbox.uid_blocks import UID_BLOCKS, UidBlock


def test_leases_from_one_hint_get_distinct_blocks(tmp_path: Path) -> None:
    a, b = UidBlock.lease(7, tmp_path), UidBlock.lease(7, tmp_path)
    assert (a.index, b.index) == (7, 8) and b.offset == 8 * UIDS_PER_BACKEND
    a.release()
    c = UidBlock.lease(7, tmp_path)
    assert c.index == 7  # given back, leased again
    b.release()
    c.release()


def test_hints_wrap_around_and_a_full_house_is_an_error(tmp_path: Path) -> None:
    held = [UidBlock.lease(UID_BLOCKS - 1, tmp_path) for _ in range(UID_BLOCKS)]
    assert sorted(h.index for h in held) == list(range(UID_BLOCKS))
    with pytest.raises(RuntimeError, match="uid blocks are in use"):
        UidBlock.lease(0, tmp_path)
    for h in held:
        h.release()


def test_another_process_holds_its_block_until_it_dies(tmp_path: Path) -> None:
    code = (
        "import sys, pathlib\n"
        "from harness.sandbox.uid_blocks import UidBlock\n"
        f"b = UidBlock.lease(3, pathlib.Path({str(tmp_path)!r}))\n"
        "print(b.index, flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "3"
    mine = UidBlock.lease(3, tmp_path)
    assert mine.index == 4  # the other process's block is not handed out twice
    mine.release()
    proc.kill()
    proc.wait()
    again = UidBlock.lease(3, tmp_path)
    assert again.index == 3  # a killed holder's lock is gone with it
    again.release()
