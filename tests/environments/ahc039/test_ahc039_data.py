"""AHC039 inputs: the generator meets the statement's constraints; public inputs match their pins."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from environments.ahc039.data import COORD_MAX, check_instance, format_input, generate, parse_input
from harness.envs.registry import default_registry


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_generated_inputs_satisfy_the_constraints(seed: int) -> None:
    inst = generate(seed)
    check_instance(inst, n=5000)  # N = 5000, coordinates in range, all 2N points distinct
    assert inst.x.dtype == np.int64 and inst.x.shape == (10000,)
    # The statement's clusters: centres lie in [20000, 80000], so most points are near the middle.
    assert 0.5 < np.mean((inst.x > 10_000) & (inst.x < 90_000) & (inst.y > 10_000) & (inst.y < 90_000))
    back = parse_input(format_input(inst))
    assert back.n == inst.n and np.array_equal(back.x, inst.x) and np.array_equal(back.y, inst.y)


def test_generator_is_deterministic_per_seed_and_honours_n() -> None:
    assert format_input(generate(3, n=200)) == format_input(generate(3, n=200))
    assert format_input(generate(3, n=200)) != format_input(generate(4, n=200))
    small = generate(5, n=1000)
    check_instance(small, n=1000)


def test_parse_input_rejects_broken_files() -> None:
    with pytest.raises(ValueError):
        parse_input(b"2\n0 0\n1 1\n2 2\n")  # 3 points for N = 2
    with pytest.raises(ValueError, match="coincide"):
        parse_input(b"1\n5 5\n5 5\n")
    with pytest.raises(ValueError, match="outside"):
        parse_input(f"1\n0 0\n{COORD_MAX + 1} 0\n".encode())


def test_public_inputs_match_the_pins_and_the_constraints(shared_data: Path) -> None:
    variant = default_registry().get("ahc039")
    ((key, source),) = variant.data
    assert key == "public-inputs" and len(source.files) == 150
    assert sorted(source.files) == [f"ahc039_{seed:06d}_input.txt" for seed in range(150)]
    folder = shared_data / "ahc" / "ahc039" / "inputs"
    for name, sha in source.files.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha, name
    for name in ("ahc039_000000_input.txt", "ahc039_000149_input.txt"):
        check_instance(parse_input((folder / name).read_bytes()), n=5000)
